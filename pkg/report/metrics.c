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

int pf_report_metrics_text(struct pf_buf *out, const struct pf_verdict *v)
{
    size_t start = out->len;
    char pod[256], ns[256], node[256], rank[32];
    text_of(pod, sizeof(pod), v->pod, "name");
    text_of(ns, sizeof(ns), v->pod, "namespace");
    text_of(node, sizeof(node), v->pod, "node");
    text_of(rank, sizeof(rank), v->pod, "rank");
    sample_pod = pod;
    family(out, "preflight_info", "The run this file describes (always 1).");
    const char *info[] = {"version", PF_VERSION, "pod",  pod,  "namespace", ns,
                          "node",    node,       "rank", rank, NULL};
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
        const char *l[] = {"node", node, "class", pf_class_name(classes[i]), NULL};
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

    family(out, "preflight_duration_seconds", "Seconds the whole run took.");
    sample(out, "preflight_duration_seconds", NULL, v->duration_seconds);
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
