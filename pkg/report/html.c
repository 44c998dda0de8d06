/* `preflight report VERDICT --html FILE`: one self-contained HTML page of a verdict
 * (docs/verdict.md, schema preflight/v1, as pkg/verdict/emit.c writes it): the headline and
 * the culprits, the rank x rank heatmap of the probed links (check collective.tcp's evidence
 * `links`, or `slowestLinks` with `linksMeasured` in a large job, and `medianLinkGbps`: as
 * pkg/run/summary.c writes them), the rails (check net.rails's evidence `networks` and
 * `rails`, pkg/fleet/rails.c and pkg/run/rails.c), this pod's checks and every rank's
 * (`ranks`, pkg/verdict/ranks.c). The file is outside input: read with libyaml, bounded in
 * depth, without aliases; a key of the wrong type is an error naming the file and the line;
 * keys it does not know are ignored (docs/verdict.md, Versioning). Every string of the
 * verdict is HTML-escaped in the page, or JSON-escaped (with < > & as \u escapes) in its data
 * block, which the script reads with JSON.parse and shows with textContent. */
#define _GNU_SOURCE
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "html.h"
#include "report.h"

#define DEPTH_MAX 64
#define WORLD_MAX (1 << 20) /* ranks a heatmap and a table take (the CLI's --world-size bound) */
#define IDS_MAX 256         /* check ids the ranks table has columns for */
/* pkg/collective/collective.h PF_COLL_SLOW_RATIO: a link under this x the median is slow */
#define SLOW_RATIO (1.0 / 3.0)

struct rd {
    yaml_document_t d;
    const char *name;
    char err[600];
};

struct str {
    const char *p; /* NULL: absent */
    size_t n;
};

static void fail_at(struct rd *r, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(struct rd *r, const yaml_node_t *n, const char *fmt, ...)
{
    if (r->err[0]) return;
    char m[400];
    PF_FORMAT_ARGS(m, fmt);
    snprintf(r->err, sizeof(r->err), "%s: line %zu: %s", r->name,
             n ? (size_t)n->start_mark.line + 1 : (size_t)1, m);
}

static const char *type_name(yaml_node_type_t t)
{
    return t == YAML_MAPPING_NODE    ? "a mapping"
           : t == YAML_SEQUENCE_NODE ? "a sequence"
           : t == YAML_SCALAR_NODE   ? "a scalar"
                                     : "empty";
}

/* A pass over the events first: deeper nesting or an alias refuse the file (a verdict has
 * neither; both make loading a document slow or large). */
static int shape(struct rd *r, const char *text, size_t len)
{
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) return pf_err_set(PF_ERR, "libyaml: no parser");
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    int depth = 0, docs = 0, rc = 0;
    for (bool done = false; !done && rc == 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&ps, &ev)) {
            snprintf(r->err, sizeof(r->err), "%s: line %zu: not YAML (%s)", r->name,
                     (size_t)ps.problem_mark.line + 1, ps.problem ? ps.problem : "syntax error");
            rc = -1;
            break;
        }
        size_t line = (size_t)ev.start_mark.line + 1;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > DEPTH_MAX)
                snprintf(r->err, sizeof(r->err), "%s: line %zu: nested deeper than a verdict",
                         r->name, line),
                    rc = -1;
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (ev.type == YAML_ALIAS_EVENT) {
            snprintf(r->err, sizeof(r->err), "%s: line %zu: a YAML alias (a verdict has none)",
                     r->name, line);
            rc = -1;
        } else if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
            snprintf(r->err, sizeof(r->err),
                     "%s: line %zu: a second YAML document (a verdict is one)", r->name, line);
            rc = -1;
        } else if (ev.type == YAML_STREAM_END_EVENT) {
            done = true;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&ps);
    return rc;
}

static yaml_node_t *node(struct rd *r, int id)
{
    return yaml_document_get_node(&r->d, id);
}

static bool is_null(const yaml_node_t *v)
{
    if (v->type != YAML_SCALAR_NODE || v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)v->data.scalar.value;
    return v->data.scalar.length == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* The value at key of map when it has type t; NULL when absent or null; an error (and NULL)
 * when it has another type. */
static yaml_node_t *get(struct rd *r, const yaml_node_t *map, const char *key, yaml_node_type_t t)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    size_t kl = strlen(key);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(r, p->key);
        if (!k || k->type != YAML_SCALAR_NODE || k->data.scalar.length != kl ||
            memcmp(k->data.scalar.value, key, kl) != 0)
            continue;
        yaml_node_t *v = node(r, p->value);
        if (!v || is_null(v)) return NULL;
        if (v->type != t) {
            fail_at(r, v, "%s is %s, expected %s (docs/verdict.md)", key, type_name(v->type),
                    type_name(t));
            return NULL;
        }
        return v;
    }
    return NULL;
}

