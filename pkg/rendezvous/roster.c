/* The roster: who is in the run, in rank order, and where the data ports are that each rank
 * dials. Rank 0 encodes it, the other ranks decode it (peer input: fuzzed by
 * tests/fuzz/fuzz_roster.c). Every rank gets every position (the ranks not in the run, or a
 * bitmap of those in it, whichever is shorter) but the records {rank, ip, port, pod, node}
 * of its partners only (struct pf_rdv_setup's partners), so that a roster is a few hundred
 * bytes at any world size (docs/design.md, "Wire protocol"). */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROSTER_MAX_WORLD (1 << 20)

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One record {rank, ip, port, pod, node} as the field key. */
static void put_peer(struct pf_buf *b, const char *key, const struct pf_rdv_peer *p)
{
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    pf_wire_put_int(&r, "rank", p->rank);
    pf_wire_put_str(&r, "ip", p->ip);
    pf_wire_put_int(&r, "port", p->port);
    pf_wire_put_str(&r, "pod", p->pod);
    pf_wire_put_str(&r, "node", p->node);
    if (pf_buf_check(&r, "a roster record") == 0) pf_wire_put(b, key, r.data, r.len);
    pf_buf_free(&r);
}

int pf_rdv_roster_encode_head(struct pf_buf *b, const struct pf_rdv_roster *ro)
{
    pf_wire_put(b, "run", ro->run, sizeof(ro->run));
    pf_wire_put_int(b, "n", ro->n);
    pf_wire_put_int(b, "world", ro->world);
    /* the ranks not in the run ("out", 4 bytes each), or a bit a rank ("in"): the shorter */
    size_t nout = (size_t)(ro->world - ro->n), nbits = ((size_t)ro->world + 7) / 8;
    uint8_t *v = pf_xcalloc(nout * 4 < nbits ? (nout ? nout * 4 : 1) : nbits, 1);
    if (nout * 4 < nbits) {
        size_t i = 0;
        for (int r = 0, k = 0; r < ro->world && i < nout; r++) {
            if (k < ro->n && ro->peer[k].rank == r)
                k++;
            else
                put_u32(v + 4 * i++, (uint32_t)r);
        }
        pf_wire_put(b, "out", v, nout * 4);
    } else {
        for (int k = 0; k < ro->n; k++)
            v[ro->peer[k].rank / 8] |= (uint8_t)(1u << (ro->peer[k].rank % 8));
        pf_wire_put(b, "in", v, nbits);
    }
    free(v);
    return pf_buf_check(b, "the ROSTER message");
}

