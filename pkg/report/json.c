/* The JSON bodies sent to the Kubernetes API: a core/v1 Event and a merge patch. Built with
 * a small escaper (every string through pf_report_json_str), never by pasting text. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "report.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not valid (overlong forms,
 * surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

int pf_report_json_str(struct pf_buf *out, const char *s)
{
    int r = pf_buf_add(out, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (r == 0 && *p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            r = pf_buf_add(out, e, 2);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            r = e ? pf_buf_add(out, e, 2) : pf_buf_addf(out, "\\u%04x", c);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                r = pf_buf_add(out, "\\ufffd", 6);
                p++;
            } else {
                r = pf_buf_add(out, p, n);
                p += n;
            }
        }
    }
    if (r == 0) r = pf_buf_add(out, "\"", 1);
    return r;
}

const char *pf_report_event_reason(enum pf_status verdict)
{
    switch (verdict) {
    case PF_FAIL:
        return "PreflightFailed";
    case PF_WARN:
        return "PreflightWarning";
    default:
        return "PreflightPassed";
    }
}

const char *pf_report_event_type(enum pf_status verdict)
{
    return verdict >= PF_WARN ? "Warning" : "Normal";
}

/* The verdict word: a verdict of skip (nothing ran) reads as pass, as in the YAML. */
static const char *verdict_word(enum pf_status s)
{
    return pf_status_name(s == PF_SKIP ? PF_PASS : s);
}

void pf_report_event_message(char *out, size_t max, const struct pf_verdict *v)
{
    if (max == 0) return;
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    /* the class and the node first: what the scheduler, and whoever cordons, acts on */
    const char *cls = pf_class_name(v->failure_class);
    const char *where = pf_node_get_str(v->pod, "node");
    pf_buf_addf(&b, "%s", verdict_word(v->verdict));
    if (*cls) pf_buf_addf(&b, " (%s)", cls);
    if (where && *where && v->verdict >= PF_WARN) pf_buf_addf(&b, " on node %s", where);
    pf_buf_addf(&b, ": %s", v->summary);
    /* the culprits first: they name the node to cordon */
    size_t i = 0;
    for (const struct pf_node *c = v->culprits ? v->culprits->first : NULL; c; c = c->next, i++) {
        const struct pf_node *rank = pf_node_get(c, "rank");
        const char *pod = pf_node_get_str(c, "pod");
        const char *node = pf_node_get_str(c, "node");
        const char *why = pf_node_get_str(c, "reason");
        pf_buf_addf(&b, "%s rank %lld", i == 0 ? "; culprits:" : ",", rank ? rank->i : -1LL);
        if (pod && node)
            pf_buf_addf(&b, " (%s on %s)", pod, node);
        else if (pod || node)
            pf_buf_addf(&b, " (%s)", pod ? pod : node);
        if (why) pf_buf_addf(&b, ": %s", why);
    }
    /* then the line a human reads first of each failed check, then of each warned one */
    for (int want = PF_FAIL; want >= PF_WARN; want--)
        for (size_t k = 0; k < v->nchecks; k++) {
            const struct pf_check *c = &v->checks[k];
            if ((int)c->status == want && c->message)
                pf_buf_addf(&b, "; %s: %s", c->id, c->message);
        }
    const char *s = b.data;
    size_t len = strlen(s);
    if (len < max) {
        memcpy(out, s, len + 1);
    } else {
        size_t cut = max > 4 ? max - 4 : 0;
        /* never split a UTF-8 sequence */
        while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
            cut--;
        memcpy(out, s, cut);
        snprintf(out + cut, max - cut, "%s", "...");
    }
    pf_buf_free(&b);
}

/* "key":"value" with a leading comma when not first. */
static int member(struct pf_buf *b, bool *first, const char *key, const char *value)
{
    int r = pf_buf_add(b, *first ? "" : ",", *first ? 0 : 1);
    *first = false;
    if (r == 0) r = pf_report_json_str(b, key);
    if (r == 0) r = pf_buf_add(b, ":", 1);
    if (r == 0) r = pf_report_json_str(b, value);
    return r;
}

int pf_report_event_body(struct pf_buf *out, const struct pf_verdict *v,
                         const struct pf_report_pod *pod, const char *timestamp)
{
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    pf_report_event_message(msg, sizeof(msg), v);
    char gen[300];
    snprintf(gen, sizeof(gen), "%s.preflight-", pod->name);
    bool f = true;
    int r = pf_buf_add(out, "{", 1);
    r = r ? r : member(out, &f, "apiVersion", "v1");
    r = r ? r : member(out, &f, "kind", "Event");
    r = r ? r : pf_buf_add(out, ",\"metadata\":{", 13);
    f = true;
    r = r ? r : member(out, &f, "generateName", gen);
    r = r ? r : member(out, &f, "namespace", pod->ns);
    r = r ? r : pf_buf_add(out, "},\"involvedObject\":{", 20);
    f = true;
    r = r ? r : member(out, &f, "apiVersion", "v1");
    r = r ? r : member(out, &f, "kind", "Pod");
    r = r ? r : member(out, &f, "name", pod->name);
    r = r ? r : member(out, &f, "namespace", pod->ns);
    if (pod->uid && *pod->uid) r = r ? r : member(out, &f, "uid", pod->uid);
    r = r ? r : pf_buf_add(out, "}", 1);
    f = false;
    r = r ? r : member(out, &f, "reason", pf_report_event_reason(v->verdict));
    r = r ? r : member(out, &f, "message", msg);
    r = r ? r : member(out, &f, "type", pf_report_event_type(v->verdict));
    r = r ? r : pf_buf_add(out, ",\"source\":{", 11);
    f = true;
    r = r ? r : member(out, &f, "component", "preflight");
    if (pod->node && *pod->node) r = r ? r : member(out, &f, "host", pod->node);
    r = r ? r : pf_buf_add(out, "}", 1);
    f = false;
    r = r ? r : member(out, &f, "firstTimestamp", timestamp);
    r = r ? r : member(out, &f, "lastTimestamp", timestamp);
    r = r ? r : pf_buf_add(out, ",\"count\":1}", 11);
    return r;
}

int pf_report_annotation_patch(struct pf_buf *out, const struct pf_verdict *v)
{
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    pf_report_event_message(msg, sizeof(msg), v);
    bool f = true;
    int r = pf_buf_add(out, "{\"metadata\":{\"annotations\":{", 28);
    r = r ? r : member(out, &f, PF_REPORT_ANNOTATION, verdict_word(v->verdict));
    r = r ? r : member(out, &f, PF_REPORT_ANNOTATION_SUMMARY, msg);
    const char *cls = pf_class_name(v->failure_class);
    if (*cls) r = r ? r : member(out, &f, PF_REPORT_ANNOTATION_CLASS, cls);
    r = r ? r : pf_buf_add(out, "}}}", 3);
    return r;
}
