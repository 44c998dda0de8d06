/* Rank > 0: dials rank 0 with backoff and jitter, takes its HELLO, sends the JOIN, and
 * waits for the roster or a REJECT. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- joining (rank > 0) */

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

void pf_rdv_join_env(struct pf_strlist *out, const struct pf_env *env,
                     bool (*secret)(const char *name))
{
    if (sodium_init() < 0) return; /* the session's open says so */
    for (size_t i = 0; i < env->vars.n; i++) {
        const char *kv = env->vars.v[i];
        const char *eq = strchr(kv, '=');
        if (!pf_str_starts(kv, "NCCL_") || !eq) continue;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
        if (secret && secret(name)) {
            /* compare secrets by hash, never send them */
            uint8_t h[crypto_hash_sha256_BYTES];
            crypto_hash_sha256(h, (const unsigned char *)eq + 1, strlen(eq + 1));
            pf_strlist_addf(out, "%s=sha256:%02x%02x%02x%02x%02x%02x%02x%02x", name, h[0], h[1],
                            h[2], h[3], h[4], h[5], h[6], h[7]);
        } else {
            pf_strlist_add(out, kv);
        }
    }
}

/* The NCCL_* variables into the JOIN: every one when all fit; else those that fit, with
 * room kept for envLeftOut: how many were left out, which rank 0 records (they are not
 * compared among the ranks). Returns that count. */
static size_t put_env(struct pf_buf *b, const struct pf_strlist *e)
{
    if (!e) return 0;
    size_t all = 0;
    for (size_t i = 0; i < e->n; i++)
        all += 1 + 3 + 4 + strlen(e->v[i]); /* [len]["env"][u32][value] */
    size_t keep = b->len + all <= b->max ? 0 : RDV_ENV_LEFT_OUT_ROOM;
    size_t out = 0;
    for (size_t i = 0; i < e->n; i++) {
        size_t f = 1 + 3 + 4 + strlen(e->v[i]);
        if (b->len + f + keep > b->max || pf_wire_put_str(b, "env", e->v[i]) < 0) out++;
    }
    if (out) pf_wire_put_int(b, "envLeftOut", (long long)out);
    return out;
}

size_t rdv_join_payload(struct rdv_session *S, struct pf_buf *b, const uint8_t nonce[PF_WIRE_NONCE])
{
    pf_wire_put(b, "nonce", nonce, PF_WIRE_NONCE);
    pf_wire_put(b, "run", S->join_run, PF_WIRE_NONCE);
    pf_wire_put_int(b, "rank", S->rank);
    pf_wire_put_int(b, "world", S->world);
    pf_wire_put_int(b, "proto", PF_WIRE_PROTO);
    pf_wire_put_str(b, "version", PF_VERSION);
    pf_wire_put_str(b, "pod", S->pod);
    pf_wire_put_str(b, "node", S->node);
    /* the job (protocol 4): "" where this pod does not know it (pf_identity_job_of) */
    pf_wire_put_str(b, "jobKind", S->id.job.kind);
    pf_wire_put_str(b, "jobNamespace", S->id.job.ns);
    pf_wire_put_str(b, "jobName", S->id.job.name);
    pf_wire_put_str(b, "jobUid", S->id.job.uid);
    pf_wire_put_str(b, "dataIp", S->bind_ip);
    pf_wire_put_int(b, "dataPort", S->data_port);
    pf_wire_put_str(b, "digest", S->su.digest ? S->su.digest : "");
    pf_wire_put_str(b, "ncclVersion", S->su.nccl_version ? S->su.nccl_version : "");
    if (S->su.fabric) pf_wire_put_str(b, "fabric", S->su.fabric);
    return put_env(b, S->su.env);
}

/* One dial of rank 0's address: fd, or -1 after saying why and sleeping the backoff. */
static int client_dial(struct rdv_session *S, int attempt, double *backoff, char *last,
                       size_t nlast, double *last_say, char *peer, size_t npeer)
{
    double now = pf_now();
    int fd;
    double dd = pf_deadline_in(S->su.waits.dial > 0 ? S->su.waits.dial : 1e9, S->join_deadline);
    if (pf_rdv_dial(&fd, peer, npeer, S->id.coordinator, S->id.port, dd) == 0) return fd;
    snprintf(last, nlast, "%s", pf_err_msg());
    if (attempt <= 2 || (attempt & (attempt - 1)) == 0 || now - *last_say > 10) {
        rdv_say(S, "%s %s:%d (attempt %d): %s",
                strstr(last, "connect") ? "connecting to" : "resolving", S->id.coordinator,
                S->id.port, attempt, last);
        *last_say = now;
    }
    rdv_guard(S, "joining rank 0 at %s:%d (attempt %d: %s)", S->id.coordinator, S->id.port, attempt,
              last);
    double jitter = 0.5 + (double)(randombytes_uniform(1000)) / 1000.0;
    double wait = *backoff * jitter;
    if (pf_now() + wait > S->join_deadline) wait = S->join_deadline - pf_now();
    sleep_s(wait);
    *backoff = *backoff * 2 > 5 ? 5 : *backoff * 2;
    return -1;
}

