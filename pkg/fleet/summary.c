/* The codecs of what ranks tell each other about results: the SUMMARY, a rank's report, its
 * TCP all-reduce result and its link measurements. A record is one field whose value is a
 * nested field list (pkg/wire/wire.c); numbers are decimal text. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../wire/wire.h"

#define RECORD_MAX (64u << 10)

static void put_num(struct pf_buf *b, const char *key, const char *text)
{
    pf_wire_put_str(b, key, text);
}

static void put_record(struct pf_buf *b, const char *key, const struct pf_buf *rec)
{
    if (rec->over) {
        b->over = true;
        return;
    }
    pf_wire_put(b, key, rec->data, rec->len);
}

/* A number or integer of the SUMMARY: false when absent or refused; the first refusal is kept,
 * named, in s->bad (the part it belongs to is left out, the rest of the summary stands) */
int fleet_records_put(struct pf_buf *out, const char *key, const void *items, size_t n,
                      fleet_record_fn put, const char *what)
{
    struct pf_buf r;
    pf_buf_init(&r, RECORD_MAX);
    for (size_t i = 0; i < n; i++) {
        pf_buf_reset(&r);
        put(&r, items, i);
        put_record(out, key, &r);
    }
    pf_buf_free(&r);
    return pf_buf_check(out, what);
}

static bool sum_refused(struct pf_fleet_summary *s, int r, const char *where)
{
    if (r < 0 && r != PF_ENOENT && !s->bad[0])
        snprintf(s->bad, sizeof(s->bad), "%s%s", where, pf_err_msg());
    return r < 0;
}

static bool sum_num(struct pf_fleet_summary *s, double *out, const struct pf_wire_fields *f,
                    const char *key, const char *where)
{
    return !sum_refused(s, pf_wire_fields_num(out, f, key), where);
}

static bool sum_int(struct pf_fleet_summary *s, long long *out, const struct pf_wire_fields *f,
                    const char *key, const char *where)
{
    return !sum_refused(s, pf_wire_fields_int(out, f, key), where);
}

static char *get_dup(const struct pf_wire_fields *f, const char *key)
{
    const struct pf_wire_field *x = pf_wire_fields_get(f, key);
    char *s = x ? pf_wire_field_dup(x) : NULL;
    return s ? s : pf_xstrdup("");
}

static void finding_record(struct pf_buf *r, const void *items, size_t i)
{
    const struct pf_fleet_finding *x = (const struct pf_fleet_finding *)items + i;
    pf_wire_put_str(r, "check", x->check);
    pf_wire_put_str(r, "code", x->code);
    pf_wire_put_str(r, "status", pf_status_name(x->status));
    pf_wire_put_str(r, "remedy", x->remedy);
    pf_wire_put_str(r, "message", x->message);
}

static void culprit_record(struct pf_buf *r, const void *items, size_t i)
{
    const struct pf_fleet_culprit *x = (const struct pf_fleet_culprit *)items + i;
    pf_wire_put_int(r, "rank", x->rank);
    pf_wire_put_str(r, "pod", x->pod);
    pf_wire_put_str(r, "node", x->node);
    pf_wire_put_str(r, "reason", x->reason);
}

