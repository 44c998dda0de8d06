/* `preflight env`: the NCCL environment alone, from the process or an --env-file, with the
 * advice lines after the verdict. */
#include <string.h>

#include "cli.h"

int pf_cmd_env(const struct pf_options *o, const struct pf_cli *cli)
{
    (void)cli;
    struct pf_run R;
    struct pf_run_opts ro;
    int code;
    int r = pf_cmd_session_open(&R, &ro, o, NULL, 0);
    if (r == 0) pf_cmd_config_unused(&R, o, "env", false);
    if (r == 0) r = pf_run_env(&R, o->env_file);
    if (r < 0) {
        code = pf_cmd_usage(o);
        goto out;
    }
    r = pf_cmd_deliver(&R, o, o->verdict_path);
    struct pf_strlist advice = {0};
    pf_run_advice(&R, &advice);
    bool to_stdout = o->verdict_path && strcmp(o->verdict_path, "-") == 0;
    for (size_t i = 0; i < advice.n && pf_cmd_human(o) && !to_stdout; i++)
        fprintf(o->out, "advice: %s\n", advice.v[i]);
    pf_strlist_free(&advice);
    code = r < 0 ? PF_EXIT_FAIL : pf_verdict_exit_code(&R.verdict);
out:
    pf_run_close(&R);
    return code;
}
