/* Options: getopt_long over argv, then the PREFLIGHT_* variables for what no flag set (a
 * flag overrides its variable, even one holding a bad value). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../../pkg/identity/identity.h"
#include "cli.h"

enum {
    O_CONFIG = 256,
    O_VERDICT,
    O_ROOT,
    O_FORMAT,
    O_STRICT,
    O_TIMEOUT,
    O_RANK,
    O_WORLD,
    O_COORD,
    O_PORT,
    O_ENV_FILE,
    O_LIST,
    O_VERSION,
    O_DRY_RUN,
    O_TERMINATION_LOG,
    O_PUSHGATEWAY,
    O_RESULTS,
    O_IMAGE,
    O_WATCH,
    O_HTML,
};

static const struct option long_opts[] = {
    {"config", required_argument, NULL, O_CONFIG},
    {"verdict", required_argument, NULL, O_VERDICT},
    {"root", required_argument, NULL, O_ROOT},
    {"format", required_argument, NULL, O_FORMAT},
    {"strict", no_argument, NULL, O_STRICT},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"rank", required_argument, NULL, O_RANK},
    {"world-size", required_argument, NULL, O_WORLD},
    {"coordinator", required_argument, NULL, O_COORD},
    {"port", required_argument, NULL, O_PORT},
    {"env-file", required_argument, NULL, O_ENV_FILE},
    {"list", no_argument, NULL, O_LIST},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {"dry-run", no_argument, NULL, O_DRY_RUN},
    {"termination-log", required_argument, NULL, O_TERMINATION_LOG},
    {"pushgateway", required_argument, NULL, O_PUSHGATEWAY},
    {"results", required_argument, NULL, O_RESULTS},
    {"filename", required_argument, NULL, 'f'},
    {"image", required_argument, NULL, O_IMAGE},
    {"watch", no_argument, NULL, O_WATCH},
    {"html", required_argument, NULL, O_HTML},
    {NULL, 0, NULL, 0},
};

int pf_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("preflight: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cmd && pf_cli_find(cmd))
        fprintf(stderr, "\ntry 'preflight --help' or 'preflight %s --help'\n", cmd);
    else
        fputs("\ntry 'preflight --help'\n", stderr);
    return PF_EXIT_USAGE;
}

static int parse_int(const char *what, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        pf_cli_usage_error(NULL, "%s: expected an integer in %ld..%ld, found \"%s\"", what, lo, hi,
                           s);
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
        pf_cli_usage_error(NULL, "%s: expected seconds (a number above 0), found \"%s\"", what, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_format(const char *what, const char *s, enum pf_format *out)
{
    if (strcmp(s, "human") == 0)
        *out = PF_FORMAT_HUMAN;
    else if (strcmp(s, "yaml") == 0)
        *out = PF_FORMAT_YAML;
    else if (strcmp(s, "json") == 0)
        *out = PF_FORMAT_JSON;
    else
        return pf_cli_usage_error(NULL, "%s: expected human, yaml or json, found \"%s\"", what, s),
               -1;
    return 0;
}

/* PREFLIGHT_STRICT and PREFLIGHT_VERBOSE: 1/true/yes or 0/false/no. */
static int parse_bool(const char *what, const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                "off"};
    for (size_t i = 0; i < PF_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0) return *out = false, 0;
    }
    pf_cli_usage_error(NULL, "%s: expected 1 or 0 (true or false), found \"%s\"", what, s);
    return -1;
}

/* HOST[:PORT], [IPv6]:PORT or a bare IPv6 address; the host a DNS name or an address. */
static int parse_coordinator(const char *what, const char *s, struct pf_identity_opts *rdv)
{
    char host[sizeof(rdv->coordinator)];
    int port = 0;
    if (strlen(s) >= sizeof(rdv->coordinator) ||
        pf_identity_split_hostport(host, sizeof(host), &port, s) < 0)
        return pf_cli_usage_error(
                   NULL, "%s: %s (expected HOST[:PORT], e.g. trainer-0.trainer:29400)", what,
                   strlen(s) >= sizeof(rdv->coordinator) ? "too long" : pf_err_msg()),
               -1;
    bool v6 = strchr(host, ':') != NULL;
    for (const char *p = host; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || (v6 && (c == ':' || c == '%')))
            continue;
        return pf_cli_usage_error(NULL,
                                  "%s: \"%s\": '%c' cannot be in a host name or address "
                                  "(expected HOST[:PORT])",
                                  what, s, c),
               -1;
    }
    snprintf(rdv->coordinator, sizeof(rdv->coordinator), "%s", s);
    return 0;
}