int pf_fleet_summary_encode(struct pf_buf *out, const struct pf_fleet_summary *s)
{
    /* an overflow is judged once, at the end, for the whole message */
    (void)fleet_records_put(out, "finding", s->findings, s->nfindings, finding_record, "");
    (void)fleet_records_put(out, "culprit", s->culprits, s->nculprits, culprit_record, "");
    struct pf_buf r;
    pf_buf_init(&r, RECORD_MAX);
    char num[64];
    if (s->have_tcp) {
        pf_wire_put_int(out, "bytes", s->bytes);
        pf_wire_put_int(out, "ranks", s->ranks);
        snprintf(num, sizeof(num), "%.9f", s->seconds);
        put_num(out, "seconds", num);
        snprintf(num, sizeof(num), "%.6f", s->algbw);
        put_num(out, "algbw", num);
        snprintf(num, sizeof(num), "%.6f", s->busbw);
        put_num(out, "busbw", num);
        pf_wire_put_int(out, "correct", s->correct);
        pf_wire_put_int(out, "iterations", s->iterations);
        if (s->expected >= 0) {
            snprintf(num, sizeof(num), "%g", s->expected);
            put_num(out, "expected", num);
        }
    }
    if (s->have_links) {
        snprintf(num, sizeof(num), "%.3f", s->median);
        put_num(out, "median", num);
        pf_buf_reset(&r);
        pf_wire_put_int(&r, "from", s->slow_src);
        pf_wire_put_int(&r, "to", s->slow_dst);
        snprintf(num, sizeof(num), "%.3f", s->slow_gbps);
        put_num(&r, "gbps", num);
        put_record(out, "slowest", &r);
    }
    if (s->verdict[0]) {
        pf_wire_put_str(out, "fleet", s->verdict);
        pf_wire_put_str(out, "fleetSummary", s->text);
    }
    pf_buf_free(&r);
    return pf_buf_check(out, "the SUMMARY message");
}

static void add_finding(struct pf_fleet_summary *s, const struct pf_wire_field *fl)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, fl->val, fl->vlen) < 0) return;
    char check[64] = "", code[64] = "", status[16] = "";
    if (pf_wire_fields_str(check, sizeof(check), &f, "check") == 0 &&
        pf_wire_fields_str(code, sizeof(code), &f, "code") == 0 &&
        pf_wire_fields_str(status, sizeof(status), &f, "status") == 0 &&
        pf_wire_fields_get(&f, "message")) {
        char *remedy = get_dup(&f, "remedy"), *msg = get_dup(&f, "message");
        int st = pf_status_parse(status);
        pf_fleet_finding(s, check, code, st == PF_WARN ? PF_WARN : PF_FAIL, remedy, "%s", msg);
        free(remedy);
        free(msg);
    }
    pf_wire_fields_free(&f);
}

static void add_culprit(struct pf_fleet_summary *s, const struct pf_wire_field *fl)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, fl->val, fl->vlen) < 0) return;
    long long rank = -1;
    if (pf_wire_fields_int(&rank, &f, "rank") == 0 && rank >= 0 && rank < (1 << 24) &&
        pf_wire_fields_get(&f, "reason")) {
        char *pod = get_dup(&f, "pod"), *node = get_dup(&f, "node"), *why = get_dup(&f, "reason");
        pf_fleet_culprit(s, (int)rank, pod, node, "%s", why);
        free(pod);
        free(node);
        free(why);
    }
    pf_wire_fields_free(&f);
}

static void get_tcp(struct pf_fleet_summary *s, const struct pf_wire_fields *f)
{
    long long correct = 0;
    bool a = sum_num(s, &s->seconds, f, "seconds", "");
    bool b = sum_num(s, &s->algbw, f, "algbw", "");
    bool c = sum_num(s, &s->busbw, f, "busbw", "");
    bool d = sum_int(s, &s->bytes, f, "bytes", "");
    bool e = sum_int(s, &s->ranks, f, "ranks", "");
    s->have_tcp = a && b && c && d && e && sum_int(s, &correct, f, "correct", "");
    s->correct = correct == 1;
    sum_int(s, &s->iterations, f, "iterations", "");
    sum_num(s, &s->expected, f, "expected", ""); /* stays -1 when absent or refused */
    s->have_links = sum_num(s, &s->median, f, "median", "");
    const struct pf_wire_field *sl = pf_wire_fields_get(f, "slowest");
    struct pf_wire_fields x;
    long long from = -1, to = -1;
    bool g = false;
    if (s->have_links && sl && pf_wire_fields_decode(&x, sl->val, sl->vlen) == 0) {
        if (sum_int(s, &from, &x, "from", "slowest ") && sum_int(s, &to, &x, "to", "slowest "))
            g = sum_num(s, &s->slow_gbps, &x, "gbps", "slowest ");
        pf_wire_fields_free(&x);
    }
    s->slow_src = (int)from;
    s->slow_dst = (int)to;
    if (!g) s->slow_src = s->slow_dst = -1;
}

