/* Help texts: the overview, each command's own options and examples; did-you-mean for
 * commands and options; the version line. */
#include <string.h>
#include <strings.h>

#include "../../pkg/inject/inject.h"
#include "cli.h"

struct opt_help {
    const char *flag; /* "--config FILE" */
    const char *var;  /* "PREFLIGHT_CONFIG", or NULL */
    unsigned groups;
    const char *text;
};

static const struct opt_help opts[] = {
    {"--config FILE", "PREFLIGHT_CONFIG", G_OUT | G_WATCH, "config file (docs/configuration.md)"},
    {"--verdict FILE|-", "PREFLIGHT_VERDICT", G_OUT | G_WATCH,
     "also write the YAML verdict to FILE (atomically; run: /run/preflight/verdict.yaml); "
     "- writes it to stdout instead of the human form"},
    {"--root DIR", "PREFLIGHT_ROOT", G_OUT | G_WATCH,
     "root prefix for /sys, /dev, /proc and the downward-API folder (default /)"},
    {"--format human|yaml|json", "PREFLIGHT_FORMAT", G_OUT | G_VERSION,
     "what stdout shows: human (the default, terminal or not), the YAML verdict, or the same "
     "document as JSON"},
    {"--strict", "PREFLIGHT_STRICT=1", G_OUT | G_WATCH,
     "a warning counts as a failure (exit by its class)"},
    {"--timeout SECONDS", "PREFLIGHT_TIMEOUT", G_OUT,
     "hard deadline for the whole run; the verdict is still written"},
    {"-v, --verbose", "PREFLIGHT_VERBOSE=1", G_OUT,
     "human form: every check with its findings, skipped ones with the reason"},
    {"--rank N", "PREFLIGHT_RANK", G_RUN,
     "this pod's rank (default: JOB_COMPLETION_INDEX, RANK, or the hostname's ordinal)"},
    {"--world-size N", "PREFLIGHT_WORLD_SIZE", G_RUN,
     "number of pods (default: the launcher's pod count, e.g. PET_NNODES)"},
    {"--coordinator HOST[:PORT]", "PREFLIGHT_COORDINATOR", G_RUN,
     "rank 0's address (default: MASTER_ADDR, or <prefix>-0.<subdomain>)"},
    {"--port N", "PREFLIGHT_PORT", G_RUN,
     "rendezvous port (default 29400, config rendezvous.port)"},
    {"--dry-run", NULL, G_RUN,
     "print this pod's rank, world size and rank 0's address and the rule that found them; "
     "check and join nothing (exit 2 when a piece is missing)"},
    {"--termination-log FILE", "PREFLIGHT_TERMINATION_LOG", G_RUN,
     "where the one-line reason of a failure goes (default /dev/termination-log when it "
     "exists)"},
    {"--pushgateway URL", "PREFLIGHT_PUSHGATEWAY", G_RUN | G_CHECK | G_WATCH,
     "push the run's metrics to this Prometheus Pushgateway (config report.pushgateway; "
     "docs/kubernetes.md)"},
    {"--results FILE", NULL, G_RUN | G_CHECK,
     "write the collective results as nccl-tests' -J JSON: NCCL's, and the TCP all-reduce "
     "marked backend tcp (config report.resultsFile)"},
    {"--env-file FILE", "PREFLIGHT_ENV_FILE", G_ENV,
     "lint the KEY=VALUE lines of FILE instead of this process's environment"},
    {"--list", NULL, G_EXPLAIN, "list every check id and finding code"},
    {"-f, --filename FILE", NULL, G_INJECT,
     "the YAML (or JSON) to gate; also as the one argument; default stdin"},
    {"--image IMAGE", NULL, G_INJECT,
     "the preflight image inject writes (default registry.example.com/preflight:" PF_VERSION ")"},
    {"--watch", NULL, G_INJECT,
     "also add the preflight-watch sidecar and the trainer's NCCL_DEBUG_FILE variables"},
    {"-f, --filename FILE", NULL, G_INJECT,
     "the YAML to gate (default: the argument, else stdin; - is stdin)"},
    {"--image IMAGE", NULL, G_INJECT, "the preflight image (default " PF_INJECT_IMAGE ")"},
    {"--watch", NULL, G_INJECT,
     "also add the preflight-watch native sidecar and the trainer's NCCL_DEBUG_* (opt-in)"},
    {"--html FILE|-", NULL, G_REPORT,
     "write the page to FILE (atomically; mode 0644); - writes it to stdout"},
    {"-h, --help", NULL, ~0u, "this help"},
};

