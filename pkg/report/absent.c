/* Why a pod is absent (report.h, "Why a pod is absent"): rank 0 reads the job's pods and
 * their Events from the API server when ranks are missing at the join deadline, and says for
 * each missing rank what Kubernetes says of its pod.
 *
 * Every field read here is read as the API server writes it (kubernetes v1.37.2, staging
 * k8s.io/api core/v1 types.go: Pod, PodStatus, PodCondition, ContainerStatus, ContainerState,
 * Event, EventSeries); the words the writers put in them are named where they are used:
 *   - the scheduler: PodScheduled=False, reason Unschedulable (v1.PodReasonUnschedulable) or
 *     SchedulingGated, message FitError.Error() "0/N nodes are available: ..."
 *     (pkg/scheduler/framework/types.go), and a Warning Event FailedScheduling with the same
 *     message (pkg/scheduler/schedule_one.go handleSchedulingFailure);
 *   - the kubelet: a container's state.waiting.reason ErrImagePull, ImagePullBackOff,
 *     InvalidImageName, ErrImageNeverPull (pkg/kubelet/images/types.go),
 *     CreateContainerConfigError, CrashLoopBackOff (pkg/kubelet/kuberuntime), with
 *     state.waiting.message; Events Failed and BackOff (pkg/kubelet/events/event.go);
 *   - the node lifecycle controller: a Warning Event NodeNotReady "Node is not ready" on each
 *     pod of a node that stopped reporting (pkg/controller/util/node/controller_utils.go
 *     MarkPodsNotReady), and status.reason NodeLost (pkg/util/node/node.go
 *     NodeUnreachablePodReason).
 * A field that is not there is no evidence: the reason stays "unknown" (never a failure of its
 * own). */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kapi/kapi.h"
#include "report.h"

#define ABSENT_BODY_MAX (16u << 20) /* a PodList of a few thousand pods */

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* o.a.b as a string, or NULL */
static const char *jstr2(const json_t *o, const char *a, const char *b)
{
    return jstr(json_is_object(o) ? json_object_get(o, a) : NULL, b);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static void set(char *out, size_t n, const char *s)
{
    pf_strcpy(out, n, s ? s : "");
}

/* The condition of type t in status.conditions, or NULL. */
static const json_t *condition(const json_t *status, const char *t)
{
    const json_t *cs = json_object_get(status, "conditions");
    size_t i;
    const json_t *c;
    if (!json_is_array(cs)) return NULL;
    json_array_foreach(cs, i, c)
    {
        const char *ty = jstr(c, "type");
        if (ty && strcmp(ty, t) == 0) return c;
    }
    return NULL;
}

/* Whether pod p is the rank's: its spec.hostname or metadata.name is expect (an Indexed Job's
 * and a JobSet's pods have generated names and hostname <job>-<index>, kubernetes
 * pkg/controller/job/indexed_job_utils.go; a StatefulSet's, a PyTorchJob's, an MPIJob's, an
 * LWS's and a Volcano Job's are named so), or, by_index, its completion-index label is the rank
 * (a pod spec that sets its own hostname keeps it: the Job controller sets one only where the
 * template has none). */
static bool is_ranks(const json_t *p, const char *expect, bool by_index, int rank)
{
    const char *name = jstr2(p, "metadata", "name"), *host = jstr2(p, "spec", "hostname");
    if (expect[0] && ((host && strcmp(host, expect) == 0) || (name && strcmp(name, expect) == 0)))
        return true;
    if (!by_index) return false;
    const char *ix = jstr(json_object_get(json_object_get(p, "metadata"), "labels"),
                          "batch.kubernetes.io/job-completion-index");
    char want[16];
    snprintf(want, sizeof(want), "%d", rank);
    return ix && strcmp(ix, want) == 0;
}

/* The pod of items that is the rank's (is_ranks). Of several (a failed try and its
 * replacement), one that is not being deleted and not finished, then the newest. */
static const json_t *pod_of(const json_t *items, const char *expect, bool by_index, int rank)
{
    const json_t *best = NULL;
    int best_rank = -1;
    const char *best_t = "";
    size_t i;
    const json_t *p;
    json_array_foreach(items, i, p)
    {
        if (!is_ranks(p, expect, by_index, rank)) continue;
        const json_t *md = json_object_get(p, "metadata");
        const char *phase = or_empty(jstr2(p, "status", "phase"));
        bool done = strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
        int score = (jstr(md, "deletionTimestamp") ? 0 : 2) + (done ? 0 : 1);
        /* RFC 3339 in UTC ("2026-11-28T13:30:41Z", metav1.Time): ordered as text */
        const char *t = or_empty(jstr(md, "creationTimestamp"));
        if (score > best_rank || (score == best_rank && strcmp(t, best_t) > 0)) {
            best = p;
            best_rank = score;
            best_t = t;
        }
    }
    return best;
}

/* The running container of this pod: preflight's (it is the one answering), or NULL. An init
 * container runs alone (restartPolicy Always sidecars aside), so the running one is found
 * first among the init containers. */
static const char *running_container(const json_t *pod)
{
    const json_t *st = json_object_get(pod, "status");
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t l = 0; l < PF_ARRAY_LEN(lists); l++) {
        const json_t *cs = json_object_get(st, lists[l]), *c;
        size_t i;
        if (!json_is_array(cs)) continue;
        json_array_foreach(cs, i, c)
        {
            const json_t *state = json_object_get(c, "state");
            if (json_is_object(json_object_get(state, "running"))) return jstr(c, "name");
        }
    }
    return NULL;
}

