/* The messages of stage rails (docs/design.md, "Wire protocol"): a rank's rails in its STEP
 * to rank 0, its probe tasks in rank 0's answer, its probe results in the next STEP. Nested
 * fields; every decoder takes peer input (fuzzed by tests/fuzz/fuzz_rails.c) and keeps only
 * what is well-formed and in range. */
#include "fleet.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../wire/wire.h"

static bool is_ipv4(const char *s)
{
    struct in_addr a;
    return *s && inet_pton(AF_INET, s, &a) == 1;
}

/* A text field that fits n (with its NUL) and holds no control byte; "" when absent. */
static bool get_text(char *out, size_t n, const struct pf_wire_fields *f, const char *key)
{
    out[0] = '\0';
    const struct pf_wire_field *fl = pf_wire_fields_get(f, key);
    if (!fl) return true;
    if (fl->vlen >= n) return false;
    for (size_t i = 0; i < fl->vlen; i++)
        if (fl->val[i] < 0x20 || fl->val[i] == 0x7f) return false;
    memcpy(out, fl->val, fl->vlen);
    out[fl->vlen] = '\0';
    return true;
}

static bool get_int(long long *out, const struct pf_wire_fields *f, const char *key, long long lo,
                    long long hi)
{
    return pf_wire_fields_int(out, f, key) == 0 && *out >= lo && *out <= hi;
}

/* ---- a rank's rails */

int pf_fleet_rails_encode(struct pf_buf *out, const struct pf_fleet_rails *r)
{
    pf_wire_put_int(out, "port", r->port);
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    for (int i = 0; i < r->n && i < PF_FLEET_RAILS_MAX; i++) {
        const struct pf_fleet_rail *x = &r->r[i];
        pf_buf_reset(&b);
        pf_wire_put_str(&b, "net", x->net);
        pf_wire_put_str(&b, "iface", x->iface);
        pf_wire_put_str(&b, "ip", x->ip);
        pf_wire_put_int(&b, "prefix", x->prefix);
        pf_wire_put_int(&b, "mtu", x->mtu);
        pf_wire_put_int(&b, "up", x->up);
        pf_wire_put_str(&b, "rdma", x->rdma);
        pf_wire_put(out, "rail", b.data, b.len);
    }
    pf_buf_free(&b);
    return pf_buf_check(out, "the rails");
}

static bool rail_decode(struct pf_fleet_rail *x, const struct pf_wire_field *fl)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, fl->val, fl->vlen) < 0) return false;
    long long prefix = 0, mtu = 0, up = 0;
    memset(x, 0, sizeof(*x));
    bool ok = get_text(x->net, sizeof(x->net), &f, "net") && x->net[0] &&
              get_text(x->iface, sizeof(x->iface), &f, "iface") && x->iface[0] &&
              get_text(x->ip, sizeof(x->ip), &f, "ip") && (!x->ip[0] || is_ipv4(x->ip)) &&
              get_text(x->rdma, sizeof(x->rdma), &f, "rdma") &&
              get_int(&prefix, &f, "prefix", 0, 32) && get_int(&mtu, &f, "mtu", 0, 1 << 20) &&
              get_int(&up, &f, "up", 0, 1);
    pf_wire_fields_free(&f);
    x->prefix = (int)prefix;
    x->mtu = (int)mtu;
    x->up = up == 1;
    return ok;
}

int pf_fleet_rails_decode(struct pf_fleet_rails *out, const uint8_t *p, size_t len)
{
    memset(out, 0, sizeof(*out));
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed rails");
    long long port = 0;
    if (!get_int(&port, &f, "port", 0, 65535)) {
        pf_wire_fields_free(&f);
        return pf_err_set(PF_EINVAL, "malformed rails: no port");
    }
    out->port = (int)port;
    for (size_t k = 0; k < f.n && out->n < PF_FLEET_RAILS_MAX; k++)
        if (pf_wire_field_is(&f.v[k], "rail") && rail_decode(&out->r[out->n], &f.v[k])) out->n++;
    pf_wire_fields_free(&f);
    out->reported = true;
    return 0;
}

/* ---- a rank's tasks */

int pf_fleet_rail_tasks_encode(struct pf_buf *out, int nets, const struct pf_fleet_rail_task *t,
                               size_t n)
{
    pf_wire_put_int(out, "nets", nets);
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    for (size_t i = 0; i < n; i++) {
        pf_buf_reset(&b);
        pf_wire_put_int(&b, "net", t[i].net);
        pf_wire_put_str(&b, "name", t[i].name);
        pf_wire_put_int(&b, "send", t[i].send);
        pf_wire_put_int(&b, "peer", t[i].peer);
        pf_wire_put_str(&b, "ip", t[i].ip);
        pf_wire_put_int(&b, "port", t[i].port);
        pf_wire_put(out, "t", b.data, b.len);
    }
    pf_buf_free(&b);
    return pf_buf_check(out, "the rail probe tasks");
}

