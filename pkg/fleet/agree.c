/* Agreement at the rendezvous: the JOINs rank 0 refused, who never came, who was refused, and
 * where the ranks that met disagree (world size, preflight version, config, NCCL version,
 * NCCL_* variables). Every code of the check `rendezvous` that judges the ranks is decided
 * here; how one pod's own meeting ended is pkg/run/meet.c's. */
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One rank's value, for sorting: its copy and its place in ranks[]. */
struct held {
    char *v;
    int i;
};

static int held_cmp(const void *a, const void *b)
{
    const struct held *x = a, *y = b;
    int c = strcmp(x->v, y->v);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The groups by sorting (O(N log N)): a scan comparing every rank with every other was
 * 2.7e8 comparisons a claim at 16,384 ranks. The biggest group wins; rank 0's group wins a
 * tie, else the group that appears first in ranks[]. */
int pf_fleet_minority(const struct pf_fleet *f, const int *ranks, int n, pf_fleet_value_fn val,
                      int *out, char *major, size_t nmajor)
{
    if (n <= 0) return 0;
    char buf[512];
    struct held *h = pf_xcalloc((size_t)n, sizeof(*h));
    int *group = pf_xcalloc((size_t)n, sizeof(*group)),
        *size = pf_xcalloc((size_t)n, sizeof(*size));
    for (int i = 0; i < n; i++)
        h[i] = (struct held){pf_xstrdup(val(f, ranks[i], buf, sizeof(buf))), i};
    qsort(h, (size_t)n, sizeof(*h), held_cmp);
    int ngroups = 0;
    for (int k = 0; k < n; k++) {
        if (k == 0 || strcmp(h[k].v, h[k - 1].v) != 0) ngroups++;
        group[h[k].i] = ngroups - 1;
        size[ngroups - 1]++;
    }
    int best = 0;
    for (int i = 1; i < n; i++) {
        int g = group[i], b = group[best];
        if (size[g] > size[b] || (size[g] == size[b] && ranks[i] == 0 && g != b)) best = i;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (group[i] != group[best]) out[k++] = ranks[i];
    for (int j = 0; j < n; j++)
        if (h[j].i == best) snprintf(major, nmajor, "%s", h[j].v);
    for (int j = 0; j < n; j++)
        free(h[j].v);
    free(h);
    free(group);
    free(size);
    return k;
}

static const char *v_world(const struct pf_fleet *f, int r, char *buf, size_t n)
{
    snprintf(buf, n, "%lld", f->r[r].world_claimed);
    return buf;
}
static const char *v_version(const struct pf_fleet *f, int r, char *buf, size_t n)
{
    (void)buf;
    (void)n;
    return f->r[r].version;
}
static const char *v_digest(const struct pf_fleet *f, int r, char *buf, size_t n)
{
    (void)buf;
    (void)n;
    return f->r[r].digest;
}
static const char *v_nccl(const struct pf_fleet *f, int r, char *buf, size_t n)
{
    (void)buf;
    (void)n;
    return f->r[r].nccl_version;
}

/* Appends "rank N (pod)" items (or bare numbers), at most PF_WIRE_LIST_MAX, then "and K
 * more". */
static void list_ranks(struct pf_buf *b, const struct pf_fleet *f, const int *ranks, size_t n,
                       bool with_pod)
{
    for (size_t i = 0; i < n; i++) {
        if (i == PF_WIRE_LIST_MAX) {
            pf_buf_addf(b, " and %zu more", n - i);
            break;
        }
        char w[PF_WHO_MAX];
        if (with_pod)
            pf_fleet_who(w, sizeof(w), f, ranks[i]);
        else
            snprintf(w, sizeof(w), "%d", ranks[i]);
        pf_buf_addf(b, "%s%s", i ? ", " : "", w);
    }
}

/* The JOINs rank 0 refused after believing them: each says what the refused pod claimed.
 * A late JOIN (the run had started) is no finding: the rank is already missing-ranks. */
static void refusals(struct pf_fleet *f)
{
    for (size_t k = 0; k < f->nrefused; k++) {
        const struct pf_wire_refused *x = &f->refused[k];
        switch (x->why) {
        case PF_WIRE_REFUSED_RUN:
            pf_fleet_finding(&f->out, "rendezvous", "version-mismatch", PF_FAIL, NULL,
                             "%s sent a JOIN that does not name this run: it runs another "
                             "preflight version",
                             x->claim);
            break;
        case PF_WIRE_REFUSED_DUPLICATE:
            if (x->rank == 0)
                pf_fleet_finding(&f->out, "rendezvous", "duplicate-rank", PF_FAIL, NULL,
                                 "%s, but rank 0 is %s", x->claim, x->holder);
            else
                pf_fleet_finding(&f->out, "rendezvous", "duplicate-rank", PF_FAIL, NULL,
                                 "rank %lld is claimed by two pods: %s (joined from %s) and %s "
                                 "(from %s)",
                                 x->rank, x->holder, x->holder_addr, x->pod, x->addr);
            break;
        case PF_WIRE_REFUSED_WORLD:
            pf_fleet_finding(&f->out, "rendezvous", "world-size-mismatch", PF_FAIL, NULL,
                             "%s of world size %lld: outside rank 0's world size %d", x->claim,
                             x->world, f->world);
            break;
        case PF_WIRE_REFUSED_JOB:
            /* another job's pod: nothing this job's ranks did, its rank stays free for its
             * own pod (a warning; the refused pod's own verdict fails, class spec) */
            pf_fleet_finding(&f->out, "rendezvous", "job-mismatch", PF_WARN, NULL,
                             "%s of %s was refused: this run is %s (the jobs share a "
                             "PREFLIGHT_TOKEN and its coordinator points here)",
                             x->claim, x->job, x->root_job);
            break;
        default: /* TOKEN is not believed (stranger-refused, below); LATE: missing-ranks */
            break;
        }
    }
}

/* A rank that never joined, whose rank a JOIN that failed the token check claimed: a
 * warning (the missing rank fails the run anyway), at most PF_WIRE_LIST_MAX. */
static void strangers(struct pf_fleet *f, const int *missing_ranks, int k)
{
    int said = 0;
    for (int i = 0; i < k && said < PF_WIRE_LIST_MAX; i++) {
        int r = missing_ranks[i];
        if (!f->r[r].refused_claim[0]) continue;
        said++;
        pf_fleet_finding(&f->out, "rendezvous", "stranger-refused", PF_WARN, NULL,
                         "rank %d never joined; the last JOIN that claimed it was refused (%s): "
                         "if that was rank %d of this job, its PREFLIGHT_TOKEN differs from rank "
                         "0's",
                         r, f->r[r].refused_claim, r);
    }
}

/* At most this many ranks' absence is told in the finding's message (all are in the culprits). */
#define ABSENT_IN_MESSAGE 4

static void missing(struct pf_fleet *f, int *out, double waited_s)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    int k = 0;
    for (int r = 1; r < f->world; r++)
        if (f->r[r].state == PF_FLEET_MISSING) out[k++] = r;
    if (k) {
        list_ranks(&b, f, out, (size_t)k, true);
        /* what the API server says of the absent pods (rendezvous.explainMissing) */
        int told = 0;
        for (int i = 0; i < k && told < ABSENT_IN_MESSAGE; i++) {
            const char *why = f->r[out[i]].absent;
            if (!why || !*why) continue;
            pf_buf_addf(&b, "%s rank %d: %s", told ? ";" : ". Why, from the API server:", out[i],
                        why);
            told++;
        }
        pf_fleet_finding(&f->out, "rendezvous", "missing-ranks", PF_FAIL, NULL,
                         "%d of %d ranks never joined within %.0f s: %s", k, f->world, waited_s,
                         pf_buf_str(&b));
        for (int i = 0; i < k; i++) {
            const char *why = f->r[out[i]].absent;
            if (why && *why)
                pf_fleet_blame(f, out[i],
                               "never joined the rendezvous (no connection to rank 0 within %.0f "
                               "s): %s",
                               waited_s, why);
            else
                pf_fleet_blame(
                    f, out[i],
                    "never joined the rendezvous (no connection to rank 0 within %.0f s)",
                    waited_s);
        }
        strangers(f, out, k);
    }
    for (int r = 1; r < f->world; r++)
        if (f->r[r].state == PF_FLEET_REFUSED) pf_fleet_blame(f, r, "%s", f->r[r].why);
    pf_buf_free(&b);
}

/* One claim the ranks must agree on; its texts in pieces: message = pre + the minority +
 * mid + the majority's value + post; culprit = cpre + its value + cmid + the majority's. */
struct claim {
    pf_fleet_value_fn val;
    const char *code;
    enum pf_status status;
    const char *sep, *verb; /* items "rank 5 (trainer-5)<verb><value>"; NULL verb: names only */
    const char *pre, *mid, *post;
    const char *cpre, *cmid; /* NULL: no culprit */
};

static void disagree(struct pf_fleet *f, const int *in, int n, const struct claim *c, int *out)
{
    char major[512], buf[512];
    int k = pf_fleet_minority(f, in, n, c->val, out, major, sizeof(major));
    if (!k) return;
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    if (c->verb) {
        for (int i = 0; i < k && i < PF_WIRE_LIST_MAX; i++) {
            char w[PF_WHO_MAX];
            pf_fleet_who(w, sizeof(w), f, out[i]);
            pf_buf_addf(&b, "%s%s%s%s", i ? c->sep : "", w, c->verb,
                        c->val(f, out[i], buf, sizeof(buf)));
        }
    } else {
        list_ranks(&b, f, out, (size_t)k, true);
    }
    pf_fleet_finding(&f->out, "rendezvous", c->code, c->status, NULL, "%s%s%s%s%s", c->pre,
                     pf_buf_str(&b), c->mid, major, c->post);
    for (int i = 0; c->cpre && i < k; i++)
        pf_fleet_blame(f, out[i], "%s%s%s%s", c->cpre, c->val(f, out[i], buf, sizeof(buf)), c->cmid,
                       major);
    pf_buf_free(&b);
}

static const char *env_value(const struct pf_fleet_rank *m, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < m->env->n; i++)
        if (strncmp(m->env->v[i], name, nl) == 0 && m->env->v[i][nl] == '=')
            return m->env->v[i] + nl + 1;
    return NULL;
}

