/* The human summary of a log: the job in two lines, a table per host (like nccl-tests' device
 * list and ibv_devinfo: one row a host), WARN lines by kind, then the findings. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define HOSTS_SHOWN 40

static const char *gdr_text(const struct pf_nccllog_host *h)
{
    if (h->cls == PF_NCCLLOG_NONE || h->gdr < 0) return "-";
    return h->gdr ? "yes" : "no";
}

static void job_lines(struct pf_buf *out, const struct pf_nccllog *log)
{
    struct pf_strlist v = {0}, t = {0};
    for (size_t i = 0; i < log->n; i++)
        nl_list_add(&v, log->v[i].version);
    for (size_t i = 0; i < log->nfiles; i++)
        nl_list_add(&v, log->files[i].pending_version);
    pf_strlist_sort(&v);
    bool nvls = false, collnet = false;
    for (size_t i = 0; i < log->nhosts; i++) {
        if (log->hosts[i].cls != PF_NCCLLOG_NONE) nl_list_add(&t, log->hosts[i].transport);
        nvls |= log->hosts[i].nvls;
        collnet |= log->hosts[i].collnet;
    }
    char vs[200] = "", ts[200] = "";
    pf_strlist_join(vs, sizeof(vs), &v, ", ");
    pf_strlist_join(ts, sizeof(ts), &t, ", ");
    pf_buf_addf(out, "NCCL log: %zu file%s, %zu lines (%zu NCCL)\n", log->nfiles,
                log->nfiles == 1 ? "" : "s", log->lines, log->nccl_lines);
    pf_buf_addf(out, "job: ");
    if (log->nranks) pf_buf_addf(out, "%d ranks, ", log->nranks);
    pf_buf_addf(out, "%zu host%s, NCCL %s\n", log->nhosts, log->nhosts == 1 ? "" : "s",
                vs[0] ? vs : "version not logged");
    pf_buf_addf(out, "inter-node: %s; NVLS %s; CollNet/SHARP %s",
                !log->multi_node ? "none (one node: P2P/SHM only)"
                : ts[0]          ? ts
                                 : "not logged",
                nvls ? "used" : "not seen", collnet ? "used" : "not seen");
    double init = 0;
    int complete = 0;
    for (size_t i = 0; i < log->n; i++) {
        complete += log->v[i].init_complete;
        if (log->v[i].init_seconds > init) init = log->v[i].init_seconds;
    }
    if (complete) pf_buf_addf(out, "; %d Init COMPLETE", complete);
    if (init > 0) pf_buf_addf(out, " (slowest %.2f s)", init);
    pf_buf_addf(out, "\n\n");
    pf_strlist_free(&v);
    pf_strlist_free(&t);
}

/* The columns after HOST take 63 characters before the HCAs; HOST gets what the width leaves
 * (at least 22, the name's length at most). */
#define HOST_MIN 22
#define AFTER_HOST 63

/* name in w columns: whole when it fits, else its start and its end around "..." (pods of one
 * job differ at the end: llama3-70b-pretrain-worker-0 and -1). */
static void host_cell(char *out, size_t n, const char *name, int w)
{
    int len = (int)strlen(name);
    if (len <= w) {
        snprintf(out, n, "%s", name);
        return;
    }
    int tail = (w - 3) / 2 < 12 ? (w - 3) / 2 : 12;
    snprintf(out, n, "%.*s...%s", w - 3 - tail, name, name + len - tail);
}

static void host_row(struct pf_buf *out, const struct pf_nccllog *log,
                     const struct pf_nccllog_host *h, int hw)
{
    char cell[512];
    host_cell(cell, sizeof(cell), h->name, hw);
    char ranks[64], devs[160] = "", ver[64] = "", tr[64];
    nl_ranks_text(ranks, sizeof(ranks), &h->ranks);
    pf_strlist_join(devs, sizeof(devs), h->hcas.n ? &h->hcas : &h->ifaces, " ");
    pf_strlist_join(ver, sizeof(ver), &h->versions, ",");
    if (h->cls == PF_NCCLLOG_NONE)
        snprintf(tr, sizeof(tr), "%s", log->multi_node ? "?" : "none");
    else
        snprintf(tr, sizeof(tr), "%s%s", h->transport, h->from_channels ? "" : "*");
    pf_buf_addf(out, "%-*s %5zu %-9.9s %-16.16s %-7s %-4s %-8.8s %5zu  %s\n", hw, cell, h->nprocs,
                ranks[0] ? ranks : "-", tr, pf_nccllog_class_name(h->cls), gdr_text(h),
                ver[0] ? ver : "-", h->nwarns, devs[0] ? devs : "-");
}

static void warn_kinds(struct pf_buf *out, const struct pf_nccllog *log)
{
    int kinds[PF_NCCLLOG_W_KINDS] = {0}, total = 0;
    for (size_t i = 0; i < log->nhosts; i++)
        for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++) {
            kinds[k] += log->hosts[i].warns_by_kind[k];
            total += log->hosts[i].warns_by_kind[k];
        }
    if (!total) return;
    pf_buf_addf(out, "\nNCCL WARN lines: %d (", total);
    bool first = true;
    for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++) {
        if (!kinds[k]) continue;
        pf_buf_addf(out, "%s%d %s", first ? "" : ", ", kinds[k], pf_nccllog_warn_kind_name(k));
        first = false;
    }
    pf_buf_addf(out, ")\n");
}

void pf_nccllog_render(struct pf_buf *out, struct pf_nccllog *log, const struct pf_check *c)
{
    pf_nccllog_render_width(out, log, c, 80);
}

void pf_nccllog_render_width(struct pf_buf *out, struct pf_nccllog *log, const struct pf_check *c,
                             int width)
{
    pf_nccllog_finish(log);
    job_lines(out, log);
    int hw = HOST_MIN, longest = 0;
    for (size_t i = 0; i < log->nhosts && i < HOSTS_SHOWN; i++)
        if ((int)strlen(log->hosts[i].name) > longest) longest = (int)strlen(log->hosts[i].name);
    /* the HCAs column keeps 16 characters */
    int room = width - AFTER_HOST - 16;
    if (longest > hw) hw = longest < room ? longest : room > hw ? room : hw;
    pf_buf_addf(out, "%-*s %5s %-9s %-16s %-7s %-4s %-8s %5s  %s\n", hw, "HOST", "PROCS", "RANKS",
                "TRANSPORT", "CLASS", "GDR", "NCCL", "WARN", "HCAS / INTERFACES");
    for (size_t i = 0; i < log->nhosts && i < HOSTS_SHOWN; i++)
        host_row(out, log, &log->hosts[i], hw);
    if (log->nhosts > HOSTS_SHOWN)
        pf_buf_addf(out, "... and %zu more hosts (see the verdict's evidence)\n",
                    log->nhosts - HOSTS_SHOWN);
    bool declared = false;
    for (size_t i = 0; i < log->nhosts; i++)
        declared |= log->hosts[i].cls != PF_NCCLLOG_NONE && !log->hosts[i].from_channels;
    if (declared) pf_buf_addf(out, "* from init lines only (no channel lines logged)\n");
    warn_kinds(out, log);
    if (!c || c->nfindings == 0) return;
    pf_buf_addf(out, "\nfindings:\n");
    for (size_t i = 0; i < c->nfindings; i++)
        pf_buf_addf(out, "  %-4s %s: %s\n", c->findings[i].status == PF_FAIL ? "FAIL" : "WARN",
                    c->findings[i].code, c->findings[i].message);
}
