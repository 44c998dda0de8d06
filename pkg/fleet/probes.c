/* The probe rounds' messages (docs/design.md, "Wire protocol"): a rank's samples of the
 * round before, in its STEP to rank 0; its probes of the next round, in rank 0's answer.
 * Nested fields; the decoders take peer input (fuzzed by tests/fuzz/fuzz_steps.c). */
#include "fleet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rendezvous/rendezvous.h"

#define MAX_ITEMS 16 /* a rank reports and gets a few per round (PF_COLL_TASKS_MAX) */

static double get_num(const struct pf_rdv_fields *f, const char *key, bool *have)
{
    char t[64] = "", *end = NULL;
    *have = false;
    if (pf_rdv_fields_str(t, sizeof(t), f, key) < 0 || !t[0]) return 0;
    double v = strtod(t, &end);
    *have = end && *end == '\0' && isfinite(v);
    return v;
}

int pf_fleet_samples_encode(struct pf_buf *out, const struct pf_coll_sample *s, size_t n)
{
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    char num[64];
    for (size_t i = 0; i < n; i++) {
        pf_buf_reset(&r);
        pf_rdv_put_int(&r, "src", s[i].src);
        pf_rdv_put_int(&r, "dst", s[i].dst);
        pf_rdv_put_int(&r, "round", s[i].round);
        pf_rdv_put_int(&r, "bytes", (long long)s[i].bytes);
        snprintf(num, sizeof(num), "%.9g", s[i].seconds);
        pf_rdv_put_str(&r, "seconds", num);
        pf_rdv_put(out, "s", r.data, r.len);
    }
    pf_buf_free(&r);
    return pf_buf_check(out, "the probe samples");
}

int pf_fleet_samples_decode(struct pf_coll_sample *out, size_t *n, size_t max, const uint8_t *p,
                            size_t len)
{
    *n = 0;
    struct pf_rdv_fields f;
    if (!p || pf_rdv_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed probe samples");
    for (size_t k = 0; k < f.n && *n < max && *n < MAX_ITEMS; k++) {
        if (!pf_rdv_field_is(&f.v[k], "s")) continue;
        struct pf_rdv_fields x;
        if (pf_rdv_fields_decode(&x, f.v[k].val, f.v[k].vlen) < 0) continue;
        long long src = -1, dst = -1, round = -1, bytes = -1;
        bool hs = false;
        double sec = get_num(&x, "seconds", &hs);
        if (hs && sec > 0 && pf_rdv_fields_int(&src, &x, "src") == 0 &&
            pf_rdv_fields_int(&dst, &x, "dst") == 0 &&
            pf_rdv_fields_int(&round, &x, "round") == 0 &&
            pf_rdv_fields_int(&bytes, &x, "bytes") == 0 && src >= 0 && src < (1 << 24) &&
            dst >= 0 && dst < (1 << 24) && round >= 0 && round < 1024 && bytes > 0 &&
            bytes <= (1ll << 40))
            out[(*n)++] =
                (struct pf_coll_sample){(int)src, (int)dst, (int)round, (size_t)bytes, sec};
        pf_rdv_fields_free(&x);
    }
    pf_rdv_fields_free(&f);
    return 0;
}

int pf_fleet_tasks_encode(struct pf_buf *out, bool more, const struct pf_coll_task *t, size_t n)
{
    pf_rdv_put_int(out, "more", more);
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    for (size_t i = 0; i < n; i++) {
        pf_buf_reset(&r);
        pf_rdv_put_int(&r, "peer", t[i].peer);
        pf_rdv_put_int(&r, "send", t[i].send);
        pf_rdv_put_int(&r, "bytes", (long long)t[i].bytes);
        pf_rdv_put(out, "t", r.data, r.len);
    }
    pf_buf_free(&r);
    return pf_buf_check(out, "the probe tasks");
}

int pf_fleet_tasks_decode(bool *more, struct pf_coll_task *out, size_t *n, size_t max, int npos,
                          const uint8_t *p, size_t len)
{
    *n = 0;
    *more = false;
    struct pf_rdv_fields f;
    if (!p || pf_rdv_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed probe tasks");
    long long m = 0;
    if (pf_rdv_fields_int(&m, &f, "more") < 0 || (m != 0 && m != 1)) {
        pf_rdv_fields_free(&f);
        return pf_err_set(PF_EINVAL, "malformed probe tasks: no \"more\"");
    }
    *more = m == 1;
    for (size_t k = 0; k < f.n && *n < max; k++) {
        if (!pf_rdv_field_is(&f.v[k], "t")) continue;
        struct pf_rdv_fields x;
        if (pf_rdv_fields_decode(&x, f.v[k].val, f.v[k].vlen) < 0) continue;
        long long peer = -1, send = -1, bytes = -1;
        if (pf_rdv_fields_int(&peer, &x, "peer") == 0 &&
            pf_rdv_fields_int(&send, &x, "send") == 0 &&
            pf_rdv_fields_int(&bytes, &x, "bytes") == 0 && peer >= 0 && peer < npos &&
            (send == 0 || send == 1) && bytes > 0 && bytes <= (long long)PF_COLL_PROBE_MAX_BYTES)
            out[(*n)++] = (struct pf_coll_task){(int)peer, send == 1, (size_t)bytes};
        pf_rdv_fields_free(&x);
    }
    pf_rdv_fields_free(&f);
    return 0;
}