static bool same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* The variable env_one groups by, and its value on a rank ("\x1f" when unset: no value a
 * pod sends holds that byte alone) for pf_fleet_minority. */
static const char *env_name;
#define ENV_UNSET "\x1f"

static const char *v_env(const struct pf_fleet *f, int r, char *buf, size_t n)
{
    (void)buf;
    (void)n;
    const char *v = env_value(&f->r[r], env_name);
    return v ? v : ENV_UNSET;
}

/* The ranks whose value of one variable differs from the most common one, into b (grouped
 * by pf_fleet_minority: O(N log N)). */
static void env_one(struct pf_buf *vars, const struct pf_fleet *f, const int *in, int n,
                    const char *name)
{
    char major[512];
    int *out = pf_xcalloc((size_t)(n > 0 ? n : 1), sizeof(*out));
    env_name = name;
    int k = pf_fleet_minority(f, in, n, v_env, out, major, sizeof(major));
    bool unset = strcmp(major, ENV_UNSET) == 0;
    bool secret = pf_verdict_is_secret_name(name);
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    for (int i = 0; i < k; i++) {
        if (i == PF_WIRE_LIST_MAX) {
            pf_buf_addf(&b, ", ...");
            break;
        }
        const char *vi = env_value(&f->r[out[i]], name);
        char w[PF_WHO_MAX];
        pf_fleet_who(w, sizeof(w), f, out[i]);
        if (!vi)
            pf_buf_addf(&b, "%s%s unset", i ? ", " : "", w);
        else
            pf_buf_addf(&b, "%s%s =%s", i ? ", " : "", w, secret ? "***" : vi);
    }
    pf_buf_addf(vars, "%s%s: %s (the others: %s)", vars->len ? "; " : "", name, pf_buf_str(&b),
                unset ? "unset" : (secret ? "***" : major));
    pf_buf_free(&b);
    free(out);
}