unsigned pf_cli_option_groups(const char *long_name)
{
    size_t n = strlen(long_name);
    for (size_t i = 0; i < PF_ARRAY_LEN(opts); i++) {
        const char *f = strstr(opts[i].flag, "--");
        if (f && strncmp(f + 2, long_name, n) == 0 && (f[2 + n] == ' ' || f[2 + n] == '\0'))
            return opts[i].groups;
    }
    return 0;
}

/* The candidate nearest to word (case-insensitive), within a distance that grows with the
 * word's length; NULL when none is that near. */
static const char *nearest(const char *word, const char *const *cand, size_t n)
{
    char low[128];
    size_t i = 0;
    for (; word[i] && i + 1 < sizeof(low); i++)
        low[i] = (char)(word[i] >= 'A' && word[i] <= 'Z' ? word[i] - 'A' + 'a' : word[i]);
    low[i] = '\0';
    int limit = strlen(low) <= 4 ? 1 : strlen(low) <= 8 ? 2 : 3;
    const char *best = NULL;
    int best_d = limit + 1;
    for (size_t k = 0; k < n; k++) {
        int d = pf_edit_distance(low, cand[k], limit);
        if (d >= 0 && d < best_d) {
            best_d = d;
            best = cand[k];
        }
    }
    return best;
}

const char *pf_cli_suggest_command(const char *word)
{
    const char *names[PF_CLI_CMDS_MAX];
    for (size_t i = 0; i < pf_cli_ncmds; i++)
        names[i] = pf_cli_cmds[i].name;
    return nearest(word, names, pf_cli_ncmds);
}

const char *pf_cli_suggest_option(const char *word)
{
    static const char *const names[] = {"--config",
                                        "--verdict",
                                        "--root",
                                        "--format",
                                        "--strict",
                                        "--timeout",
                                        "--rank",
                                        "--world-size",
                                        "--port",
                                        "--env-file",
                                        "--list",
                                        "--verbose",
                                        "--help",
                                        "--coordinator",
                                        "--version",
                                        "--dry-run",
                                        "--termination-log",
                                        "--pushgateway",
                                        "--results",
                                        "--html"};
    return nearest(word, names, PF_ARRAY_LEN(names));
}

void pf_cli_version(FILE *f)
{
    fprintf(f, "preflight %s (git %s)\n", PF_VERSION, PF_GIT);
}

/* Prints text from column col on, wrapped at 80 columns, continued at indent. */
static void wrapped(FILE *f, int col, int indent, const char *text)
{
    for (const char *p = text; *p;) {
        if (*p == ' ' || *p == '\n') {
            p++;
            continue;
        }
        int wl = (int)strcspn(p, " \n");
        if (col > indent && col + 1 + wl > 80) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", wl, p);
        col += wl;
        p += wl;
    }
    fputc('\n', f);
}