/* A container state that says why a pod does not start: waiting with a reason other than the
 * ordinary ones on the way (ContainerCreating, PodInitializing; pkg/kubelet/kubelet_pods.go),
 * first among the init containers. */
static bool stuck_container(const json_t *pod, const char **name, const char **reason,
                            const char **message)
{
    const json_t *st = json_object_get(pod, "status");
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t l = 0; l < PF_ARRAY_LEN(lists); l++) {
        const json_t *cs = json_object_get(st, lists[l]), *c;
        size_t i;
        if (!json_is_array(cs)) continue;
        json_array_foreach(cs, i, c)
        {
            const char *r = jstr2(json_object_get(c, "state"), "waiting", "reason");
            if (!r || !*r || strcmp(r, "ContainerCreating") == 0 ||
                strcmp(r, "PodInitializing") == 0)
                continue;
            *name = or_empty(jstr(c, "name"));
            *reason = r;
            *message = or_empty(jstr2(json_object_get(c, "state"), "waiting", "message"));
            return true;
        }
    }
    return false;
}

/* The init container running now and since when; NULL when none. */
static const char *running_init(const json_t *pod, const char **since)
{
    const json_t *cs = json_object_get(json_object_get(pod, "status"), "initContainerStatuses");
    const json_t *c;
    size_t i;
    if (!json_is_array(cs)) return NULL;
    json_array_foreach(cs, i, c)
    {
        const json_t *run = json_object_get(json_object_get(c, "state"), "running");
        if (!json_is_object(run)) continue;
        *since = or_empty(jstr(run, "startedAt"));
        return or_empty(jstr(c, "name"));
    }
    return NULL;
}

/* A finished pod's last word: the first terminated container with a non-zero exit code. */
static bool failed_container(const json_t *pod, const char **name, long long *code,
                             const char **reason, const char **message)
{
    const json_t *st = json_object_get(pod, "status");
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t l = 0; l < PF_ARRAY_LEN(lists); l++) {
        const json_t *cs = json_object_get(st, lists[l]), *c;
        size_t i;
        if (!json_is_array(cs)) continue;
        json_array_foreach(cs, i, c)
        {
            const json_t *t = json_object_get(json_object_get(c, "state"), "terminated");
            const json_t *ec = json_object_get(t, "exitCode");
            if (!json_is_integer(ec) || json_integer_value(ec) == 0) continue;
            *name = or_empty(jstr(c, "name"));
            *code = json_integer_value(ec);
            *reason = or_empty(jstr(t, "reason"));
            *message = or_empty(jstr(t, "message"));
            return true;
        }
    }
    return false;
}

