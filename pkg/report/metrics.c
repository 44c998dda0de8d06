/* The Prometheus textfile (text exposition format 0.0.4): what a node-exporter textfile
 * collector or a sidecar scrapes after the run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

#define METRICS_FILE_MAX (8u << 20) /* the textfile, all series of one verdict */

int pf_report_prom_escape(struct pf_buf *out, const char *s)
{
    int r = 0;
    for (const char *p = s ? s : ""; r == 0 && *p; p++) {
        if (*p == '\\')
            r = pf_buf_add(out, "\\\\", 2);
        else if (*p == '"')
            r = pf_buf_add(out, "\\\"", 2);
        else if (*p == '\n')
            r = pf_buf_add(out, "\\n", 2);
        else
            r = pf_buf_add(out, p, 1);
    }
    return r;
}

/* A sample value: Go's float forms (NaN, +Inf, -Inf), else the shortest round-trip text. */
static int value(struct pf_buf *b, double d)
{
    if (isnan(d)) return pf_buf_addf(b, " NaN\n");
    if (isinf(d)) return pf_buf_addf(b, " %sInf\n", d > 0 ? "+" : "-");
    char s[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(s, sizeof(s), "%.*g", prec, d);
        if (strtod(s, NULL) == d) break;
    }
    return pf_buf_addf(b, " %s\n", s);
}

