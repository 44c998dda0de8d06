/* `preflight inject [-f FILE]`: the gate added to a job's YAML (pkg/inject), stdin or FILE to
 * stdout; hints to stderr. Nothing is written when any object is refused. */
#include <stdlib.h>
#include <string.h>

#include "../../pkg/inject/inject.h"
#include "cli.h"

int pf_cmd_inject(const struct pf_options *o, const struct pf_cli *cli)
{
    if (o->inject_file && cli->arg)
        return pf_cli_usage_error("inject",
                                  "inject: give the YAML once (FILE or -f FILE, not both)");
    const char *path = o->inject_file ? o->inject_file : cli->arg ? cli->arg : "-";
    bool in_stdin = strcmp(path, "-") == 0;
    struct pf_buf in;
    pf_buf_init(&in, PF_INJECT_MAX);
    if (pf_file_read_named(&in, "inject", in_stdin ? "/dev/stdin" : path, 0) < 0) {
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        pf_buf_free(&in);
        return PF_EXIT_USAGE;
    }
    struct pf_inject_opts io = {o->image, o->watch, in_stdin ? "stdin" : path};
    struct pf_inject_result res;
    char *out = NULL;
    size_t len = 0;
    int r = pf_inject(&io, in.data, in.len, &out, &len, &res);
    pf_buf_free(&in);
    if (r < 0) {
        fprintf(o->err, "preflight: inject: %s\n", pf_err_msg());
        return PF_EXIT_FAIL;
    }
    int code = PF_EXIT_PASS;
    if (fwrite(out, 1, len, o->out) != len || fflush(o->out) != 0) {
        fprintf(o->err, "preflight: inject: cannot write to stdout\n");
        code = PF_EXIT_FAIL;
    }
    for (size_t i = 0; i < res.notes.n; i++)
        fprintf(o->err, "preflight: note: %s\n", res.notes.v[i]);
    fprintf(o->err,
            "preflight: inject: %d pod template%s gated, %d already gated, %d object%s passed "
            "through\n",
            res.gated, res.gated == 1 ? "" : "s", res.already, res.passed,
            res.passed == 1 ? "" : "s");
    free(out);
    pf_inject_result_free(&res);
    return code;
}