static bool env_differs(const struct pf_fleet *f, const int *in, int n, const char *name)
{
    for (int i = 1; i < n; i++)
        if (!same(env_value(&f->r[in[0]], name), env_value(&f->r[in[i]], name))) return true;
    return false;
}

static void env_mismatch(struct pf_fleet *f, const int *in, int n)
{
    struct pf_strlist names = {0};
    for (int i = 0; i < n; i++) {
        const struct pf_fleet_rank *m = &f->r[in[i]];
        for (size_t e = 0; e < m->env->n; e++) {
            const char *eq = strchr(m->env->v[e], '=');
            if (!eq) continue;
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - m->env->v[e]), m->env->v[e]);
            if (!pf_strlist_has(&names, name)) pf_strlist_add(&names, name);
        }
    }
    pf_strlist_sort(&names);
    int nvars = 0;
    struct pf_buf vars;
    pf_buf_init(&vars, PF_BUF_TEXT);
    for (size_t v = 0; v < names.n; v++) {
        if (!env_differs(f, in, n, names.v[v])) continue;
        nvars++;
        env_one(&vars, f, in, n, names.v[v]);
    }
    if (nvars)
        pf_fleet_finding(&f->out, "rendezvous", "env-mismatch", PF_WARN, NULL,
                         "%d NCCL variable%s differ between ranks: %s", nvars, nvars > 1 ? "s" : "",
                         pf_buf_str(&vars));
    pf_buf_free(&vars);
    pf_strlist_free(&names);
}

