/* Gang-relative judgement (check `gang`, docs/checks/39-gang.md): every rank sends rank 0 its
 * pod's inventory with its report (GPUs, HCAs, ports, PCIe, the NICs NCCL would use, firmware,
 * driver, NCCL, attachments: what its local checks read), and rank 0 compares every rank with
 * the others of its group. A rank that differs where a strict majority of its group agrees is
 * named with the numbers; a trait every rank shares is not a node fault; without a majority
 * the gang cannot tell which side is wrong, and says so.
 *
 * Memory: every value is interned once in the fleet's table, a rank keeps one index a trait
 * (4 bytes), so 16,384 ranks that agree cost 16,384 x 68 bytes and a handful of strings.
 * Time: one sort of the ranks by group, then pf_fleet_minority (a sort) a trait and group:
 * O(T N log N). */
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FAM_NONE = 0, FAM_GPU = 1, FAM_HCA = 2 };

const struct pf_gang_trait_def pf_gang_traits[PF_GANG_NTRAITS] = {
    [PF_GANG_GPUS] = {"gpus", "gang-gpu-count", "%s GPUs", PF_FAIL, FAM_GPU},
    [PF_GANG_GPU_MODEL] = {"gpuModel", "gang-gpu-model", "GPU model %s", PF_FAIL, FAM_GPU},
    [PF_GANG_NVLINKS] = {"nvlinks", "gang-nvlink", "%s NVLink links active", PF_FAIL, FAM_GPU},
    [PF_GANG_DRIVER] = {"driver", "gang-driver", "driver %s", PF_WARN, FAM_NONE},
    [PF_GANG_HCAS] = {"hcas", "gang-hca-count", "%s HCAs", PF_FAIL, FAM_HCA},
    [PF_GANG_PROVIDER] = {"provider", "gang-hca-provider", "HCA provider %s", PF_FAIL, FAM_HCA},
    [PF_GANG_PORTS] = {"ports", "gang-ports", "%s ports ACTIVE", PF_FAIL, FAM_HCA},
    [PF_GANG_RATE] = {"rate", "gang-port-rate", "ports at %s", PF_FAIL, FAM_HCA},
    [PF_GANG_LINK] = {"linkLayer", "gang-link-layer", "link layer %s", PF_FAIL, FAM_HCA},
    [PF_GANG_PCIE] = {"pcie", "gang-pcie", "NIC PCIe link %s", PF_WARN, FAM_HCA},
    [PF_GANG_FIRMWARE] = {"firmware", "gang-firmware", "HCA firmware %s", PF_WARN, FAM_NONE},
    [PF_GANG_NICS] = {"nics", "gang-nics", "NCCL socket NICs %s", PF_WARN, FAM_NONE},
    [PF_GANG_NCCL] = {"nccl", "gang-nccl-version", "NCCL %s", PF_FAIL, FAM_NONE},
    [PF_GANG_NETWORKS] = {"networks", "gang-networks", "networks %s", PF_FAIL, FAM_NONE},
};

/* ---- the codec */

void pf_fleet_inv_init(struct pf_fleet_inv *inv)
{
    memset(inv, 0, sizeof(*inv));
    inv->ports_down = -1;
}

int pf_fleet_inv_encode(struct pf_buf *out, const struct pf_fleet_inv *inv)
{
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        if (inv->v[t][0]) pf_wire_put_str(out, pf_gang_traits[t].key, inv->v[t]);
    if (inv->group[0]) pf_wire_put_str(out, "group", inv->group);
    if (inv->ports_down >= 0) pf_wire_put_int(out, "portsDown", inv->ports_down);
    return pf_buf_check(out, "this pod's inventory");
}

/* A value as the inventory keeps it: printable ASCII or UTF-8 (no control bytes), short. */
static bool value_ok(const struct pf_wire_field *fl)
{
    if (fl->vlen >= PF_GANG_VALUE) return false;
    for (size_t i = 0; i < fl->vlen; i++)
        if (fl->val[i] < 0x20 || fl->val[i] == 0x7f) return false;
    return true;
}

