/* The probe rounds' messages (docs/design.md, "Wire protocol"): a rank's samples of the
 * round before, in its STEP to rank 0; its probes of the next round, in rank 0's answer.
 * Nested fields; the decoders take peer input (fuzzed by tests/fuzz/fuzz_steps.c). */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../wire/wire.h"

#define MAX_ITEMS 16 /* a rank reports and gets a few per round (PF_COLL_TASKS_MAX) */

static void sample_record(struct pf_buf *r, const void *items, size_t i)
{
    const struct pf_coll_sample *s = (const struct pf_coll_sample *)items + i;
    char num[64];
    pf_wire_put_int(r, "src", s->src);
    pf_wire_put_int(r, "dst", s->dst);
    pf_wire_put_int(r, "round", s->round);
    pf_wire_put_int(r, "bytes", (long long)s->bytes);
    snprintf(num, sizeof(num), "%.9g", s->seconds);
    pf_wire_put_str(r, "seconds", num);
}

int pf_fleet_samples_encode(struct pf_buf *out, const struct pf_coll_sample *s, size_t n)
{
    /* the decoder takes MAX_ITEMS: more would be dropped at rank 0 without a word */
    int r = fleet_records_put(out, "s", s, n < MAX_ITEMS ? n : MAX_ITEMS, sample_record,
                              "the probe samples");
    if (r == 0 && n > MAX_ITEMS)
        r = pf_err_set(PF_ETOOBIG, "the probe samples: %zu, over the limit of %d a round", n,
                       MAX_ITEMS);
    return r;
}

int pf_fleet_samples_decode(struct pf_coll_sample *out, size_t *n, size_t max, const uint8_t *p,
                            size_t len)
{
    *n = 0;
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed probe samples");
    for (size_t k = 0; k < f.n && *n < max && *n < MAX_ITEMS; k++) {
        if (!pf_wire_field_is(&f.v[k], "s")) continue;
        struct pf_wire_fields x;
        if (pf_wire_fields_decode(&x, f.v[k].val, f.v[k].vlen) < 0) continue;
        long long src = -1, dst = -1, round = -1, bytes = -1;
        double sec = 0;
        if (pf_wire_fields_num(&sec, &x, "seconds") == 0 && sec > 0 &&
            pf_wire_fields_int(&src, &x, "src") == 0 && pf_wire_fields_int(&dst, &x, "dst") == 0 &&
            pf_wire_fields_int(&round, &x, "round") == 0 &&
            pf_wire_fields_int(&bytes, &x, "bytes") == 0 && src >= 0 && src < (1 << 24) &&
            dst >= 0 && dst < (1 << 24) && round >= 0 && round < 1024 && bytes > 0 &&
            bytes <= (1ll << 40))
            out[(*n)++] =
                (struct pf_coll_sample){(int)src, (int)dst, (int)round, (size_t)bytes, sec, 0};
        pf_wire_fields_free(&x);
    }
    pf_wire_fields_free(&f);
    return 0;
}

static const char *const cpu_keys[4] = {"cpuWait", "cpuSteal", "cpuPsi", "cpuAvg10"};

static long long cpu_units(double share)
{
    return share < 0 || !isfinite(share) ? -1 : (long long)llround((share > 1 ? 1 : share) * 1e4);
}

int pf_fleet_cpu_encode(struct pf_buf *out, const struct pf_coll_cpu *c)
{
    double v[4] = {c->wait, c->steal, c->psi, c->psi_avg10 < 0 ? -1 : c->psi_avg10 / 100};
    for (int k = 0; k < 4; k++)
        pf_wire_put_int(out, cpu_keys[k], cpu_units(v[k]));
    return pf_buf_check(out, "the CPU report");
}

int pf_fleet_cpu_decode(struct pf_coll_cpu *out, const uint8_t *p, size_t len)
{
    *out = (struct pf_coll_cpu){-1, -1, -1, -1};
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed CPU report");
    double v[4];
    int r = 0;
    for (int k = 0; k < 4 && r == 0; k++) {
        long long x;
        r = pf_wire_fields_int(&x, &f, cpu_keys[k]);
        if (r == 0 && (x < -1 || x > 10000))
            r = pf_err_set(PF_EINVAL, "CPU report: %s %lld out of range", cpu_keys[k], x);
        v[k] = x < 0 ? -1 : (double)x / 1e4;
    }
    pf_wire_fields_free(&f);
    if (r < 0) return r == PF_ENOENT ? PF_ENOENT : PF_EINVAL;
    *out = (struct pf_coll_cpu){v[0], v[1], v[2], v[3] < 0 ? -1 : v[3] * 100};
    return 0;
}

static void task_record(struct pf_buf *r, const void *items, size_t i)
{
    const struct pf_coll_task *t = (const struct pf_coll_task *)items + i;
    pf_wire_put_int(r, "peer", t->peer);
    pf_wire_put_int(r, "send", t->send);
    pf_wire_put_int(r, "bytes", (long long)t->bytes);
}

int pf_fleet_tasks_encode(struct pf_buf *out, bool more, const struct pf_coll_task *t, size_t n)
{
    pf_wire_put_int(out, "more", more);
    return fleet_records_put(out, "t", t, n, task_record, "the probe tasks");
}

int pf_fleet_tasks_decode(bool *more, struct pf_coll_task *out, size_t *n, size_t max, int npos,
                          const uint8_t *p, size_t len)
{
    *n = 0;
    *more = false;
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed probe tasks");
    long long m = 0;
    if (pf_wire_fields_int(&m, &f, "more") < 0 || (m != 0 && m != 1)) {
        pf_wire_fields_free(&f);
        return pf_err_set(PF_EINVAL, "malformed probe tasks: no \"more\"");
    }
    *more = m == 1;
    for (size_t k = 0; k < f.n && *n < max; k++) {
        if (!pf_wire_field_is(&f.v[k], "t")) continue;
        struct pf_wire_fields x;
        if (pf_wire_fields_decode(&x, f.v[k].val, f.v[k].vlen) < 0) continue;
        long long peer = -1, send = -1, bytes = -1;
        if (pf_wire_fields_int(&peer, &x, "peer") == 0 &&
            pf_wire_fields_int(&send, &x, "send") == 0 &&
            pf_wire_fields_int(&bytes, &x, "bytes") == 0 && peer >= 0 && peer < npos &&
            (send == 0 || send == 1) && bytes > 0 && bytes <= (long long)PF_COLL_PROBE_MAX_BYTES)
            out[(*n)++] = (struct pf_coll_task){(int)peer, send == 1, (size_t)bytes};
        pf_wire_fields_free(&x);
    }
    pf_wire_fields_free(&f);
    return 0;
}
