/* Help texts: the overview, each command's own options and examples; did-you-mean for
 * commands and options; the version line. */
#include <string.h>
#include <strings.h>

#include "cli.h"

/* Which commands an option belongs to. */
enum {
    G_RUN = 1 << 0,
    G_CHECK = 1 << 1,
    G_ENV = 1 << 2,
    G_LOG = 1 << 3,
    G_EXPLAIN = 1 << 4,
    G_OUT = G_RUN | G_CHECK | G_ENV | G_LOG, /* commands that produce a verdict */
};

struct opt_help {
    const char *flag; /* "--config FILE" */
    const char *var;  /* "PREFLIGHT_CONFIG", or NULL */
    unsigned groups;
    const char *text;
};

static const struct opt_help opts[] = {
    {"--config FILE", "PREFLIGHT_CONFIG", G_OUT, "config file (docs/configuration.md)"},
    {"--verdict FILE|-", "PREFLIGHT_VERDICT", G_OUT,
     "also write the YAML verdict to FILE (atomically; run: /run/preflight/verdict.yaml); "
     "- writes it to stdout instead of the human form"},
    {"--root DIR", "PREFLIGHT_ROOT", G_OUT,
     "root prefix for /sys, /dev, /proc and the downward-API folder (default /)"},
    {"--format human|yaml", "PREFLIGHT_FORMAT", G_OUT,
     "what stdout shows: human (the default, terminal or not) or the YAML verdict"},
    {"--strict", "PREFLIGHT_STRICT=1", G_OUT, "a warning counts as a failure (exit by its class)"},
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
    {"--pushgateway URL", "PREFLIGHT_PUSHGATEWAY", G_RUN | G_CHECK,
     "push the run's metrics to this Prometheus Pushgateway (config report.pushgateway; "
     "docs/kubernetes.md)"},
    {"--results FILE", NULL, G_RUN | G_CHECK,
     "write the NCCL collective results as nccl-tests' -J JSON (config report.resultsFile)"},
    {"--env-file FILE", "PREFLIGHT_ENV_FILE", G_ENV,
     "lint the KEY=VALUE lines of FILE instead of this process's environment"},
    {"--list", NULL, G_EXPLAIN, "list every check id and finding code"},
    {"-h, --help", NULL, ~0u, "this help"},
};

#define NONE PF_CLI_ARGS_NONE
#define ONE PF_CLI_ARGS_ONE
#define MANY PF_CLI_ARGS_MANY

/* The commands: name, function, arguments, the message when the one it needs is missing,
 * options, then the help. */