int pf_fleet_summary_decode(struct pf_fleet_summary *out, const uint8_t *p, size_t len)
{
    memset(out, 0, sizeof(*out));
    out->expected = -1;
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, p, len) < 0) return pf_err_set(PF_EINVAL, "malformed SUMMARY");
    for (size_t i = 0; i < f.n; i++) {
        if (pf_wire_field_is(&f.v[i], "finding"))
            add_finding(out, &f.v[i]);
        else if (pf_wire_field_is(&f.v[i], "culprit"))
            add_culprit(out, &f.v[i]);
    }
    get_tcp(out, &f);
    if (pf_wire_fields_str(out->verdict, sizeof(out->verdict), &f, "fleet") == 0)
        pf_wire_fields_str(out->text, sizeof(out->text), &f, "fleetSummary");
    else
        out->verdict[0] = '\0';
    pf_wire_fields_free(&f);
    return 0;
}

/* A check as this rank found it itself: a finding of the whole job that every rank carries
 * (marked fleet: another pod's rail, a clique mismatch) is rank 0's judgement already, not a
 * sign against this pod, so it leaves the status and the codes reported. */
static void check_record(struct pf_buf *r, const void *items, size_t i)
{
    const struct pf_check *c = (const struct pf_check *)items + i;
    enum pf_status own = PF_PASS;
    bool any_fleet = false;
    for (size_t k = 0; k < c->nfindings; k++) {
        if (c->findings[k].fleet)
            any_fleet = true;
        else if (c->findings[k].status > own)
            own = c->findings[k].status;
    }
    pf_wire_put_str(r, "id", c->id);
    pf_wire_put_str(r, "status",
                    pf_status_name(any_fleet && c->status > PF_PASS ? own : c->status));
    for (size_t k = 0; k < c->nfindings; k++)
        if (!c->findings[k].fleet) pf_wire_put_str(r, "code", c->findings[k].code);
}

int pf_fleet_report_encode(struct pf_buf *out, const struct pf_verdict *v)
{
    pf_wire_put_str(out, "verdict", pf_status_name(v->verdict));
    return fleet_records_put(out, "check", v->checks, v->nchecks, check_record,
                             "this rank's report");
}

/* The index of id in the fleet's table of check ids (added when new); -1 when the table is
 * full. hint: where it most likely is (ranks report their checks in the same order). */
static int check_index(struct pf_fleet *f, const char *id, size_t hint)
{
    if (hint < f->ids.n && strcmp(f->ids.v[hint], id) == 0) return (int)hint;
    for (size_t i = 0; i < f->ids.n; i++)
        if (strcmp(f->ids.v[i], id) == 0) return (int)i;
    if (f->ids.n >= PF_FLEET_IDS_MAX) return -1;
    pf_strlist_add(&f->ids, id);
    return (int)f->ids.n - 1;
}

static uint8_t status_byte(const char *s)
{
    int st = pf_status_parse(s);
    return st < 0 ? PF_FLEET_ST_OTHER : (uint8_t)(st + 1);
}