static void family(struct pf_buf *b, const char *name, const char *help)
{
    pf_buf_addf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* The pod every sample is labelled with: files of several pods in one textfile folder must
 * not collide. */
static const char *sample_pod;

/* name{pod="p",k1="v1",k2="v2"} value; labels given as a NULL-terminated key, value list. */
static void sample(struct pf_buf *b, const char *name, const char *const *labels, double d)
{
    pf_buf_addf(b, "%s{pod=\"", name);
    pf_report_prom_escape(b, sample_pod ? sample_pod : "");
    pf_buf_add(b, "\"", 1);
    for (size_t i = 0; labels && labels[i]; i += 2) {
        if (strcmp(labels[i], "pod") == 0) continue;
        pf_buf_addf(b, ",%s=\"", labels[i]);
        pf_report_prom_escape(b, labels[i + 1]);
        pf_buf_add(b, "\"", 1);
    }
    pf_buf_add(b, "}", 1);
    value(b, d);
}

static double num(const struct pf_node *map, const char *key, bool *found)
{
    const struct pf_node *n = pf_node_get(map, key);
    *found = true;
    if (n && n->kind == PF_NODE_DBL) return n->d;
    if (n && n->kind == PF_NODE_INT) return (double)n->i;
    *found = false;
    return 0;
}

static void text_of(char *out, size_t n, const struct pf_node *map, const char *key)
{
    const struct pf_node *x = pf_node_get(map, key);
    if (!x)
        snprintf(out, n, "%s", "");
    else if (x->kind == PF_NODE_INT)
        snprintf(out, n, "%lld", x->i);
    else if (x->kind == PF_NODE_STR && x->str)
        snprintf(out, n, "%s", x->str);
    else
        snprintf(out, n, "%s", "");
}

double pf_report_metrics_now;

/* What a culprit's reason blames (docs/checks/90-report.md): the node for a slow node (whose
 * reason speaks of its links), else a rail when it names one, a link when it names one, else
 * the node. */
static const char *culprit_kind(const char *reason)
{
    if (!reason || strncmp(reason, "slow node", 9) == 0) return "node";
    if (strstr(reason, "rail")) return "rail";
    if (reason && strstr(reason, "link")) return "link";
    return "node";
}

/* preflight_culprit: one sample per culprit the verdict names (rank 0's summary lists at
 * most its list's maximum, so a fleet of 1,000 pods adds at most that many series). The
 * labels are culprit_pod and culprit_node: a Pushgateway overwrites pod and node with this
 * pod's grouping key. */
static void culprits(struct pf_buf *out, const struct pf_verdict *v, const char *workload)
{
    if (!v->culprits || !v->culprits->first) return;
    family(out, "preflight_culprit",
           "A pod this run blames, with its node and what failed: kind node (the pod or its "
           "node), link (a path between two pods) or rail (one rail of the fabric); always 1.");
    for (const struct pf_node *c = v->culprits->first; c; c = c->next) {
        /* a rank blamed twice for the same kind (two reasons) is one series */
        const char *kind = culprit_kind(pf_node_get_str(c, "reason"));
        const struct pf_node *r = pf_node_get(c, "rank");
        bool seen = false;
        for (const struct pf_node *e = v->culprits->first; e != c && !seen; e = e->next) {
            const struct pf_node *er = pf_node_get(e, "rank");
            seen = r && er && r->i == er->i &&
                   strcmp(culprit_kind(pf_node_get_str(e, "reason")), kind) == 0;
        }
        if (seen) continue;
        char rank[32], pod[256], node[256];
        text_of(rank, sizeof(rank), c, "rank");
        text_of(pod, sizeof(pod), c, "pod");
        text_of(node, sizeof(node), c, "node");
        const char *l[] = {"culprit_pod", pod,    "culprit_node", node,       "culprit_rank",
                           rank,          "kind", kind,           "workload", workload,
                           NULL};
        sample(out, "preflight_culprit", l, 1);
    }
}

/* The training job a pod belongs to, what alerts count distinct jobs by: the first of the
 * job labels the downward API gives (Job, JobSet, Kubeflow, app.kubernetes.io/instance), else
 * the pod's name without its "-<ordinal>" (trainer-3 -> trainer). */
static void workload_of(char *out, size_t n, const struct pf_node *pod)
{
    static const char *const keys[] = {
        "batch.kubernetes.io/job-name", "jobset.sigs.k8s.io/jobset-name",
        "training.kubeflow.org/job-name", "app.kubernetes.io/instance"};
    const struct pf_node *labels = pf_node_get(pod, "labels");
    for (size_t i = 0; labels && labels->kind == PF_NODE_MAP && i < PF_ARRAY_LEN(keys); i++) {
        const char *v = pf_node_get_str(labels, keys[i]);
        if (v && *v) {
            snprintf(out, n, "%s", v);
            return;
        }
    }
    text_of(out, n, pod, "name");
    char *dash = strrchr(out, '-');
    if (dash && dash != out && dash[1] && strspn(dash + 1, "0123456789") == strlen(dash + 1))
        *dash = '\0';
}

static bool same_link(const struct pf_node *a, const struct pf_node *b)
{
    const struct pf_node *af = pf_node_get(a, "from"), *at = pf_node_get(a, "to");
    const struct pf_node *bf = pf_node_get(b, "from"), *bt = pf_node_get(b, "to");
    return af && at && bf && bt && af->i == bf->i && at->i == bt->i;
}

/* A link probed in several rounds is listed once a round: one series, its slowest figure (in
 * *gbps), at its first listing; false at the others. */
static bool first_of_link(const struct pf_node *seq, const struct pf_node *x, double *gbps)
{
    for (const struct pf_node *e = seq->first; e != x; e = e->next)
        if (same_link(e, x)) return false;
    for (const struct pf_node *e = x->next; e; e = e->next) {
        bool found;
        double d = num(e, "gbps", &found);
        if (found && same_link(e, x) && d < *gbps) *gbps = d;
    }
    return true;
}

/* Rank 0's link probe figures (check collective.tcp): the links it lists (every one up to 48,
 * else the 48 slowest: pkg/run/summary.c) and the median; bounded whatever the fleet's size. */
/* The node of a rank, from rank 0's list of ranks ("" when unknown). */
static void node_of_rank(char *out, size_t n, const struct pf_verdict *v, const char *rank)
{
    char *end = NULL;
    long long r = strtoll(rank, &end, 10);
    pf_strcpy(out, n, end && end != rank && !*end ? pf_ranks_node(&v->ranks, r) : "");
}

static void links(struct pf_buf *out, const struct pf_verdict *v, const char *workload)
{
    const struct pf_check *c = NULL;
    for (size_t k = 0; k < v->nchecks; k++)
        if (strcmp(v->checks[k].id, "collective.tcp") == 0) c = &v->checks[k];
    if (!c || !c->evidence) return;
    const struct pf_node *l = pf_node_get(c->evidence, "links");
    if (!l) l = pf_node_get(c->evidence, "slowestLinks");
    bool any = false;
    for (const struct pf_node *x = l && l->kind == PF_NODE_SEQ ? l->first : NULL; x; x = x->next) {
        bool found;
        double d = num(x, "gbps", &found);
        if (!found || !first_of_link(l, x, &d)) continue;
        if (!any)
            family(out, "preflight_link_gbps",
                   "Rank 0's link probe: Gb/s from one rank to another, with their nodes (all "
                   "links up to 48, else the 48 slowest; a link's slowest round).");
        any = true;
        char from[32], to[32], from_node[256], to_node[256];
        text_of(from, sizeof(from), x, "from");
        text_of(to, sizeof(to), x, "to");
        node_of_rank(from_node, sizeof(from_node), v, from);
        node_of_rank(to_node, sizeof(to_node), v, to);
        const char *lb[] = {"from_rank", from,    "to_rank",  to,       "from_node", from_node,
                            "to_node",   to_node, "workload", workload, NULL};
        sample(out, "preflight_link_gbps", lb, d);
    }
    bool found;
    double med = num(c->evidence, "medianLinkGbps", &found);
    if (found) {
        family(out, "preflight_link_median_gbps", "The median of rank 0's link probes, Gb/s.");
        sample(out, "preflight_link_median_gbps", NULL, med);
    }
}

/* The rail probes (check net.rails): this pod's own probe on each of its rails (its rails:
 * a handful), and on rank 0 each network's median; bounded whatever the fleet's size. */
static void rails(struct pf_buf *out, const struct pf_verdict *v)
{
    const struct pf_check *c = NULL;
    for (size_t k = 0; k < v->nchecks; k++)
        if (strcmp(v->checks[k].id, "net.rails") == 0) c = &v->checks[k];
    if (!c || !c->evidence) return;
    const struct pf_node *seq = pf_node_get(c->evidence, "rails");
    bool any = false;
    for (const struct pf_node *r = seq && seq->kind == PF_NODE_SEQ ? seq->first : NULL; r;
         r = r->next) {
        bool found;
        double d = num(pf_node_get(r, "probe"), "gbps", &found);
        if (!found) continue;
        if (!any)
            family(out, "preflight_rail_probe_gbps",
                   "This pod's probe of each of its rails (a secondary network), Gb/s.");
        any = true;
        char net[256], iface[64];
        text_of(net, sizeof(net), r, "network");
        text_of(iface, sizeof(iface), r, "interface");
        const char *l[] = {"network", net, "interface", iface, NULL};
        sample(out, "preflight_rail_probe_gbps", l, d);
    }
    seq = pf_node_get(c->evidence, "networks");
    any = false;
    for (const struct pf_node *n = seq && seq->kind == PF_NODE_SEQ ? seq->first : NULL; n;
         n = n->next) {
        bool found;
        double d = num(n, "medianGbps", &found);
        if (!found) continue;
        if (!any)
            family(out, "preflight_rail_median_gbps",
                   "Rank 0: the median of the rail probes on each network, Gb/s.");
        any = true;
        char net[256];
        text_of(net, sizeof(net), n, "name");
        const char *l[] = {"network", net, NULL};
        sample(out, "preflight_rail_median_gbps", l, d);
    }
}

/* The NCCL Inspector plugin's range label (NVIDIA/nccl v2.30.7-1,
 * plugins/profiler/inspector/inspector_prom.cc, inspectorPromFormatMessageSizeRange): the
 * size in the largest unit of 1024 up to TB, floored, as "<n>-<n+1><unit>". */
void pf_report_inspector_size(char *out, size_t n, unsigned long long bytes)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    if (bytes == 0) {
        snprintf(out, n, "0B");
        return;
    }
    double x = (double)bytes;
    size_t u = 0;
    while (x >= 1024.0 && u < 4) {
        x /= 1024.0;
        u++;
    }
    double lo = floor(x) < 1.0 ? 1.0 : floor(x);
    snprintf(out, n, "%.0f-%.0f%s", lo, lo + 1, units[u]);
}

