/* Failure classes: which class a failing verdict has, the exit code that follows from it, and
 * the one-line reason a termination message and an Event carry (docs/checks.md, "class"). */
#define _GNU_SOURCE
#include "verdict.h"

#include <stdio.h>
#include <string.h>

/* Whether the culprits name this pod (by rank, or by pod name). */
static bool pod_is_culprit(const struct pf_verdict *v)
{
    const struct pf_node *rk = pf_node_get(v->pod, "rank");
    const char *name = pf_node_get_str(v->pod, "name");
    for (const struct pf_node *c = v->culprits->first; c; c = c->next) {
        const struct pf_node *r = pf_node_get(c, "rank");
        const char *pod = pf_node_get_str(c, "pod");
        /* by rank where both know it (pods on one host may share a name); else by name */
        if (rk && rk->kind == PF_NODE_INT && r && r->kind == PF_NODE_INT) {
            if (r->i == rk->i) return true;
            continue;
        }
        if (name && *name && pod && strcmp(pod, name) == 0) return true;
    }
    return false;
}

bool pf_verdict_fails(const struct pf_verdict *v)
{
    return v->verdict == PF_FAIL || (v->verdict == PF_WARN && v->warn_fails);
}

void pf_verdict_classify(struct pf_verdict *v)
{
    bool me = v->culprits->count > 0 && pod_is_culprit(v);
    /* another pod is named: a collective that failed here failed with it (a peer died during
     * NCCL's init, say), so moving this pod to another node would not help */
    bool other = v->culprits->count > 0 && !me;
    /* a finding of the whole job (another pod's broken rail, a clique mismatch) is a fault of
     * this pod's node only when the culprits name this pod: on every other pod it is a peer's
     * fault, which marks nothing (docs/checks.md, "class") */
    enum pf_status floor = v->warn_fails ? PF_WARN : PF_FAIL;
    enum pf_class worst = PF_CLASS_NONE;
    for (size_t i = 0; i < v->nchecks; i++) {
        struct pf_check *c = &v->checks[i];
        for (size_t j = 0; j < c->nfindings; j++) {
            struct pf_finding *f = &c->findings[j];
            if (me && f->cls == PF_CLASS_PEER) f->cls = PF_CLASS_NODE;
            if (other && f->cls == PF_CLASS_NODE && strncmp(c->id, "collective.", 11) == 0)
                f->cls = PF_CLASS_PEER;
            if (!me && f->fleet && f->cls == PF_CLASS_NODE) f->cls = PF_CLASS_PEER;
            if (f->status >= floor && f->cls > worst) worst = f->cls;
        }
    }
    /* a named culprit fails the gate without a finding of its own: this pod, or another */
    if (worst == PF_CLASS_NONE && v->verdict == PF_FAIL && v->culprits->count > 0)
        worst = me ? PF_CLASS_NODE : PF_CLASS_PEER;
    v->failure_class = pf_verdict_fails(v) ? worst : PF_CLASS_NONE;
}

int pf_verdict_exit_code(const struct pf_verdict *v)
{
    if (!pf_verdict_fails(v)) return 0;
    switch (v->failure_class) {
    case PF_CLASS_SPEC:
        return PF_EXIT_CLASS_SPEC;
    case PF_CLASS_NODE:
        return PF_EXIT_CLASS_NODE;
    case PF_CLASS_PEER:
        return PF_EXIT_CLASS_PEER;
    default:
        return 1;
    }
}

/* The finding that explains the verdict: the first failing one of the winning class. */
static void first_cause(const struct pf_verdict *v, const struct pf_check **oc,
                        const struct pf_finding **of)
{
    enum pf_status floor = v->warn_fails ? PF_WARN : PF_FAIL;
    *oc = NULL;
    *of = NULL;
    /* a failing finding of that class first, then a warning of it (--strict), then any */
    for (int pass = 0; pass < 3 && !*of; pass++)
        for (size_t i = 0; i < v->nchecks && !*of; i++)
            for (size_t j = 0; j < v->checks[i].nfindings; j++) {
                const struct pf_finding *f = &v->checks[i].findings[j];
                if (f->status < floor) continue;
                if (pass < 2 && f->cls != v->failure_class) continue;
                if (pass == 0 && f->status != PF_FAIL) continue;
                *oc = &v->checks[i];
                *of = f;
                break;
            }
}

void pf_verdict_reason_line(char *out, size_t n, const struct pf_verdict *v)
{
    if (n == 0) return;
    const char *node = pf_node_get_str(v->pod, "node");
    char head[160];
    const char *cls = pf_class_name(v->failure_class);
    snprintf(head, sizeof(head), "%s%s%s%s%s%s", pf_status_name(v->verdict), *cls ? " (" : "", cls,
             *cls ? ")" : "", node && *node ? " " : "", node && *node ? node : "");
    const struct pf_check *c;
    const struct pf_finding *f;
    first_cause(v, &c, &f);
    if (f)
        snprintf(out, n, "%s: %s: %s", head, c->id, f->message ? f->message : f->code);
    else if (v->verdict == PF_FAIL && v->culprits->count) {
        const struct pf_node *k = v->culprits->first;
        const struct pf_node *r = pf_node_get(k, "rank");
        const char *why = pf_node_get_str(k, "reason");
        snprintf(out, n, "%s: culprit rank %lld: %s", head, r ? r->i : -1LL, why ? why : "");
    } else
        snprintf(out, n, "%s: %s", head, v->summary);
    /* one line: a termination message is read as one */
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}