static const struct pf_cli_cmd cmds[] = {
    {"run", pf_cmd_run, NONE, NULL, G_RUN, "preflight run [options]",
     "all checks + rendezvous + collectives (initContainer mode)",
     "Runs the local checks, meets the other pods of the job through its headless Service, runs\n"
     "a brief TCP all-reduce among them (NCCL too where there are GPUs), writes the YAML verdict\n"
     "to --verdict and prints the human form on stdout. Progress lines go to stderr. The\n"
     "rendezvous token is read from PREFLIGHT_TOKEN only (a flag would show in ps).\n",
     "  preflight run              # in an initContainer: everything from the pod\n"
     "  preflight run --rank 0 --world-size 4 --coordinator trainer-0.trainer:29400\n"
     "  preflight run --verdict -  # the YAML verdict on stdout\n"},
    {"check", pf_cmd_check, NONE, NULL, G_CHECK, "preflight check [options]",
     "local checks only (kubectl exec mode)",
     "Checks this pod only: GPUs, RDMA devices and ports, memlock, interfaces, Multus, SR-IOV,\n"
     "the NCCL environment, /dev/shm, the port range; samples the RDMA error counters twice,\n"
     "PREFLIGHT_COUNTERS_WINDOW seconds apart (default 1).\n",
     "  kubectl exec trainer-3 -c trainer -- preflight check\n"
     "  preflight check -v                     # every check; skipped ones say why\n"
     "  preflight check --verdict /tmp/v.yaml  # human on stdout, YAML in the file\n"},
    {"env", pf_cmd_env, NONE, NULL, G_ENV, "preflight env [--env-file FILE] [options]",
     "NCCL environment lint only (own environment, or a KEY=VALUE file)",
     "Lints the NCCL_* variables (and NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf) that NCCL\n"
     "would read in this process, or those of a KEY=VALUE file (e.g. a pod's env dumped by\n"
     "kubectl).\n",
     "  preflight env\n"
     "  preflight env --env-file job.env\n"},
    {"explain", pf_cmd_explain, ONE, NULL, G_EXPLAIN, "preflight explain ID|CODE | --list",
     "what a check or finding means and how to fix it",
     "Prints the text of docs/checks.md for a check id (nccl.env), a finding code (p2p-disabled;\n"
     "every check that has it) or ID/CODE. Case does not matter. Rendered for the terminal\n"
     "(bold, code) on a terminal, plain text otherwise.\n",
     "  preflight explain port-down\n"
     "  preflight explain rendezvous/timeout\n"
     "  preflight explain --list\n"},
    {"log", pf_cmd_log, MANY, NULL, G_LOG, "preflight log FILE... [options]",
     "read NCCL_DEBUG=INFO logs of a past run: transport, GDR, versions",
     "Reads NCCL_DEBUG=INFO logs (kubectl logs output; - for stdin) and reports the transport\n"
     "NCCL chose, the HCAs, GPUDirect RDMA, the NCCL versions and NCCL WARN lines.\n",
     "  kubectl logs trainer-0 | preflight log -\n"
     "  preflight log rank0.log rank1.log --format yaml\n"},
    {"install", pf_cmd_install, ONE, "install needs a folder (preflight install DIR)", 0,
     "preflight install DIR", "copy this binary into DIR (hand it to the training image)",
     "Copies this binary to DIR/preflight (mode 0755, atomically), for an initContainer that\n"
     "hands it to the training container through an emptyDir.\n",
     "  preflight install /opt/preflight\n"},
    {"version", pf_cmd_version, NONE, NULL, 0, "preflight version",
     "version, build info, which optional libraries load here",
     "Prints the version, the build, the verdict schema, and whether libcuda, libnccl,\n"
     "libibverbs and libcurl load here (--version prints the first line only).\n",
     "  preflight version\n"},
    {"help", NULL, ONE, NULL, 0, "preflight help [COMMAND]",
     "this overview, or a command's own help", "", "  preflight help run\n"},
};

const struct pf_cli_cmd *pf_cli_find(const char *name)
{
    for (size_t i = 0; name && i < PF_ARRAY_LEN(cmds); i++)
        if (strcmp(cmds[i].name, name) == 0) return &cmds[i];
    return NULL;
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
    const char *names[PF_ARRAY_LEN(cmds)];
    for (size_t i = 0; i < PF_ARRAY_LEN(cmds); i++)
        names[i] = cmds[i].name;
    return nearest(word, names, PF_ARRAY_LEN(cmds));
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
                                        "--results"};
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
        if (with_commands && h->groups != ~0u && h->groups != G_OUT) {
            const char *sep = " (";
            for (size_t k = 0; k < PF_ARRAY_LEN(cmds) && n < sizeof(text); k++)
                if (cmds[k].group & h->groups) {
                    n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s only", sep,
                                          cmds[k].name);
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
    "writes the YAML verdict to stdout, and then --format human is a usage error (use\n"
    "--verdict FILE to have both). Progress lines go to stderr.\n";

static const char exit_text[] =
    "0 pass or warn; 2 usage or config error (the message names the flag, or the file, line\n"
    "and key); a failure (a warning too with --strict or policy.failOn: warn) exits with its\n"
    "class: 3 spec (the pod spec or job config is wrong), 4 node (this node is unfit), 5 peer\n"
    "(another pod or the path to it failed); 1 when a failing finding has no class; 6 (log)\n"
    "no NCCL line found: unknown\n";

void pf_cli_help(FILE *f, const char *cmd)
{
    const struct pf_cli_cmd *c = pf_cli_find(cmd);
    if (!c || strcmp(c->name, "help") == 0) {
        fputs("usage: preflight <command> [options]\n\ncommands:\n", f);
        for (size_t i = 0; i < PF_ARRAY_LEN(cmds); i++)
            fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].summary);
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