static struct str sget(struct rd *r, const yaml_node_t *map, const char *key)
{
    yaml_node_t *v = get(r, map, key, YAML_SCALAR_NODE);
    return v ? (struct str){(const char *)v->data.scalar.value, v->data.scalar.length}
             : (struct str){NULL, 0};
}

static bool seq_is(const struct str s, const char *lit)
{
    return s.p && s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* A number at key: false when absent or not finite (.nan, .inf); an error when not a
 * number. */
static bool nget(struct rd *r, const yaml_node_t *map, const char *key, double *out)
{
    yaml_node_t *v = get(r, map, key, YAML_SCALAR_NODE);
    if (!v) return false;
    const char *s = (const char *)v->data.scalar.value;
    if (strcmp(s, ".nan") == 0 || strcmp(s, ".inf") == 0 || strcmp(s, "-.inf") == 0 ||
        strcmp(s, ".NaN") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, "-.Inf") == 0)
        return false;
    char *end;
    double x = strtod(s, &end);
    if (!*s || *end || end != s + v->data.scalar.length || !isfinite(x)) {
        fail_at(r, v, "%s is \"%.60s\", expected a number", key, s);
        return false;
    }
    *out = x;
    return true;
}

/* An integer rank (or count) in 0..max: false when absent; an error when not one. */
static bool iget(struct rd *r, const yaml_node_t *map, const char *key, long long max,
                 long long *out)
{
    double x;
    if (!nget(r, map, key, &x)) return false;
    if (x != floor(x) || x < 0 || x > (double)max) {
        fail_at(r, get(r, map, key, YAML_SCALAR_NODE), "%s is %g, expected an integer in 0..%lld",
                key, x, max);
        return false;
    }
    *out = (long long)x;
    return true;
}

#define EACH(it, seq)                                                                              \
    for (yaml_node_item_t *it = (seq) ? (seq)->data.sequence.items.start : NULL;                   \
         (seq) && it < (seq)->data.sequence.items.top; it++)

/* ---- writing */

/* s as HTML text or attribute value: & < > " ' as references; control characters, which a
 * YAML escape can put in a string, as U+FFFD (libyaml has refused bytes that are not UTF-8). */
static void h(struct pf_buf *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *rep = c == '&'                                            ? "&amp;"
                          : c == '<'                                          ? "&lt;"
                          : c == '>'                                          ? "&gt;"
                          : c == '"'                                          ? "&quot;"
                          : c == '\''                                         ? "&#39;"
                          : (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f ? "\xef\xbf\xbd"
                                                                              : NULL;
        if (!rep) continue;
        pf_buf_add(b, s + run, i - run);
        pf_buf_add(b, rep, strlen(rep));
        run = i + 1;
    }
    pf_buf_add(b, s + run, n - run);
}

static void hs(struct pf_buf *b, struct str s)
{
    if (s.p) h(b, s.p, s.n);
}

/* s as a JSON string: " \ and controls escaped, and < > & as \u escapes so that the data block
 * holds no "</script" and no markup; U+2028 and U+2029 escaped too. */
static void js(struct pf_buf *b, struct str s)
{
    pf_buf_add(b, "\"", 1);
    for (size_t i = 0; s.p && i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c == '"' || c == '\\')
            pf_buf_addf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&')
            pf_buf_addf(b, "\\u%04x", c);
        else if (c == 0xe2 && i + 2 < s.n && (unsigned char)s.p[i + 1] == 0x80 &&
                 ((unsigned char)s.p[i + 2] == 0xa8 || (unsigned char)s.p[i + 2] == 0xa9))
            pf_buf_addf(b, "\\u%04x", (unsigned char)s.p[i += 2] == 0xa8 ? 0x2028 : 0x2029);
        else
            pf_buf_add(b, &s.p[i], 1);
    }
    pf_buf_add(b, "\"", 1);
}

static const char *status_class(struct str s)
{
    if (seq_is(s, "pass")) return "st-pass";
    if (seq_is(s, "warn")) return "st-warn";
    if (seq_is(s, "fail")) return "st-fail";
    if (seq_is(s, "skip")) return "st-skip";
    return "";
}

static int status_key(struct str s)
{
    return seq_is(s, "fail") ? 0 : seq_is(s, "warn") ? 1 : seq_is(s, "pass") ? 2 : 3;
}

/* ---- the sections */

struct page {
    struct rd *r;
    yaml_node_t *root, *checks, *tcp, *rails;
    struct pf_buf *b, *data;
    long long world;
};

static yaml_node_t *check_of(struct rd *r, yaml_node_t *checks, const char *id)
{
    EACH(it, checks)
    {
        yaml_node_t *c = node(r, *it);
        if (c && c->type == YAML_MAPPING_NODE && seq_is(sget(r, c, "id"), id)) return c;
    }
    return NULL;
}

