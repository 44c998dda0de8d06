/* `preflight log FILE...`: the NCCL_DEBUG=INFO logs of a past run (check nccl.log), the
 * log's own rendering first in the human form. */
#include <string.h>

#include "../../pkg/nccllog/nccllog.h"
#include "cli.h"

int pf_cmd_log(const struct pf_options *o, const struct pf_cli *cli)
{
    const char *const *files = cli->args;
    int nfiles = cli->nargs;
    struct pf_run R;
    struct pf_run_opts ro;
    int code;
    struct pf_nccllog log = {0};
    int r = pf_cmd_session_open(&R, &ro, o, NULL, 0);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    pf_cmd_config_unused(&R, o, "log", false);
    if (nfiles == 0) {
        pf_err_set(PF_EUSAGE, "log needs at least one file (kubectl logs of an NCCL_DEBUG=INFO "
                              "run, or - for stdin)");
        code = pf_cmd_usage(o);
        goto out;
    }
    struct pf_check *c = pf_verdict_add_check(&R.verdict, "nccl.log");
    for (int i = 0; i < nfiles; i++) {
        if (pf_nccllog_read_file(&log, files[i], R.deadline) < 0) {
            code = pf_cmd_usage(o);
            goto out;
        }
    }
    char why[1024];
    if (pf_nccllog_several_runs(&log, why, sizeof(why))) {
        fprintf(o->err,
                "preflight: log: these files are not of one job: %s; give one job's logs at a "
                "time (its pods' logs of one run)\n",
                why);
        code = PF_EXIT_USAGE;
        goto out;
    }
    pf_nccllog_check(&R.verdict, c, &log, R.config.expect_transport);
    if (pf_cmd_human(o) && log.nccl_lines && !(o->verdict_path && !strcmp(o->verdict_path, "-"))) {
        struct pf_buf b;
        pf_buf_init(&b, PF_BUF_DOCUMENT);
        pf_nccllog_render_width(&b, &log, NULL, o->width ? o->width : 80);
        fprintf(o->out, "%s\n", b.data);
        pf_buf_free(&b);
    }
    r = pf_cmd_deliver(&R, o, o->verdict_path);
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&R.verdict);
    if (r >= 0 && code == PF_EXIT_PASS && log.nccl_lines == 0) code = PF_EXIT_UNKNOWN;
out:
    pf_nccllog_free(&log);
    pf_run_close(&R);
    return code;
}
