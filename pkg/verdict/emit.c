/* YAML output through libyaml's emitter, the same document as JSON (RFC 8259, written here
 * from the same calls: `--format json`), and atomic writes of the verdict file. */
#define _GNU_SOURCE
#include "verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_YAML (64u << 20)

#define JSON_MAX_DEPTH 128

struct out {
    yaml_emitter_t em;
    struct pf_buf buf;
    int failed;
    /* JSON: the same calls write JSON text instead of YAML events; per open collection
     * whether it is a map and how many scalars or collections it holds so far */
    bool json;
    int depth;
    bool is_map[JSON_MAX_DEPTH];
    size_t count[JSON_MAX_DEPTH];
};

static int write_handler(void *data, unsigned char *buffer, size_t size)
{
    struct out *o = data;
    if (pf_buf_add(&o->buf, buffer, size) < 0) {
        o->failed = 1;
        return 0;
    }
    return 1;
}

static void emit(struct out *o, yaml_event_t *ev)
{
    if (o->failed) {
        yaml_event_delete(ev);
        return;
    }
    if (!yaml_emitter_emit(&o->em, ev)) o->failed = 1;
}

/* Plain scalars that some YAML reader resolves to something other than the same string: the
 * YAML 1.1 types (yaml.org/type: bool, null, int in every base, base-60 int and float, float
 * with the spec's `[0-9.]*` fraction, timestamp, merge `<<`, value `=`; what PyYAML, Go
 * yaml.v2 and Ruby Psych read, including Psych's `1,000`), and the YAML 1.2 core schema (0o
 * octal, exponent without a dot, .inf/.nan), plus what Go's strconv accepts after a sign or
 * digit (hex floats, inf, infinity, nan). Matched case-insensitively: quoting "TrUe" too costs
 * nothing. */
static const char *const implicit_types =
    "^("
    "~|null|y|n|yes|no|true|false|on|off|<<|="                  /* null, bool, merge, value */
    "|[-+]?(\\.[0-9.][0-9_.,]*|[0-9][0-9_.,]*)(e[-+]?[0-9_]+)?" /* decimal int and float */
    "|[-+]?\\.[0-9.]*(e[-+]?[0-9]+)?"                           /* "." and ".e1" (1.1 spec) */
    "|[-+]?0x[0-9a-f_.]*[0-9a-f][0-9a-f_.]*(p[-+]?[0-9_]+)?"    /* hex int, Go hex float */
    "|[-+]?0o[0-7_]+|[-+]?0b[01_]+"                             /* 1.2 octal, 1.1 binary */
    "|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\\.[0-9_]*)?"            /* base 60 (1.1) */
    "|[-+]?\\.?(inf|infinity|nan)"                              /* .inf, .nan, Go's Inf */
    "|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?([t \t].*)?"  /* timestamp (1.1) */
    ")$";

static regex_t implicit_re;
static int implicit_ok;

static void implicit_compile(void)
{
    implicit_ok = regcomp(&implicit_re, implicit_types, REG_EXTENDED | REG_ICASE | REG_NOSUB) == 0;
}

/* Whether a YAML 1.1 or 1.2 reader would resolve the plain scalar s to anything but the
 * string s. Exposed for the unit tests through pf_yaml_plain_is_string. */
static bool resolves_to_non_string(const char *s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!*s) return true; /* null */
    pthread_once(&once, implicit_compile);
    if (!implicit_ok) return true; /* cannot tell: quote */
    return regexec(&implicit_re, s, 0, NULL, 0) == 0;
}

bool pf_yaml_plain_is_string(const char *s)
{
    return !resolves_to_non_string(s);
}