/* What the pod's own object says of why it is not in the run. */
static void judge_pod(struct pf_absent *a, const json_t *pod, const struct pf_absent_ask *q,
                      const char *pf_name)
{
    const json_t *md = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec"),
                 *st = json_object_get(pod, "status");
    set(a->pod, sizeof(a->pod), jstr(md, "name"));
    set(a->uid, sizeof(a->uid), jstr(md, "uid"));
    set(a->phase, sizeof(a->phase), jstr(st, "phase"));
    set(a->node, sizeof(a->node), jstr(spec, "nodeName"));
    set(a->ip, sizeof(a->ip), jstr(st, "podIP"));
    const char *name, *reason, *msg, *since = "";
    long long code;
    const json_t *sched = condition(st, "PodScheduled");
    const char *sched_status = jstr(sched, "status");
    const char *del = jstr(md, "deletionTimestamp");
    if (del) {
        set(a->reason, sizeof(a->reason), "Terminating");
        snprintf(a->message, sizeof(a->message), "deleted at %s, being terminated", del);
    } else if (jstr(st, "reason") && strcmp(jstr(st, "reason"), "NodeLost") == 0) {
        set(a->reason, sizeof(a->reason), "NodeLost");
        set(a->message, sizeof(a->message), jstr(st, "message"));
    } else if (strcmp(a->phase, "Failed") == 0 || strcmp(a->phase, "Succeeded") == 0) {
        if (failed_container(pod, &name, &code, &reason, &msg))
            snprintf(a->message, sizeof(a->message), "container %s exited %lld%s%s%s%s%s", name,
                     code, *reason ? " (" : "", reason, *reason ? ")" : "", *msg ? ": " : "", msg);
        set(a->reason, sizeof(a->reason), jstr(st, "reason") ? jstr(st, "reason") : a->phase);
        if (!a->message[0]) set(a->message, sizeof(a->message), jstr(st, "message"));
    } else if (sched_status && strcmp(sched_status, "False") == 0) {
        /* the scheduler's own words: Unschedulable with FitError's message, SchedulingGated */
        set(a->reason, sizeof(a->reason),
            jstr(sched, "reason") ? jstr(sched, "reason") : "Unschedulable");
        set(a->message, sizeof(a->message), jstr(sched, "message"));
    } else if (!a->node[0]) {
        set(a->reason, sizeof(a->reason), "NotScheduled");
        set(a->message, sizeof(a->message),
            "not bound to a node yet (no PodScheduled condition: the scheduler has not tried, or "
            "a queue such as Kueue holds it)");
    } else if (stuck_container(pod, &name, &reason, &msg)) {
        /* ErrImagePull, ImagePullBackOff, CreateContainerConfigError, CrashLoopBackOff, ... */
        set(a->reason, sizeof(a->reason), reason);
        snprintf(a->message, sizeof(a->message), "container %s: %s", name,
                 *msg ? msg : "(no message)");
    } else if ((name = running_init(pod, &since)) && pf_name && strcmp(name, pf_name) != 0) {
        set(a->reason, sizeof(a->reason), "InitContainerRunning");
        snprintf(a->message, sizeof(a->message),
                 "initContainer %s has been running since %s on node %s; %s starts after it", name,
                 *since ? since : "?", a->node, pf_name);
    } else if (name || strcmp(a->phase, "Running") == 0) {
        /* preflight runs there (or the pod is Running) and never reached rank 0 */
        set(a->reason, sizeof(a->reason), "Unreachable");
        snprintf(a->message, sizeof(a->message),
                 "%s%s%s on node %s at %s, but it never reached rank 0 at %s:%d",
                 name ? "container " : "", name ? name : "", name ? " is running" : "Running",
                 a->node, a->ip[0] ? a->ip : "no address yet", or_empty(q->coordinator), q->port);
    } else {
        set(a->reason, sizeof(a->reason), "ContainerCreating");
        snprintf(a->message, sizeof(a->message),
                 "bound to node %s; no container of it has started yet", a->node);
    }
}

int pf_absent_pods(struct pf_absent *a, size_t n, const struct pf_absent_ask *q, const char *json,
                   size_t len)
{
    json_error_t e;
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &e);
    const json_t *items = json_object_get(root, "items");
    if (!json_is_array(items)) {
        json_decref(root);
        return pf_err_set(PF_EINVAL, "not a PodList%s%s", root ? "" : ": ", root ? "" : e.text);
    }
    /* preflight's container: the one running in this very pod */
    const char *pf_name = NULL;
    size_t i;
    const json_t *p;
    json_array_foreach(items, i, p)
    {
        const char *name = jstr2(p, "metadata", "name");
        if (q && q->self_pod && name && strcmp(name, q->self_pod) == 0)
            pf_name = running_container(p);
    }
    struct pf_absent_ask none = {0};
    for (size_t k = 0; k < n; k++) {
        bool by_index = q && q->by_index;
        if (!a[k].expect[0] && !by_index) continue; /* the launcher names no pod for this rank */
        const json_t *pod = pod_of(items, a[k].expect, by_index, a[k].rank);
        if (!pod) {
            set(a[k].reason, sizeof(a[k].reason), "NoPod");
            if (a[k].expect[0])
                snprintf(a[k].message, sizeof(a[k].message),
                         "no pod named or with hostname %s among the %zu pods of the job",
                         a[k].expect, json_array_size(items));
            else
                snprintf(a[k].message, sizeof(a[k].message),
                         "no pod with completion index %d among the %zu pods of the job", a[k].rank,
                         json_array_size(items));
            continue;
        }
        judge_pod(&a[k], pod, q ? q : &none, pf_name);
    }
    json_decref(root);
    return 0;
}