/* On a new connection to rank 0: its HELLO, this rank's JOIN, and rank 0's answer in msg.
 * 0: msg holds the answer; 1: try again (last says why); PF_ERR: stop, findings recorded. */
static int client_hello_join(struct rdv_session *S, int fd, const char *peer, double backoff,
                             char *last, size_t nlast, struct pf_rdv_msg *msg)
{
    pf_rdv_conn_init(&S->ctl, fd, peer, true);
    S->have_ctl = true;
    S->ctl.auth.on = S->auth;
    S->ctl.auth.token = S->token;
    pf_rdv_sockaddr_ip(S->root_ip, sizeof(S->root_ip), fd, true);
    pf_rdv_sockaddr_ip(S->my_ip, sizeof(S->my_ip), fd, false);
    double hd = rdv_wait_end(S, S->su.waits.frame);
    int r = pf_rdv_conn_recv(&S->ctl, msg, false, hd);
    if (r < 0 || msg->type != PF_WIRE_HELLO) {
        snprintf(last, nlast, "%s", r < 0 ? pf_err_msg() : "no HELLO from rank 0");
        pf_rdv_msg_free(msg);
        pf_rdv_conn_close(&S->ctl);
        S->have_ctl = false;
        if (r == PF_EPROTO && !S->auth) {
            rdv_end(S, PF_RDV_END_OTHER_VERSION, "rank 0 at %s speaks %s", peer, last);
            return PF_ERR;
        }
        /* with a token, a HELLO is no proof of who sent it (it carries no HMAC): another
         * version's header from whatever answers at rank 0's address is not believed */
        if (r == PF_EPROTO) S->unauthenticated++;
        rdv_say(S, "rank 0 at %s: %s; trying again", peer, last);
        sleep_s(backoff);
        return 1;
    }
    const struct pf_wire_field *nf = pf_wire_fields_get(&msg->f, "nonce");
    if (nf && nf->vlen == PF_WIRE_NONCE) memcpy(S->ctl.auth.nonce_s, nf->val, PF_WIRE_NONCE);
    const struct pf_wire_field *rf = pf_wire_fields_get(&msg->f, "run");
    if (rf && rf->vlen == PF_WIRE_NONCE) memcpy(S->join_run, rf->val, PF_WIRE_NONCE);
    pf_rdv_msg_free(msg);
    pf_wire_random(S->ctl.auth.nonce_c, PF_WIRE_NONCE);
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_JOIN);
    size_t left_out = rdv_join_payload(S, &b, S->ctl.auth.nonce_c);
    if (left_out && !S->env_left_out) {
        S->env_left_out = left_out;
        rdv_say(S,
                "%zu of this pod's NCCL_* variables do not fit its JOIN (%u bytes): the ranks "
                "do not compare them",
                left_out, PF_RDV_MAX_JOIN);
    }
    r = pf_rdv_conn_send(&S->ctl, PF_WIRE_JOIN, b.data, b.len, rdv_wait_end(S, S->su.waits.frame));
    pf_buf_free(&b);
    if (r == 0) {
        rdv_guard(S, "joined rank 0 at %s; waiting for rank 0 to start the run", peer);
        rdv_say(S, "rank %d joined rank 0 at %s; waiting for the others", S->rank, peer);
        r = pf_rdv_conn_recv(&S->ctl, msg, false, S->cutoff - S->su.waits.roster_margin);
    }
    if (r < 0) {
        snprintf(last, nlast, "%s", pf_err_msg());
        pf_rdv_conn_close(&S->ctl);
        S->have_ctl = false;
        if (r == PF_ETIMEOUT || pf_now() >= S->cutoff - 2 * S->su.waits.roster_margin) {
            rdv_end(S, PF_RDV_END_NO_START,
                    "joined rank 0 at its address, but it had not started the run by this pod's "
                    "deadline (it was still waiting for other ranks)");
            return PF_ERR;
        }
        rdv_say(S, "rank 0 went away before the run started (%s); joining again", last);
        sleep_s(backoff);
        return 1;
    }
    return 0;
}

/* Rank 0's answer to the JOIN: a REJECT, or the roster. 0, PF_ERR (the end says why), or
 * ANSWER_UNVERIFIED (last says what came): with a token, an answer whose MAC fails is not
 * believed. Whoever answers at rank 0's address without the token (a stale DNS record, a
 * reused pod IP, a stranger) cannot end this pod's join; it tries again until its deadline. */