/* The option argv[optind - 1] named, without "=value". */
static void opt_name(char *out, size_t n, const char *arg)
{
    size_t len = strcspn(arg, "=");
    snprintf(out, n, "%.*s", (int)len, arg);
}

/* A usage error for what getopt_long refused: an unknown option (with a did-you-mean), a
 * value given to a flag that takes none, or a missing value. */
static int bad_option(const char *cmd, int c, const char *arg)
{
    char name[64];
    opt_name(name, sizeof(name), arg ? arg : "?");
    if (c == ':') return pf_cli_usage_error(cmd, "%s needs a value", name);
    if (strncmp(name, "--", 2) == 0) {
        const struct option *hit = NULL;
        int prefix = 0;
        char which[256] = "";
        for (const struct option *lo = long_opts; lo->name; lo++) {
            if (strcmp(lo->name, name + 2) == 0) hit = lo;
            if (strncmp(lo->name, name + 2, strlen(name + 2)) == 0) {
                size_t w = strlen(which);
                snprintf(which + w, sizeof(which) - w, "%s--%s", prefix++ ? ", " : "", lo->name);
            }
        }
        if (hit && hit->has_arg == no_argument && strchr(arg, '='))
            return pf_cli_usage_error(cmd, "%s takes no value", name);
        if (!hit && prefix > 1 && name[2])
            return pf_cli_usage_error(cmd, "option '%s' is ambiguous (%s)", name, which);
    } else if (optopt) {
        snprintf(name, sizeof(name), "-%c", optopt);
    }
    const char *near = pf_cli_suggest_option(name);
    if (near)
        return pf_cli_usage_error(cmd, "unknown option '%s' (did you mean '%s'?)", name, near);
    return pf_cli_usage_error(cmd, "unknown option '%s'", name);
}

struct seen {
    bool config, verdict, root, format, strict, timeout, verbose, rank, world, coord, port,
        env_file, termination_log, pushgateway, results;
    /* the long names of the options given, in order, for the command's own check */
    const char *given[PF_CLI_MAX_ARGS];
    int ngiven;
};

/* One option getopt_long accepted. Returns -1 to go on, else an exit code. */
static int take(struct pf_options *o, struct pf_cli *cli, struct seen *set, int c, const char *val,
                bool *help, bool *version)
{
    switch (c) {
    case 'h':
        *help = true;
        return -1;
    case O_VERSION:
        *version = true;
        return -1;
    case 'v':
        o->verbose = set->verbose = true;
        return -1;
    case O_STRICT:
        o->strict = set->strict = true;
        return -1;
    case O_LIST:
        cli->list = true;
        return -1;
    case O_DRY_RUN:
        o->dry_run = true;
        return -1;
    case O_TERMINATION_LOG:
        o->termination_log = val, set->termination_log = true;
        return -1;
    case O_PUSHGATEWAY:
        if (pf_http_url_check("--pushgateway", val) < 0)
            return pf_cli_usage_error(cli->cmd, "%s", pf_err_msg());
        o->pushgateway = val, set->pushgateway = true;
        return -1;
    case O_RESULTS:
        o->results = val, set->results = true;
        return -1;
    case 'f':
        o->inject_file = val;
        return -1;
    case O_IMAGE:
        o->image = val;
        return -1;
    case O_WATCH:
        o->watch = true;
        return -1;
    case O_HTML:
        o->html = val;
        return -1;
    case O_CONFIG:
        o->config_path = val, set->config = true;
        return -1;
    case O_VERDICT:
        o->verdict_path = val, set->verdict = true;
        return -1;
    case O_ROOT:
        o->root = val, set->root = true;
        return -1;
    case O_ENV_FILE:
        o->env_file = val, set->env_file = true;
        return -1;
    case O_FORMAT:
        set->format = true;
        return parse_format("--format", val, &o->format) < 0 ? PF_EXIT_USAGE : -1;
    case O_TIMEOUT:
        set->timeout = true;
        return parse_timeout("--timeout", val, &o->timeout_s) < 0 ? PF_EXIT_USAGE : -1;
    case O_RANK:
        set->rank = true;
        return parse_int("--rank", val, 0, 1 << 20, &o->identity.rank) < 0 ? PF_EXIT_USAGE : -1;
    case O_WORLD:
        set->world = true;
        return parse_int("--world-size", val, 1, 1 << 20, &o->identity.world_size) < 0
                   ? PF_EXIT_USAGE
                   : -1;
    case O_PORT:
        set->port = true;
        return parse_int("--port", val, 1, 65535, &o->identity.port) < 0 ? PF_EXIT_USAGE : -1;
    case O_COORD:
        set->coord = true;
        return parse_coordinator("--coordinator", val, &o->identity) < 0 ? PF_EXIT_USAGE : -1;
    }
    return PF_EXIT_USAGE;
}