/* Strings that a YAML reader would take for something else are double-quoted. */
static bool needs_quotes(const char *s)
{
    if (resolves_to_non_string(s)) return true;
    /* leading/trailing blanks, or characters that start YAML syntax (libyaml would pick a
     * quoted style for most of these itself; being explicit keeps the output stable) */
    size_t n = strlen(s);
    if (s[0] == ' ' || s[n - 1] == ' ' || strchr("!&*-?{}[],#|>@`\"'%:", s[0])) return true;
    if (strstr(s, ": ") || strstr(s, " #") || s[n - 1] == ':') return true;
    return false;
}

/* Length of the well-formed UTF-8 sequence at s (as libyaml checks it: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

/* A copy of s with every byte that is not well-formed UTF-8 replaced by U+FFFD, or NULL when s
 * is well-formed: text from the host, the environment or a peer may be anything, and libyaml
 * refuses such a scalar (which would lose the whole verdict). */
static char *utf8_repair(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l == 0) break;
        i += l;
    }
    if (i == n) return NULL;
    char *o = pf_xmalloc(n * 3 + 1), *p = o;
    for (i = 0; i < n;) {
        size_t l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l == 0) {
            memcpy(p, "\xef\xbf\xbd", 3);
            p += 3;
            i++;
        } else {
            memcpy(p, s + i, l);
            p += l;
            i += l;
        }
    }
    *p = '\0';
    return o;
}

/* JSON: what goes before a value: a comma and a new line before a key or an item, ": "
 * between a key and its value. */
static void jadd(struct out *o, const void *p, size_t n)
{
    if (pf_buf_add(&o->buf, p, n) < 0) o->failed = 1;
}

static void jaddf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jaddf(struct out *o, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    jadd(o, tmp, n < 0 ? 0 : (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void json_pre(struct out *o)
{
    if (o->depth == 0) return;
    int d = o->depth - 1;
    size_t c = o->count[d]++;
    if (o->is_map[d] && c % 2 == 1) {
        jadd(o, ": ", 2);
        return;
    }
    if (c) jadd(o, ",", 1);
    jaddf(o, "\n%*s", 2 * o->depth, "");
}

static void json_string(struct out *o, const char *s)
{
    jadd(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            jaddf(o, "\\%c", *p);
        else if (*p == '\n')
            jadd(o, "\\n", 2);
        else if (*p == '\t')
            jadd(o, "\\t", 2);
        else if (*p < 0x20 || *p == 0x7f)
            jaddf(o, "\\u%04x", *p);
        else
            jadd(o, p, 1);
    }
    jadd(o, "\"", 1);
}

/* A scalar that is not a string (a number, true, false, null) as JSON: YAML's .nan and .inf
 * have no JSON form and become null. */
static void json_scalar(struct out *o, const char *s, bool is_string)
{
    json_pre(o);
    if (o->depth > 0 && o->is_map[o->depth - 1] && o->count[o->depth - 1] % 2 == 1)
        is_string = true; /* a key */
    if (is_string)
        json_string(o, s);
    else if (strstr(s, "inf") || strstr(s, "nan"))
        jadd(o, "null", 4);
    else
        jadd(o, s, strlen(s));
}

static void json_open(struct out *o, bool map)
{
    json_pre(o);
    jadd(o, map ? "{" : "[", 1);
    if (o->depth >= JSON_MAX_DEPTH) {
        o->failed = 1;
        return;
    }
    o->is_map[o->depth] = map;
    o->count[o->depth++] = 0;
}

static void json_close(struct out *o)
{
    if (o->depth <= 0) return;
    int d = --o->depth;
    if (o->count[d]) jaddf(o, "\n%*s", 2 * d, "");
    jadd(o, o->is_map[d] ? "}" : "]", 1);
}

static void scalar(struct out *o, const char *s, bool is_string)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;
    char *fixed = utf8_repair(s, strlen(s));
    if (fixed) s = fixed;
    if (o->json) {
        json_scalar(o, s, is_string);
        free(fixed);
        return;
    }
    if (is_string && needs_quotes(s)) style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    if (is_string && strchr(s, '\n')) style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    /* on failure the event is left uninitialised: never hand it to the emitter */
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                      style))
        o->failed = 1;
    else
        emit(o, &ev);
    free(fixed);
}