int pf_rdv_roster_encode(struct pf_buf *b, const struct pf_rdv_roster *ro)
{
    pf_rdv_roster_encode_head(b, ro);
    for (int k = 0; k < ro->n; k++)
        if (ro->peer[k].known) put_peer(b, "m", &ro->peer[k]);
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

/* The position of rank in the roster (ranks ascend), or -1. */
static int roster_pos(const struct pf_rdv_roster *ro, int rank)
{
    int lo = 0, hi = ro->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (ro->peer[mid].rank == rank) return mid;
        if (ro->peer[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Takes record p into its rank's position: its position, or -1 when its rank is not in the
 * run. */
static int roster_learn(struct pf_rdv_roster *ro, const struct pf_rdv_peer *p)
{
    int k = roster_pos(ro, p->rank);
    if (k < 0) return -1;
    ro->peer[k] = *p;
    ro->peer[k].known = true;
    return k;
}

/* The ranks in the run, from "out" or "in": n of them, rank 0 among them. */
static int roster_ranks(struct pf_rdv_roster *ro, const struct pf_wire_fields *f)
{
    const struct pf_wire_field *out = pf_wire_fields_get(f, "out"),
                               *in = pf_wire_fields_get(f, "in");
    size_t nbits = ((size_t)ro->world + 7) / 8;
    if (!out == !in) return PF_EINVAL;
    if (out && (out->vlen % 4 || out->vlen / 4 != (size_t)(ro->world - ro->n))) return PF_EINVAL;
    if (in && in->vlen != nbits) return PF_EINVAL;
    ro->peer = pf_xcalloc((size_t)ro->n, sizeof(*ro->peer));
    int k = 0;
    if (out) {
        size_t i = 0, nout = out->vlen / 4;
        long long last = 0; /* rank 0 is always in */
        for (int r = 0; r < ro->world; r++) {
            if (i < nout && get_u32(out->val + 4 * i) == (uint32_t)r) {
                if (r <= last) return PF_EINVAL;
                last = r;
                i++;
            } else if (k < ro->n) {
                ro->peer[k++].rank = r;
            }
        }
        if (i != nout) return PF_EINVAL; /* not ascending, or out of range */
    } else {
        for (int r = 0; r < ro->world; r++)
            if (in->val[r / 8] >> (r % 8) & 1) {
                if (k == ro->n) return PF_EINVAL;
                ro->peer[k++].rank = r;
            }
        /* no bit past the world */
        if (ro->world % 8 && in->val[nbits - 1] >> (ro->world % 8)) return PF_EINVAL;
    }
    return k == ro->n && ro->peer[0].rank == 0 ? 0 : PF_EINVAL;
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
    out->n = (int)n;
    memcpy(out->run, run->val, PF_WIRE_NONCE);
    if (roster_ranks(out, &f) < 0) {
        pf_wire_fields_free(&f);
        out->n = 0;
        return pf_err_set(PF_EINVAL, "malformed roster from rank 0: its list of ranks");
    }
    /* a malformed record, or one naming a rank not in the run, is left out: that rank's
     * address is then unknown here */
    for (size_t i = 0; i < f.n; i++) {
        struct pf_rdv_peer p;
        if (pf_wire_field_is(&f.v[i], "m") && peer_decode(&p, &f.v[i], out->world) == 0)
            roster_learn(out, &p);
    }
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

int rdv_roster_partners(const struct rdv_session *S, int pos, int *out)
{
    if (!S->su.partners) return -1;
    int q[PF_RDV_PARTNERS_MAX];
    int k = S->su.partners(S->su.arg, pos, S->n, q, PF_RDV_PARTNERS_MAX), m = 0;
    for (int i = 0; i < k && i < PF_RDV_PARTNERS_MAX; i++) {
        bool again = false;
        for (int j = 0; j < m; j++)
            again |= out[j] == q[i];
        if (q[i] >= 0 && q[i] < S->n && q[i] != pos && !again) out[m++] = q[i];
    }
    return m;
}

/* Position pos's part of the roster: its partners' records (every record without a
 * partners rule). */
static void roster_part(void *arg, int pos, struct pf_buf *out)
{
    struct rdv_session *S = arg;
    int q[PF_RDV_PARTNERS_MAX];
    int k = rdv_roster_partners(S, pos, q);
    for (int i = 0; i < k; i++)
        put_peer(out, "m", &S->ro.peer[q[i]]);
    for (int i = 0; k < 0 && i < S->n; i++)
        put_peer(out, "m", &S->ro.peer[i]);
}

void rdv_roster_build(struct rdv_session *S)
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
        p->known = true;
        k++;
    }
    S->pos = 0;
}

int rdv_roster_payload(struct rdv_session *S, int pos, struct pf_buf *b)
{
    pf_rdv_roster_encode_head(b, &S->ro);
    roster_part(S, pos, b);
    return pf_buf_check(b, "the ROSTER message");
}

void rdv_root_send_roster(struct rdv_session *S)
{
    rdv_roster_build(S);
    struct pf_buf b;
    pf_buf_init(&b, PF_WIRE_MAX_PAYLOAD);
    if (pf_rdv_roster_encode_head(&b, &S->ro) < 0)
        rdv_say(S, "%s: the other ranks get a shortened roster", pf_err_msg());
    /* without a partners rule every rank gets every record: one payload, encoded once */
    bool all = !S->su.partners;
    if (all) roster_part(S, 0, &b);
    /* a window of ranks at a time holds its frame in its output queue */
    rdv_send_all(S, PF_WIRE_ROSTER, b.data, b.len, all ? NULL : roster_part, S,
                 rdv_wait_end(S, S->su.waits.flush));
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
        if (p->known && !p->ip[0]) pf_strcpy(p->ip, sizeof(p->ip), S->root_ip);
        S->rk[k] = p->rank;
        if (p->rank == S->rank) S->pos = k;
    }
    if (S->pos < 0) return pf_err_set(PF_EINVAL, "rank 0's roster does not list this rank");
    return 0;
}

const struct pf_rdv_peer *rdv_peer_addr(const struct rdv_session *S, int pos, char *why,
                                        size_t nwhy)
{
    if (pos >= 0 && pos < S->n && S->ro.peer && pos < S->ro.n && S->ro.peer[pos].known)
        return &S->ro.peer[pos];
    snprintf(why, nwhy, "no data address of position %d (rank %d): rank 0 sent none for it", pos,
             pos >= 0 && pos < S->n && S->rk ? S->rk[pos] : -1);
    return NULL;
}

int rdv_addr_put(const struct rdv_session *S, struct pf_buf *out, int pos)
{
    char why[160];
    const struct pf_rdv_peer *p = rdv_peer_addr(S, pos, why, sizeof(why));
    if (!p) return pf_err_set(PF_EINVAL, "%s", why);
    put_peer(out, "a", p);
    return pf_buf_check(out, "a partner's address");
}

int rdv_addr_take(struct rdv_session *S, const uint8_t *payload, size_t len)
{
    struct pf_wire_fields f;
    if (!payload || pf_wire_fields_decode(&f, payload, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed addresses from rank 0");
    int took = 0, r = 0;
    for (size_t i = 0; i < f.n && S->ro.peer; i++) {
        struct pf_rdv_peer p;
        if (!pf_wire_field_is(&f.v[i], "a")) continue;
        if (peer_decode(&p, &f.v[i], S->ro.world) < 0) {
            r = pf_err_set(PF_EINVAL, "malformed address record from rank 0");
            continue;
        }
        if (!p.ip[0]) pf_strcpy(p.ip, sizeof(p.ip), S->root_ip);
        took += roster_learn(&S->ro, &p) >= 0;
    }
    pf_wire_fields_free(&f);
    return r < 0 ? r : took;
}