/* When the Event happened last: series.lastObservedTime, lastTimestamp, eventTime,
 * firstTimestamp (an events.k8s.io Event read through core/v1 has eventTime and series, an
 * older one lastTimestamp). */
static const char *event_time(const json_t *ev)
{
    const char *t = jstr2(ev, "series", "lastObservedTime");
    if (!t) t = jstr(ev, "lastTimestamp");
    if (!t) t = jstr(ev, "eventTime");
    if (!t) t = jstr(ev, "firstTimestamp");
    return or_empty(t);
}

/* The same instant in two precisions ("...:05Z" and "...:05.000123Z") compare by their first
 * 19 bytes, then the rest. */
static int time_cmp(const char *x, const char *y)
{
    int c = strncmp(x, y, 19);
    return c ? c : strcmp(x, y);
}

int pf_absent_events(struct pf_absent *a, const char *json, size_t len)
{
    json_error_t e;
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &e);
    const json_t *items = json_object_get(root, "items");
    if (!json_is_array(items)) {
        json_decref(root);
        return pf_err_set(PF_EINVAL, "not an EventList%s%s", root ? "" : ": ", root ? "" : e.text);
    }
    const json_t *last = NULL, *ev;
    const char *last_t = "";
    bool node_not_ready = false;
    size_t i;
    json_array_foreach(items, i, ev)
    {
        const char *type = jstr(ev, "type");
        if (!type || strcmp(type, "Warning") != 0) continue;
        const char *uid = jstr2(ev, "involvedObject", "uid");
        if (a->uid[0] && uid && strcmp(uid, a->uid) != 0) continue; /* another pod's */
        const char *r = jstr(ev, "reason");
        if (r && strcmp(r, "NodeNotReady") == 0) node_not_ready = true;
        const char *t = event_time(ev);
        if (!last || time_cmp(t, last_t) >= 0) last = ev, last_t = t;
    }
    if (last) {
        snprintf(a->event, sizeof(a->event), "%s: %s", or_empty(jstr(last, "reason")),
                 or_empty(jstr(last, "message")));
        const char *r = or_empty(jstr(last, "reason"));
        /* the pod's status said nothing decisive: the Event says it */
        bool weak = !a->reason[0] || strcmp(a->reason, "unknown") == 0 ||
                    strcmp(a->reason, "ContainerCreating") == 0 ||
                    strcmp(a->reason, "NotScheduled") == 0 || !a->message[0];
        if (weak && *r) {
            set(a->reason, sizeof(a->reason), r);
            set(a->message, sizeof(a->message), jstr(last, "message"));
        }
    }
    if (node_not_ready && strcmp(a->phase, "Failed") != 0 && strcmp(a->phase, "Succeeded") != 0) {
        /* the node lifecycle controller's word on the pod's node wins over what the pod's
         * last status (written before its node stopped) says */
        set(a->reason, sizeof(a->reason), "NodeNotReady");
        snprintf(a->message, sizeof(a->message),
                 "node %s is not ready (its kubelet stopped "
                 "reporting): the node lifecycle controller marked the pod not ready",
                 a->node[0] ? a->node : "?");
    }
    json_decref(root);
    return 0;
}

void pf_absent_text(char *out, size_t n, const struct pf_absent *a)
{
    const char *reason = a->reason[0] ? a->reason : "unknown";
    if (!a->pod[0]) {
        pf_snprintf(out, n, "%s: %s", reason, a->message[0] ? a->message : "no word from the API");
        return;
    }
    pf_snprintf(out, n, "pod %s %s, %s: %s", a->pod, a->phase[0] ? a->phase : "(no phase)", reason,
                a->message[0] ? a->message : "(no message)");
}

/* "%XX" for every byte outside RFC 3986's unreserved set */
static void url_query(struct pf_buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~')
            pf_buf_addf(b, "%c", *p);
        else
            pf_buf_addf(b, "%%%02X", *p);
    }
}

static void all_unknown(struct pf_absent *a, size_t n, const char *why)
{
    for (size_t k = 0; k < n; k++) {
        set(a[k].reason, sizeof(a[k].reason), "unknown");
        set(a[k].message, sizeof(a[k].message), why);
    }
}

