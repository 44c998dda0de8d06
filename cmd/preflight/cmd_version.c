/* `preflight version`: this build, and the libraries dlopen finds (pkg/dl/info.c); as text, or
 * with --format yaml|json as one document with the same facts (as `kubectl version -o`). */
#include "../../pkg/dl/dl.h"
#include "cli.h"

#ifdef __clang__
#define PF_COMPILER "clang " __clang_version__
#else
#define PF_COMPILER "gcc " __VERSION__
#endif

static int version_doc(const struct pf_options *o, const struct pf_dl_info info[])
{
    struct pf_node *doc = pf_node_new_map();
    pf_node_set_str(doc, "version", PF_VERSION);
    pf_node_set_str(doc, "git", PF_GIT);
    pf_node_set_str(doc, "built", __DATE__);
    pf_node_set_str(doc, "compiler", PF_COMPILER);
    pf_node_set_str(doc, "verdictSchema", "preflight/v1");
    struct pf_node *libs = pf_node_set_seq(doc, "libraries");
    for (size_t i = 0; i < PF_DL_INFO_COUNT; i++) {
        struct pf_node *m = pf_node_add_map(libs);
        pf_node_set_str(m, "soname", info[i].soname);
        pf_node_set_bool(m, "loaded", info[i].loaded);
        if (info[i].loaded) pf_node_set_str(m, "path", info[i].path);
        if (info[i].version[0]) pf_node_set_str(m, "version", info[i].version);
        if (info[i].detail[0]) pf_node_set_str(m, "detail", info[i].detail);
    }
    int r = pf_cmd_print_node(o, doc);
    pf_node_free(doc);
    if (r < 0) fprintf(o->err, "preflight: %s\n", pf_err_msg());
    return r < 0 ? PF_EXIT_FAIL : PF_EXIT_PASS;
}

int pf_cmd_version(const struct pf_options *o, const struct pf_cli *cli)
{
    (void)cli;
    struct pf_dl_info info[PF_DL_INFO_COUNT];
    pf_dl_info_gather(info);
    if (!pf_cmd_human(o)) return version_doc(o, info);
    fprintf(o->out, "preflight %s (git %s)\n", PF_VERSION, PF_GIT);
    fprintf(o->out, "built %s with %s, verdict schema preflight/v1\n", __DATE__, PF_COMPILER);
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    pf_dl_info_format(&b, info);
    fputs(b.data, o->out);
    pf_buf_free(&b);
    return PF_EXIT_PASS;
}
