#define _GNU_SOURCE
#include "app.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../checks/checks.h"
#include "../run/run.h"
#include "../dl/dl.h"
#include "../explain/explain.h"
#include "../nccl/nccl.h"
#include "../report/report.h"

#define DEFAULT_VERDICT "/run/preflight/verdict.yaml"

void pf_options_init(struct pf_options *o)
{
    memset(o, 0, sizeof(*o));
    o->rdv.rank = -1;
    o->rdv.world_size = -1;
    o->out = stdout;
    o->err = stderr;
}

static void progress_line(void *arg, const char *line)
{
    FILE *f = arg;
    char ts[32];
    pf_utc_timestamp(ts, sizeof(ts));
    fprintf(f, "%s preflight: %s\n", ts, line);
    fflush(f);
}

static const char *env_or(const struct pf_env *e, const char *name, const char *dflt)
{
    const char *s = pf_env_get(e, name);
    return s && *s ? s : dflt;
}

/* The session of every subcommand (pkg/run), its progress lines on o->err. */
static int session_open(struct pf_run *s, struct pf_run_opts *ro, const struct pf_options *o,
                        const char *guard)
{
    memset(ro, 0, sizeof(*ro));
    ro->config_path = o->config_path;
    ro->root = o->root;
    ro->strict = o->strict;
    ro->timeout_s = o->timeout_s;
    ro->environ_ = o->environ_;
    ro->progress = progress_line;
    ro->progress_arg = o->err;
    ro->rdv = o->rdv;
    return pf_run_open(s, ro, guard);
}

static bool use_human(const struct pf_options *o)
{
    return o->format != PF_FORMAT_YAML; /* human unless asked: kubectl logs read it too */
}

static bool want_color(const struct pf_options *o)
{
    const char *nc = getenv("NO_COLOR");
    return o->out_is_tty && !(nc && *nc);
}

/* Prints the verdict on stdout in the chosen format and writes the file when asked. */
static int deliver(struct pf_run *s, const struct pf_options *o, const char *path)
{
    s->verdict.duration_seconds = pf_now() - s->t0;
    pf_verdict_finalize(&s->verdict, pf_run_policy, &s->config);
    int r = 0;
    /* a signal during the write still leaves this verdict, complete (docs/security.md) */
    pf_verdict_guard_final(&s->verdict, pf_verdict_exit_code(&s->verdict));
    if (path) {
        r = pf_verdict_write_file(&s->verdict, path);
        if (r < 0) fprintf(o->err, "preflight: %s\n", pf_err_msg());
    }
    pf_verdict_guard_disarm();
    if (path && strcmp(path, "-") == 0) return r;
    if (use_human(o)) {
        struct pf_human_style st = {want_color(o), o->width ? o->width : 80, o->verbose};
        pf_verdict_render_human_style(o->out, &s->verdict, &st);
        if (path && r == 0) fprintf(o->out, "\nverdict written to %s\n", path);
    } else {
        char *yaml = NULL;
        size_t len = 0;
        if (pf_verdict_to_yaml(&yaml, &len, &s->verdict) == 0) {
            fwrite(yaml, 1, len, o->out);
            free(yaml);
        }
    }
    fflush(o->out);
    return r;
}

static int usage_error(const struct pf_options *o)
{
    fprintf(o->err, "preflight: %s\n", pf_err_msg());
    return PF_EXIT_USAGE;
}

int pf_app_check(const struct pf_options *o)
{
    struct pf_run s;
    struct pf_run_opts ro;
    int code;
    bool guard = o->timeout_s > 0 || o->verdict_path;
    const char *path = o->verdict_path;
    int r = session_open(&s, &ro, o, guard ? (path ? path : "-") : NULL);
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    r = pf_run_counters_window(&s.counters_window, &s.ctx.env);
    s.ctx.verdict_path = path ? path : "-";
    if (r == 0) r = pf_run_check(&s);
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    r = deliver(&s, o, path);
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&s.verdict);
out:
    pf_run_close(&s);
    return code;
}

/* run --dry-run: this pod's identity and the rule that found it; nothing is checked or joined.
 * 0 when it is complete, 2 with the missing piece named. */
static int dry_run(struct pf_run *s, const struct pf_options *o)
{
    struct pf_rdv_ident id;
    int port = s->config.rendezvous_port > 0 ? s->config.rendezvous_port : 29400;
    if (pf_rdv_whoami(&id, &o->rdv, &s->ctx, port) < 0) return usage_error(o);
    struct pf_node *doc = pf_node_new_map();
    struct pf_node *m = pf_node_set_map(doc, "identity");
    pf_rdv_ident_evidence(m, &id);
    if (id.member) {
        pf_node_set_str(m, "rankFrom", id.rank_from);
        pf_node_set_str(m, "worldSizeFrom", id.world_from);
        if (id.coord_from[0]) pf_node_set_str(m, "coordinatorFrom", id.coord_from);
        pf_node_set_int(m, "port", id.port);
    }
    char *yaml = NULL;
    if (pf_node_to_yaml(&yaml, NULL, doc) == 0) fputs(yaml, o->out);
    free(yaml);
    pf_node_free(doc);
    return PF_EXIT_PASS;
}