static void add_check(struct pf_fleet *f, struct pf_fleet_rank *m, const struct pf_wire_field *fl,
                      size_t k)
{
    struct pf_wire_fields x;
    if (pf_wire_fields_decode(&x, fl->val, fl->vlen) < 0) return;
    char id[64], status[16] = "";
    if (pf_wire_fields_str(id, sizeof(id), &x, "id") < 0) {
        pf_wire_fields_free(&x);
        return;
    }
    pf_wire_fields_str(status, sizeof(status), &x, "status");
    uint8_t st = status_byte(status);
    int ix = check_index(f, id, k);
    if (ix >= 0) {
        if ((size_t)ix >= m->nst) {
            m->st = pf_xrealloc(m->st, (size_t)ix + 1);
            memset(m->st + m->nst, 0, (size_t)ix + 1 - m->nst);
            m->nst = (uint16_t)(ix + 1);
        }
        m->st[ix] = st;
    }
    if (st == PF_PASS + 1) {
        m->passed++;
    } else if (st != PF_SKIP + 1) { /* a skipped check is its status byte alone */
        struct pf_fleet_check c = {.id = (uint16_t)(ix < 0 ? 0 : ix), .status = st};
        if (ix < 0) c.own_id = pf_xstrdup(id);
        for (size_t j = 0; j < x.n && c.codes.n < 256; j++) {
            if (!pf_wire_field_is(&x.v[j], "code")) continue;
            char *code = pf_wire_field_dup(&x.v[j]);
            if (code) pf_strlist_add(&c.codes, code);
            free(code);
        }
        m->bad = pf_xrealloc(m->bad, (m->nbad + 1) * sizeof(*m->bad));
        m->bad[m->nbad++] = c;
    }
    pf_wire_fields_free(&x);
}

int pf_fleet_report_decode(struct pf_fleet *f, int rank, const uint8_t *p, size_t len)
{
    struct pf_wire_fields x;
    if (rank < 0 || rank >= f->world) return pf_err_set(PF_EINVAL, "report of rank %d", rank);
    if (!p || pf_wire_fields_decode(&x, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed report");
    struct pf_fleet_rank *m = &f->r[rank];
    m->reported = true;
    pf_wire_fields_str(m->verdict, sizeof(m->verdict), &x, "verdict");
    size_t nchecks = 0;
    for (size_t k = 0; k < x.n && nchecks < 256; k++)
        if (pf_wire_field_is(&x.v[k], "check")) add_check(f, m, &x.v[k], nchecks++);
    /* the pod's inventory (check gang), when the rank sent one */
    const struct pf_wire_field *inv = pf_wire_fields_get(&x, "inv");
    int r = 0;
    if (inv) {
        struct pf_fleet_inv in;
        r = pf_fleet_inv_decode(&in, inv->val, inv->vlen);
        pf_fleet_gang_add(f, rank, &in); /* what was refused stays unknown */
    }
    pf_wire_fields_free(&x);
    return r < 0 ? r : 0;
}

int pf_fleet_ar_encode(struct pf_buf *out, const struct pf_fleet_ar *a)
{
    pf_wire_put_str(out, "s", a->ok ? "ok" : "fail");
    char num[64];
    snprintf(num, sizeof(num), "%.9f", a->seconds);
    pf_wire_put_str(out, "seconds", num);
    pf_wire_put_int(out, "wrong", a->wrong);
    pf_wire_put_int(out, "firstBad", a->first_bad);
    pf_wire_put_str(out, "iface", a->iface ? a->iface : "");
    return pf_buf_check(out, "the all-reduce result");
}

int pf_fleet_ar_decode(struct pf_fleet_rank *m, const uint8_t *p, size_t len)
{
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed all-reduce result");
    char s[32] = "";
    pf_wire_fields_str(s, sizeof(s), &f, "s");
    m->ar_done = strcmp(s, "ok") == 0;
    int r = 0;
    if (pf_wire_fields_num(&m->ar_seconds, &f, "seconds") < 0 && m->ar_done) {
        /* a success without its time is no result the fleet can average */
        char why[256];
        snprintf(why, sizeof(why), "%s", pf_err_msg());
        m->ar_done = false;
        m->ar_seconds = 0;
        r = pf_err_set(PF_EINVAL, "all-reduce result refused: %s", why);
    }
    pf_wire_fields_int(&m->ar_wrong, &f, "wrong");
    pf_wire_fields_int(&m->ar_first_bad, &f, "firstBad");
    pf_wire_fields_str(m->iface, sizeof(m->iface), &f, "iface");
    pf_wire_fields_free(&f);
    return r;
}
