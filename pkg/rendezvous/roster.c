/* The roster: who is in the run, in rank order, and where their data ports are. Rank 0
 * encodes it, the other ranks decode it (peer input: fuzzed by tests/fuzz/fuzz_roster.c).
 * Each rank is one record {rank, ip, port, pod, node} (docs/design.md, "Wire protocol"). */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROSTER_MAX_WORLD (1 << 20)

int pf_rdv_roster_encode(struct pf_buf *b, const struct pf_rdv_roster *ro)
{
    pf_wire_put(b, "run", ro->run, sizeof(ro->run));
    pf_wire_put_int(b, "n", ro->n);
    pf_wire_put_int(b, "world", ro->world);
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    for (int k = 0; k < ro->n; k++) {
        const struct pf_rdv_peer *p = &ro->peer[k];
        pf_buf_reset(&r);
        pf_wire_put_int(&r, "rank", p->rank);
        pf_wire_put_str(&r, "ip", p->ip);
        pf_wire_put_int(&r, "port", p->port);
        pf_wire_put_str(&r, "pod", p->pod);
        pf_wire_put_str(&r, "node", p->node);
        if (pf_buf_check(&r, "a roster record") == 0) pf_wire_put(b, "m", r.data, r.len);
    }
    pf_buf_free(&r);
    return pf_buf_check(b, "the ROSTER message");
}

/* One record {rank, ip, port, pod, node}: 0, or PF_EINVAL when a field is missing, out of
 * range or too long. */
static int peer_decode(struct pf_rdv_peer *p, const struct pf_wire_field *fl, int world)
{
    struct pf_wire_fields x;
    if (pf_wire_fields_decode(&x, fl->val, fl->vlen) < 0) return PF_EINVAL;
    long long rank = -1, port = -1;
    memset(p, 0, sizeof(*p));
    int r = 0;
    if (pf_wire_fields_int(&rank, &x, "rank") < 0 || rank < 0 || rank >= world ||
        pf_wire_fields_int(&port, &x, "port") < 0 || port < 0 || port > 65535)
        r = PF_EINVAL;
    /* the text fields may be empty or absent; too long or holding a NUL byte is malformed */
    static const char *const keys[] = {"ip", "pod", "node"};
    char *dst[] = {p->ip, p->pod, p->node};
    size_t cap[] = {sizeof(p->ip), sizeof(p->pod), sizeof(p->node)};
    for (size_t i = 0; i < PF_ARRAY_LEN(keys) && r == 0; i++) {
        int s = pf_wire_fields_str(dst[i], cap[i], &x, keys[i]);
        if (s < 0 && s != PF_ENOENT) r = PF_EINVAL;
    }
    pf_wire_fields_free(&x);
    p->rank = (int)rank;
    p->port = (int)port;
    return r;
}

int pf_rdv_roster_decode(struct pf_rdv_roster *out, const uint8_t *payload, size_t len)
{
    memset(out, 0, sizeof(*out));
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, payload, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed roster from rank 0: %s", pf_err_msg());
    long long n = 0, world = 0;
    const struct pf_wire_field *run = pf_wire_fields_get(&f, "run");
    /* rank 0's world size may differ from this pod's claim (world-size-mismatch): the roster
     * follows rank 0's */
    if (pf_wire_fields_int(&world, &f, "world") < 0 || world < 1 || world > ROSTER_MAX_WORLD ||
        pf_wire_fields_int(&n, &f, "n") < 0 || n < 1 || n > world || !run ||
        run->vlen != PF_WIRE_NONCE) {
        pf_wire_fields_free(&f);
        return pf_err_set(PF_EINVAL, "malformed roster from rank 0");
    }
    out->world = (int)world;
    memcpy(out->run, run->val, PF_WIRE_NONCE);
    out->peer = pf_xcalloc((size_t)n, sizeof(*out->peer));
    int k = 0;
    /* a malformed record is left out: the rank it names is then not in the run */
    for (size_t i = 0; i < f.n && k < n; i++)
        if (pf_wire_field_is(&f.v[i], "m") && peer_decode(&out->peer[k], &f.v[i], out->world) == 0)
            k++;
    out->n = k;
    pf_wire_fields_free(&f);
    return 0;
}

void pf_rdv_roster_free(struct pf_rdv_roster *ro)
{
    free(ro->peer);
    memset(ro, 0, sizeof(*ro));
}

void rdv_roster_alloc(struct rdv_session *S, int n)
{
    S->n = n;
    S->ro.n = n;
    S->ro.peer = pf_xcalloc((size_t)n, sizeof(*S->ro.peer));
    S->rk = pf_xcalloc((size_t)n, sizeof(int));
}

void rdv_roster_free(struct rdv_session *S)
{
    pf_rdv_roster_free(&S->ro);
    free(S->rk);
    S->rk = NULL;
}

void rdv_root_send_roster(struct rdv_session *S)
{
    int n = 0;
    for (int r = 0; r < S->world; r++)
        n += r == 0 || S->m[r].state == PF_RDV_JOINED;
    rdv_roster_alloc(S, n);
    S->ro.world = S->world;
    pf_wire_random(S->ro.run, sizeof(S->ro.run));
    int k = 0;
    for (int r = 0; r < S->world; r++) {
        struct rdv_member *m = &S->m[r];
        if (!(r == 0 || m->state == PF_RDV_JOINED)) continue;
        struct pf_rdv_peer *p = &S->ro.peer[k];
        S->rk[k] = p->rank = r;
        pf_strcpy(p->ip, sizeof(p->ip), r == 0 ? "" : (m->data_ip[0] ? m->data_ip : m->addr));
        p->port = r == 0 ? S->data_port : m->data_port;
        pf_strcpy(p->pod, sizeof(p->pod), m->pod);
        pf_strcpy(p->node, sizeof(p->node), m->node);
        k++;
    }
    S->pos = 0;
    struct pf_buf b;
    pf_buf_init(&b, PF_WIRE_MAX_PAYLOAD);
    if (pf_rdv_roster_encode(&b, &S->ro) < 0)
        rdv_say(S, "%s: the other ranks get a shortened roster", pf_err_msg());
    /* encoded once; a window of ranks at a time holds a copy in its output queue */
    rdv_send_all(S, PF_WIRE_ROSTER, b.data, b.len, NULL, NULL, rdv_wait_end(S, S->su.waits.flush));
    pf_buf_free(&b);
}

int rdv_client_parse_roster(struct rdv_session *S, const struct pf_rdv_msg *msg)
{
    rdv_roster_free(S);
    if (pf_rdv_roster_decode(&S->ro, msg->payload, msg->len) < 0) return PF_EINVAL;
    S->n = S->ro.n;
    S->rk = pf_xcalloc((size_t)(S->n > 0 ? S->n : 1), sizeof(int));
    S->pos = -1;
    for (int k = 0; k < S->n; k++) {
        struct pf_rdv_peer *p = &S->ro.peer[k];
        /* rank 0's data address is the one this rank reached it at */
        if (!p->ip[0]) pf_strcpy(p->ip, sizeof(p->ip), S->root_ip);
        S->rk[k] = p->rank;
        if (p->rank == S->rank) S->pos = k;
    }
    if (S->pos < 0) return pf_err_set(PF_EINVAL, "rank 0's roster does not list this rank");
    return 0;
}