void pf_fleet_agree(struct pf_fleet *f, double waited_s)
{
    int *in = pf_xmalloc((size_t)f->world * sizeof(int));
    int *out = pf_xmalloc((size_t)f->world * sizeof(int));
    int n = 0;
    for (int r = 0; r < f->world; r++)
        if (f->r[r].state == PF_FLEET_JOINED) in[n++] = r;
    refusals(f);
    missing(f, out, waited_s);
    static const struct claim world = {.val = v_world,
                                       .code = "world-size-mismatch",
                                       .status = PF_FAIL,
                                       .sep = "; ",
                                       .verb = " says ",
                                       .pre = "ranks disagree on the world size: ",
                                       .mid = "; the others say ",
                                       .post = "",
                                       .cpre = "world size ",
                                       .cmid = ", the others say "};
    static const struct claim version = {.val = v_version,
                                         .code = "version-mismatch",
                                         .status = PF_FAIL,
                                         .sep = ", ",
                                         .verb = " runs preflight ",
                                         .pre = "",
                                         .mid = "; the others run ",
                                         .post = "",
                                         .cpre = "runs preflight ",
                                         .cmid = ", the others "};
    static const struct claim config = {.val = v_digest,
                                        .code = "config-mismatch",
                                        .status = PF_WARN,
                                        .pre = "the preflight config of ",
                                        .mid = " differs from the others' (digest ",
                                        .post = ")"}; /* names only, no culprit */
    static const struct claim nccl = {.val = v_nccl,
                                      .code = "nccl-version-mismatch",
                                      .status = PF_FAIL,
                                      .sep = ", ",
                                      .verb = " has NCCL ",
                                      .pre = "",
                                      .mid = "; the others have ",
                                      .post = " (NCCL refuses mismatched versions)",
                                      .cpre = "NCCL ",
                                      .cmid = ", the others "};
    disagree(f, in, n, &world, out);
    disagree(f, in, n, &version, out);
    disagree(f, in, n, &config, out);
    /* the NCCL version where known */
    int nk = 0;
    int *known = pf_xmalloc((size_t)f->world * sizeof(int));
    for (int i = 0; i < n; i++)
        if (f->r[in[i]].nccl_version[0]) known[nk++] = in[i];
    disagree(f, known, nk, &nccl, out);
    free(known);
    env_mismatch(f, in, n);
    pf_fleet_fabric_agree(f);
    free(in);
    free(out);
}