static void api_why(char *out, size_t n, const struct pf_kapi_res *res, const char *what)
{
    if (res->curl_code != PF_CURLE_OK)
        pf_snprintf(out, n, "%s: %s", what, res->error);
    else if (res->status == 401 || res->status == 403)
        pf_snprintf(out, n,
                    "%s: HTTP %ld: the pod's ServiceAccount may not list them (the chart's "
                    "config.rendezvous.explainMissing grants list on pods and events)",
                    what, res->status);
    else
        pf_snprintf(out, n, "%s: HTTP %ld", what, res->status);
}

void pf_absent_read(struct pf_absent *a, size_t n, const struct pf_absent_ask *q,
                    const struct pf_env *env, const struct pf_host *h, double deadline, char *from,
                    size_t from_n)
{
    char why[1400] = "", ns_file[256] = "";
    if (from_n) from[0] = '\0';
    for (size_t k = 0; k < n; k++)
        a[k].reason[0] = a[k].message[0] = '\0';
    struct pf_kapi api;
    int r = pf_kapi_open(&api, env, h);
    const char *ns = q->ns;
    if ((!ns || !*ns) &&
        pf_host_read(ns_file, sizeof(ns_file), h, "%s/namespace", PF_KAPI_SA_DIR) > 0)
        ns = pf_trim(ns_file);
    if (r < 0)
        pf_snprintf(why, sizeof(why), "the API server cannot be asked: %s", pf_err_msg());
    else if (!q->selector || !*q->selector)
        pf_snprintf(why, sizeof(why),
                    "no label of this pod names its job's pods (podinfo labels: a JobSet's, a "
                    "Job's, an LWS's, a Volcano or Kubeflow job's)");
    else if (!ns || !*ns)
        pf_snprintf(why, sizeof(why), "the namespace is unknown (POD_NAMESPACE)");
    else if (pf_kapi_load(env) < 0)
        pf_snprintf(why, sizeof(why), "libcurl cannot be loaded: %s", pf_err_msg());
    if (why[0]) {
        all_unknown(a, n, why);
        pf_kapi_close(&api);
        pf_err_clear();
        return;
    }
    struct pf_buf path;
    pf_buf_init(&path, 4096);
    pf_buf_addf(&path, "/api/v1/namespaces/%s/pods?labelSelector=", ns);
    url_query(&path, q->selector);
    pf_snprintf(from, from_n, "pods of namespace %s labelled %s, and their Warning Events", ns,
                q->selector);
    struct pf_kapi_res res;
    pf_kapi_request_max(&res, &api, "GET", pf_buf_str(&path), "application/json", "", deadline,
                        ABSENT_BODY_MAX);
    char what[1200];
    pf_snprintf(what, sizeof(what), "GET %s", pf_buf_str(&path));
    if (res.curl_code != PF_CURLE_OK || res.status != 200) {
        api_why(why, sizeof(why), &res, what);
    } else if (pf_absent_pods(a, n, q, res.body.data, res.body.len) < 0) {
        pf_snprintf(why, sizeof(why), "%s: %s%s", what, pf_err_msg(),
                    res.body.len >= ABSENT_BODY_MAX ? " (the answer was cut at 16 MiB)" : "");
    }
    pf_buf_free(&res.body);
    if (why[0]) {
        all_unknown(a, n, why);
    } else {
        /* the Events of the absent pods, one request each, the first PF_ABSENT_EVENTS_MAX */
        size_t asked = 0;
        for (size_t k = 0; k < n && asked < PF_ABSENT_EVENTS_MAX; k++) {
            if (!a[k].uid[0] || deadline - pf_now() < 0.1) continue;
            asked++;
            pf_buf_reset(&path);
            pf_buf_addf(&path, "/api/v1/namespaces/%s/events?fieldSelector=", ns);
            url_query(&path, "involvedObject.uid=");
            url_query(&path, a[k].uid);
            pf_kapi_request_max(&res, &api, "GET", pf_buf_str(&path), "application/json", "",
                                deadline, ABSENT_BODY_MAX / 4);
            if (res.curl_code == PF_CURLE_OK && res.status == 200)
                (void)pf_absent_events(&a[k], res.body.data, res.body.len);
            pf_buf_free(&res.body);
        }
    }
    for (size_t k = 0; k < n; k++)
        if (!a[k].reason[0]) {
            set(a[k].reason, sizeof(a[k].reason), "unknown");
            if (!a[k].message[0])
                set(a[k].message, sizeof(a[k].message),
                    "the job's naming gives no pod name for this rank");
        }
    pf_buf_free(&path);
    pf_kapi_close(&api);
    pf_err_clear();
}