/* The NCCL results once more under the names and labels of the NCCL Inspector plugin's
 * Prometheus mode (same file, inspectorPromGetLabelsColl and inspectorPromWriteCollBucket), so
 * that its Grafana dashboard shows them beside the training job's own. */
static void inspector(struct pf_buf *out, const struct pf_verdict *v, const char *node)
{
    static const struct {
        const char *name, *key, *help;
        double scale;
    } m[] = {
        {"nccl_bus_bandwidth_gbs", "busbwGBps",
         "NCCL bus bandwidth in GB/s (collectives), as the NCCL Inspector plugin names it.", 1},
        {"nccl_collective_exec_time_microseconds", "timeUs",
         "Execution time in microseconds (collectives), as the NCCL Inspector plugin names it.", 1},
    };
    const char *job = getenv("SLURM_JOB_ID");
    for (size_t k = 0; k < PF_ARRAY_LEN(m); k++) {
        bool any = false;
        for (const struct pf_node *c = v->collectives ? v->collectives->first : NULL; c;
             c = c->next) {
            const char *backend = pf_node_get_str(c, "backend");
            if (!backend || strcmp(backend, "nccl") != 0) continue;
            bool found;
            double d = num(c, m[k].key, &found);
            if (!found) continue;
            if (!any) family(out, m[k].name, m[k].help);
            any = true;
            char ranks[32], size[32], coll[32];
            text_of(ranks, sizeof(ranks), c, "ranks");
            if (!ranks[0]) text_of(ranks, sizeof(ranks), v->pod, "worldSize");
            if (!ranks[0]) snprintf(ranks, sizeof(ranks), "unknown");
            const struct pf_node *b = pf_node_get(c, "bytes");
            pf_report_inspector_size(
                size, sizeof(size),
                b && b->kind == PF_NODE_INT && b->i > 0 ? (unsigned long long)b->i : 0);
            const char *op = pf_node_get_str(c, "op");
            snprintf(coll, sizeof(coll), "%s",
                     !op                                ? "unknown"
                     : strcmp(op, "allreduce") == 0     ? "AllReduce"
                     : strcmp(op, "allgather") == 0     ? "AllGather"
                     : strcmp(op, "reducescatter") == 0 ? "ReduceScatter"
                     : strcmp(op, "alltoall") == 0      ? "AllToAll"
                     : strcmp(op, "broadcast") == 0     ? "Broadcast"
                                                        : op);
            const char *l[] = {"version",
                               "v5.1",
                               "slurm_job_id",
                               job && *job ? job : "unknown",
                               "node",
                               node,
                               "gpu",
                               "unknown",
                               "comm_name",
                               "preflight",
                               "n_nodes",
                               ranks,
                               "nranks",
                               ranks,
                               "collective",
                               coll,
                               "message_size",
                               size,
                               "algo_proto",
                               "unknown",
                               NULL};
            sample(out, m[k].name, l, d * m[k].scale);
        }
    }
}

