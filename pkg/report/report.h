/* report: what a run tells the world outside the pod once its verdict is known: a Kubernetes
 * Event on the pod and a pod annotation (through the API server, with libcurl loaded at run
 * time), and a Prometheus textfile. Also `preflight install`: hands this binary to another
 * container through a shared volume. */
#ifndef PF_REPORT_H
#define PF_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../context/context.h"
#include "../verdict/verdict.h"

/* Longest Event message, bytes (cut at a UTF-8 boundary, "..." appended). */
#define PF_REPORT_EVENT_MSG_MAX 1024
#define PF_REPORT_ANNOTATION "preflight.dev/verdict"
#define PF_REPORT_ANNOTATION_SUMMARY "preflight.dev/summary"
#define PF_REPORT_ANNOTATION_CLASS                                                                 \
    "preflight.dev/failure-class" /* spec|node|peer, when failing                                  \
                                   */

/* The service-account folder every pod gets (read under the root prefix). */
#define PF_REPORT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* The report stage of `preflight run`, between the rendezvous and the verdict file: finalizes
 * the verdict, posts the Event and the annotation when the config asks (adding the check
 * `report.kubernetes`), finalizes again, and writes the metrics file when
 * report.metricsFile is set (a write error adds the check `report.metrics`). t0 is the
 * run's start (pf_now()). Never fails the gate by itself: every problem is a warn. */
/* The time the reporting may take, in seconds, handed down by pkg/run (run.h, budget.c). */
struct pf_report_waits {
    double api_s;  /* the API server's requests of one check together (Event and annotation;
                    * the node's label), and never past ctx's deadline */
    double push_s; /* the push to a Pushgateway, every attempt included */
};
void pf_report_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg, double t0,
                     const struct pf_report_waits *w);

/* The check `report.kubernetes` (the shape of the local checks plus a time budget; run by
 * pf_report_stage after the verdict is finalized, because the Event carries the verdict).
 * Skips when the config asks for neither the Event nor the annotation, outside a pod, in the
 * static build and when libcurl does not load (PREFLIGHT_CURL_LIB, or its older name
 * PREFLIGHT_LIBCURL, names another library).
 * budget_s bounds the whole exchange with the API server. */
void pf_report_kubernetes(struct pf_check *out, struct pf_ctx *ctx, double budget_s);

/* Node marking (report.markNode: label | taint), after a failure of class "node" (the
 * verdict's failureClass: failure_class; any other class, or NULL, does nothing): patches the
 * pod's own node (NODE_NAME) with the label preflight.dev/unfit=<code> or a NoSchedule taint
 * preflight.dev/unfit=<code>:NoSchedule, code being the first failing finding, so that the
 * next attempt is scheduled elsewhere. Adds the check `report.node`; never fails the gate.
 * Needs get and patch on nodes (a ClusterRole). */
#define PF_REPORT_NODE_KEY "preflight.dev/unfit"
/* api_s: the longest the node's requests may take (and never past ctx's deadline). */
void pf_report_node_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg,
                          const char *failure_class, double api_s);
/* The check itself: marks node `node` for finding `code` when failure_class is "node". */
void pf_report_mark_node(struct pf_check *out, struct pf_ctx *ctx, const char *failure_class,
                         const char *node, const char *code, double budget_s);
/* The label patch, a JSON merge patch as `kubectl label node N preflight.dev/unfit=CODE`
 * sends (Content-Type application/merge-patch+json). */
int pf_report_node_label_patch(struct pf_buf *out, const char *code);
/* The taint patch, a strategic merge patch as `kubectl taint node N
 * preflight.dev/unfit=CODE:NoSchedule` sends (application/strategic-merge-patch+json): the
 * node's whole taint list (a list without a merge key is replaced whole), our taint added or
 * its value replaced, plus metadata.resourceVersion, so that a taint added by someone else
 * meanwhile makes the API server answer 409 instead of being lost. node_json: the node as GET
 * returned it. Returns -1 when node_json has no metadata.resourceVersion. */
int pf_report_node_taint_patch(struct pf_buf *out, const char *node_json, const char *code);

/* `preflight report VERDICT --html FILE` (html.c): the verdict's text (docs/verdict.md; name:
 * how errors call it, the file's path) rendered as one self-contained HTML page into out: the
 * headline and culprits, the rank x rank heatmap of the probed links, the rails, this pod's
 * checks and every rank's, sortable. No network: the page loads nothing and runs only its own
 * script. 0, or PF_EUSAGE "NAME: line N: why" (not YAML, not a verdict, a key of the wrong
 * type), PF_ETOOBIG when out's maximum is too small. */
#define PF_REPORT_VERDICT_MAX (128u << 20) /* a 16,384-rank verdict is about 17 MB */
int pf_report_html(struct pf_buf *out, const char *name, const char *text, size_t len);

