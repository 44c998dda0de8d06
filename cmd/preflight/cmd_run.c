/* `preflight run`: every stage of pkg/run's table, from the local checks to the report, then
 * the verdict and the termination message; `run --dry-run` prints the identity alone. */
#include <stdlib.h>
#include <string.h>

#include "../../pkg/report/report.h"
#include "cli.h"

#define DEFAULT_VERDICT "/run/preflight/verdict.yaml"

/* A run without a token: said on the screen, not only as `auth: none` in the evidence. */
#define NO_TOKEN                                                                                   \
    "PREFLIGHT_TOKEN is not set: the rendezvous was not authenticated (auth: none), so any "       \
    "process that reaches its port could join or answer as a rank; set PREFLIGHT_TOKEN from "      \
    "a Secret (docs/security.md)"

/* This pod's identity and the rule that found it; nothing is checked or joined. 0 when it is
 * complete, 2 with the missing piece named. */
static int dry_run(struct pf_run *R, const struct pf_options *o)
{
    struct pf_identity id;
    int port = R->config.rendezvous_port;
    if (pf_run_whoami(&id, &o->identity, &R->ctx, port) < 0) return pf_cmd_usage(o);
    struct pf_node *doc = pf_node_new_map();
    struct pf_node *m = pf_node_set_map(doc, "identity");
    pf_run_ident_evidence(m, &id);
    if (id.member) {
        pf_node_set_str(m, "rankFrom", id.rank_from);
        pf_node_set_str(m, "worldSizeFrom", id.world_from);
        if (id.coord_from[0]) pf_node_set_str(m, "coordinatorFrom", id.coord_from);
        pf_node_set_int(m, "port", id.port);
    }
    (void)pf_cmd_print_node(o, doc); /* --format json: JSON, else YAML */
    pf_node_free(doc);
    return PF_EXIT_PASS;
}

/* -v: how long each stage took, on stderr after the run. */
static void stage_times(struct pf_run *R)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_MESSAGE);
    pf_run_timing_text(R, &b);
    pf_ctx_progress(&R->ctx, "stages: %s", pf_buf_str(&b));
    pf_buf_free(&b);
}

int pf_cmd_run(const struct pf_options *o, const struct pf_cli *cli)
{
    (void)cli;
    struct pf_run R;
    struct pf_run_opts ro;
    int code;
    const char *path = o->verdict_path ? o->verdict_path : DEFAULT_VERDICT;
    int r = pf_cmd_session_open(&R, &ro, o, path, PF_CMD_GUARD);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    if (o->dry_run) {
        code = dry_run(&R, o);
        goto out;
    }
    char term[PF_HOST_PATH_MAX] = "";
    const char *tl = o->termination_log;
    if (!tl) {
        tl = pf_env_get(&R.ctx.env, "PREFLIGHT_TERMINATION_LOG");
        if (tl && !*tl) tl = NULL;
    }
    (void)pf_report_termination_path(term, sizeof(term), tl);
    bool open_rdv = !o->identity.token || !*o->identity.token;
    if (open_rdv) pf_ctx_progress(&R.ctx, "warning: %s", NO_TOKEN);
    pf_verdict_guard_termination(term);
    r = pf_run_run(&R);
    if (o->verbose) stage_times(&R);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    r = pf_cmd_deliver(&R, o, path);
    bool to_stdout = strcmp(path, "-") == 0;
    if (open_rdv && pf_cmd_human(o) && !to_stdout) fprintf(o->out, "\nwarning: %s\n", NO_TOKEN);
    if (pf_report_termination_write(&R.verdict, term) < 0) /* never fails the run */
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&R.verdict);
out:
    pf_run_close(&R);
    return code;
}
