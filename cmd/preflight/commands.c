/* The command table: every subcommand of preflight, its function, its arguments and its help
 * (main.c looks a command up here; help.c renders the help from it). */
#include <string.h>

#include "cli.h"

#define NONE PF_CLI_ARGS_NONE
#define ONE PF_CLI_ARGS_ONE
#define MANY PF_CLI_ARGS_MANY

/* The commands: name, function, arguments, the message when the one it needs is missing,
 * options, then the help. */
const struct pf_cli_cmd pf_cli_cmds[] = {
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
    {"watch", pf_cmd_watch, ONE,
     "watch needs the shared folder of NCCL_DEBUG_FILE (preflight watch DIR)", G_WATCH,
     "preflight watch DIR [options]",
     "sidecar: the trainer's NCCL logs in DIR against the gate's verdict",
     "Follows every NCCL_DEBUG_FILE file in DIR (one per process: NCCL_DEBUG_FILE=DIR/nccl.%h.%p)\n"
     "as the trainer writes it and reports per process the network NCCL chose, its NICs and\n"
     "channels, GPUDirect RDMA and the NCCL version, compared with the gate's verdict\n"
     "DIR/verdict.yaml; and a stall at NCCL init (watch.stallSeconds). Each finding is "
     "a\n"
     "log line, the verdict DIR/watch.yaml, an Event on the pod (report.events) and\n"
     "metrics (report.pushgateway). Ends on SIGTERM, when the trainer's processes end, or after\n"
     "watch.windowSeconds (600); watch.onMismatch: stop ends the trainer after a failing "
     "finding.\n",
     "  preflight watch /run/preflight     # the chart's sidecar (watch.enabled)\n"
     "  preflight watch /tmp/nccl --config watch.yaml\n"},
    {"install", pf_cmd_install, ONE, "install needs a folder (preflight install DIR)", 0,
     "preflight install DIR", "copy this binary into DIR (hand it to the training image)",
     "Copies this binary to DIR/preflight (mode 0755, atomically), for an initContainer that\n"
     "hands it to the training container through an emptyDir.\n",
     "  preflight install /opt/preflight\n"},
    {"inject", pf_cmd_inject, ONE, NULL, G_INJECT,
     "preflight inject [-f FILE] [--watch] [--image IMAGE]",
     "add the preflight gate to a job's YAML (stdin to stdout)",
     "Reads Kubernetes YAML (FILE, -f FILE or stdin; a List or several documents) and writes it\n"
     "back with the preflight initContainer, its volumes and variables, the failure policy and,\n"
     "with --watch, the preflight-watch sidecar added to every pod template of a Job (Indexed),\n"
     "JobSet, StatefulSet, PyTorchJob, MPIJob, TrainingRuntime, LeaderWorkerSet or Volcano Job.\n"
     "Text is inserted: every field and comment stays as written (from an object read back\n"
     "from the API server, what the server wrote is removed); a second run changes\n"
     "nothing. What it cannot gate (a Deployment, an unknown kind, no pod template) is refused\n"
     "with the reason and nothing is written (exit 1). Hints (the headless Service a launcher\n"
     "does not create, the service account's RBAC) go to stderr.\n",
     "  kubectl get job t -o yaml | preflight inject | kubectl replace --force -f -\n"
     "  preflight inject -f jobset.yaml --watch > gated.yaml\n"
     "  preflight inject job.yaml --image registry.example.com/preflight:0.1.0\n"},
    {"report", pf_cmd_report, ONE,
     "report needs a verdict file (preflight report VERDICT.yaml --html FILE)", G_REPORT,
     "preflight report VERDICT --html FILE", "one self-contained HTML page of a run (link heatmap)",
     "Reads a YAML verdict (docs/verdict.md; rank 0's verdict of a run has every rank) and\n"
     "writes one HTML file that needs nothing else (no network, no script from elsewhere): the\n"
     "verdict and its culprits, a rank x rank heatmap of the probed link rates (a slow node\n"
     "shows as a cross, a slow link as one cell), the rails, this pod's checks and every\n"
     "rank's, in tables sorted by a click on a header. A file that is not a verdict is refused\n"
     "with the line (exit 2).\n",
     "  preflight report /run/preflight/verdict.yaml --html run.html\n"
     "  kubectl cp trainer-0:/run/preflight/verdict.yaml v.yaml -c trainer\n"
     "  preflight report v.yaml --html - > run.html\n"},
    {"version", pf_cmd_version, NONE, NULL, G_VERSION, "preflight version [--format yaml|json]",
     "version, build info, which optional libraries load here",
     "Prints the version, the build, the verdict schema, and whether libcuda, libnccl,\n"
     "libibverbs and libcurl load here (--version prints the first line only).\n",
     "  preflight version\n"
     "  preflight version --format json | jq -r .version\n"},
    {"help", NULL, ONE, NULL, 0, "preflight help [COMMAND]",
     "this overview, or a command's own help", "", "  preflight help run\n"},
};

const size_t pf_cli_ncmds = PF_ARRAY_LEN(pf_cli_cmds);
_Static_assert(PF_ARRAY_LEN(pf_cli_cmds) <= PF_CLI_CMDS_MAX, "PF_CLI_CMDS_MAX: too small");

const struct pf_cli_cmd *pf_cli_find(const char *name)
{
    for (size_t i = 0; name && i < pf_cli_ncmds; i++)
        if (strcmp(pf_cli_cmds[i].name, name) == 0) return &pf_cli_cmds[i];
    return NULL;
}