int pf_report_metrics_text(struct pf_buf *out, const struct pf_verdict *v)
{
    size_t start = out->len;
    char pod[256], ns[256], node[256], rank[32];
    text_of(pod, sizeof(pod), v->pod, "name");
    text_of(ns, sizeof(ns), v->pod, "namespace");
    text_of(node, sizeof(node), v->pod, "node");
    text_of(rank, sizeof(rank), v->pod, "rank");
    char workload[256];
    workload_of(workload, sizeof(workload), v->pod);
    sample_pod = pod;
    family(out, "preflight_info", "The run this file describes (always 1).");
    const char *info[] = {"version", PF_VERSION, "pod", pod,        "namespace", ns,  "node",
                          node,      "rank",     rank,  "workload", workload,    NULL};
    sample(out, "preflight_info", info, 1);

    family(out, "preflight_verdict",
           "The run's verdict, one-hot: 1 on the verdict given (pass, warn or fail), 0 on the "
           "others.");
    enum pf_status given = v->verdict == PF_SKIP ? PF_PASS : v->verdict;
    static const enum pf_status verdicts[] = {PF_PASS, PF_WARN, PF_FAIL};
    for (size_t i = 0; i < PF_ARRAY_LEN(verdicts); i++) {
        const char *l[] = {"verdict", pf_status_name(verdicts[i]), NULL};
        sample(out, "preflight_verdict", l, verdicts[i] == given);
    }

    family(out, "preflight_failure_class",
           "The failure class of a failing run, one-hot over spec (pod spec or job config), node "
           "(this pod's node) and peer (another pod or the path to it); all 0 when it passes.");
    static const enum pf_class classes[] = {PF_CLASS_SPEC, PF_CLASS_NODE, PF_CLASS_PEER};
    for (size_t i = 0; i < PF_ARRAY_LEN(classes); i++) {
        const char *l[] = {"node",     node,     "class", pf_class_name(classes[i]),
                           "workload", workload, NULL};
        sample(out, "preflight_failure_class", l, v->failure_class == classes[i]);
    }

    if (v->nchecks > 0) {
        family(out, "preflight_check_status",
               "Each check's status, one-hot over pass, warn, fail and skip.");
        static const enum pf_status all[] = {PF_PASS, PF_WARN, PF_FAIL, PF_SKIP};
        for (size_t k = 0; k < v->nchecks; k++)
            for (size_t i = 0; i < PF_ARRAY_LEN(all); i++) {
                const char *l[] = {"check", v->checks[k].id, "status", pf_status_name(all[i]),
                                   NULL};
                sample(out, "preflight_check_status", l, v->checks[k].status == all[i]);
            }
    }

    static const struct {
        const char *metric, *key, *help;
    } bw[] = {
        {"preflight_collective_busbw_gbps", "busbwGBps",
         "Bus bandwidth of each collective in GB/s (nccl-tests' busbw: algbw times the "
         "collective's factor, 2(n-1)/n for all-reduce)."},
        {"preflight_collective_algbw_gbps", "algbwGBps",
         "Algorithm bandwidth of each collective in GB/s (bytes / time, as nccl-tests)."},
        {"preflight_collective_busbw_floor_gbps", "expectedMinBusbwGBps",
         "The bus bandwidth each collective must reach (config tcp.minBusbwGBps or the NCCL "
         "floor of docs/performance.md), GB/s; absent where none applies."},
    };
    for (size_t m = 0; m < PF_ARRAY_LEN(bw); m++) {
        bool any = false;
        for (const struct pf_node *c = v->collectives ? v->collectives->first : NULL; c;
             c = c->next) {
            bool found;
            double d = num(c, bw[m].key, &found);
            if (!found) continue;
            if (!any) family(out, bw[m].metric, bw[m].help);
            any = true;
            char backend[64], op[64], bytes[32];
            text_of(backend, sizeof(backend), c, "backend");
            text_of(op, sizeof(op), c, "op");
            text_of(bytes, sizeof(bytes), c, "bytes");
            const char *l[] = {"backend", backend, "op", op, "bytes", bytes, NULL};
            sample(out, bw[m].metric, l, d);
        }
    }

    for (size_t k = 0; k < v->nchecks; k++) {
        const struct pf_check *c = &v->checks[k];
        if (strcmp(c->id, "rendezvous") != 0 || c->status == PF_SKIP) continue;
        bool found;
        double d = num(c->evidence, "seconds", &found);
        family(out, "preflight_rendezvous_seconds",
               "Seconds the rendezvous took, from the start of the stage to all ranks met.");
        sample(out, "preflight_rendezvous_seconds", NULL, found ? d : c->seconds);
    }

    culprits(out, v, workload);
    links(out, v, workload);
    rails(out, v);
    inspector(out, v, node);

    family(out, "preflight_duration_seconds", "Seconds the whole run took.");
    sample(out, "preflight_duration_seconds", NULL, v->duration_seconds);
    family(out, "preflight_last_run_timestamp_seconds",
           "Unix time the run ended (what alerts on stale or missing runs compare with time()).");
    sample(out, "preflight_last_run_timestamp_seconds", NULL,
           pf_report_metrics_now ? pf_report_metrics_now : (double)time(NULL));
    sample_pod = NULL;
    return out->len > start && out->len < out->max ? 0 : PF_ETOOBIG;
}

static int mkdir_parents(const char *path)
{
    char dir[PF_HOST_PATH_MAX];
    if (pf_strcpy(dir, sizeof(dir), path) < 0)
        return pf_err_set(PF_ETOOBIG, "%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return pf_err_set(PF_ERR, "cannot create %s: %s", dir, strerror(errno));
        *p = '/';
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return pf_err_set(PF_ERR, "cannot create %s: %s", dir, strerror(errno));
    return 0;
}

int pf_report_metrics_write(const struct pf_verdict *v, const char *path)
{
    struct pf_buf b;
    pf_buf_init(&b, METRICS_FILE_MAX);
    int r = pf_report_metrics_text(&b, v);
    if (r < 0) {
        pf_buf_free(&b);
        return pf_err_set(r, "metrics for %s: over %zu bytes", path, b.max);
    }
    r = mkdir_parents(path);
    /* 0644 whatever the umask: a scraper in another container reads it */
    if (r == 0) r = pf_file_replace(path, b.data, b.len, 0644);
    pf_buf_free(&b);
    return r;
}
