/* `preflight explain ID|CODE` and `preflight explain --list`: the text of docs/checks.md,
 * rendered for a terminal (ANSI) or as plain text. */
#include <stdlib.h>
#include <string.h>

#include "../../pkg/explain/explain.h"
#include "cli.h"

static bool want_ansi(const struct pf_options *o)
{
    const char *nc = getenv("NO_COLOR");
    return o->out_is_tty && !(nc && *nc);
}

/* Every check id with its finding codes: "rdma.ports: port-down, port-not-linkup, ...". */
static void list(struct pf_buf *md)
{
    struct pf_strlist ids = {0}, codes = {0};
    pf_explain_list(&ids, &codes);
    pf_buf_addf(md, "Check ids and their finding codes ('preflight explain NAME' for either):\n\n");
    for (size_t i = 0; i < ids.n; i++) {
        size_t idlen = strlen(ids.v[i]);
        pf_buf_addf(md, "- **%s**", ids.v[i]);
        const char *sep = ": ";
        for (size_t k = 0; k < codes.n; k++) {
            if (strncmp(codes.v[k], ids.v[i], idlen) != 0 || codes.v[k][idlen] != '/') continue;
            pf_buf_addf(md, "%s%s", sep, codes.v[k] + idlen + 1);
            sep = ", ";
        }
        pf_buf_add(md, "\n", 1);
    }
    pf_strlist_free(&ids);
    pf_strlist_free(&codes);
}

int pf_cmd_explain(const struct pf_options *o, const struct pf_cli *cli)
{
    if (!cli->arg && !cli->list)
        return pf_cli_usage_error("explain",
                                  "explain needs a check id or finding code (or --list)");
    struct pf_buf md, text;
    pf_buf_init(&md, PF_BUF_DOCUMENT);
    if (cli->list) {
        if (cli->arg) {
            pf_buf_free(&md);
            return pf_cli_usage_error("explain", "explain: --list takes no ID or CODE");
        }
        list(&md);
    } else if (pf_explain(&md, cli->arg) < 0) {
        pf_buf_free(&md);
        fprintf(o->err, "preflight: %s\n", pf_err_msg());
        return PF_EXIT_USAGE;
    }
    pf_buf_init(&text, PF_BUF_RENDERED);
    int width = o->width ? o->width : 80;
    pf_explain_render(&text, md.data, want_ansi(o), width > 100 ? 100 : width);
    fputs(text.data, o->out);
    pf_buf_free(&text);
    pf_buf_free(&md);
    return PF_EXIT_PASS;
}
