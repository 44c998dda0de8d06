/* What the subcommands share: the session with the command line's options, progress lines on
 * stderr, and the verdict delivered (the file, then the human form or the YAML on stdout). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void pf_options_init(struct pf_options *o)
{
    memset(o, 0, sizeof(*o));
    o->identity.rank = -1;
    o->identity.world_size = -1;
    o->out = stdout;
    o->err = stderr;
}

static void progress_line(void *arg, const char *line)
{
    FILE *f = arg;
    char ts[32];
    pf_utc_timestamp(ts, sizeof(ts));
    /* one progress message, one line: a peer's bytes in it (a pod name, an address) never
     * move the cursor or start a forged line */
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    if (!pf_text_is_safe(line, false)) {
        (void)pf_text_escape(&b, line, false);
        line = pf_buf_str(&b);
    }
    fprintf(f, "%s preflight: %s\n", ts, line);
    pf_buf_free(&b);
    fflush(f);
}

int pf_cmd_session_open(struct pf_run *R, struct pf_run_opts *ro, const struct pf_options *o,
                        const char *verdict_path, unsigned flags)
{
    memset(ro, 0, sizeof(*ro));
    ro->config_path = o->config_path;
    ro->root = o->root;
    ro->strict = o->strict;
    ro->timeout_s = o->timeout_s;
    ro->environ_ = o->environ_;
    ro->progress = progress_line;
    ro->progress_arg = o->err;
    ro->identity = o->identity;
    ro->verdict_path = verdict_path;
    ro->guard = flags & PF_CMD_GUARD;
    ro->counters_window = flags & PF_CMD_COUNTERS;
    ro->pushgateway = o->pushgateway;
    ro->results_file = o->results;
    return pf_run_open(R, ro);
}

bool pf_cmd_human(const struct pf_options *o)
{
    /* human unless asked: kubectl logs read it too */
    return o->format != PF_FORMAT_YAML && o->format != PF_FORMAT_JSON;
}

int pf_cmd_print_node(const struct pf_options *o, const struct pf_node *doc)
{
    char *text = NULL;
    size_t len = 0;
    int r = o->format == PF_FORMAT_JSON ? pf_node_to_json(&text, &len, doc)
                                        : pf_node_to_yaml(&text, &len, doc);
    if (r == 0) fwrite(text, 1, len, o->out);
    free(text);
    fflush(o->out);
    return r;
}

static bool want_color(const struct pf_options *o)
{
    const char *nc = getenv("NO_COLOR");
    return o->out_is_tty && !(nc && *nc);
}

int pf_cmd_deliver(struct pf_run *R, const struct pf_options *o, const char *path)
{
    R->verdict.duration_seconds = pf_now() - R->t0;
    pf_verdict_finalize(&R->verdict, pf_run_policy, &R->config);
    int r = 0;
    /* a signal during the write still leaves this verdict, complete (docs/security.md) */
    pf_verdict_guard_final(&R->verdict, pf_verdict_exit_code(&R->verdict));
    if (path) {
        r = pf_verdict_write_file(&R->verdict, path);
        if (r < 0) fprintf(o->err, "preflight: %s\n", pf_err_msg());
    }
    pf_verdict_guard_disarm();
    if (path && strcmp(path, "-") == 0) return r;
    if (pf_cmd_human(o)) {
        struct pf_human_style st = {want_color(o), o->width ? o->width : 80, o->verbose};
        pf_verdict_render_human_style(o->out, &R->verdict, &st);
        if (path && r == 0) fprintf(o->out, "\nverdict written to %s\n", path);
    } else {
        char *doc = NULL;
        size_t len = 0;
        int e = o->format == PF_FORMAT_JSON ? pf_verdict_to_json(&doc, &len, &R->verdict)
                                            : pf_verdict_to_yaml(&doc, &len, &R->verdict);
        if (e == 0) {
            fwrite(doc, 1, len, o->out);
            free(doc);
        }
    }
    fflush(o->out);
    return r;
}

void pf_cmd_config_unused(const struct pf_run *R, const struct pf_options *o, const char *cmd,
                          bool pushes)
{
    const struct pf_config *c = &R->config;
    if (!c->path[0]) return;
    char keys[256] = "";
    size_t n = 0;
    const struct {
        bool set;
        const char *key;
    } k[] = {
        {c->report_events, "report.events"},
        {c->report_annotate, "report.annotate"},
        {c->report_metrics_file[0] != '\0', "report.metricsFile"},
        {c->report_mark_node != PF_MARK_NODE_NONE, "report.markNode"},
        {!pushes && c->report_pushgateway[0], "report.pushgateway"},
        {!pushes && c->report_results_file[0], "report.resultsFile"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(k) && n < sizeof(keys); i++)
        if (k[i].set)
            n += (size_t)snprintf(keys + n, sizeof(keys) - n, "%s%s", n ? ", " : "", k[i].key);
    if (!n) return;
    fprintf(o->err, "preflight: %s: %s %s not used by 'preflight %s' (%s); ignored\n", c->path,
            keys, strchr(keys, ',') ? "are" : "is", cmd,
            pushes ? "Events, the annotation, the node mark and the metrics file are written by "
                     "'preflight run'"
                   : "only 'preflight run' and 'preflight check' report");
}

int pf_cmd_usage(const struct pf_options *o)
{
    fprintf(o->err, "preflight: %s\n", pf_err_msg());
    return PF_EXIT_USAGE;
}