int pf_fleet_inv_decode(struct pf_fleet_inv *out, const uint8_t *p, size_t len)
{
    pf_fleet_inv_init(out);
    struct pf_wire_fields f;
    if (!p || pf_wire_fields_decode(&f, p, len) < 0)
        return pf_err_set(PF_EINVAL, "malformed inventory");
    char bad[64] = "";
    for (size_t k = 0; k < f.n; k++) {
        const struct pf_wire_field *fl = &f.v[k];
        char *dst = NULL;
        for (int t = 0; t < PF_GANG_NTRAITS && !dst; t++)
            if (pf_wire_field_is(fl, pf_gang_traits[t].key)) dst = out->v[t];
        if (!dst && pf_wire_field_is(fl, "group")) dst = out->group;
        if (!dst) continue; /* a trait this rank does not know */
        if (!value_ok(fl)) {
            if (!bad[0]) snprintf(bad, sizeof(bad), "%.*s", (int)fl->klen, fl->key);
            continue;
        }
        memcpy(dst, fl->val, fl->vlen);
        dst[fl->vlen] = '\0';
    }
    long long down;
    if (pf_wire_fields_int(&down, &f, "portsDown") == 0 && down >= 0 && down <= 4096)
        out->ports_down = (int)down;
    pf_wire_fields_free(&f);
    if (bad[0]) return pf_err_set(PF_EINVAL, "inventory: the value of %s was refused", bad);
    return 0;
}

/* ---- the fleet's table of values */

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void table_grow(struct pf_fleet *f)
{
    uint32_t n = f->gang.nslot ? f->gang.nslot * 2 : 64;
    uint32_t *slot = pf_xcalloc(n, sizeof(*slot)); /* 0: empty (index 0 is never hashed) */
    for (uint32_t i = 1; i < f->gang.n; i++) {
        uint32_t s = hash(f->gang.v[i]) & (n - 1);
        while (slot[s])
            s = (s + 1) & (n - 1);
        slot[s] = i;
    }
    free(f->gang.slot);
    f->gang.slot = slot;
    f->gang.nslot = n;
}

static uint32_t intern(struct pf_fleet *f, const char *v)
{
    if (!v[0]) return 0;
    if (!f->gang.v) {
        f->gang.cap = 16;
        f->gang.v = pf_xcalloc(f->gang.cap, sizeof(*f->gang.v));
        f->gang.v[0] = pf_xstrdup("");
        f->gang.n = 1;
    }
    if ((f->gang.n + 1) * 2 > f->gang.nslot) table_grow(f);
    uint32_t s = hash(v) & (f->gang.nslot - 1);
    while (f->gang.slot[s]) {
        if (strcmp(f->gang.v[f->gang.slot[s]], v) == 0) return f->gang.slot[s];
        s = (s + 1) & (f->gang.nslot - 1);
    }
    if (f->gang.n == f->gang.cap) {
        f->gang.cap *= 2;
        f->gang.v = pf_xrealloc(f->gang.v, f->gang.cap * sizeof(*f->gang.v));
    }
    f->gang.v[f->gang.n] = pf_xstrdup(v);
    f->gang.slot[s] = f->gang.n;
    return f->gang.n++;
}

void pf_fleet_gang_add(struct pf_fleet *f, int rank, const struct pf_fleet_inv *inv)
{
    if (rank < 0 || rank >= f->world) return;
    struct pf_fleet_rank *m = &f->r[rank];
    m->inv_reported = true;
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        m->inv[t] = intern(f, inv->v[t]);
    m->inv[PF_GANG_NTRAITS] = intern(f, inv->group);
    m->ports_down = (int16_t)(inv->ports_down < 0      ? -1
                              : inv->ports_down > 4096 ? 4096
                                                       : inv->ports_down);
}