static bool task_decode(struct pf_fleet_rail_task *t, int npos, const struct pf_wire_field *fl)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, fl->val, fl->vlen) < 0) return false;
    long long net = -1, send = -1, peer = -1, port = 0;
    memset(t, 0, sizeof(*t));
    bool ok =
        get_int(&net, &f, "net", 0, PF_FLEET_RAIL_NETS - 1) && get_int(&send, &f, "send", 0, 1) &&
        get_int(&peer, &f, "peer", 0, npos - 1) && get_int(&port, &f, "port", 0, 65535) &&
        get_text(t->name, sizeof(t->name), &f, "name") && t->name[0] &&
        get_text(t->ip, sizeof(t->ip), &f, "ip") && (send == 0 || (is_ipv4(t->ip) && port > 0));
    pf_wire_fields_free(&f);
    t->net = (int)net;
    t->send = send == 1;
    t->peer = (int)peer;
    t->port = (int)port;
    return ok;
}

int pf_fleet_rail_tasks_decode(int *nets, struct pf_fleet_rail_task *out, size_t *n, size_t max,
                               int npos, const uint8_t *p, size_t len)
{
    *n = 0;
    *nets = 0;
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed rail probe tasks");
    long long nn = 0;
    if (!get_int(&nn, &f, "nets", 0, 1 << 20)) {
        pf_wire_fields_free(&f);
        return pf_err_set(PF_EINVAL, "malformed rail probe tasks: no nets");
    }
    *nets = (int)nn;
    for (size_t k = 0; k < f.n && *n < max && *n < PF_FLEET_RAIL_TASKS; k++)
        if (pf_wire_field_is(&f.v[k], "t") && task_decode(&out[*n], npos, &f.v[k])) (*n)++;
    pf_wire_fields_free(&f);
    return 0;
}

/* ---- a rank's results */

int pf_fleet_rail_results_encode(struct pf_buf *out, const struct pf_fleet_rail_result *r, size_t n)
{
    pf_wire_put_int(out, "n", (long long)n);
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    char num[64];
    for (size_t i = 0; i < n; i++) {
        pf_buf_reset(&b);
        pf_wire_put_int(&b, "net", r[i].net);
        pf_wire_put_int(&b, "dst", r[i].dst);
        pf_wire_put_int(&b, "state", r[i].state);
        snprintf(num, sizeof(num), "%.9g", r[i].gbps);
        pf_wire_put_str(&b, "gbps", num);
        pf_wire_put_str(&b, "why", r[i].why);
        pf_wire_put(out, "r", b.data, b.len);
    }
    pf_buf_free(&b);
    return pf_buf_check(out, "the rail probe results");
}

static bool result_decode(struct pf_fleet_rail_result *r, int nnet, int npos,
                          const struct pf_wire_field *fl)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, fl->val, fl->vlen) < 0) return false;
    long long net = -1, dst = -1, state = -1;
    char num[64] = "", *end = NULL;
    memset(r, 0, sizeof(*r));
    bool ok = get_int(&net, &f, "net", 0, nnet - 1) && get_int(&dst, &f, "dst", 0, npos - 1) &&
              get_int(&state, &f, "state", PF_RAIL_NOT_RUN, PF_RAIL_STALLED) &&
              get_text(num, sizeof(num), &f, "gbps") && num[0] &&
              get_text(r->why, sizeof(r->why), &f, "why");
    if (ok) {
        r->gbps = strtod(num, &end);
        ok = end && *end == '\0' && isfinite(r->gbps) && r->gbps >= 0;
    }
    pf_wire_fields_free(&f);
    r->net = (int)net;
    r->dst = (int)dst;
    r->state = (int)state;
    return ok;
}

int pf_fleet_rail_results_decode(struct pf_fleet_rail_result *out, size_t *n, size_t max, int nnet,
                                 int npos, const uint8_t *p, size_t len)
{
    *n = 0;
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed rail probe results");
    for (size_t k = 0; k < f.n && *n < max && *n < PF_FLEET_RAIL_TASKS; k++)
        if (pf_wire_field_is(&f.v[k], "r") && result_decode(&out[*n], nnet, npos, &f.v[k])) (*n)++;
    pf_wire_fields_free(&f);
    return 0;
}