static void headline(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b;
    struct str v = sget(r, P->root, "verdict"), cls = sget(r, P->root, "failureClass");
    yaml_node_t *pod = get(r, P->root, "pod", YAML_MAPPING_NODE);
    yaml_node_t *fleet = get(r, P->root, "fleet", YAML_MAPPING_NODE);
    pf_buf_addf(b, "<header class=\"v-%s\"><h1>preflight ",
                seq_is(v, "pass") || seq_is(v, "warn") || seq_is(v, "fail") ? v.p : "unknown");
    if (v.p) {
        for (size_t i = 0; i < v.n && i < 16; i++) {
            char c = v.p[i] >= 'a' && v.p[i] <= 'z' ? (char)(v.p[i] - 32) : v.p[i];
            h(b, &c, 1);
        }
    } else {
        pf_buf_addf(b, "(no verdict)");
    }
    if (cls.p) {
        pf_buf_addf(b, " <span class=\"cls\">");
        hs(b, cls);
        pf_buf_addf(b, "</span>");
    }
    pf_buf_addf(b, "</h1>\n<p id=\"summary\">");
    hs(b, sget(r, P->root, "summary"));
    pf_buf_addf(b, "</p>\n");
    struct str fs = sget(r, fleet, "summary");
    if (fs.p) {
        pf_buf_addf(b, "<p>job: ");
        hs(b, fs);
        pf_buf_addf(b, "</p>\n");
    }
    pf_buf_addf(b, "<p class=\"note\">");
    struct str ns = sget(r, pod, "namespace"), name = sget(r, pod, "name"),
               nd = sget(r, pod, "node");
    if (name.p) {
        pf_buf_addf(b, "pod ");
        if (ns.p) hs(b, ns), pf_buf_addf(b, "/");
        hs(b, name);
    }
    if (nd.p) pf_buf_addf(b, " on node "), hs(b, nd);
    long long rank = -1, ws = 0, fws = 0, franks = 0;
    iget(r, pod, "rank", WORLD_MAX, &rank);
    iget(r, pod, "worldSize", WORLD_MAX, &ws);
    iget(r, fleet, "worldSize", WORLD_MAX, &fws);
    iget(r, fleet, "ranks", WORLD_MAX, &franks);
    if (fws > ws) ws = fws;
    if (rank >= 0) pf_buf_addf(b, ", rank %lld", rank);
    if (ws > 0) pf_buf_addf(b, "; world size %lld", ws);
    if (franks > 0) pf_buf_addf(b, " (%lld met)", franks);
    if (ws > P->world) P->world = ws;
    struct str at = sget(r, P->root, "generatedAt");
    if (at.p) pf_buf_addf(b, "; written "), hs(b, at);
    double dur;
    if (nget(r, P->root, "durationSeconds", &dur)) pf_buf_addf(b, " after %.1f s", dur);
    pf_buf_addf(b, "</p></header>\n");
}

static void culprits(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b;
    yaml_node_t *cs = get(r, P->root, "culprits", YAML_SEQUENCE_NODE);
    pf_buf_addf(b, "<section id=\"culprits\"><h2>Culprits</h2>\n");
    if (!cs || cs->data.sequence.items.top == cs->data.sequence.items.start) {
        pf_buf_addf(b, "<p>No culprit named.</p></section>\n");
        return;
    }
    pf_buf_addf(b, "<table class=\"sortable\"><thead><tr><th data-num=\"1\">rank</th><th>pod</th>"
                   "<th>node</th><th>why</th></tr></thead><tbody>\n");
    EACH(it, cs)
    {
        yaml_node_t *c = node(r, *it);
        if (!c || c->type != YAML_MAPPING_NODE) {
            fail_at(r, c, "a culprit is %s, expected a mapping", type_name(c ? c->type : 0));
            continue;
        }
        long long rank = -1;
        iget(r, c, "rank", WORLD_MAX, &rank);
        if (rank >= 0)
            pf_buf_addf(b, "<tr><td class=\"n\">%lld</td><td>", rank);
        else
            pf_buf_addf(b, "<tr><td class=\"n\"></td><td>");
        hs(b, sget(r, c, "pod"));
        pf_buf_addf(b, "</td><td>");
        hs(b, sget(r, c, "node"));
        pf_buf_addf(b, "</td><td>");
        hs(b, sget(r, c, "reason"));
        pf_buf_addf(b, "</td></tr>\n");
    }
    pf_buf_addf(b, "</tbody></table></section>\n");
}

/* The findings of a check as a list, "code: message" each. */
static void findings_list(struct page *P, yaml_node_t *c)
{
    struct rd *r = P->r;
    yaml_node_t *fs = get(r, c, "findings", YAML_SEQUENCE_NODE);
    if (!fs || fs->data.sequence.items.top == fs->data.sequence.items.start) return;
    pf_buf_addf(P->b, "<ul>");
    EACH(it, fs)
    {
        yaml_node_t *f = node(r, *it);
        if (!f || f->type != YAML_MAPPING_NODE) {
            fail_at(r, f, "a finding is %s, expected a mapping", type_name(f ? f->type : 0));
            continue;
        }
        struct str st = sget(r, f, "status");
        pf_buf_addf(P->b, "<li><span class=\"%s mono\">", status_class(st));
        hs(P->b, sget(r, f, "code"));
        pf_buf_addf(P->b, "</span>: ");
        hs(P->b, sget(r, f, "message"));
        pf_buf_addf(P->b, "</li>");
    }
    pf_buf_addf(P->b, "</ul>\n");
}

