/* `preflight check`: this node's local checks, no other pod (pkg/run's check table). */
#include "cli.h"

#include <stdio.h>

int pf_cmd_check(const struct pf_options *o, const struct pf_cli *cli)
{
    (void)cli;
    struct pf_run R;
    struct pf_run_opts ro;
    int code;
    bool guard = o->timeout_s > 0 || o->verdict_path;
    const char *path = o->verdict_path;
    int r = pf_cmd_session_open(&R, &ro, o, path, PF_CMD_COUNTERS | (guard ? PF_CMD_GUARD : 0));
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    pf_cmd_config_unused(&R, o, "check", true);
    r = pf_run_check(&R);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    r = pf_cmd_deliver(&R, o, path);
    if (r == 0 && pf_cmd_human(o)) /* within 60 columns, as the human form at its narrowest */
        fprintf(o->out, "\nThis pod was judged alone; `preflight run` also\n"
                        "compares it with the other pods of its job (gang).\n");
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&R.verdict);
out:
    pf_run_close(&R);
    return code;
}