/* ---- pieces, public for tests */

/* Appends s to out as a JSON string literal (with the quotes), as the bodies above write
 * strings (jansson; control bytes escaped), invalid UTF-8 replaced by U+FFFD so the API server
 * never rejects the body. */
int pf_report_json_str(struct pf_buf *out, const char *s);

/* The line an Event carries: "fail (node) on node gpu-node-17: 2 of 14 checks failed: nccl.env,
 * rdma.ports; culprits: rank 5 (trainer-5 on gpu-node-22): never joined the rendezvous", cut to max
 * bytes at a UTF-8 boundary with "..." appended. */
void pf_report_event_message(char *out, size_t max, const struct pf_verdict *v);

/* Event reason and type for a verdict: PreflightPassed/Normal, PreflightWarning/Warning,
 * PreflightFailed/Warning. */
const char *pf_report_event_reason(enum pf_status verdict);
const char *pf_report_event_type(enum pf_status verdict);

struct pf_report_pod {
    const char *name; /* the pod (POD_NAME, else the hostname) */
    const char *ns;   /* its namespace */
    const char *uid;  /* POD_UID when given (metadata.uid), else NULL */
    const char *node; /* NODE_NAME, or NULL */
};

/* The core/v1 Event JSON for the verdict, involvedObject the pod; timestamp is RFC 3339. */
int pf_report_event_body(struct pf_buf *out, const struct pf_verdict *v,
                         const struct pf_report_pod *pod, const char *timestamp);

/* The JSON merge patch that sets the annotations preflight.dev/verdict,
 * preflight.dev/summary and preflight.dev/failure-class on the pod. */
int pf_report_annotation_patch(struct pf_buf *out, const struct pf_verdict *v);

/* The Prometheus text exposition of the verdict (HELP/TYPE lines, label values escaped);
 * every sample carries the label pod, preflight_failure_class the node and the class. */
int pf_report_metrics_text(struct pf_buf *out, const struct pf_verdict *v);
/* The time preflight_last_run_timestamp_seconds gives; 0 (the default) for now. Tests set it. */
extern double pf_report_metrics_now;
/* The NCCL Inspector plugin's message_size label for a size: "256-257MB". */
void pf_report_inspector_size(char *out, size_t n, unsigned long long bytes);
/* Writes it atomically (temp file in the same folder, fsync, rename; mode 0644), creating
 * the parent folder when missing. */
int pf_report_metrics_write(const struct pf_verdict *v, const char *path);

/* ---- the Pushgateway (push.c) */

/* The job of the grouping key, and the bounds of a push: the budget its caller hands down
 * (pkg/run: the wait report.push), at most PF_REPORT_PUSH_ATTEMPTS attempts (a refused
 * connection, a 5xx or a 429 is tried again after 0.2 s, then 0.4 s). */
#define PF_REPORT_PUSH_JOB "preflight"
#define PF_REPORT_PUSH_ATTEMPTS 3
/* base + /metrics/job/preflight/namespace/NS/pod/POD/node/NODE; a value that is empty or has
 * a character outside [A-Za-z0-9._~-] goes as <label>@base64/<base64url> (the Pushgateway
 * README, "URL"). */
int pf_report_push_url(struct pf_buf *out, const char *base, const char *ns, const char *pod,
                       const char *node);
/* The same with another job ("preflight-watch": `preflight watch` pushes its own group, so
 * that the gate's group of the same pod stays as the gate pushed it). */
#define PF_REPORT_PUSH_JOB_WATCH "preflight-watch"
int pf_report_push_url_job(struct pf_buf *out, const char *base, const char *job, const char *ns,
                           const char *pod, const char *node);
/* The Pushgateway this run pushes to: report.pushgateway (which --pushgateway, else
 * PREFLIGHT_PUSHGATEWAY, overrides: cmd/preflight/session.c); NULL for none. */
const char *pf_report_pushgateway_url(const struct pf_ctx *ctx);
/* PUTs body (the verdict's metrics, pf_report_metrics_text) to the group of this pod within
 * budget_s; the outcome goes into out (check `report.metrics`): a message on success, a warn
 * push-failed (HTTP status), push-unreachable, push-timeout or push-credentials otherwise. */
void pf_report_push(struct pf_check *out, struct pf_ctx *ctx, const char *base,
                    const struct pf_buf *body, double budget_s);
/* The same into the group of job (PF_REPORT_PUSH_JOB_WATCH). */
void pf_report_push_job(struct pf_check *out, struct pf_ctx *ctx, const char *base, const char *job,
                        const struct pf_buf *body, double budget_s);