struct linkset {
    size_t n, cap;
    double *g;
};

static void link_add(struct page *P, struct linkset *L, long long from, long long to, double gbps)
{
    if (from + 1 > P->world) P->world = from + 1;
    if (to + 1 > P->world) P->world = to + 1;
    pf_buf_addf(P->data, "%s%lld,%lld,%.10g", L->n ? "," : "", from, to, gbps);
    if (L->n == L->cap)
        L->g = pf_xrealloc(L->g, (L->cap = L->cap ? L->cap * 2 : 64) * sizeof(*L->g));
    L->g[L->n++] = gbps;
}

/* An integer in 0..max at *p, up to the next blank, '=' or end (no sign, no exponent). */
static bool rank_at(const char **p, const char *end, long long max, long long *out)
{
    const char *s = *p;
    long long v = 0;
    if (s == end || *s < '0' || *s > '9') return false;
    for (; s < end && *s >= '0' && *s <= '9'; s++)
        if ((v = v * 10 + (*s - '0')) > max) return false;
    *p = s;
    *out = v;
    return true;
}

/* evidence.linkRates (docs/verdict.md, written by pkg/run/summary.c): a mapping from the
 * sending rank to "DST=GBPS DST=GBPS ...", every probed link of a large job. */
static bool link_rates(struct page *P, yaml_node_t *m, struct linkset *L)
{
    struct rd *r = P->r;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(r, p->key), *v = node(r, p->value);
        long long from, to;
        if (!k || k->type != YAML_SCALAR_NODE || !v || v->type != YAML_SCALAR_NODE) {
            fail_at(r, k, "linkRates has %s: %s, expected a rank: \"DST=GBPS ...\"",
                    type_name(k ? k->type : 0), type_name(v ? v->type : 0));
            return false;
        }
        const char *ks = (const char *)k->data.scalar.value;
        if (!rank_at(&ks, ks + k->data.scalar.length, WORLD_MAX - 1, &from) ||
            ks != (const char *)k->data.scalar.value + k->data.scalar.length) {
            fail_at(r, k, "linkRates: key \"%.40s\" is not a rank in 0..%d",
                    (const char *)k->data.scalar.value, WORLD_MAX - 1);
            return false;
        }
        const char *s = (const char *)v->data.scalar.value, *end = s + v->data.scalar.length;
        while (s < end) {
            const char *at = s;
            char num[40], *e;
            size_t w = 0;
            bool ok = rank_at(&s, end, WORLD_MAX - 1, &to) && s < end && *s++ == '=';
            while (ok && s + w < end && s[w] != ' ' && w < sizeof(num) - 1)
                num[w] = s[w], w++;
            num[w] = '\0';
            double gbps = ok && w ? strtod(num, &e) : 0;
            if (!ok || !w || *e || !isfinite(gbps) || gbps < 0 || (s + w < end && s[w] != ' ')) {
                fail_at(r, v, "linkRates of rank %lld: \"%.40s\" is not DST=GBPS", from, at);
                return false;
            }
            s += w;
            while (s < end && *s == ' ')
                s++;
            link_add(P, L, from, to, gbps);
        }
    }
    return true;
}

