/* The JSON bodies sent to the Kubernetes API: a core/v1 Event, the pod's merge patch and the
 * node's patches. Built as jansson values and written by json_dumps, never by pasting text;
 * every string goes through json_text, which makes it valid UTF-8 first. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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

/* s as a JSON string (NULL as ""); invalid UTF-8 bytes become U+FFFD, because json_string
 * takes valid UTF-8 only and the API server rejects anything else. NULL only when out of
 * memory. */
static json_t *json_text(const char *s)
{
    s = s ? s : "";
    json_t *j = json_string(s);
    if (j) return j;
    size_t len = strlen(s);
    char *t = pf_xmalloc(3 * len + 1), *o = t; /* each byte at most U+FFFD's 3 */
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            p++;
        } else {
            memcpy(o, p, n);
            o += n;
            p += n;
        }
    }
    j = json_stringn(t, (size_t)(o - t));
    free(t);
    return j;
}

static void put(json_t *obj, const char *key, const char *value)
{
    json_object_set_new(obj, key, json_text(value));
}

/* Appends j, compact, to out and drops it. */
static int dump(struct pf_buf *out, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!s) return pf_err_set(PF_ERR, "cannot build the JSON body (out of memory)");
    int r = pf_buf_add(out, s, strlen(s));
    free(s);
    return r;
}

int pf_report_json_str(struct pf_buf *out, const char *s)
{
    return dump(out, json_text(s));
}

const char *pf_report_event_reason(enum pf_status verdict)
{
    static const char *const reasons[] = {
        [PF_FAIL] = "PreflightFailed", [PF_WARN] = "PreflightWarning"};
    return pf_name_of(reasons, PF_ARRAY_LEN(reasons), (int)verdict, "PreflightPassed");
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

/* {"<outer>": {"<inner>": {...}}}, returning the innermost object. */
static json_t *nested(json_t **top, const char *outer, const char *inner)
{
    json_t *in = json_object(), *mid = json_object();
    *top = json_object();
    json_object_set_new(mid, inner, in);
    json_object_set_new(*top, outer, mid);
    return in;
}

int pf_report_event_body(struct pf_buf *out, const struct pf_verdict *v,
                         const struct pf_report_pod *pod, const char *timestamp)
{
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    pf_report_event_message(msg, sizeof(msg), v);
    char gen[300];
    snprintf(gen, sizeof(gen), "%s.preflight-", pod->name);
    json_t *ev = json_object(), *meta = json_object(), *obj = json_object(), *src = json_object();
    put(ev, "apiVersion", "v1");
    put(ev, "kind", "Event");
    put(meta, "generateName", gen);
    put(meta, "namespace", pod->ns);
    json_object_set_new(ev, "metadata", meta);
    put(obj, "apiVersion", "v1");
    put(obj, "kind", "Pod");
    put(obj, "name", pod->name);
    put(obj, "namespace", pod->ns);
    if (pod->uid && *pod->uid) put(obj, "uid", pod->uid);
    json_object_set_new(ev, "involvedObject", obj);
    put(ev, "reason", pf_report_event_reason(v->verdict));
    put(ev, "message", msg);
    put(ev, "type", pf_report_event_type(v->verdict));
    put(src, "component", "preflight");
    if (pod->node && *pod->node) put(src, "host", pod->node);
    json_object_set_new(ev, "source", src);
    put(ev, "firstTimestamp", timestamp);
    put(ev, "lastTimestamp", timestamp);
    json_object_set_new(ev, "count", json_integer(1));
    return dump(out, ev);
}

int pf_report_annotation_patch(struct pf_buf *out, const struct pf_verdict *v)
{
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    pf_report_event_message(msg, sizeof(msg), v);
    json_t *patch;
    json_t *ann = nested(&patch, "metadata", "annotations");
    put(ann, PF_REPORT_ANNOTATION, verdict_word(v->verdict));
    put(ann, PF_REPORT_ANNOTATION_SUMMARY, msg);
    const char *cls = pf_class_name(v->failure_class);
    if (*cls) put(ann, PF_REPORT_ANNOTATION_CLASS, cls);
    return dump(out, patch);
}

int pf_report_node_label_patch(struct pf_buf *out, const char *code)
{
    json_t *patch;
    put(nested(&patch, "metadata", "labels"), PF_REPORT_NODE_KEY, code);
    return dump(out, patch);
}

int pf_report_node_taint_patch(struct pf_buf *out, const char *node_json, const char *code)
{
    json_t *node = json_loads(node_json, 0, NULL);
    json_t *rv = json_object_get(json_object_get(node, "metadata"), "resourceVersion");
    if (!json_is_string(rv)) {
        json_decref(node);
        return PF_ERR;
    }
    json_t *patch = json_object(), *meta = json_object(), *spec = json_object();
    json_t *taints = json_array();
    json_object_set(meta, "resourceVersion", rv);
    json_object_set_new(patch, "metadata", meta);
    /* the others' taints as the API server gave them (members in their order); an earlier
     * one of ours is replaced */
    json_t *had = json_object_get(json_object_get(node, "spec"), "taints");
    size_t i;
    json_t *t;
    json_array_foreach(had, i, t)
    {
        const char *key = json_string_value(json_object_get(t, "key"));
        if (json_is_object(t) && !(key && strcmp(key, PF_REPORT_NODE_KEY) == 0))
            json_array_append(taints, t);
    }
    json_t *mine = json_object();
    put(mine, "effect", "NoSchedule");
    put(mine, "key", PF_REPORT_NODE_KEY);
    put(mine, "value", code);
    json_array_append_new(taints, mine);
    json_object_set_new(spec, "taints", taints);
    json_object_set_new(patch, "spec", spec);
    json_decref(node);
    return dump(out, patch);
}