static const char *var(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

/* The PREFLIGHT_* variables, for what no flag set. */
static int from_environment(struct pf_options *o, const struct seen *set, const char *cmd)
{
    const char *s;
    if (!set->config && (s = var("PREFLIGHT_CONFIG"))) o->config_path = s;
    if (!set->verdict && (s = var("PREFLIGHT_VERDICT"))) o->verdict_path = s;
    if (!set->root && (s = var("PREFLIGHT_ROOT"))) o->root = s;
    if (!set->env_file && cmd && strcmp(cmd, "env") == 0 && (s = var("PREFLIGHT_ENV_FILE")))
        o->env_file = s;
    if (!set->format && (s = var("PREFLIGHT_FORMAT")) &&
        parse_format("PREFLIGHT_FORMAT", s, &o->format) < 0)
        return PF_EXIT_USAGE;
    if (!set->strict && (s = var("PREFLIGHT_STRICT")) &&
        parse_bool("PREFLIGHT_STRICT", s, &o->strict) < 0)
        return PF_EXIT_USAGE;
    if (!set->verbose && (s = var("PREFLIGHT_VERBOSE")) &&
        parse_bool("PREFLIGHT_VERBOSE", s, &o->verbose) < 0)
        return PF_EXIT_USAGE;
    if (!set->timeout && (s = var("PREFLIGHT_TIMEOUT")) &&
        parse_timeout("PREFLIGHT_TIMEOUT", s, &o->timeout_s) < 0)
        return PF_EXIT_USAGE;
    if (!set->rank && (s = var("PREFLIGHT_RANK")) &&
        parse_int("PREFLIGHT_RANK", s, 0, 1 << 20, &o->identity.rank) < 0)
        return PF_EXIT_USAGE;
    if (!set->world && (s = var("PREFLIGHT_WORLD_SIZE")) &&
        parse_int("PREFLIGHT_WORLD_SIZE", s, 1, 1 << 20, &o->identity.world_size) < 0)
        return PF_EXIT_USAGE;
    if (!set->coord && (s = var("PREFLIGHT_COORDINATOR")) &&
        parse_coordinator("PREFLIGHT_COORDINATOR", s, &o->identity) < 0)
        return PF_EXIT_USAGE;
    if (!set->port && (s = var("PREFLIGHT_PORT")) &&
        parse_int("PREFLIGHT_PORT", s, 1, 65535, &o->identity.port) < 0)
        return PF_EXIT_USAGE;
    if ((s = var("PREFLIGHT_TOKEN"))) o->identity.token = s;
    /* `--verdict -` puts the YAML verdict on stdout: the human form or JSON cannot go there */
    if (o->verdict_path && strcmp(o->verdict_path, "-") == 0 &&
        (o->format == PF_FORMAT_HUMAN || o->format == PF_FORMAT_JSON))
        return pf_cli_usage_error(cmd,
                                  "%s - puts the YAML verdict on stdout, so %s %s cannot print "
                                  "there too (use --verdict FILE for the file and the %s)",
                                  set->verdict ? "--verdict" : "PREFLIGHT_VERDICT",
                                  set->format ? "--format" : "PREFLIGHT_FORMAT",
                                  o->format == PF_FORMAT_JSON ? "json" : "human",
                                  o->format == PF_FORMAT_JSON ? "JSON" : "human form");
    return -1;
}

/* The human form's width: COLUMNS when it is a number, else the terminal's, else 80. */
static int out_width(bool tty)
{
    const char *s = var("COLUMNS");
    char *end;
    long c = s ? strtol(s, &end, 10) : 0;
    if (s && !*end && c >= 20 && c <= 1000) return (int)c;
    struct winsize ws;
    if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

/* The positional arguments: the command, then what it takes. */
static int positionals(struct pf_cli *cli, int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const struct pf_cli_cmd *c = pf_cli_find(cli->cmd);
        if (!cli->cmd) {
            cli->cmd = a;
        } else if (c && c->args == PF_CLI_ARGS_MANY) {
            if (cli->nargs >= PF_CLI_MAX_ARGS)
                return pf_cli_usage_error(c->name, "%s: at most %d files (cat them into one)",
                                          c->name, PF_CLI_MAX_ARGS);
            cli->args[cli->nargs++] = a;
        } else if (c && c->args == PF_CLI_ARGS_ONE && !cli->arg) {
            cli->arg = a;
        } else {
            return pf_cli_usage_error(cli->cmd, "unexpected argument '%s'", a);
        }
    }
    return -1;
}

/* The command itself: help, an unknown one (with a did-you-mean), an option it does not
 * take. Returns -1 to go on. */
static int check_command(struct pf_cli *cli)
{
    const char *cmd = cli->cmd;
    const struct pf_cli_cmd *c = pf_cli_find(cmd);
    if (c && !c->fn) { /* help */
        if (cli->arg && !pf_cli_find(cli->arg)) {
            const char *near = pf_cli_suggest_command(cli->arg);
            if (near)
                return pf_cli_usage_error(NULL, "no command '%s' (did you mean '%s'?)", cli->arg,
                                          near);
            return pf_cli_usage_error(NULL, "no command '%s'", cli->arg);
        }
        pf_cli_help(stdout, cli->arg);
        return PF_EXIT_PASS;
    }
    if (!c) {
        const char *near = pf_cli_suggest_command(cmd);
        if (near)
            return pf_cli_usage_error(NULL, "unknown command '%s' (did you mean '%s'?)", cmd, near);
        return pf_cli_usage_error(NULL, "unknown command '%s'", cmd);
    }
    return -1;
}

/* Every option given must be one the command takes (help.c's option table, the same one its
 * help lists): one it would not use is refused, naming the commands that take it. */
static int options_of_command(const struct pf_cli *cli, const struct seen *set)
{
    const struct pf_cli_cmd *c = pf_cli_find(cli->cmd);
    if (!c || !c->fn) return -1;
    for (int i = 0; i < set->ngiven; i++) {
        unsigned groups = pf_cli_option_groups(set->given[i]);
        if (groups & c->group) continue;
        char which[256] = "";
        size_t n = 0;
        int k = 0, total = 0;
        for (size_t j = 0; j < pf_cli_ncmds; j++)
            total += (pf_cli_cmds[j].group & groups) != 0;
        for (size_t j = 0; j < pf_cli_ncmds && n < sizeof(which); j++)
            if (pf_cli_cmds[j].group & groups) {
                k++;
                n += (size_t)snprintf(which + n, sizeof(which) - n, "%s'preflight %s'",
                                      k == 1       ? ""
                                      : k == total ? " or "
                                                   : ", ",
                                      pf_cli_cmds[j].name);
            }
        if (k == 0)
            return pf_cli_usage_error(c->name, "'preflight %s' takes no option --%s", c->name,
                                      set->given[i]);
        return pf_cli_usage_error(c->name, "--%s is an option of %s, not of '%s'", set->given[i],
                                  which, c->name);
    }
    return -1;
}

/* The command, for messages, before getopt_long has moved the positionals. */
static const char *first_word(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') return argv[i];
        if (strcmp(argv[i], "--") == 0) return i + 1 < argc ? argv[i + 1] : NULL;
    }
    return NULL;
}