static void links(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b, *d = P->data;
    yaml_node_t *ev = get(r, P->tcp, "evidence", YAML_MAPPING_NODE);
    yaml_node_t *all = get(r, ev, "links", YAML_SEQUENCE_NODE);
    yaml_node_t *slowest = get(r, ev, "slowestLinks", YAML_SEQUENCE_NODE);
    yaml_node_t *rates = get(r, ev, "linkRates", YAML_MAPPING_NODE);
    yaml_node_t *ls = all ? all : slowest;
    double median = 0;
    bool have_median = nget(r, ev, "medianLinkGbps", &median) && median > 0;
    struct linkset L = {0};
    pf_buf_addf(d, ",\"links\":[");
    bool every = all || (rates && link_rates(P, rates, &L));
    if (rates && every) ls = NULL; /* every link is listed: the slowest ones again are not read */
    EACH(it, ls)
    {
        yaml_node_t *l = node(r, *it);
        if (!l || l->type != YAML_MAPPING_NODE) {
            fail_at(r, l, "a link is %s, expected a mapping {from, to, gbps}",
                    type_name(l ? l->type : 0));
            continue;
        }
        long long from, to;
        double gbps;
        if (!iget(r, l, "from", WORLD_MAX - 1, &from) || !iget(r, l, "to", WORLD_MAX - 1, &to) ||
            !nget(r, l, "gbps", &gbps))
            continue;
        link_add(P, &L, from, to, gbps);
    }
    pf_buf_addf(d, "]");
    size_t n = L.n;
    if (!have_median && every && n) {
        median = pf_median(L.g, n);
        have_median = median > 0;
    }
    free(L.g);
    pf_buf_addf(d, ",\"median\":%.10g,\"ratio\":%.10g", have_median ? median : 0.0, SLOW_RATIO);
    pf_buf_addf(b, "<section id=\"links\"><h2>Links, rank &#215; rank</h2>\n");
    if (!ls && !(rates && every)) {
        pf_buf_addf(b, "<p>This verdict lists no link probe (rank 0's verdict of a run of two "
                       "pods or more does: check collective.tcp).</p>\n");
    } else {
        long long measured = 0;
        iget(r, ev, "linksMeasured", 1LL << 40, &measured);
        pf_buf_addf(b, "<p>Rows: the sending rank; columns: the receiving rank. ");
        if (have_median) pf_buf_addf(b, "Median link %.3f Gb/s. ", median);
        if (slowest && !every)
            pf_buf_addf(b,
                        "%lld links were measured; the verdict lists the %zu slowest, the "
                        "others show as not listed.",
                        measured, n);
        else
            pf_buf_addf(b, "%zu links measured.", n);
        pf_buf_addf(b, "</p>\n<div id=\"hm\"><div><canvas id=\"heat\"></canvas>"
                       "<div id=\"tip\"></div></div><div id=\"legend\"></div></div>\n");
    }
    if (P->tcp) {
        struct str st = sget(r, P->tcp, "status");
        pf_buf_addf(b, "<p>collective.tcp: <span class=\"%s\">", status_class(st));
        hs(b, st);
        pf_buf_addf(b, "</span> ");
        hs(b, sget(r, P->tcp, "message"));
        pf_buf_addf(b, "</p>\n");
        findings_list(P, P->tcp);
    }
    pf_buf_addf(b, "</section>\n");
}

static void cell_s(struct pf_buf *b, struct str s)
{
    pf_buf_addf(b, "<td>");
    hs(b, s);
    pf_buf_addf(b, "</td>");
}

static void cell_n(struct rd *r, struct pf_buf *b, const yaml_node_t *m, const char *key)
{
    double x;
    if (nget(r, m, key, &x))
        pf_buf_addf(b, "<td class=\"n\">%.10g</td>", x);
    else
        pf_buf_addf(b, "<td class=\"n\"></td>");
}

static void rails(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b;
    pf_buf_addf(b, "<section id=\"rails\"><h2>Rails</h2>\n");
    if (!P->rails) {
        pf_buf_addf(b, "<p>No check net.rails in this verdict.</p></section>\n");
        return;
    }
    struct str st = sget(r, P->rails, "status");
    pf_buf_addf(b, "<p>net.rails: <span class=\"%s\">", status_class(st));
    hs(b, st);
    pf_buf_addf(b, "</span> ");
    hs(b, sget(r, P->rails, "message"));
    pf_buf_addf(b, "</p>\n");
    yaml_node_t *ev = get(r, P->rails, "evidence", YAML_MAPPING_NODE);
    yaml_node_t *nets = get(r, ev, "networks", YAML_SEQUENCE_NODE);
    if (nets) {
        pf_buf_addf(b, "<h3>Networks of the job</h3><table class=\"sortable\" id=\"networks\">"
                       "<thead><tr><th>network</th><th data-num=\"1\">pods</th>"
                       "<th data-num=\"1\">probed</th><th>subnet</th><th data-num=\"1\">MTU</th>"
                       "<th data-num=\"1\">median Gb/s</th></tr></thead><tbody>\n");
        EACH(it, nets)
        {
            yaml_node_t *x = node(r, *it);
            if (!x || x->type != YAML_MAPPING_NODE) {
                fail_at(r, x, "a network is %s, expected a mapping", type_name(x ? x->type : 0));
                continue;
            }
            pf_buf_addf(b, "<tr>");
            cell_s(b, sget(r, x, "name"));
            cell_n(r, b, x, "pods");
            cell_n(r, b, x, "probed");
            cell_s(b, sget(r, x, "subnet"));
            cell_n(r, b, x, "mtu");
            cell_n(r, b, x, "medianGbps");
            pf_buf_addf(b, "</tr>\n");
        }
        pf_buf_addf(b, "</tbody></table>\n");
    }
    yaml_node_t *mine = get(r, ev, "rails", YAML_SEQUENCE_NODE);
    if (mine) {
        pf_buf_addf(b, "<h3>This pod's rails</h3><table class=\"sortable\" id=\"myrails\">"
                       "<thead><tr><th>network</th><th>interface</th><th>address</th>"
                       "<th data-num=\"1\">MTU</th><th>up</th><th>probe to</th>"
                       "<th data-num=\"1\">Gb/s</th><th>note</th></tr></thead><tbody>\n");
        EACH(it, mine)
        {
            yaml_node_t *x = node(r, *it);
            if (!x || x->type != YAML_MAPPING_NODE) {
                fail_at(r, x, "a rail is %s, expected a mapping", type_name(x ? x->type : 0));
                continue;
            }
            yaml_node_t *pr = get(r, x, "probe", YAML_MAPPING_NODE);
            struct str note = sget(r, pr, "error");
            pf_buf_addf(b, "<tr>");
            cell_s(b, sget(r, x, "network"));
            cell_s(b, sget(r, x, "interface"));
            cell_s(b, sget(r, x, "address"));
            cell_n(r, b, x, "mtu");
            cell_s(b, sget(r, x, "up"));
            cell_s(b, sget(r, pr, "to"));
            cell_n(r, b, pr, "gbps");
            cell_s(b, note.p ? note : sget(r, pr, "note"));
            pf_buf_addf(b, "</tr>\n");
        }
        pf_buf_addf(b, "</tbody></table>\n");
    }
    findings_list(P, P->rails);
    pf_buf_addf(b, "</section>\n");
}