#define ANSWER_UNVERIFIED 2
#define ANSWER_UNAUTHENTICATED 3 /* with a token, an answer that carries no HMAC at all */
static int client_answer(struct rdv_session *S, struct pf_rdv_msg *msg, char *last, size_t nlast)
{
    if (S->auth && !msg->mac_ok) {
        char code[48] = "";
        pf_wire_fields_str(code, sizeof(code), &msg->f, "code");
        snprintf(last, nlast, "%s%s%s%s from %s fails the token check: not believed",
                 msg->type == PF_WIRE_REJECT ? "a REJECT" : "an answer", code[0] ? " (" : "", code,
                 code[0] ? ")" : "", S->ctl.peer);
        return msg->had_mac ? ANSWER_UNVERIFIED : ANSWER_UNAUTHENTICATED;
    }
    if (msg->type == PF_WIRE_REJECT) {
        char code[48] = "", text[1024] = "";
        pf_wire_fields_str(code, sizeof(code), &msg->f, "code");
        pf_wire_fields_str(text, sizeof(text), &msg->f, "message");
        enum pf_wire_refusal why;
        if (pf_wire_refusal_parse(code, &why) == 0)
            rdv_end_refused(S, why, text);
        else
            rdv_end(S, PF_RDV_END_BAD_ANSWER, "%s: %s", pf_err_msg(), text);
        rdv_say(S, "rank 0 refused this pod: %s", text);
        return PF_ERR;
    }
    if (msg->type != PF_WIRE_ROSTER) {
        rdv_end(S, PF_RDV_END_BAD_ANSWER, "rank 0 answered the JOIN with a %s frame, not a ROSTER",
                pf_wire_type_name(msg->type));
        return PF_ERR;
    }
    if (rdv_client_parse_roster(S, msg) < 0) {
        rdv_end(S, PF_RDV_END_BAD_ANSWER, "rank 0's ROSTER does not decode: %s", pf_err_msg());
        return PF_ERR;
    }
    return 0;
}

/* The join deadline passed and every answer at rank 0's address failed the token check. */
static int client_unverified(struct rdv_session *S, int n, const char *last)
{
    char m2[1024];
    snprintf(m2, sizeof(m2),
             "%d answer%s at rank 0's address %s:%d failed the token check (last: %s): this "
             "pod's PREFLIGHT_TOKEN differs from rank 0's, or something else answers at that "
             "address (a stale DNS record, a reused pod IP); this pod kept trying for %.0f s",
             n, n == 1 ? "" : "s", S->id.coordinator, S->id.port, last, pf_now() - S->t0);
    rdv_end(S, PF_RDV_END_UNVERIFIED, "%s", m2);
    return PF_ERR;
}

int rdv_client_join(struct rdv_session *S)
{
    double backoff = 0.25;
    char last[512] = "";
    char b0[NAME_MAX_];
    const char *pod0 = rdv_pod_of(S, 0, b0, sizeof(b0));
    double last_say = 0;
    int unverified = 0; /* answers at rank 0's address that failed the token check */
    for (int attempt = 1;; attempt++) {
        if (pf_now() >= S->join_deadline) break;
        char peer[96];
        int fd =
            client_dial(S, attempt, &backoff, last, sizeof(last), &last_say, peer, sizeof(peer));
        if (fd < 0) continue;
        struct pf_rdv_msg msg = {0};
        int r = client_hello_join(S, fd, peer, backoff, last, sizeof(last), &msg);
        if (r == 1) continue;
        if (r < 0) return PF_ERR;
        r = client_answer(S, &msg, last, sizeof(last));
        pf_rdv_msg_free(&msg);
        if (r != ANSWER_UNVERIFIED && r != ANSWER_UNAUTHENTICATED) return r;
        if (r == ANSWER_UNVERIFIED)
            unverified++;
        else
            S->unauthenticated++;
        rdv_say(S, "%s; trying again", last);
        pf_rdv_conn_close(&S->ctl);
        S->have_ctl = false;
        sleep_s(backoff);
        backoff = backoff * 2 > 5 ? 5 : backoff * 2;
    }
    /* only an HMAC that does not verify shows another token (spec); answers without one,
     * from whatever answers at rank 0's address, prove nothing about this pod */
    if (unverified) return client_unverified(S, unverified, last);
    if (S->unauthenticated) {
        rdv_end(S, PF_RDV_END_UNAUTHENTICATED,
                "%d answer%s at rank 0's address %s:%d carried no HMAC (last: %s): not "
                "believed, as this pod has a PREFLIGHT_TOKEN; rank 0 never answered with it "
                "within %.0f s",
                S->unauthenticated, S->unauthenticated == 1 ? "" : "s", S->id.coordinator,
                S->id.port, last, pf_now() - S->t0);
        return PF_ERR;
    }
    /* never reached rank 0 */
    char m2[1024];
    snprintf(m2, sizeof(m2), "rank 0%s%s%s never answered at %s:%d within %.0f s (last error: %s)",
             pod0[0] ? " (" : "", pod0, pod0[0] ? ")" : "", S->id.coordinator, S->id.port,
             pf_now() - S->t0, last[0] ? last : "none");
    rdv_end(S, PF_RDV_END_UNREACHABLE, "%s", m2);
    pf_strcpy(S->last_error, sizeof(S->last_error), last[0] ? last : "no answer");
    return PF_ERR;
}