const char *pf_fleet_gang_value(const struct pf_fleet *f, int rank, int t)
{
    if (rank < 0 || rank >= f->world || t < 0 || t > PF_GANG_NTRAITS) return "";
    uint32_t i = f->r[rank].inv[t];
    return i < f->gang.n ? f->gang.v[i] : "";
}

/* ---- the judgement */

static const char *v_trait(const struct pf_fleet *f, int rank, char *buf, size_t n)
{
    (void)buf;
    (void)n;
    return pf_fleet_gang_value(f, rank, f->gang.trait);
}

/* Ranks by group, then by their place in the roster. */
struct member {
    uint32_t group;
    int pos, rank;
};
static int member_cmp(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int status_of(const struct pf_fleet_gang_opts *o, const char *code, enum pf_status st)
{
    return o && o->policy ? o->policy(o->arg, code, (int)st) : (int)st;
}

/* The trait's fmt with v in place of its "%s". */
static void fmt_value(char *out, size_t n, int t, const char *v)
{
    const char *f = pf_gang_traits[t].fmt, *at = strstr(f, "%s");
    if (!at) {
        snprintf(out, n, "%s", f);
        return;
    }
    snprintf(out, n, "%.*s%s%s", (int)(at - f), f, v, at + 2);
}

/* What the majority's HCAs or GPUs are, from one rank of it: "mlx5, 8 ports ACTIVE, ...". */
static void context(char *out, size_t n, const struct pf_fleet *f, int rank, int t)
{
    out[0] = '\0';
    int fam = pf_gang_traits[t].family;
    if (fam == FAM_NONE) return;
    size_t len = 0;
    for (int u = 0; u < PF_GANG_NTRAITS; u++) {
        const char *v = pf_fleet_gang_value(f, rank, u);
        if (u == t || pf_gang_traits[u].family != fam || !v[0]) continue;
        char one[PF_GANG_VALUE + 48];
        fmt_value(one, sizeof(one), u, v);
        int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "", one);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
}

/* Names the ranks out[0..k) of a group of m that differ on trait t from major (held by the
 * group's rank maj). */
static void name_outliers(struct pf_fleet *f, const struct pf_fleet_gang_opts *o, int t,
                          const int *out, int k, int m, const char *major, int maj,
                          const char *group, const char *why, struct pf_fleet_gang_result *res)
{
    const struct pf_gang_trait_def *d = &pf_gang_traits[t];
    int st = status_of(o, d->code, d->status);
    if (st < 0) return; /* ignored by the policy */
    char ctx[512], mv[PF_GANG_VALUE + 48], peers[PF_GANG_VALUE + 640], in[PF_GANG_VALUE + 32] = "";
    context(ctx, sizeof(ctx), f, maj, t);
    fmt_value(mv, sizeof(mv), t, major);
    if (group[0]) snprintf(in, sizeof(in), " (group %s)", group);
    if (k == 1)
        snprintf(peers, sizeof(peers), "its %d peers%s have %s%s%s%s", m - 1, in, mv,
                 ctx[0] ? " (" : "", ctx, ctx[0] ? ")" : "");
    else
        snprintf(peers, sizeof(peers), "%d of its %d peers%s have %s%s%s%s", m - k, m - 1, in, mv,
                 ctx[0] ? " (" : "", ctx, ctx[0] ? ")" : "");
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    for (int i = 0; i < k; i++) {
        if (i == PF_WIRE_LIST_MAX) {
            pf_buf_addf(&b, "; and %d more ranks", k - i);
            break;
        }
        char w[PF_WHO_MAX], v[PF_GANG_VALUE + 48];
        pf_fleet_who(w, sizeof(w), f, out[i]);
        fmt_value(v, sizeof(v), t, pf_fleet_gang_value(f, out[i], t));
        pf_buf_addf(&b, "%s%s: %s", i ? "; " : "", w, v);
    }
    pf_fleet_finding(&f->out, "gang", d->code, (enum pf_status)st, NULL, "%s; %s%s", pf_buf_str(&b),
                     peers, why);
    pf_buf_free(&b);
    for (int i = 0; i < k; i++) {
        struct pf_fleet_rank *r = &f->r[out[i]];
        if (d->family) r->gang_named |= (uint8_t)(1u << d->family);
        res->named++;
        if (st != PF_FAIL) continue;
        char v[PF_GANG_VALUE + 48];
        fmt_value(v, sizeof(v), t, pf_fleet_gang_value(f, out[i], t));
        pf_fleet_blame(f, out[i], "%s; %s%s", v, peers, why);
    }
}

/* No strict majority: the values and who holds them, at most a few. */
static void undecided(struct pf_fleet *f, int t, const int *ranks, int m, const char *group,
                      struct pf_fleet_gang_result *res)
{
    res->undecided++;
    const struct pf_gang_trait_def *d = &pf_gang_traits[t];
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    int shown = 0;
    for (int i = 0; i < m; i++) {
        if (shown == PF_WIRE_LIST_MAX) {
            pf_buf_addf(&b, "; and %d more ranks", m - i);
            break;
        }
        char w[PF_WHO_MAX], v[PF_GANG_VALUE + 48];
        pf_fleet_who(w, sizeof(w), f, ranks[i]);
        fmt_value(v, sizeof(v), t, pf_fleet_gang_value(f, ranks[i], t));
        pf_buf_addf(&b, "%s%s: %s", shown++ ? "; " : "", w, v);
    }
    char in[PF_GANG_VALUE + 32] = "";
    if (group[0]) snprintf(in, sizeof(in), " of group %s", group);
    pf_fleet_finding(&f->out, "gang", "gang-undecided", PF_WARN, NULL,
                     "%s: no value is held by more than half of the %d ranks%s, so the gang "
                     "cannot tell which rank differs (%s): %s",
                     d->key, m, in, d->code, pf_buf_str(&b));
    pf_buf_free(&b);
}

/* Positive evidence where the gang has no majority: for the HCA traits, the ranks with ports
 * not ACTIVE (rdma.ports read their state files) when every other rank has all of its ports
 * ACTIVE. Returns how many went into out. */
static int down_ranks(const struct pf_fleet *f, int t, const int *ranks, int m, int *out)
{
    if (pf_gang_traits[t].family != FAM_HCA) return 0;
    int k = 0;
    for (int i = 0; i < m; i++) {
        int d = f->r[ranks[i]].ports_down;
        if (d < 0) return 0; /* a rank that cannot tell: no evidence for the others */
        if (d > 0) out[k++] = ranks[i];
    }
    return k < m ? k : 0;
}

static void judge_trait(struct pf_fleet *f, const struct pf_fleet_gang_opts *o, int t,
                        const struct member *g, int ng, int *known, int *out,
                        struct pf_fleet_gang_result *res)
{
    const struct pf_gang_trait_def *d = &pf_gang_traits[t];
    int m = 0;
    for (int i = 0; i < ng; i++) {
        const struct pf_fleet_rank *r = &f->r[g[i].rank];
        if (!r->inv[t]) continue; /* the rank could not tell: not compared */
        if (d->family && (r->gang_named & (1u << d->family))) continue;
        known[m++] = g[i].rank;
    }
    if (m < 2) return;
    const char *group = pf_fleet_gang_value(f, g[0].rank, PF_GANG_NTRAITS);
    f->gang.trait = t;
    char major[PF_GANG_VALUE];
    int k = pf_fleet_minority(f, known, m, v_trait, out, major, sizeof(major));
    if (k == 0) return; /* every rank shares it: never a node fault */
    int maj = -1;
    for (int i = 0; i < m && maj < 0; i++)
        if (strcmp(pf_fleet_gang_value(f, known[i], t), major) == 0) maj = known[i];
    if ((m - k) * 2 > m) {
        name_outliers(f, o, t, out, k, m, major, maj, group, "", res);
        return;
    }
    int kd = down_ranks(f, t, known, m, out);
    if (kd > 0) {
        /* the majority's value is that of a rank with every port ACTIVE */
        int ok = -1;
        for (int i = 0; i < m && ok < 0; i++)
            if (f->r[known[i]].ports_down == 0) ok = known[i];
        name_outliers(f, o, t, out, kd, m, pf_fleet_gang_value(f, ok, t), ok, group,
                      "; no majority, but these ranks have ports that are not ACTIVE "
                      "(rdma.ports) and the others have none",
                      res);
        return;
    }
    undecided(f, t, known, m, group, res);
}

static void group_evidence(struct pf_node *groups, const struct pf_fleet *f, const struct member *g,
                           int ng)
{
    struct pf_node *e = pf_node_add_map(groups);
    const char *name = pf_fleet_gang_value(f, g[0].rank, PF_GANG_NTRAITS);
    if (g[0].group == UINT32_MAX)
        pf_node_set_str(e, "group", "rank 0 (gang.rank0: apart)");
    else if (name[0])
        pf_node_set_str(e, "group", name);
    pf_node_set_int(e, "ranks", ng);
    struct pf_node *tr = pf_node_set_map(e, "traits");
    for (int t = 0; t < PF_GANG_NTRAITS; t++) {
        /* the value of the group's first rank that knows it (the majority's, when one
         * exists, is in the findings) */
        for (int i = 0; i < ng; i++) {
            const char *v = pf_fleet_gang_value(f, g[i].rank, t);
            if (!v[0]) continue;
            pf_node_set_str(tr, pf_gang_traits[t].key, v);
            break;
        }
    }
}

#define GANG_EVIDENCE_GROUPS 16

void pf_fleet_gang_judge(struct pf_fleet *f, const struct pf_fleet_gang_opts *o,
                         struct pf_fleet_gang_result *res, struct pf_node *evidence)
{
    memset(res, 0, sizeof(*res));
    int n = f->roster ? f->n : 0;
    struct member *mem = pf_xcalloc(n > 0 ? (size_t)n : 1, sizeof(*mem));
    int nm = 0;
    for (int i = 0; i < n; i++) {
        int r = f->roster[i];
        if (r < 0 || r >= f->world || !f->r[r].inv_reported) continue;
        f->r[r].gang_named = 0;
        uint32_t g = f->r[r].inv[PF_GANG_NTRAITS];
        if (r == 0 && o && o->rank0_apart) g = UINT32_MAX;
        mem[nm++] = (struct member){g, i, r};
    }
    res->ranks = nm;
    qsort(mem, (size_t)nm, sizeof(*mem), member_cmp);
    int *known = pf_xcalloc(nm > 0 ? (size_t)nm : 1, sizeof(int));
    int *out = pf_xcalloc(nm > 0 ? (size_t)nm : 1, sizeof(int));
    struct pf_node *groups = NULL;
    if (evidence) {
        pf_node_set_int(evidence, "ranksCompared", nm);
        groups = pf_node_set_seq(evidence, "groups");
    }
    int shown = 0;
    for (int a = 0; a < nm;) {
        int b = a + 1;
        while (b < nm && mem[b].group == mem[a].group)
            b++;
        if (b - a >= 2) {
            res->groups++;
            for (int t = 0; t < PF_GANG_NTRAITS; t++)
                judge_trait(f, o, t, mem + a, b - a, known, out, res);
        }
        if (groups && shown++ < GANG_EVIDENCE_GROUPS) group_evidence(groups, f, mem + a, b - a);
        a = b;
    }
    if (evidence) {
        pf_node_set_int(evidence, "groupsCompared", res->groups);
        if (shown > GANG_EVIDENCE_GROUPS) pf_node_set_int(evidence, "groupsNotListed", shown - 16);
    }
    free(known);
    free(out);
    free(mem);
}