static void collectives(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b;
    yaml_node_t *cs = get(r, P->root, "collectives", YAML_SEQUENCE_NODE);
    if (!cs || cs->data.sequence.items.top == cs->data.sequence.items.start) return;
    pf_buf_addf(b, "<section id=\"collectives\"><h2>Collectives</h2><table class=\"sortable\">"
                   "<thead><tr><th>backend</th><th>op</th><th data-num=\"1\">bytes</th>"
                   "<th data-num=\"1\">ranks</th><th>transport</th>"
                   "<th data-num=\"1\">busbw GB/s</th><th data-num=\"1\">algbw GB/s</th>"
                   "<th data-num=\"1\">expected min GB/s</th><th>correct</th></tr></thead>"
                   "<tbody>\n");
    EACH(it, cs)
    {
        yaml_node_t *c = node(r, *it);
        if (!c || c->type != YAML_MAPPING_NODE) {
            fail_at(r, c, "a collective is %s, expected a mapping", type_name(c ? c->type : 0));
            continue;
        }
        pf_buf_addf(b, "<tr>");
        cell_s(b, sget(r, c, "backend"));
        cell_s(b, sget(r, c, "op"));
        cell_n(r, b, c, "bytes");
        cell_n(r, b, c, "ranks");
        cell_s(b, sget(r, c, "transport"));
        cell_n(r, b, c, "busbwGBps");
        cell_n(r, b, c, "algbwGBps");
        cell_n(r, b, c, "expectedMinBusbwGBps");
        cell_s(b, sget(r, c, "correct"));
        pf_buf_addf(b, "</tr>\n");
    }
    pf_buf_addf(b, "</tbody></table></section>\n");
}

static void own_checks(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b;
    pf_buf_addf(b, "<section id=\"checks\"><h2>Checks of this pod</h2>\n");
    if (!P->checks) {
        pf_buf_addf(b, "<p>No checks.</p></section>\n");
        return;
    }
    pf_buf_addf(b, "<table class=\"sortable\" id=\"ct\"><thead><tr><th>status</th><th>check</th>"
                   "<th>message</th><th>findings</th></tr></thead><tbody>\n");
    EACH(it, P->checks)
    {
        yaml_node_t *c = node(r, *it);
        if (!c || c->type != YAML_MAPPING_NODE) {
            fail_at(r, c, "a check is %s, expected a mapping", type_name(c ? c->type : 0));
            continue;
        }
        struct str st = sget(r, c, "status");
        pf_buf_addf(b, "<tr><td class=\"%s\" data-k=\"%d\">", status_class(st), status_key(st));
        hs(b, st);
        pf_buf_addf(b, "</td><td class=\"mono\">");
        hs(b, sget(r, c, "id"));
        pf_buf_addf(b, "</td><td>");
        hs(b, sget(r, c, "message"));
        pf_buf_addf(b, "</td><td>");
        findings_list(P, c);
        pf_buf_addf(b, "</td></tr>\n");
    }
    pf_buf_addf(b, "</tbody></table></section>\n");
}

/* The index of id among the ranks' check ids (added when new); -1 past IDS_MAX. */
static int id_index(struct pf_strlist *ids, struct str id)
{
    for (size_t i = 0; i < ids->n; i++)
        if (strlen(ids->v[i]) == id.n && memcmp(ids->v[i], id.p, id.n) == 0) return (int)i;
    if (ids->n >= IDS_MAX) return -1;
    pf_strlist_addn(ids, id.p, id.n);
    return (int)ids->n - 1;
}

static char status_letter(struct str s)
{
    return seq_is(s, "pass")   ? 'p'
           : seq_is(s, "warn") ? 'w'
           : seq_is(s, "fail") ? 'f'
           : seq_is(s, "skip") ? 's'
                               : '?';
}

