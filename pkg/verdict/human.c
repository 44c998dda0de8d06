/* The human form of a verdict: what `kubectl exec ... preflight check` and `kubectl logs` of
 * the initContainer show. One header line; failures first, then warnings, then passes on
 * one line each; skips folded into one line (all of them with `verbose`). A check's message
 * is not repeated by its first finding; findings that share a remedy print it once, naming
 * what it applies to. Wrapped to the width with hanging indents; ANSI colour only when asked. */
#include "verdict.h"

#include <stdlib.h>
#include <string.h>

#define C_RESET "\033[0m"
#define C_BOLD "\033[1m"
#define C_DIM "\033[2m"

#define IND 6 /* "fail  ": where a check's id starts and its findings and remedies go */

struct hw {
    FILE *f;
    int width;
    bool color;
    int col;      /* the column the next character goes to (0-based) */
    bool pending; /* a space is owed before the next word */
};

static const char *status_color(enum pf_status s)
{
    static const char *const colors[] = {
        [PF_PASS] = "\033[32m", [PF_WARN] = "\033[33m", [PF_FAIL] = "\033[31m"};
    return pf_name_of(colors, PF_ARRAY_LEN(colors), (int)s, C_DIM);
}

/* Columns that the first n bytes of UTF-8 text take (continuation bytes take none). */
static int text_cols(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static void hw_esc(struct hw *h, const char *esc)
{
    if (h->color) fputs(esc, h->f);
}

static void hw_nl(struct hw *h)
{
    fputc('\n', h->f);
    h->col = 0;
    h->pending = false;
}

/* Text that came from outside (peers' fields, environment values, log lines, host names)
 * with control sequences, carriage returns and (unless keep_newlines) newlines made visible
 * (pf_text_escape): a stranger's bytes never move the cursor or forge a line. The text
 * itself when it is safe already; else a copy in *tmp (freed by the caller). */
static const char *hw_safe(struct pf_buf *tmp, const char *s, bool keep_newlines)
{
    pf_buf_init(tmp, PF_BUF_DOCUMENT);
    if (pf_text_is_safe(s, keep_newlines)) return s;
    (void)pf_text_escape(tmp, s, keep_newlines);
    return pf_buf_str(tmp);
}

static void hw_put_raw(struct hw *h, const char *s);

/* Prints s as it is (no wrapping), counting its columns; outside text made safe. */
static void hw_put(struct hw *h, const char *s)
{
    struct pf_buf tmp;
    hw_put_raw(h, hw_safe(&tmp, s, false));
    pf_buf_free(&tmp);
}

static void hw_put_raw(struct hw *h, const char *s)
{
    if (h->pending && h->col > 0) {
        fputc(' ', h->f);
        h->col++;
    }
    h->pending = false;
    fputs(s, h->f);
    h->col += text_cols(s, strlen(s));
}

static void hw_pad(struct hw *h, int to)
{
    while (h->col < to) {
        fputc(' ', h->f);
        h->col++;
    }
}

/* Prints text word by word from the current column, breaking lines at the width and
 * continuing them at indent. A word longer than a line gets a line of its own. A newline
 * in text starts a new line at indent. */
static void hw_words_raw(struct hw *h, int indent, const char *text)
{
    for (const char *p = text; *p;) {
        if (*p == '\n') {
            hw_nl(h);
            hw_pad(h, indent);
            p++;
            continue;
        }
        if (*p == ' ' || *p == '\t') {
            h->pending = true;
            p++;
            continue;
        }
        size_t wl = strcspn(p, " \t\n");
        int need = (h->pending ? 1 : 0) + text_cols(p, wl);
        if (h->col + need > h->width && h->col > indent) {
            hw_nl(h);
            hw_pad(h, indent);
        }
        if (h->pending && h->col > 0) {
            fputc(' ', h->f);
            h->col++;
        }
        h->pending = false;
        fwrite(p, 1, wl, h->f);
        h->col += text_cols(p, wl);
        p += wl;
    }
}

/* hw_words_raw of text made safe: a newline in it is shown as \n, not obeyed (a message
 * may carry a peer's bytes). */
static void hw_words(struct hw *h, int indent, const char *text)
{
    struct pf_buf tmp;
    hw_words_raw(h, indent, hw_safe(&tmp, text, false));
    pf_buf_free(&tmp);
}

/* Prints text on what is left of the line, cut with "..." when it does not fit. */
static void hw_one_line(struct hw *h, const char *text)
{
    struct pf_buf tmp;
    text = hw_safe(&tmp, text, false);
    if (h->pending && h->col > 0) {
        fputc(' ', h->f);
        h->col++;
    }
    h->pending = false;
    int room = h->width - h->col;
    size_t n = strcspn(text, "\n");
    if (text_cols(text, n) <= room && !text[n]) {
        hw_put_raw(h, text);
        pf_buf_free(&tmp);
        return;
    }
    size_t cut = 0;
    int cols = 0;
    while (cut < n && cols < room - 3) {
        cut++;
        while (cut < n && ((unsigned char)text[cut] & 0xC0) == 0x80)
            cut++;
        cols++;
    }
    while (cut > 0 && text[cut - 1] == ' ')
        cut--;
    fwrite(text, 1, cut, h->f);
    fputs("...", h->f);
    h->col += text_cols(text, cut) + 3;
    pf_buf_free(&tmp);
}

static void hw_status(struct hw *h, enum pf_status s)
{
    hw_esc(h, status_color(s));
    hw_put(h, pf_status_name(s));
    hw_esc(h, C_RESET);
}

static const char *str_or(const struct pf_node *map, const char *key, const char *dflt)
{
    const char *s = pf_node_get_str(map, key);
    return s && *s ? s : dflt;
}

static void scalar_text(char *out, size_t n, const struct pf_node *v)
{
    if (!v) {
        snprintf(out, n, "-");
        return;
    }
    switch (v->kind) {
    case PF_NODE_STR:
        snprintf(out, n, "%s", v->str);
        break;
    case PF_NODE_INT:
        snprintf(out, n, "%lld", v->i);
        break;
    case PF_NODE_DBL:
        snprintf(out, n, "%.2f", v->d);
        break;
    case PF_NODE_BOOL:
        snprintf(out, n, "%s", v->b ? "yes" : "no");
        break;
    default:
        snprintf(out, n, "-");
    }
}

static const char *verdict_word(enum pf_status s)
{
    return s == PF_FAIL ? "FAIL" : s == PF_WARN ? "WARN" : "PASS";
}

/* A verdict that judged nothing (every check skipped) while a check names what it lacked
 * (evidence.unknown) is no pass: its word is UNKNOWN (`preflight log` on a file without NCCL
 * lines). The YAML keeps `verdict: pass`, a closed set (docs/verdict.md). */
static bool verdict_unknown(const struct pf_verdict *v)
{
    bool unknown = false;
    for (size_t i = 0; i < v->nchecks; i++) {
        if (v->checks[i].status != PF_SKIP) return false;
        unknown |= pf_check_unknowns(&v->checks[i]) > 0;
    }
    return unknown && v->verdict == PF_PASS && v->culprits->count == 0;
}

/* "preflight FAIL: 2 failed, 1 warning, 6 passed, 6 skipped; pod ml/trainer-5, node
 * gpu-node-22, rank 3/16" */
static void header(struct hw *h, const struct pf_verdict *v)
{
    size_t n[PF_FAIL + 1] = {0};
    for (size_t i = 0; i < v->nchecks; i++)
        n[v->checks[i].status]++;
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    const char *sep = "";
    if (n[PF_FAIL]) pf_buf_addf(&b, "%s%zu failed", sep, n[PF_FAIL]), sep = ", ";
    if (n[PF_WARN])
        pf_buf_addf(&b, "%s%zu warning%s", sep, n[PF_WARN], n[PF_WARN] == 1 ? "" : "s"), sep = ", ";
    pf_buf_addf(&b, "%s%zu passed", sep, n[PF_PASS]);
    if (n[PF_SKIP]) pf_buf_addf(&b, ", %zu skipped", n[PF_SKIP]);
    if (!v->nchecks) pf_buf_addf(&b, " (no checks ran)");
    const char *pod = str_or(v->pod, "name", NULL);
    const char *ns = str_or(v->pod, "namespace", NULL);
    const char *node = str_or(v->pod, "node", NULL);
    const char *sep2 = "; ";
    if (pod) pf_buf_addf(&b, "%spod %s%s%s", sep2, ns ? ns : "", ns ? "/" : "", pod), sep2 = ", ";
    if (node) pf_buf_addf(&b, "%snode %s", sep2, node), sep2 = ", ";
    if (pf_node_get(v->pod, "rank")) {
        char rank[32], world[32];
        scalar_text(rank, sizeof(rank), pf_node_get(v->pod, "rank"));
        scalar_text(world, sizeof(world), pf_node_get(v->pod, "worldSize"));
        pf_buf_addf(&b, "%srank %s", sep2, rank);
        if (pf_node_get(v->pod, "worldSize")) pf_buf_addf(&b, "/%s", world);
    }
    hw_esc(h, C_BOLD);
    hw_put(h, "preflight");
    hw_esc(h, C_RESET);
    h->pending = true;
    hw_esc(h, C_BOLD);
    hw_esc(h, status_color(v->verdict));
    hw_put(h, verdict_unknown(v) ? "UNKNOWN" : verdict_word(v->verdict));
    hw_esc(h, C_RESET);
    hw_put(h, ":");
    h->pending = true;
    hw_words(h, 2, b.data);
    hw_nl(h);
    pf_buf_free(&b);
}

/* The thing a finding's message is about, when it starts with one: "mlx5_1 port 1" of
 * "mlx5_1 port 1: state is DOWN". NULL when the message has no short subject. */
static bool subject_of(char *out, size_t n, const char *msg)
{
    const char *c = strstr(msg, ": ");
    if (!c || c == msg || (size_t)(c - msg) >= n || c - msg > 40) return false;
    for (const char *p = msg; p < c; p++)
        if (*p == '(' || *p == ')' || *p == ',' || *p == ';' || *p == '\n') return false;
    snprintf(out, n, "%.*s", (int)(c - msg), msg);
    return true;
}

/* The remedies of a check's non-passing findings, each once: "fix:" when there is one,
 * else "fix for CODE (SUBJECT, ...):" naming what each applies to. */
static void remedies(struct hw *h, const struct pf_check *c)
{
    struct pf_strlist seen = {0};
    size_t distinct = 0;
    for (size_t i = 0; i < c->nfindings; i++) {
        const struct pf_finding *fd = &c->findings[i];
        if (fd->status > PF_PASS && fd->remedy && *fd->remedy &&
            !pf_strlist_has(&seen, fd->remedy)) {
            pf_strlist_add(&seen, fd->remedy);
            distinct++;
        }
    }
    for (size_t r = 0; r < seen.n; r++) {
        struct pf_strlist codes = {0}, subjects = {0};
        bool all_subjects = true;
        for (size_t i = 0; i < c->nfindings; i++) {
            const struct pf_finding *fd = &c->findings[i];
            if (fd->status <= PF_PASS || !fd->remedy || strcmp(fd->remedy, seen.v[r]) != 0)
                continue;
            if (!pf_strlist_has(&codes, fd->code)) pf_strlist_add(&codes, fd->code);
            char subj[64];
            if (fd->message && subject_of(subj, sizeof(subj), fd->message)) {
                if (!pf_strlist_has(&subjects, subj)) pf_strlist_add(&subjects, subj);
            } else {
                all_subjects = false;
            }
        }
        hw_pad(h, IND);
        hw_esc(h, C_BOLD);
        hw_put(h, "fix");
        hw_esc(h, C_RESET);
        if (distinct > 1) {
            /* "for port-down (mlx5_1 port 1, mlx5_2 port 1):" */
            char list[1024], subj[1024], label[2100];
            pf_strlist_join(list, sizeof(list), &codes, ", ");
            pf_strlist_join(subj, sizeof(subj), &subjects, ", ");
            if (all_subjects && subjects.n)
                snprintf(label, sizeof(label), "for %s (%s):", list, subj);
            else
                snprintf(label, sizeof(label), "for %s:", list);
            h->pending = true;
            hw_words(h, IND + 2, label);
        } else {
            hw_put(h, ":");
        }
        h->pending = true;
        hw_words(h, IND + 2, seen.v[r]);
        hw_nl(h);
        pf_strlist_free(&codes);
        pf_strlist_free(&subjects);
    }
    pf_strlist_free(&seen);
}

/* The status and the check's id in bold, where every check's line starts. */
static void check_head(struct hw *h, const struct pf_check *c)
{
    hw_status(h, c->status);
    hw_pad(h, IND);
    hw_esc(h, C_BOLD);
    hw_put(h, c->id);
    hw_esc(h, C_RESET);
}

/* A failing or warning check (or any check with `verbose`): its line, its findings, its
 * remedies. */
static void check_full(struct hw *h, const struct pf_check *c)
{
    check_head(h, c);
    size_t first = 0;
    const char *msg = c->message && *c->message ? c->message : NULL;
    if (!msg && c->nfindings) msg = c->findings[0].message;
    if (msg) {
        hw_put(h, ":");
        h->pending = true;
        hw_words(h, IND + 2, msg);
    }
    /* the first finding says what the check's line says: only its code is new */
    if (c->nfindings && c->findings[0].message && msg && strcmp(c->findings[0].message, msg) == 0) {
        char code[PF_CODE_MAX + 4];
        snprintf(code, sizeof(code), "[%s]", c->findings[0].code);
        h->pending = true;
        hw_words(h, IND + 2, code);
        first = 1;
    }
    hw_nl(h);
    for (size_t i = first; i < c->nfindings; i++) {
        const struct pf_finding *fd = &c->findings[i];
        hw_pad(h, IND);
        hw_put(h, "-");
        h->pending = true;
        if (fd->status != c->status) {
            h->pending = true;
            hw_status(h, fd->status);
        }
        h->pending = true;
        char code[PF_CODE_MAX + 2];
        snprintf(code, sizeof(code), "%s:", fd->code);
        hw_words(h, IND + 2, code);
        h->pending = true;
        hw_words(h, IND + 2, fd->message ? fd->message : "");
        hw_nl(h);
    }
    /* what could not be decided (evidence.unknown), beside what failed */
    const struct pf_node *u = c->status != PF_PASS ? pf_node_get(c->evidence, "unknown") : NULL;
    size_t shown = 0;
    for (const struct pf_node *e = u && u->kind == PF_NODE_SEQ ? u->first : NULL; e; e = e->next) {
        if (shown++ == 3) {
            hw_pad(h, IND);
            hw_put(h, "- unknown:");
            h->pending = true;
            hw_words(h, IND + 2, "more under evidence.unknown");
            hw_nl(h);
            break;
        }
        const char *code = pf_node_get_str(e, "code"), *missing = pf_node_get_str(e, "missing");
        char label[PF_CODE_MAX + 16];
        snprintf(label, sizeof(label), "unknown %s:", code ? code : "?");
        hw_pad(h, IND);
        hw_put(h, "-");
        h->pending = true;
        hw_words(h, IND + 2, label);
        h->pending = true;
        hw_words(h, IND + 2, missing ? missing : "");
        hw_nl(h);
    }
    remedies(h, c);
}

/* A passing check on one line. */
static void check_line(struct hw *h, const struct pf_check *c)
{
    check_head(h, c);
    if (c->message && *c->message) {
        hw_put(h, ":");
        h->pending = true;
        hw_one_line(h, c->message);
    }
    hw_nl(h);
}

/* Every skipped check on one (wrapped) line: "skip  gpu.devices, net.sriov (-v: why)". */
static void skips_folded(struct hw *h, const struct pf_verdict *v)
{
    size_t n = 0;
    for (size_t i = 0; i < v->nchecks; i++)
        n += v->checks[i].status == PF_SKIP && !pf_check_unknowns(&v->checks[i]);
    if (!n) return;
    hw_status(h, PF_SKIP);
    hw_pad(h, IND);
    size_t k = 0;
    for (size_t i = 0; i < v->nchecks; i++) {
        if (v->checks[i].status != PF_SKIP || pf_check_unknowns(&v->checks[i])) continue;
        char id[PF_CODE_MAX + 2];
        snprintf(id, sizeof(id), "%s%s", v->checks[i].id, ++k < n ? "," : "");
        h->pending = k > 1;
        hw_words(h, IND, id);
    }
    h->pending = true;
    hw_esc(h, C_DIM);
    hw_words(h, IND, "(-v says why)");
    hw_esc(h, C_RESET);
    hw_nl(h);
}

/* "64 MiB" for sizes of whole KiB, MiB or GiB; the byte count otherwise. */
static void size_text(char *out, size_t n, const struct pf_node *v)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB"};
    if (!v || v->kind != PF_NODE_INT || v->i <= 0) {
        scalar_text(out, n, v);
        return;
    }
    long long x = v->i;
    int u = 0;
    while (u < 3 && x % 1024 == 0) {
        x /= 1024;
        u++;
    }
    snprintf(out, n, "%lld %s", x, unit[u]);
}