int pf_app_run(const struct pf_options *o)
{
    struct pf_run s;
    struct pf_run_opts ro;
    int code;
    const char *path = o->verdict_path ? o->verdict_path : DEFAULT_VERDICT;
    int r = session_open(&s, &ro, o, path);
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    if (o->dry_run) {
        code = dry_run(&s, o);
        goto out;
    }
    char term[PF_HOST_PATH_MAX] = "";
    (void)pf_report_termination_path(term, sizeof(term),
                                     o->termination_log
                                         ? o->termination_log
                                         : env_or(&s.ctx.env, "PREFLIGHT_TERMINATION_LOG", NULL));
    pf_verdict_guard_termination(term);
    s.ctx.verdict_path = path;
    r = pf_run_run(&s);
    if (o->verbose) {
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        pf_run_timing_text(&s, &b);
        pf_ctx_progress(&s.ctx, "stages: %s", pf_buf_str(&b));
        pf_buf_free(&b);
    }
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    r = deliver(&s, o, path);
    if (pf_report_termination_write(&s.verdict, term) < 0) /* never fails the run */
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&s.verdict);
out:
    pf_run_close(&s);
    return code;
}

int pf_app_env(const struct pf_options *o)
{
    struct pf_run s;
    struct pf_run_opts ro;
    int code;
    int r = session_open(&s, &ro, o, NULL);
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    s.ctx.in_env_mode = true;
    if (o->env_file) {
        pf_env_free(&s.ctx.env);
        r = pf_env_load_file(&s.ctx.env, o->env_file);
        s.ctx.env_file = o->env_file;
        if (r < 0) {
            code = usage_error(o);
            goto out;
        }
    } else {
        pf_env_load_nccl_conf(&s.ctx.env, &s.ctx.host);
    }
    pf_checks_inventory(&s.ctx);
    pf_checks_run(&s.ctx, PF_MODE_ENV);
    r = deliver(&s, o, o->verdict_path);
    struct pf_strlist advice = {0};
    pf_checks_advice(&advice, &s.verdict);
    bool to_stdout = o->verdict_path && strcmp(o->verdict_path, "-") == 0;
    for (size_t i = 0; i < advice.n && use_human(o) && !to_stdout; i++)
        fprintf(o->out, "advice: %s\n", advice.v[i]);
    pf_strlist_free(&advice);
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&s.verdict);
out:
    pf_run_close(&s);
    return code;
}

int pf_app_log(const struct pf_options *o, const char *const *files, int nfiles)
{
    struct pf_run s;
    struct pf_run_opts ro;
    int code;
    struct pf_nccllog log = {0};
    int r = session_open(&s, &ro, o, NULL);
    if (r < 0) {
        code = usage_error(o);
        goto out;
    }
    if (nfiles == 0) {
        pf_err_set(PF_EUSAGE, "log needs at least one file (kubectl logs of an NCCL_DEBUG=INFO "
                              "run, or - for stdin)");
        code = usage_error(o);
        goto out;
    }
    struct pf_check *c = pf_verdict_add_check(&s.verdict, "nccl.log");
    for (int i = 0; i < nfiles; i++) {
        if (pf_nccllog_read_file(&log, files[i]) < 0) {
            code = usage_error(o);
            goto out;
        }
    }
    pf_nccllog_check(&s.verdict, c, &log, s.config.expect_transport);
    if (use_human(o) && log.nccl_lines && !(o->verdict_path && !strcmp(o->verdict_path, "-"))) {
        struct pf_buf b;
        pf_buf_init(&b, (size_t)1 << 20);
        pf_nccllog_render(&b, &log, NULL);
        fprintf(o->out, "%s\n", b.data ? b.data : "");
        pf_buf_free(&b);
    }
    r = deliver(&s, o, o->verdict_path);
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&s.verdict);
out:
    pf_nccllog_free(&log);
    pf_run_close(&s);
    return code;
}

int pf_app_install(const struct pf_options *o, const char *dir)
{
    char path[PF_HOST_PATH_MAX];
    if (pf_report_install_self(path, sizeof(path), dir) < 0) {
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        return PF_EXIT_FAIL;
    }
    fprintf(o->out, "installed %s\n", path);
    return PF_EXIT_PASS;
}

int pf_app_explain(const struct pf_options *o, const char *what)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    int r = pf_explain(&b, what);
    if (r < 0) {
        pf_buf_free(&b);
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        return PF_EXIT_USAGE;
    }
    fputs(pf_buf_str(&b), o->out);
    pf_buf_free(&b);
    return PF_EXIT_PASS;
}

int pf_app_version(const struct pf_options *o)
{
    fprintf(o->out, "preflight %s (git %s)\n", PF_VERSION, PF_GIT);
    fprintf(o->out, "built %s with %s, verdict schema preflight/v1\n", __DATE__,
#ifdef __clang__
            "clang " __clang_version__
#else
            "gcc " __VERSION__
#endif
    );
    struct pf_dl_info info[PF_DL_INFO_COUNT];
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_dl_info_gather(info);
    pf_dl_info_format(&b, info);
    if (b.data) fputs(b.data, o->out);
    pf_buf_free(&b);
    return PF_EXIT_PASS;
}