/* One rank's entry of the data block: [rank, pod, node, address, state, verdict, passed,
 * tcpSeconds, status letters by id index, {id index: "codes"}]. */
static void rank_row(struct page *P, yaml_node_t *x, struct pf_strlist *ids, struct pf_buf *row)
{
    struct rd *r = P->r;
    struct pf_buf *d = P->data;
    long long rank = -1, passed = -1;
    double tcp = -1;
    if (!iget(r, x, "rank", WORLD_MAX - 1, &rank)) {
        if (!r->err[0]) fail_at(r, x, "a rank without its rank number");
        return;
    }
    if (rank + 1 > P->world) P->world = rank + 1;
    iget(r, x, "checksPassed", 1 << 20, &passed);
    if (!nget(r, x, "tcpSeconds", &tcp)) tcp = -1;
    pf_buf_addf(d, "[%lld,", rank);
    static const char *const keys[] = {"pod", "node", "address", "state", "verdict"};
    for (size_t k = 0; k < PF_ARRAY_LEN(keys); k++) {
        js(d, sget(r, x, keys[k]));
        pf_buf_add(d, ",", 1);
    }
    pf_buf_addf(d, "%lld,%.6g,", passed, tcp);
    pf_buf_reset(row);
    char letters[IDS_MAX];
    memset(letters, '-', sizeof(letters));
    yaml_node_t *cs = get(r, x, "checks", YAML_SEQUENCE_NODE);
    size_t ncodes = 0;
    EACH(it, cs)
    {
        yaml_node_t *c = node(r, *it);
        if (!c || c->type != YAML_MAPPING_NODE) {
            fail_at(r, c, "a rank's check is %s, expected a mapping {id, status, findings}",
                    type_name(c ? c->type : 0));
            continue;
        }
        struct str id = sget(r, c, "id");
        if (!id.p) continue;
        int ix = id_index(ids, id);
        if (ix < 0) continue;
        letters[ix] = status_letter(sget(r, c, "status"));
        yaml_node_t *fs = get(r, c, "findings", YAML_SEQUENCE_NODE);
        size_t k = 0;
        EACH(f, fs)
        {
            yaml_node_t *code = node(r, *f);
            if (!code || code->type != YAML_SCALAR_NODE) continue;
            if (!k++) pf_buf_addf(row, "%s\"%d\":\"", ncodes++ ? "," : "", ix);
            struct str cstr = {(const char *)code->data.scalar.value, code->data.scalar.length};
            struct pf_buf one;
            pf_buf_init(&one, PF_BUF_DOCUMENT);
            js(&one, cstr); /* its quotes dropped: the codes of a check go in one string */
            if (k > 1) pf_buf_add(row, ", ", 2);
            pf_buf_add(row, one.data + 1, one.len - 2);
            pf_buf_free(&one);
        }
        if (k) pf_buf_add(row, "\"", 1);
    }
    size_t n = ids->n;
    while (n > 0 && letters[n - 1] == '-')
        n--;
    pf_buf_addf(d, "\"%.*s\",{%s}]", (int)n, letters, pf_buf_str(row));
}

static void ranks(struct page *P)
{
    struct rd *r = P->r;
    struct pf_buf *b = P->b, *d = P->data;
    yaml_node_t *rs = get(r, P->root, "ranks", YAML_SEQUENCE_NODE);
    struct pf_strlist ids = {0};
    struct pf_buf row;
    pf_buf_init(&row, PF_BUF_DOCUMENT);
    pf_buf_addf(d, ",\"ranks\":[");
    size_t n = 0;
    EACH(it, rs)
    {
        yaml_node_t *x = node(r, *it);
        if (!x || x->type != YAML_MAPPING_NODE) {
            fail_at(r, x, "a rank is %s, expected a mapping", type_name(x ? x->type : 0));
            continue;
        }
        if (n++) pf_buf_add(d, ",", 1);
        rank_row(P, x, &ids, &row);
        if (r->err[0]) break;
    }
    pf_buf_addf(d, "],\"ids\":[");
    for (size_t i = 0; i < ids.n; i++) {
        if (i) pf_buf_add(d, ",", 1);
        js(d, (struct str){ids.v[i], strlen(ids.v[i])});
    }
    pf_buf_addf(d, "]");
    pf_buf_free(&row);
    pf_strlist_free(&ids);
    pf_buf_addf(b, "<section id=\"ranks\"><h2>Ranks</h2>\n");
    if (!rs)
        pf_buf_addf(b, "<p>This verdict has no ranks list (rank 0's verdict of a run has "
                       "one).</p>\n");
    else
        pf_buf_addf(
            b,
            "<p>%zu ranks; a click on a header sorts them all by it.</p>\n<div "
            "id=\"rnav\"></div><div class=\"wide\"><table id=\"rt\"><thead></thead><tbody></tbody>"
            "</table></div>\n",
            n);
    pf_buf_addf(b, "</section>\n");
}

