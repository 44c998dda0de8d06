/* `preflight watch DIR`: the sidecar beside the trainer (docs/kubernetes.md, "Watching the
 * trainer's NCCL"). Follows the NCCL_DEBUG_FILE files of DIR (pkg/watch) until the trainer ends,
 * SIGTERM (the kubelet ends a native sidecar after the main containers), or watch.windowSeconds;
 * each finding is said at once: one log line on stderr, the verdict DIR/watch.yaml
 * (check `watch`), a Kubernetes Event on the pod (report.events), the metrics to the
 * Pushgateway (job preflight-watch). watch.onMismatch: stop ends the trainer's processes after
 * a failing finding. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/report/report.h"
#include "../../pkg/watch/watch.h"
#include "cli.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void say(const struct pf_options *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const struct pf_options *o, const char *fmt, ...)
{
    char ts[32], line[2048];
    pf_utc_timestamp(ts, sizeof(ts));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    const char *s = line;
    if (!pf_text_is_safe(line, false)) { /* a hostname from a log line is outside input */
        (void)pf_text_escape(&b, line, false);
        s = pf_buf_str(&b);
    }
    fprintf(o->err, "%s preflight: watch: %s\n", ts, s);
    fflush(o->err);
    pf_buf_free(&b);
}

/* The verdict as it stands: check `watch` rebuilt from the follower, plus what reporting
 * added (stop). */
static void build(struct pf_run *R, const struct pf_watch *w, const struct pf_strlist *stopped,
                  const char *stop_note)
{
    struct pf_check *c = pf_verdict_find_check(&R->verdict, "watch");
    if (c) {
        /* rebuilt whole each time: a fresh verdict, the pod and environment kept */
        struct pf_verdict nv;
        pf_verdict_init(&nv);
        pf_node_free(nv.pod);
        nv.pod = pf_node_clone(R->verdict.pod);
        nv.warn_fails = R->verdict.warn_fails;
        pf_verdict_free(&R->verdict);
        R->verdict = nv;
        R->ctx.verdict = &R->verdict;
    }
    c = pf_verdict_add_check(&R->verdict, "watch");
    pf_watch_check(c, w);
    if (stopped->n) {
        struct pf_node *s = pf_node_set_seq(c->evidence, "stoppedPids");
        for (size_t i = 0; i < stopped->n; i++)
            pf_node_add_str(s, stopped->v[i]);
    }
    if (stop_note[0]) pf_node_set_str(c->evidence, "stop", stop_note);
    R->verdict.duration_seconds = pf_now() - R->t0;
    pf_verdict_finalize(&R->verdict, pf_run_policy, &R->config);
}

static void write_verdict(struct pf_run *R, const struct pf_options *o, const char *path)
{
    if (pf_verdict_write_file(&R->verdict, path) < 0) say(o, "%s", pf_err_msg());
}

/* The Event (report.events, when event; never the annotation: that is the gate's) and the
 * push. */
static void tell(struct pf_run *R, const struct pf_options *o, const struct pf_watch *w, bool event)
{
    R->config.report_annotate = false;
    if (event && R->config.report_events && getenv("KUBERNETES_SERVICE_HOST")) {
        struct pf_verdict keep;
        pf_verdict_clone(&keep, &R->verdict);
        struct pf_check *k = pf_verdict_add_check(&R->verdict, "report.kubernetes");
        pf_report_kubernetes(k, &R->ctx, 5);
        for (size_t i = 0; i < k->nfindings; i++)
            say(o, "Event: %s: %s", k->findings[i].code, k->findings[i].message);
        if (!k->nfindings && k->message) say(o, "%s", k->message);
        pf_verdict_free(&R->verdict);
        R->verdict = keep;
        R->ctx.verdict = &R->verdict;
    }
    const char *base = pf_report_pushgateway_url(&R->ctx);
    if (base) {
        struct pf_buf body;
        pf_buf_init(&body, 8 << 20);
        int r = pf_report_metrics_text(&body, &R->verdict);
        if (r == 0) r = pf_watch_metrics_text(&body, w, pf_node_get_str(R->verdict.pod, "name"));
        struct pf_verdict scratch;
        pf_verdict_init(&scratch);
        struct pf_check *pc = pf_verdict_add_check(&scratch, "report.metrics");
        if (r == 0) pf_report_push_job(pc, &R->ctx, base, PF_REPORT_PUSH_JOB_WATCH, &body, 5);
        for (size_t i = 0; i < pc->nfindings; i++)
            say(o, "push: %s: %s", pc->findings[i].code, pc->findings[i].message);
        pf_verdict_free(&scratch);
        pf_buf_free(&body);
    }
}