static void options_of(FILE *f, unsigned group, bool with_commands)
{
    for (size_t i = 0; i < PF_ARRAY_LEN(opts); i++) {
        const struct opt_help *h = &opts[i];
        if (!(h->groups & group)) continue;
        char text[512];
        size_t n = (size_t)snprintf(text, sizeof(text), "%s", h->text);
        if (h->var && n < sizeof(text))
            n += (size_t)snprintf(text + n, sizeof(text) - n, " [%s]", h->var);
        if (with_commands && h->groups != ~0u && (h->groups & G_OUT) != G_OUT) {
            const char *sep = " (";
            for (size_t k = 0; k < pf_cli_ncmds && n < sizeof(text); k++)
                if (pf_cli_cmds[k].group & h->groups) {
                    n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s only", sep,
                                          pf_cli_cmds[k].name);
                    sep = ", ";
                }
            if (n < sizeof(text)) snprintf(text + n, sizeof(text) - n, ")");
        }
        fprintf(f, "  %-26s ", h->flag);
        int col = 3 + ((int)strlen(h->flag) > 26 ? (int)strlen(h->flag) : 26);
        if (col > 29) {
            fprintf(f, "\n%*s", 29, "");
            col = 29;
        }
        wrapped(f, col, 29, text);
    }
}

static const char output_text[] =
    "stdout shows the human verdict, whether or not it is a terminal (kubectl exec without -t,\n"
    "kubectl logs): colour only on a terminal and never with NO_COLOR; wrapped to COLUMNS,\n"
    "the terminal's width, or 80. --format yaml prints the YAML verdict instead; --verdict -\n"
    "writes the YAML verdict to stdout, and then --format human or json is a usage error\n"
    "(use --verdict FILE to have both). --format json prints the same document as --format\n"
    "yaml, as JSON. Progress lines go to stderr. An option the command does not take is a usage\n"
    "error.\n";

static const char exit_text[] =
    "0 pass or warn; 2 usage or config error (the message names the flag, or the file, line\n"
    "and key); a failure (a warning too with --strict or policy.failOn: warn) exits with its\n"
    "class: 3 spec (the pod spec or job config is wrong), 4 node (this node is unfit), 5 peer\n"
    "(another pod or the path to it failed); 1 when a failing finding has no class, and when\n"
    "the verdict file could not be written (the file there is left as it was); 6 (log) no\n"
    "NCCL line found: unknown\n";

void pf_cli_help(FILE *f, const char *cmd)
{
    const struct pf_cli_cmd *c = pf_cli_find(cmd);
    if (!c || strcmp(c->name, "help") == 0) {
        fputs("usage: preflight <command> [options]\n\ncommands:\n", f);
        for (size_t i = 0; i < pf_cli_ncmds; i++)
            fprintf(f, "  %-9s %s\n", pf_cli_cmds[i].name, pf_cli_cmds[i].summary);
        fputs("\noptions [environment variable]; a flag overrides its variable:\n", f);
        options_of(f, ~0u, true);
        fputs("  --version                  the version line only\n", f);
        fputs("  the rendezvous token is read from PREFLIGHT_TOKEN only\n\n", f);
        fputs("output:\n  ", f);
        wrapped(f, 2, 2, output_text);
        fputs("\nexit codes:\n  ", f);
        wrapped(f, 2, 2, exit_text);
        fputc('\n', f);
        wrapped(f, 0, 0,
                "'preflight help COMMAND' (or 'preflight COMMAND --help') shows a command's own "
                "options and examples. Docs: docs/checks.md, docs/configuration.md, "
                "docs/troubleshooting.md.");
        return;
    }
    fprintf(f, "usage: %s\n\n%s\n", c->synopsis, c->summary);
    if (*c->about) {
        fputc('\n', f);
        wrapped(f, 0, 0, c->about);
    }
    if (c->group) {
        fputs("\noptions [environment variable]:\n", f);
        options_of(f, c->group, false);
        if (c->group == G_RUN)
            fputs("  the rendezvous token is read from PREFLIGHT_TOKEN only\n", f);
    }
    if (c->group & G_OUT) {
        fputs("\noutput:\n  ", f);
        wrapped(f, 2, 2, output_text);
        fputs("\nexit codes:\n  ", f);
        wrapped(f, 2, 2, exit_text);
    }
    fprintf(f, "\nexamples:\n%s", c->examples);
}
