/* `preflight version`: this build, and the libraries dlopen finds (pkg/dl/info.c). */
#include "../../pkg/dl/dl.h"
#include "cli.h"

int pf_cmd_version(const struct pf_options *o, const struct pf_cli *cli)
{
    (void)cli;
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
    pf_buf_init(&b, PF_BUF_TEXT);
    pf_dl_info_gather(info);
    pf_dl_info_format(&b, info);
    fputs(b.data, o->out);
    pf_buf_free(&b);
    return PF_EXIT_PASS;
}