int pf_cmd_watch(const struct pf_options *o, const struct pf_cli *cli)
{
    struct pf_run R;
    struct pf_run_opts ro;
    struct pf_watch w;
    memset(&w, 0, sizeof(w));
    w.inotify_fd = -1;
    struct pf_strlist stopped = {0};
    char stop_note[256] = "";
    int code;
    int r = pf_cmd_session_open(&R, &ro, o, NULL, 0);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    pf_run_record_pod(&R);
    const struct pf_config *cfg = &R.config;
    struct pf_watch_opts wo = {
        .dir = cli->arg, .stall_s = cfg->watch_stall_s, .processes = cfg->watch_processes};
    if (pf_watch_open(&w, &wo) < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    char own[1200];
    if (o->verdict_path)
        snprintf(own, sizeof(own), "%s", o->verdict_path);
    else
        snprintf(own, sizeof(own), "%s/%s", w.dir, PF_WATCH_OWN_FILE);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: the wait returns at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    bool stop_policy = cfg->watch_on_mismatch == PF_WATCH_STOP;
    say(o, "following %s for %.0f s (gate verdict %s: %s; on a failing finding: %s)", w.dir,
        cfg->watch_window_s, w.gate_path,
        w.gate.found ? w.gate.verdict : (w.gate.error[0] ? w.gate.error : "not there yet"),
        stop_policy ? "stop the trainer" : "warn");
    double end = R.t0 + cfg->watch_window_s;
    double last_write = 0, last_alive = 0;
    bool stopped_trainer = false, gate_said = w.gate.found;
    const char *why = "the window ended";
    size_t written_findings = (size_t)-1, written_lines = (size_t)-1;
    /* the findings the last Event told of: the end posts one only when they changed (else
     * kube-apiserver stores a second Event, identical, for the same findings) */
    size_t told_findings = (size_t)-1;
    for (;;) {
        if (stop_signal) {
            why = stop_signal == SIGTERM ? "SIGTERM (the trainer ended)" : "interrupted";
            break;
        }
        double now = pf_now();
        if (now >= end) break;
        double wait = end - now < 0.5 ? end - now : 0.5;
        int n = pf_watch_step(&w, wait);
        if (!gate_said && w.gate.found) {
            gate_said = true;
            say(o, "gate verdict %s: %s (NCCL %s, network %s)", w.gate_path, w.gate.verdict,
                w.gate.version[0] ? w.gate.version : "unknown",
                w.gate.network[0] ? w.gate.network : "unknown");
        }
        bool failing = false;
        const struct pf_watch_finding *f;
        while ((f = pf_watch_take(&w))) {
            int st = pf_run_policy(&R.config, "watch", f->code, f->status);
            if (st == PF_POLICY_IGNORE) continue;
            if (f->proc[0])
                say(o, "%s %s: %s (%.3f s after the deciding line was read)",
                    pf_status_name((enum pf_status)st), f->code, f->message, pf_now() - f->line_at);
            else
                say(o, "%s %s: %s", pf_status_name((enum pf_status)st), f->code, f->message);
            if (st == PF_FAIL || (R.config.fail_on == PF_WARN && st == PF_WARN)) failing = true;
        }
        if (n > 0 || (w.lines != written_lines && pf_now() - last_write >= 1.0)) {
            build(&R, &w, &stopped, stop_note);
            write_verdict(&R, o, own);
            last_write = pf_now();
            written_lines = w.lines;
        }
        if (n > 0 && w.nfindings != written_findings) {
            written_findings = w.nfindings;
            if (failing && stop_policy && !stopped_trainer) {
                stopped_trainer = true;
                int k = pf_watch_stop_trainer(&w, cfg->watch_grace_s, &stopped);
                if (k)
                    snprintf(stop_note, sizeof(stop_note), "SIGTERM sent to %d trainer process%s",
                             k, k == 1 ? "" : "es");
                else if (w.stop_refused)
                    snprintf(stop_note, sizeof(stop_note),
                             "the trainer's %d process%s may not be signalled by this user (run "
                             "the watch as the trainer's user, or as root with CAP_KILL)",
                             w.stop_refused, w.stop_refused == 1 ? "" : "es");
                else
                    snprintf(stop_note, sizeof(stop_note),
                             "no trainer process visible to stop (shareProcessNamespace: true?)");
                say(o, "%s", stop_note);
                build(&R, &w, &stopped, stop_note);
                write_verdict(&R, o, own);
            }
            tell(&R, o, &w, true);
            told_findings = w.nfindings;
        }
        if (stop_policy && pf_now() - last_alive >= 1.0) {
            last_alive = pf_now();
            if (pf_watch_trainer_ended(&w)) {
                why = "the trainer's processes ended";
                break;
            }
        }
    }
    (void)pf_watch_poll(&w); /* what the last moment wrote */
    while (pf_watch_take(&w))
        ;
    build(&R, &w, &stopped, stop_note);
    write_verdict(&R, o, own);
    tell(&R, o, &w, w.nfindings != told_findings);
    char reason[512];
    pf_verdict_reason_line(reason, sizeof(reason), &R.verdict);
    say(o, "done (%s): %s: %s; %llu lines of %zu files; verdict %s", why,
        pf_status_name(R.verdict.verdict), reason, w.lines, w.nfiles, own);
    code = pf_verdict_exit_code(&R.verdict);
out:
    pf_strlist_free(&stopped);
    pf_watch_close(&w);
    pf_run_close(&R);
    return code;
}