/* One line a collective: "tcp   allreduce of 64 MiB among 4 ranks: busbw 1.88 GB/s ..." */
static void collectives(struct hw *h, const struct pf_verdict *v)
{
    for (const struct pf_node *c = v->collectives->first; c; c = c->next) {
        char bytes[32], ranks[16], algbw[32], busbw[32], expect[32];
        size_text(bytes, sizeof(bytes), pf_node_get(c, "bytes"));
        scalar_text(ranks, sizeof(ranks), pf_node_get(c, "ranks"));
        scalar_text(algbw, sizeof(algbw), pf_node_get(c, "algbwGBps"));
        scalar_text(busbw, sizeof(busbw), pf_node_get(c, "busbwGBps"));
        scalar_text(expect, sizeof(expect), pf_node_get(c, "expectedMinBusbwGBps"));
        const struct pf_node *ok = pf_node_get(c, "correct");
        struct pf_buf b;
        pf_buf_init(&b, PF_BUF_MESSAGE);
        pf_buf_addf(&b, "%s of %s among %s ranks", str_or(c, "op", "-"), bytes, ranks);
        if (pf_node_get_str(c, "transport"))
            pf_buf_addf(&b, " over %s", str_or(c, "transport", "-"));
        pf_buf_addf(&b, ": busbw %s GB/s (algbw %s)", busbw, algbw);
        if (pf_node_get(c, "expectedMinBusbwGBps"))
            pf_buf_addf(&b, ", expected at least %s", expect);
        if (ok && ok->kind == PF_NODE_BOOL)
            pf_buf_addf(&b, ", result %s", ok->b ? "correct" : "WRONG");
        hw_esc(h, C_DIM);
        hw_put(h, str_or(c, "backend", "-"));
        hw_esc(h, C_RESET);
        hw_pad(h, IND);
        h->pending = h->col > IND;
        hw_words(h, IND + 2, b.data);
        hw_nl(h);
        pf_buf_free(&b);
    }
}

