/* `preflight install DIR`: copies this binary to DIR/preflight (pkg/report/install.c). */
#include "../../pkg/report/report.h"
#include "cli.h"

int pf_cmd_install(const struct pf_options *o, const struct pf_cli *cli)
{
    char path[PF_HOST_PATH_MAX];
    if (pf_report_install_self(path, sizeof(path), cli->arg) < 0) {
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        return PF_EXIT_FAIL;
    }
    fprintf(o->out, "installed %s\n", path);
    return PF_EXIT_PASS;
}
