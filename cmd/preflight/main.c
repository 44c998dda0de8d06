/* preflight: flags, subcommands and exit codes; everything else lives in pkg/. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../pkg/app/app.h"

extern char **environ;

static const char usage_text[] =
    "usage: preflight <command> [options]\n"
    "\n"
    "commands:\n"
    "  run        all checks + rendezvous + collectives (initContainer mode)\n"
    "  check      local checks only (kubectl exec mode)\n"
    "  env        NCCL environment lint only (own environment, or --env-file FILE)\n"
    "  explain    ID|CODE: what a check or finding means and how to fix it\n"
    "  version    version, build info, which optional libraries load here\n"
    "  log        FILE...: read NCCL_DEBUG=INFO logs of a past run (kubectl logs output,\n"
    "             - for stdin): transport, HCAs, GPUDirect RDMA, versions, NCCL WARN lines\n"
    "  install    DIR: copy this binary to DIR/preflight (mode 0755), for an initContainer\n"
    "             that runs it inside the training image\n"
    "\n"
    "options (environment variable in brackets):\n"
    "  --config FILE         config file (PREFLIGHT_CONFIG)\n"
    "  --verdict FILE|-      where to write the YAML verdict (PREFLIGHT_VERDICT;\n"
    "                        run: /run/preflight/verdict.yaml)\n"
    "  --root DIR            root prefix for /sys, /dev, /proc, podinfo (PREFLIGHT_ROOT)\n"
    "  --format human|yaml   output on stdout (human on a terminal)\n"
    "  --strict              warn counts as fail\n"
    "  --timeout SECONDS     hard deadline for the whole run (PREFLIGHT_TIMEOUT)\n"
    "  --rank N              this pod's rank (PREFLIGHT_RANK)\n"
    "  --world-size N        number of pods (PREFLIGHT_WORLD_SIZE)\n"
    "  --coordinator HOST[:PORT]  rank 0's address (PREFLIGHT_COORDINATOR)\n"
    "  --port N              rendezvous port (PREFLIGHT_PORT)\n"
    "  --env-file FILE       env: lint KEY=VALUE lines from FILE\n"
    "  the rendezvous token is read from PREFLIGHT_TOKEN only\n"
    "\n"
    "exit codes: 0 pass or warn, 1 fail (warn too with --strict), 2 usage or config error\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("preflight: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\ntry 'preflight --help'\n", stderr);
    return PF_EXIT_USAGE;
}

static int parse_int(const char *what, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof(range), "%ld..%ld", lo, hi);
        usage_error("%s: expected an integer in %s, found \"%s\"", what, range, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_timeout(const char *what, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v > 0) || v > 7 * 86400.0) {
        usage_error("%s: expected seconds (a number above 0), found \"%s\"", what, s);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct pf_options o;
    pf_options_init(&o);
    o.environ_ = environ;
    o.out_is_tty = isatty(STDOUT_FILENO);

    const char *cmd = NULL;
    const char *explain_what = NULL;
    static const char *log_files[256];
    int nlog = 0;
    const char *s;

    /* flags given on the command line; the environment fills in the rest after the flags are
     * read, so that a flag overrides its variable (even one holding a bad value) */
    bool set_config = false, set_verdict = false, set_root = false, set_timeout = false,
         set_rank = false, set_world = false, set_coord = false, set_port = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[64];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
            fputs(usage_text, stdout);
            return PF_EXIT_PASS;
        }
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (!cmd)
                cmd = a;
            else if (strcmp(cmd, "log") == 0) {
                if (nlog >= (int)(sizeof(log_files) / sizeof(log_files[0])))
                    return usage_error("log: at most 256 files (cat them into one)");
                log_files[nlog++] = a;
            } else if ((strcmp(cmd, "explain") == 0 || strcmp(cmd, "install") == 0) &&
                       !explain_what)
                explain_what = a;
            else
                return usage_error("unexpected argument '%s'", a);
            continue;
        }
        if (strcmp(a, "--") == 0) return usage_error("unexpected argument '%s'", a);
        /* --name=value or --name value */
        const char *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a);
        }
        if (strcmp(name, "--strict") == 0) {
            if (val) return usage_error("%s takes no value", name);
            o.strict = true;
            continue;
        }
        static const char *const with_value[] = {
            "--config", "--verdict",    "--root",        "--format", "--timeout",
            "--rank",   "--world-size", "--coordinator", "--port",   "--env-file"};
        int known = 0;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
            known |= strcmp(name, with_value[k]) == 0;
        if (!known) return usage_error("unknown option '%s'", name);
        if (!val) {
            if (i + 1 >= argc) return usage_error("%s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "--config") == 0) {
            o.config_path = val;
            set_config = true;
        } else if (strcmp(name, "--verdict") == 0) {
            o.verdict_path = val;
            set_verdict = true;
        } else if (strcmp(name, "--root") == 0) {
            o.root = val;
            set_root = true;
        } else if (strcmp(name, "--env-file") == 0)
            o.env_file = val;
        else if (strcmp(name, "--coordinator") == 0) {
            if (!*val || strlen(val) >= sizeof(o.rdv.coordinator))
                return usage_error("--coordinator: expected HOST[:PORT], found \"%s\"", val);
            snprintf(o.rdv.coordinator, sizeof(o.rdv.coordinator), "%s", val);
            set_coord = true;
        } else if (strcmp(name, "--format") == 0) {
            if (strcmp(val, "human") == 0)
                o.format = PF_FORMAT_HUMAN;
            else if (strcmp(val, "yaml") == 0)
                o.format = PF_FORMAT_YAML;
            else
                return usage_error("--format: expected human or yaml, found \"%s\"", val);
        } else if (strcmp(name, "--timeout") == 0) {
            if (parse_timeout("--timeout", val, &o.timeout_s) < 0) return PF_EXIT_USAGE;
            set_timeout = true;
        } else if (strcmp(name, "--rank") == 0) {
            if (parse_int("--rank", val, 0, 1 << 20, &o.rdv.rank) < 0) return PF_EXIT_USAGE;
            set_rank = true;
        } else if (strcmp(name, "--world-size") == 0) {
            if (parse_int("--world-size", val, 1, 1 << 20, &o.rdv.world_size) < 0)
                return PF_EXIT_USAGE;
            set_world = true;
        } else if (strcmp(name, "--port") == 0) {
            if (parse_int("--port", val, 1, 65535, &o.rdv.port) < 0) return PF_EXIT_USAGE;
            set_port = true;
        }
    }

    if (!set_config && (s = getenv("PREFLIGHT_CONFIG")) && *s) o.config_path = s;
    if (!set_verdict && (s = getenv("PREFLIGHT_VERDICT")) && *s) o.verdict_path = s;
    if (!set_root && (s = getenv("PREFLIGHT_ROOT")) && *s) o.root = s;
    if (!set_timeout && (s = getenv("PREFLIGHT_TIMEOUT")) && *s &&
        parse_timeout("PREFLIGHT_TIMEOUT", s, &o.timeout_s) < 0)
        return PF_EXIT_USAGE;
    if (!set_rank && (s = getenv("PREFLIGHT_RANK")) && *s &&
        parse_int("PREFLIGHT_RANK", s, 0, 1 << 20, &o.rdv.rank) < 0)
        return PF_EXIT_USAGE;
    if (!set_world && (s = getenv("PREFLIGHT_WORLD_SIZE")) && *s &&
        parse_int("PREFLIGHT_WORLD_SIZE", s, 1, 1 << 20, &o.rdv.world_size) < 0)
        return PF_EXIT_USAGE;
    if (!set_coord && (s = getenv("PREFLIGHT_COORDINATOR")) && *s) {
        if (strlen(s) >= sizeof(o.rdv.coordinator))
            return usage_error("PREFLIGHT_COORDINATOR: expected HOST[:PORT], found \"%.80s...\"",
                               s);
        snprintf(o.rdv.coordinator, sizeof(o.rdv.coordinator), "%s", s);
    }
    if (!set_port && (s = getenv("PREFLIGHT_PORT")) && *s &&
        parse_int("PREFLIGHT_PORT", s, 1, 65535, &o.rdv.port) < 0)
        return PF_EXIT_USAGE;
    if ((s = getenv("PREFLIGHT_TOKEN")) && *s) o.rdv.token = s;

    if (!cmd) {
        fputs(usage_text, stderr);
        return PF_EXIT_USAGE;
    }
    if (o.env_file && strcmp(cmd, "env") != 0)
        return usage_error("--env-file is an option of 'preflight env', not of '%s'", cmd);
    if (strcmp(cmd, "run") == 0) return pf_app_run(&o);
    if (strcmp(cmd, "check") == 0) return pf_app_check(&o);
    if (strcmp(cmd, "env") == 0) return pf_app_env(&o);
    if (strcmp(cmd, "version") == 0) return pf_app_version(&o);
    if (strcmp(cmd, "log") == 0) return pf_app_log(&o, log_files, nlog);
    if (strcmp(cmd, "install") == 0) {
        if (!explain_what || !*explain_what)
            return usage_error("install needs a folder (preflight install DIR)");
        return pf_app_install(&o, explain_what);
    }
    if (strcmp(cmd, "explain") == 0) {
        if (!explain_what) return usage_error("explain needs a check id or finding code");
        return pf_app_explain(&o, explain_what);
    }
    return usage_error("unknown command '%s'", cmd);
}
