/* The human form of a verdict: what `kubectl exec ... preflight check` shows on a terminal. */
#include "verdict.h"

#include <string.h>

#define C_RESET "\033[0m"
#define C_BOLD "\033[1m"
#define C_DIM "\033[2m"

static const char *status_color(enum pf_status s)
{
    switch (s) {
    case PF_PASS:
        return "\033[32m";
    case PF_WARN:
        return "\033[33m";
    case PF_FAIL:
        return "\033[31m";
    default:
        return "\033[2m";
    }
}

static void status_word(FILE *f, enum pf_status s, bool color, int width)
{
    const char *name = pf_status_name(s);
    if (color)
        fprintf(f, "%s%-*s%s", status_color(s), width, name, C_RESET);
    else
        fprintf(f, "%-*s", width, name);
}

/* Prints text with every line after the first indented by indent spaces. */
static void indented(FILE *f, const char *text, int indent)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fprintf(f, "%*s", indent, "");
    }
}

static const char *str_or(const struct pf_node *map, const char *key, const char *dflt)
{
    const char *s = pf_node_get_str(map, key);
    return s && *s ? s : dflt;
}

static void scalar_text(char *out, size_t n, const struct pf_node *v)
{
    if (!v) {
        snprintf(out, n, "-");
        return;
    }
    switch (v->kind) {
    case PF_NODE_STR:
        snprintf(out, n, "%s", v->str);
        break;
    case PF_NODE_INT:
        snprintf(out, n, "%lld", v->i);
        break;
    case PF_NODE_DBL:
        snprintf(out, n, "%.2f", v->d);
        break;
    case PF_NODE_BOOL:
        snprintf(out, n, "%s", v->b ? "yes" : "no");
        break;
    default:
        snprintf(out, n, "-");
    }
}

void pf_verdict_render_human(FILE *f, const struct pf_verdict *v, bool color)
{
    int idw = 5;
    for (size_t i = 0; i < v->nchecks; i++) {
        int l = (int)strlen(v->checks[i].id);
        if (l > idw) idw = l;
    }

    fprintf(f, "%spreflight%s ", color ? C_BOLD : "", color ? C_RESET : "");
    if (color)
        fprintf(f, "%s%s%s%s", C_BOLD, status_color(v->verdict),
                v->verdict == PF_FAIL   ? "FAIL"
                : v->verdict == PF_WARN ? "WARN"
                                        : "PASS",
                C_RESET);
    else
        fprintf(f, "%s", v->verdict == PF_FAIL ? "FAIL" : v->verdict == PF_WARN ? "WARN" : "PASS");
    fprintf(f, ": %s\n", v->summary);

    const char *pod = str_or(v->pod, "name", NULL);
    if (pod) {
        char rank[32] = "", world[32] = "";
        scalar_text(rank, sizeof(rank), pf_node_get(v->pod, "rank"));
        scalar_text(world, sizeof(world), pf_node_get(v->pod, "worldSize"));
        fprintf(f, "pod %s", pod);
        if (pf_node_get_str(v->pod, "namespace"))
            fprintf(f, " (namespace %s)", pf_node_get_str(v->pod, "namespace"));
        if (pf_node_get_str(v->pod, "node"))
            fprintf(f, " on node %s", pf_node_get_str(v->pod, "node"));
        if (pf_node_get(v->pod, "rank")) fprintf(f, ", rank %s of %s", rank, world);
        fputc('\n', f);
    }
    fputc('\n', f);

    fprintf(f, "  %s%-6s %-*s  %s%s\n", color ? C_DIM : "", "STATUS", idw, "CHECK", "MESSAGE",
            color ? C_RESET : "");
    for (size_t i = 0; i < v->nchecks; i++) {
        const struct pf_check *c = &v->checks[i];
        fputs("  ", f);
        status_word(f, c->status, color, 6);
        fprintf(f, " %-*s  %s\n", idw, c->id, c->message ? c->message : "");
        int indent = 2 + 6 + 1 + idw + 2;
        for (size_t j = 0; j < c->nfindings; j++) {
            const struct pf_finding *fd = &c->findings[j];
            fprintf(f, "%*s", indent, "");
            status_word(f, fd->status, color, 0);
            fprintf(f, " %s: ", fd->code);
            indented(f, fd->message ? fd->message : "", indent + 2);
            fputc('\n', f);
            if (fd->remedy && fd->status > PF_PASS) {
                fprintf(f, "%*s%sfix:%s ", indent + 2, "", color ? C_BOLD : "",
                        color ? C_RESET : "");
                indented(f, fd->remedy, indent + 7);
                fputc('\n', f);
            }
        }
    }

    if (v->collectives->count) {
        fprintf(f, "\n  %-8s %-14s %12s %6s %-10s %10s %10s %10s  %s\n", "BACKEND", "OP", "BYTES",
                "RANKS", "TRANSPORT", "ALGBW", "BUSBW", "EXPECTED", "CORRECT");
        for (const struct pf_node *c = v->collectives->first; c; c = c->next) {
            char bytes[32], ranks[16], algbw[32], busbw[32], expect[32], correct[16];
            scalar_text(bytes, sizeof(bytes), pf_node_get(c, "bytes"));
            scalar_text(ranks, sizeof(ranks), pf_node_get(c, "ranks"));
            scalar_text(algbw, sizeof(algbw), pf_node_get(c, "algbwGBps"));
            scalar_text(busbw, sizeof(busbw), pf_node_get(c, "busbwGBps"));
            scalar_text(expect, sizeof(expect), pf_node_get(c, "expectedMinBusbwGBps"));
            scalar_text(correct, sizeof(correct), pf_node_get(c, "correct"));
            fprintf(f, "  %-8s %-14s %12s %6s %-10s %10s %10s %10s  %s\n",
                    str_or(c, "backend", "-"), str_or(c, "op", "-"), bytes, ranks,
                    str_or(c, "transport", "-"), algbw, busbw, expect, correct);
        }
        fprintf(f, "  %s(GB/s; busbw by the nccl-tests formulas)%s\n", color ? C_DIM : "",
                color ? C_RESET : "");
    }

    if (v->culprits->count) {
        fprintf(f, "\n  %sCULPRITS%s\n", color ? C_BOLD : "", color ? C_RESET : "");
        for (const struct pf_node *c = v->culprits->first; c; c = c->next) {
            char rank[16];
            scalar_text(rank, sizeof(rank), pf_node_get(c, "rank"));
            fprintf(f, "  rank %-4s %-24s %-20s %s\n", rank, str_or(c, "pod", "-"),
                    str_or(c, "node", "-"), str_or(c, "reason", ""));
        }
    }
}