/* The push at the end of `check` and `run` (nothing when no Pushgateway is configured):
 * finalizes the verdict, pushes within budget seconds, finalizes again. t0 is the run's
 * start. */
void pf_report_push_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg, double t0,
                          double budget);

/* ---- nccl-tests' JSON (results.c) */

/* The collective results in the layout `all_reduce_perf -J FILE` writes (nccl-tests
 * src/common.cu); see results.c for the fields. */
int pf_report_results_json(char **out, const struct pf_verdict *v);
/* Writes it to report.resultsFile when set (a failure is a warn results-write-failed of
 * check `report.metrics`). */
void pf_report_results_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg);

/* Appends a label value escaped per the exposition format (\\, \", \n). */
int pf_report_prom_escape(struct pf_buf *out, const char *s);

/* ---- the termination message */

#define PF_REPORT_TERMINATION_DEFAULT "/dev/termination-log"
/* The kubelet keeps at most 4096 bytes of it (all containers of a pod together 12 KiB). */
#define PF_REPORT_TERMINATION_MAX 1024
/* Where the termination message goes: configured (--termination-log,
 * PREFLIGHT_TERMINATION_LOG) when its folder exists; unconfigured, /dev/termination-log when
 * that file exists (the kubelet made it). out is "" for nowhere. */
int pf_report_termination_path(char *out, size_t n, const char *configured);
/* Writes the verdict's one-line reason (pf_verdict_reason_line) to path; nothing for "". */
int pf_report_termination_write(const struct pf_verdict *v, const char *path);

/* `preflight install DIR`: copies the running binary (/proc/self/exe) to DIR/preflight,
 * atomically (temp file + rename) with mode 0755. out gets the path written. */
int pf_report_install_self(char *out, size_t n, const char *dir);

/* ---- Why a pod is absent (rendezvous.explainMissing; absent.c). When ranks are missing at
 * the join deadline, rank 0 lists its job's pods (GET pods with a label selector from its own
 * labels, pf_identity_selector) and each absent pod's Warning Events (GET events with field
 * selector involvedObject.uid), and says for each missing rank what Kubernetes says of its
 * pod. Needs list on pods and events in the namespace (the chart grants it with the option). */
#define PF_ABSENT_MAX 16       /* missing ranks explained one by one (the rest are counted) */
#define PF_ABSENT_EVENTS_MAX 8 /* absent pods whose Events are read */
struct pf_absent {
    int rank;
    char expect[256]; /* in: the rank's pod name or hostname by the job's naming; "" unknown */
    char pod[256], uid[64], phase[24], node[256], ip[64]; /* out: "" when not known */
    /* Kubernetes' word (Unschedulable, SchedulingGated, ErrImagePull, ImagePullBackOff,
     * NodeNotReady, NodeLost, Terminating, Failed, ...) or preflight's (NoPod, NotScheduled,
     * InitContainerRunning, ContainerCreating, Unreachable); "unknown" when the API said
     * nothing (the message says why) */
    char reason[64];
    char message[640];
    char event[640]; /* the pod's latest Warning Event, "Reason: message"; "" none */
};
struct pf_absent_ask {
    const char *ns;          /* the job's namespace; NULL: the service account's */
    const char *selector;    /* pf_identity_selector's */
    const char *self_pod;    /* this pod's name: its running container is preflight's */
    const char *coordinator; /* rank 0's address and port, for "never reached" */
    int port;
    /* the rank is the pod's label batch.kubernetes.io/job-completion-index (an Indexed Job
     * that is no JobSet's): a pod whose hostname the naming does not give is still found */
    bool by_index;
};
/* Pure: from a PodList's JSON (core/v1, as the API server writes it) fills reason, message and
 * the pod's name, uid, phase, node and address of each a[i] whose expect names one of its
 * pods. PF_EINVAL when the text is no PodList. */
int pf_absent_pods(struct pf_absent *a, size_t n, const struct pf_absent_ask *q, const char *json,
                   size_t len);
/* Pure: from an EventList's JSON, a's latest Warning Event into a->event; it gives the reason
 * where the pod's status said nothing decisive, and NodeNotReady always. PF_EINVAL when the
 * text is no EventList. */
int pf_absent_events(struct pf_absent *a, const char *json, size_t len);
/* The requests, before deadline: every a[i] ends with a reason ("unknown" with why, when the
 * API cannot be asked or answers no list). from: what was read ("" when nothing). */
void pf_absent_read(struct pf_absent *a, size_t n, const struct pf_absent_ask *q,
                    const struct pf_env *env, const struct pf_host *h, double deadline, char *from,
                    size_t from_n);
/* "pod trainer-2-x7k2p Pending, Unschedulable: 0/64 nodes are available: ..." */
void pf_absent_text(char *out, size_t n, const struct pf_absent *a);

#endif