/* The page's Content-Security-Policy: nothing from anywhere, inline style, and the one script
 * by its SHA-256 (CSP Level 2 hash source), so that no other script can run even where an
 * escape were missing. */
static void csp(struct pf_buf *b)
{
    unsigned char sum[crypto_hash_sha256_BYTES];
    if (sodium_init() < 0) return;
    crypto_hash_sha256(sum, (const unsigned char *)pf_report_html_js, strlen(pf_report_html_js));
    pf_buf_addf(b, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                   "style-src 'unsafe-inline'; img-src data:; script-src 'sha256-");
    pf_buf_base64(b, sum, sizeof(sum), false);
    pf_buf_addf(b, "'\">\n");
}

int pf_report_html(struct pf_buf *out, const char *name, const char *text, size_t len)
{
    struct rd r = {.name = name};
    if (len == 0) return pf_err_set(PF_EUSAGE, "%s: empty (expected a preflight verdict)", name);
    if (shape(&r, text, len) < 0) return pf_err_set(PF_EUSAGE, "%s", r.err);
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) return pf_err_set(PF_ERR, "libyaml: no parser");
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    if (!yaml_parser_load(&ps, &r.d)) {
        int rc = pf_err_set(PF_EUSAGE, "%s: line %zu: not YAML (%s)", name,
                            (size_t)ps.problem_mark.line + 1, ps.problem ? ps.problem : "?");
        yaml_parser_delete(&ps);
        return rc;
    }
    yaml_parser_delete(&ps);
    yaml_node_t *root = yaml_document_get_root_node(&r.d);
    int rc = 0;
    if (!root || root->type != YAML_MAPPING_NODE) {
        rc = pf_err_set(PF_EUSAGE,
                        "%s: line %zu: not a preflight verdict (%s, expected a mapping "
                        "with apiVersion preflight/v1, kind Verdict)",
                        name, root ? (size_t)root->start_mark.line + 1 : (size_t)1,
                        root ? type_name(root->type) : "no document");
        goto out;
    }
    struct str api = sget(&r, root, "apiVersion"), kind = sget(&r, root, "kind");
    if (!seq_is(api, "preflight/v1") || !seq_is(kind, "Verdict")) {
        yaml_node_t *at =
            get(&r, root, seq_is(api, "preflight/v1") ? "kind" : "apiVersion", YAML_SCALAR_NODE);
        rc = pf_err_set(PF_EUSAGE,
                        "%s: line %zu: not a preflight verdict (apiVersion \"%.*s\", kind "
                        "\"%.*s\"; expected apiVersion preflight/v1, kind Verdict: "
                        "docs/verdict.md)",
                        name, at ? (size_t)at->start_mark.line + 1 : (size_t)1,
                        api.p ? (int)(api.n > 60 ? 60 : api.n) : 0, api.p ? api.p : "",
                        kind.p ? (int)(kind.n > 60 ? 60 : kind.n) : 0, kind.p ? kind.p : "");
        goto out;
    }
    struct pf_buf body, data;
    pf_buf_init(&body, out->max);
    pf_buf_init(&data, out->max);
    struct page P = {.r = &r, .root = root, .b = &body, .data = &data};
    P.checks = get(&r, root, "checks", YAML_SEQUENCE_NODE);
    P.tcp = check_of(&r, P.checks, "collective.tcp");
    P.rails = check_of(&r, P.checks, "net.rails");
    pf_buf_addf(&data, "{\"v\":1");
    headline(&P);
    culprits(&P);
    links(&P);
    rails(&P);
    collectives(&P);
    own_checks(&P);
    ranks(&P);
    pf_buf_addf(&data, ",\"world\":%lld}", P.world);
    if (r.err[0]) {
        rc = pf_err_set(PF_EUSAGE, "%s", r.err);
    } else {
        pf_buf_addf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        csp(out);
        struct str v = sget(&r, root, "verdict"),
                   pod = sget(&r, get(&r, root, "pod", YAML_MAPPING_NODE), "name");
        pf_buf_addf(out, "<title>preflight ");
        hs(out, v);
        if (pod.p) pf_buf_addf(out, ": "), hs(out, pod);
        pf_buf_addf(out, "</title>\n<style>\n%s</style></head><body>\n", pf_report_html_css);
        pf_buf_add(out, body.data, body.len);
        pf_buf_addf(out, "<script type=\"application/json\" id=\"pf-data\">");
        pf_buf_add(out, data.data, data.len);
        pf_buf_addf(out, "</script>\n<script>%s</script>\n</body></html>\n", pf_report_html_js);
        rc = pf_buf_check(&body, "the page") < 0 || pf_buf_check(&data, "the page") < 0
                 ? pf_err_set(PF_ETOOBIG, "%s: the page would be larger than %zu bytes", name,
                              out->max)
                 : pf_buf_check(out, "the page");
    }
    pf_buf_free(&body);
    pf_buf_free(&data);
out:
    yaml_document_delete(&r.d);
    return rc;
}
