/* `preflight report VERDICT --html FILE`: a verdict (docs/verdict.md) as one self-contained
 * HTML page (pkg/report/html.c), written atomically to FILE or to stdout (--html -). */
#include <stdlib.h>
#include <string.h>

#include "../../pkg/report/report.h"
#include "cli.h"

int pf_cmd_report(const struct pf_options *o, const struct pf_cli *cli)
{
    if (!o->html)
        return pf_cli_usage_error("report", "report: say where the page goes: --html FILE "
                                            "(or --html - for stdout)");
    const char *path = cli->arg;
    bool in_stdin = strcmp(path, "-") == 0;
    struct pf_buf in;
    pf_buf_init(&in, PF_REPORT_VERDICT_MAX);
    if (pf_file_read_named(&in, "report", in_stdin ? "/dev/stdin" : path, 0) < 0) {
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        pf_buf_free(&in);
        return PF_EXIT_USAGE;
    }
    struct pf_buf page;
    pf_buf_init(&page, in.len * 8 + (4u << 20)); /* every byte escaped, plus the page itself */
    int r = pf_report_html(&page, in_stdin ? "stdin" : path, in.data, in.len);
    pf_buf_free(&in);
    if (r < 0) {
        fprintf(o->err, "preflight: report: %s\n", pf_err_msg());
        pf_buf_free(&page);
        return r == PF_EUSAGE ? PF_EXIT_USAGE : PF_EXIT_FAIL;
    }
    int code = PF_EXIT_PASS;
    if (strcmp(o->html, "-") == 0) {
        if (fwrite(page.data, 1, page.len, o->out) != page.len || fflush(o->out) != 0) {
            fprintf(o->err, "preflight: report: cannot write to stdout\n");
            code = PF_EXIT_FAIL;
        }
    } else if (pf_file_replace(o->html, page.data, page.len, 0644) < 0) {
        fprintf(o->err, "preflight: report: --html %s: %s\n", o->html, pf_err_msg());
        code = PF_EXIT_FAIL;
    } else {
        fprintf(o->err, "preflight: report: wrote %s (%zu bytes)\n", o->html, page.len);
    }
    pf_buf_free(&page);
    return code;
}