static void culprits(struct hw *h, const struct pf_verdict *v)
{
    for (const struct pf_node *c = v->culprits->first; c; c = c->next) {
        char rank[16];
        scalar_text(rank, sizeof(rank), pf_node_get(c, "rank"));
        struct pf_buf b;
        pf_buf_init(&b, PF_BUF_MESSAGE);
        pf_buf_addf(&b, "rank %s", rank);
        const char *pod = str_or(c, "pod", NULL), *node = str_or(c, "node", NULL);
        if (pod)
            pf_buf_addf(&b, " (pod %s%s%s)", pod, node ? " on node " : "", node ? node : "");
        else if (node)
            pf_buf_addf(&b, " (node %s)", node);
        pf_buf_addf(&b, ": %s", str_or(c, "reason", "named by the collectives"));
        hw_esc(h, C_BOLD);
        hw_esc(h, status_color(PF_FAIL));
        hw_put(h, "culprit");
        hw_esc(h, C_RESET);
        h->pending = true;
        hw_words(h, IND + 2, b.data);
        hw_nl(h);
        pf_buf_free(&b);
    }
}

void pf_verdict_render_human_style(FILE *f, const struct pf_verdict *v,
                                   const struct pf_human_style *st)
{
    struct hw h = {f, st->width >= 40 ? st->width : 40, st->color, 0, false};
    header(&h, v);
    hw_nl(&h);
    culprits(&h, v);
    static const enum pf_status order[] = {PF_FAIL, PF_WARN, PF_PASS, PF_SKIP};
    for (size_t o = 0; o < PF_ARRAY_LEN(order); o++) {
        for (size_t i = 0; i < v->nchecks; i++) {
            const struct pf_check *c = &v->checks[i];
            if (c->status != order[o]) continue;
            /* a skipped check that names what it lacked is shown with it */
            if (c->status >= PF_WARN || st->verbose ||
                (c->status == PF_SKIP && pf_check_unknowns(c)))
                check_full(&h, c);
            else if (c->status == PF_PASS)
                check_line(&h, c);
        }
    }
    if (!st->verbose) skips_folded(&h, v);
    collectives(&h, v);
}

void pf_verdict_render_human(FILE *f, const struct pf_verdict *v, bool color)
{
    struct pf_human_style st = {.color = color, .width = 80, .verbose = false};
    pf_verdict_render_human_style(f, v, &st);
}