static void fmt_double(char *out, size_t n, double d)
{
    if (isnan(d) || isinf(d)) {
        snprintf(out, n, "%s", isnan(d) ? ".nan" : d > 0 ? ".inf" : "-.inf");
        return;
    }
    if (d != 0 && (fabs(d) < 0.001 || fabs(d) >= 1e15)) {
        /* "1.000e-05": YAML 1.1 reads an exponent only after a dot ("1e-05" is a string) */
        snprintf(out, n, "%.3e", d);
        return;
    }
    snprintf(out, n, "%.3f", d);
    char *dot = strchr(out, '.');
    if (dot) {
        char *e = out + strlen(out) - 1;
        while (e > dot + 1 && *e == '0')
            *e-- = '\0';
    }
}

static void map_start(struct out *o, bool flow)
{
    if (o->json) {
        json_open(o, true);
        return;
    }
    yaml_event_t ev;
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                        flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
    emit(o, &ev);
}

static void map_end(struct out *o)
{
    if (o->json) {
        json_close(o);
        return;
    }
    yaml_event_t ev;
    yaml_mapping_end_event_initialize(&ev);
    emit(o, &ev);
}

static void seq_start(struct out *o, bool flow)
{
    if (o->json) {
        json_open(o, false);
        return;
    }
    yaml_event_t ev;
    yaml_sequence_start_event_initialize(
        &ev, NULL, NULL, 1, flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
    emit(o, &ev);
}

static void seq_end(struct out *o)
{
    if (o->json) {
        json_close(o);
        return;
    }
    yaml_event_t ev;
    yaml_sequence_end_event_initialize(&ev);
    emit(o, &ev);
}

/* A sequence of plain scalars is written in flow style: [a, b, c]. */
static bool all_scalars(const struct pf_node *n)
{
    for (const struct pf_node *c = n->first; c; c = c->next)
        if (c->kind == PF_NODE_MAP || c->kind == PF_NODE_SEQ) return false;
    return true;
}

static void node(struct out *o, const struct pf_node *n, bool mask)
{
    char num[64];
    switch (n->kind) {
    case PF_NODE_STR:
        scalar(o, mask ? "***" : n->str, true);
        break;
    case PF_NODE_INT:
        snprintf(num, sizeof(num), "%lld", n->i);
        scalar(o, num, false);
        break;
    case PF_NODE_DBL:
        fmt_double(num, sizeof(num), n->d);
        scalar(o, num, false);
        break;
    case PF_NODE_BOOL:
        scalar(o, n->b ? "true" : "false", false);
        break;
    case PF_NODE_NULL:
        scalar(o, "null", false);
        break;
    case PF_NODE_MAP:
        map_start(o, n->count == 0);
        for (const struct pf_node *c = n->first; c; c = c->next) {
            scalar(o, c->key ? c->key : "", true);
            node(o, c, c->kind == PF_NODE_STR && pf_verdict_is_secret_name(c->key ? c->key : ""));
        }
        map_end(o);
        break;
    case PF_NODE_SEQ:
        seq_start(o, n->count == 0 || all_scalars(n));
        for (const struct pf_node *c = n->first; c; c = c->next)
            node(o, c, false);
        seq_end(o);
        break;
    }
}

static void kv(struct out *o, const char *k, const char *v)
{
    scalar(o, k, true);
    scalar(o, v, true);
}

/* The ranks list, straight from its flat entries: a rank without a check to list is one
 * line, {rank: 5, pod: ..., verdict: pass, checksPassed: 17}. */
static void ranks(struct out *o, const struct pf_ranks *l)
{
    char num[64];
    seq_start(o, false);
    for (size_t i = 0; i < l->n && !o->failed; i++) {
        struct pf_rank_in e;
        pf_ranks_get(l, i, &e);
        map_start(o, e.nchecks == 0 || l->brief);
        scalar(o, "rank", true);
        snprintf(num, sizeof(num), "%d", e.rank);
        scalar(o, num, false);
        const char *const keys[] = {"pod", "node", "address", "state"};
        const char *const vals[] = {e.pod, e.node, e.address, e.state};
        for (size_t k = 0; k < PF_ARRAY_LEN(keys); k++)
            if (vals[k][0]) kv(o, keys[k], vals[k]);
        if (e.has_tcp) {
            scalar(o, "tcpSeconds", true);
            fmt_double(num, sizeof(num), e.tcp_seconds);
            scalar(o, num, false);
        }
        kv(o, "verdict", e.verdict);
        if (e.passed >= 0) {
            scalar(o, "checksPassed", true);
            snprintf(num, sizeof(num), "%d", e.passed);
            scalar(o, num, false);
        }
        if (e.nchecks && !l->brief) {
            scalar(o, "checks", true);
            seq_start(o, false);
            for (size_t k = 0; k < e.nchecks; k++) {
                struct pf_rank_in_check c;
                pf_ranks_check(l, i, k, &c);
                map_start(o, true);
                kv(o, "id", c.id);
                kv(o, "status", c.status);
                scalar(o, "findings", true);
                seq_start(o, true);
                for (size_t j = 0; j < c.ncodes; j++)
                    scalar(o, pf_ranks_code(l, i, k, j), true);
                seq_end(o);
                map_end(o);
            }
            seq_end(o);
        }
        map_end(o);
    }
    seq_end(o);
}

static int begin(struct out *o, bool json)
{
    memset(o, 0, sizeof(*o));
    pf_buf_init(&o->buf, MAX_YAML);
    o->json = json;
    if (json) return 0;
    if (!yaml_emitter_initialize(&o->em))
        return pf_err_set(PF_ERR, "libyaml: cannot initialise the emitter");
    yaml_emitter_set_output(&o->em, write_handler, o);
    yaml_emitter_set_unicode(&o->em, 1);
    yaml_emitter_set_width(&o->em, 100);
    yaml_emitter_set_indent(&o->em, 2);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit(o, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    emit(o, &ev);
    return 0;
}

static int finish(struct out *o, char **out, size_t *out_len)
{
    if (o->json) {
        jadd(o, "\n", 1);
        if (o->failed) {
            pf_buf_free(&o->buf);
            return pf_err_set(PF_ERR, "JSON output: nested too deep or too large");
        }
        if (out_len) *out_len = o->buf.len;
        *out = pf_buf_detach(&o->buf);
        return 0;
    }
    yaml_event_t ev;
    yaml_document_end_event_initialize(&ev, 1);
    emit(o, &ev);
    yaml_stream_end_event_initialize(&ev);
    emit(o, &ev);
    yaml_emitter_flush(&o->em);
    int failed = o->failed;
    const char *problem = o->em.problem;
    yaml_emitter_delete(&o->em);
    if (failed) {
        pf_buf_free(&o->buf);
        return pf_err_set(PF_ERR, "libyaml emitter: %s", problem ? problem : "output too large");
    }
    if (out_len) *out_len = o->buf.len;
    size_t len = o->buf.len;
    *out = pf_buf_detach(&o->buf);
    /* the buffer grew by doubling: a large verdict (rank 0's, held twice by the guard's
     * snapshot) keeps only its length */
    char *fit = realloc(*out, len + 1);
    if (fit) *out = fit;
    return 0;
}

static int node_doc(char **out, size_t *out_len, const struct pf_node *n, bool json)
{
    struct out o;
    int r = begin(&o, json);
    if (r < 0) return r;
    node(&o, n, false);
    return finish(&o, out, out_len);
}

int pf_node_to_yaml(char **out, size_t *out_len, const struct pf_node *n)
{
    return node_doc(out, out_len, n, false);
}

int pf_node_to_json(char **out, size_t *out_len, const struct pf_node *n)
{
    return node_doc(out, out_len, n, true);
}

static int verdict_doc(char **out, size_t *out_len, const struct pf_verdict *v, bool json)
{
    struct out o;
    char num[64];
    int r = begin(&o, json);
    if (r < 0) return r;
    map_start(&o, false);
    kv(&o, "apiVersion", "preflight/v1");
    kv(&o, "kind", "Verdict");
    kv(&o, "verdict", pf_status_name(v->verdict));
    if (v->failure_class) kv(&o, "failureClass", pf_class_name(v->failure_class));
    kv(&o, "summary", v->summary);
    kv(&o, "generatedAt", v->generated_at);
    scalar(&o, "durationSeconds", true);
    fmt_double(num, sizeof(num), v->duration_seconds);
    scalar(&o, num, false);
    scalar(&o, "pod", true);
    node(&o, v->pod, false);
    scalar(&o, "environment", true);
    node(&o, v->environment, false);

    scalar(&o, "checks", true);
    seq_start(&o, v->nchecks == 0);
    for (size_t i = 0; i < v->nchecks; i++) {
        const struct pf_check *c = &v->checks[i];
        map_start(&o, false);
        kv(&o, "id", c->id);
        kv(&o, "status", pf_status_name(c->status));
        kv(&o, "message", c->message ? c->message : "");
        if (c->nfindings) {
            scalar(&o, "findings", true);
            seq_start(&o, false);
            for (size_t j = 0; j < c->nfindings; j++) {
                const struct pf_finding *f = &c->findings[j];
                map_start(&o, false);
                kv(&o, "code", f->code);
                kv(&o, "status", pf_status_name(f->status));
                if (f->cls && f->status >= PF_WARN) kv(&o, "class", pf_class_name(f->cls));
                kv(&o, "message", f->message ? f->message : "");
                if (f->remedy) kv(&o, "remedy", f->remedy);
                map_end(&o);
            }
            seq_end(&o);
        }
        if (c->evidence && c->evidence->count) {
            scalar(&o, "evidence", true);
            node(&o, c->evidence, false);
        }
        map_end(&o);
    }
    seq_end(&o);

    scalar(&o, "collectives", true);
    node(&o, v->collectives, false);
    scalar(&o, "culprits", true);
    node(&o, v->culprits, false);
    if (v->ranks.n) {
        scalar(&o, "ranks", true);
        ranks(&o, &v->ranks);
    }
    for (const struct pf_node *c = v->extra->first; c; c = c->next) {
        scalar(&o, c->key, true);
        node(&o, c, false);
    }
    map_end(&o);
    return finish(&o, out, out_len);
}

int pf_verdict_to_yaml(char **out, size_t *out_len, const struct pf_verdict *v)
{
    return verdict_doc(out, out_len, v, false);
}

int pf_verdict_to_json(char **out, size_t *out_len, const struct pf_verdict *v)
{
    return verdict_doc(out, out_len, v, true);
}

int pf_verdict_write_file(const struct pf_verdict *v, const char *path)
{
    char *yaml = NULL;
    size_t len = 0;
    int r = pf_verdict_to_yaml(&yaml, &len, v);
    if (r < 0) return r;
    if (strcmp(path, "-") == 0) {
        int e = pf_file_write_all(STDOUT_FILENO, yaml, len);
        r = e == 0 ? 0 : pf_err_set(PF_ERR, "stdout: %s", strerror(-e));
        free(yaml);
        return r;
    }
    pf_file_mkdir_parents(path);
    r = pf_file_replace(path, yaml, len, 0644);
    free(yaml);
    if (r < 0) {
        pf_verdict_guard_write_failed();
        char why[1024];
        pf_strcpy(why, sizeof(why), pf_err_msg());
        return pf_err_set(r, "verdict not written: %s", why);
    }
    return 0;
}