int pf_cli_parse(struct pf_cli *cli, struct pf_options *o, int argc, char **argv)
{
    memset(cli, 0, sizeof(*cli));
    struct seen set = {0};
    bool help = false, version = false;
    const char *cmd0 = first_word(argc, argv);
    opterr = 0;
    optind = 1;
    int c, li = -1;
    while ((c = getopt_long(argc, argv, ":hvf:", long_opts, &li)) != -1) {
        if (c == '?' || c == ':') return bad_option(cmd0, c, argv[optind - 1]);
        const char *name = c == 'v'   ? "verbose"
                           : c == 'f' ? "filename"
                           : li >= 0  ? long_opts[li].name
                                      : NULL;
        if (name && c != 'h' && c != O_VERSION && set.ngiven < PF_CLI_MAX_ARGS)
            set.given[set.ngiven++] = name;
        li = -1;
        int r = take(o, cli, &set, c, optarg, &help, &version);
        if (r >= 0) return r;
    }
    int r = positionals(cli, argc, argv, optind);
    if (r >= 0) return r;
    if (version) {
        pf_cli_version(stdout);
        return PF_EXIT_PASS;
    }
    if (help) {
        pf_cli_help(stdout, cli->cmd && pf_cli_find(cli->cmd) ? cli->cmd : cli->arg);
        return PF_EXIT_PASS;
    }
    if (!cli->cmd) {
        pf_cli_help(stderr, NULL);
        return PF_EXIT_USAGE;
    }
    r = check_command(cli);
    if (r >= 0) return r;
    r = options_of_command(cli, &set);
    if (r >= 0) return r;
    r = from_environment(o, &set, cli->cmd);
    if (r >= 0) return r;
    o->width = out_width(o->out_is_tty);
    const char *term = var("TERM");
    if (term && strcmp(term, "dumb") == 0) o->out_is_tty = false; /* no colour for dumb terminals */
    return -1;
}
