/* identity: rank, world size and rank 0's address over tables (options, every launcher's
 * variables, labels and names), the pod names of a naming rule, host:port splitting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/identity/identity.h"
#include "../../../pkg/k8s/map.h"

#define DEFPORT 29400

/* ---- identity */

struct ident_case {
    const char *name;
    const char *env[6]; /* "KEY=VALUE", NULL-terminated */
    const char *host, *fqdn;
    enum pf_identity_pytorch_hint hint;
    int o_rank, o_world, o_port; /* -1/-1/0: not given */
    const char *o_coord;
    /* expected */
    int rc;
    int rank, world;
    const char *rank_from, *world_from;
    const char *coord, *coord_from;
    int port;
    enum pf_identity_naming naming;
    const char *prefix, *domain;
    const char *msg[3]; /* substrings of the error message */
};

static const struct ident_case ident_cases[] = {
    {.name = "Indexed Job: JOB_COMPLETION_INDEX wins over the hostname",
     .env = {"JOB_COMPLETION_INDEX=3", "WORLD_SIZE=8"},
     .host = "trainer-5",
     .rank = 3,
     .world = 8,
     .rank_from = "JOB_COMPLETION_INDEX",
     .world_from = "WORLD_SIZE",
     .coord = "trainer-0",
     .coord_from = "hostname and subdomain",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "trainer"},
    {.name = "JOB_COMPLETION_INDEX wins over RANK",
     .env = {"RANK=1", "JOB_COMPLETION_INDEX=2", "WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1"},
     .host = "box",
     .rank = 2,
     .world = 4,
     .rank_from = "JOB_COMPLETION_INDEX",
     .coord = "10.0.0.1",
     .coord_from = "MASTER_ADDR",
     .port = DEFPORT},
    {.name = "RANK when no index; MASTER_ADDR names rank 0",
     .env = {"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1"},
     .host = "box",
     .rank = 2,
     .world = 4,
     .rank_from = "RANK",
     .world_from = "WORLD_SIZE",
     .coord = "10.0.0.1",
     .coord_from = "MASTER_ADDR",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_NONE},
    {.name = "an empty variable counts as unset",
     .env = {"RANK=", "JOB_COMPLETION_INDEX=", "WORLD_SIZE=4"},
     .host = "trainer-2",
     .rank = 2,
     .world = 4,
     .rank_from = "hostname trainer-2",
     .coord = "trainer-0",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "trainer"},
    {.name = "StatefulSet ordinal with subdomain: rank 0's FQDN",
     .host = "trainer-3",
     .fqdn = "trainer-3.trainers.ml.svc.cluster.local",
     .o_world = 4,
     .rank = 3,
     .world = 4,
     .rank_from = "hostname trainer-3",
     .world_from = "--world-size (PREFLIGHT_WORLD_SIZE)",
     .coord = "trainer-0.trainers.ml.svc.cluster.local",
     .coord_from = "hostname and subdomain",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "trainer",
     .domain = "trainers.ml.svc.cluster.local"},
    {.name = "an FQDN with a trailing dot",
     .env = {"WORLD_SIZE=16"},
     .host = "trainer-15",
     .fqdn = "trainer-15.svc.ns.svc.cluster.local.",
     .rank = 15,
     .world = 16,
     .coord = "trainer-0.svc.ns.svc.cluster.local",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "trainer",
     .domain = "svc.ns.svc.cluster.local"},
    {.name = "an FQDN of another host is not a domain",
     .env = {"WORLD_SIZE=4"},
     .host = "trainer-1",
     .fqdn = "trainer-10.svc.ns.svc.cluster.local",
     .rank = 1,
     .world = 4,
     .coord = "trainer-0",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "trainer",
     .domain = ""},
    {.name = "JobSet: the pod index is the last ordinal",
     .env = {"WORLD_SIZE=4"},
     .host = "llm-workers-0-3",
     .fqdn = "llm-workers-0-3.llm.default.svc.cluster.local",
     .rank = 3,
     .world = 4,
     .coord = "llm-workers-0-0.llm.default.svc.cluster.local",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "llm-workers-0"},
    {.name = "PyTorchJob master is rank 0",
     .env = {"WORLD_SIZE=3"},
     .host = "bert-master-0",
     .rank = 0,
     .world = 3,
     .rank_from = "hostname bert-master-0",
     .coord = "bert-master-0",
     .coord_from = "PyTorchJob master name",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_PYTORCH,
     .prefix = "bert"},
    {.name = "PyTorchJob worker-0 is rank 1",
     .env = {"WORLD_SIZE=3"},
     .host = "bert-worker-0",
     .hint = PF_IDENTITY_PT_YES,
     .rank = 1,
     .world = 3,
     .coord = "bert-master-0",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_PYTORCH,
     .prefix = "bert"},
    {.name = "PyTorchJob worker-N is rank N+1; the master's name ignores the subdomain",
     .env = {"WORLD_SIZE=6"},
     .host = "my-job-worker-4",
     .fqdn = "my-job-worker-4.other.ns.svc.cluster.local",
     .rank = 5,
     .world = 6,
     .coord = "my-job-master-0",
     .coord_from = "PyTorchJob master name",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_PYTORCH,
     .prefix = "my-job"},
    {.name = "no Kubeflow labels: a -worker-N name is a plain ordinal",
     .env = {"WORLD_SIZE=3"},
     .host = "bert-worker-1",
     .hint = PF_IDENTITY_PT_NO,
     .rank = 1,
     .world = 3,
     .coord = "bert-worker-0",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "bert-worker"},
    {.name = "a -master-N other than 0 is a plain ordinal",
     .env = {"WORLD_SIZE=3"},
     .host = "db-master-2",
     .rank = 2,
     .world = 3,
     .coord = "db-master-0",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_ORDINAL,
     .prefix = "db-master"},
    {.name = "flags override the environment",
     .env = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=other", "JOB_COMPLETION_INDEX=0"},
     .host = "trainer-7",
     .o_rank = 5,
     .o_world = 8,
     .o_coord = "head:31000",
     .rank = 5,
     .world = 8,
     .rank_from = "--rank (PREFLIGHT_RANK)",
     .world_from = "--world-size (PREFLIGHT_WORLD_SIZE)",
     .coord = "head",
     .coord_from = "--coordinator (PREFLIGHT_COORDINATOR)",
     .port = 31000,
     .naming = PF_IDENTITY_NAMING_ORDINAL},
    {.name = "PREFLIGHT_WORLD_SIZE wins over WORLD_SIZE",
     .env = {"WORLD_SIZE=2"},
     .host = "trainer-4",
     .o_world = 6,
     .rank = 4,
     .world = 6,
     .world_from = "--world-size (PREFLIGHT_WORLD_SIZE)"},
    {.name = "MASTER_ADDR's port is torch's: ours comes from --port",
     .env = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=10.1.1.1:23456"},
     .host = "box",
     .o_port = 31234,
     .rank = 1,
     .world = 2,
     .coord = "10.1.1.1",
     .port = 31234},
    {.name = "MASTER_ADDR as [IPv6]:port",
     .env = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=[fd00::1]:29500"},
     .host = "box",
     .rank = 1,
     .world = 2,
     .coord = "fd00::1",
     .port = DEFPORT},
    {.name = "rank 0 without a name pattern needs no address",
     .env = {"RANK=0", "WORLD_SIZE=1"},
     .host = "localhost",
     .rank = 0,
     .world = 1,
     .coord = "",
     .port = DEFPORT,
     .naming = PF_IDENTITY_NAMING_NONE},
    /* errors: each message names what to fix */
    {.name = "world size missing",
     .host = "trainer-1",
     .rc = PF_EUSAGE,
     .msg = {"world size unknown", "PREFLIGHT_WORLD_SIZE", "WORLD_SIZE"}},
    {.name = "rank not below the world size",
     .env = {"RANK=4", "WORLD_SIZE=4"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"rank 4 (from RANK)", "world size 4 (from WORLD_SIZE)"}},
    {.name = "hostname ordinal not below the flag's world size",
     .host = "trainer-9",
     .o_world = 8,
     .rc = PF_EUSAGE,
     .msg = {"rank 9", "hostname trainer-9", "--world-size"}},
    {.name = "garbage RANK",
     .env = {"RANK=3x", "WORLD_SIZE=4"},
     .host = "trainer-1",
     .rc = PF_EUSAGE,
     .msg = {"RANK=3x", "non-negative integer"}},
    {.name = "negative JOB_COMPLETION_INDEX",
     .env = {"JOB_COMPLETION_INDEX=-1", "WORLD_SIZE=4"},
     .host = "trainer-1",
     .rc = PF_EUSAGE,
     .msg = {"JOB_COMPLETION_INDEX=-1"}},
    {.name = "RANK with a sign",
     .env = {"RANK=+1", "WORLD_SIZE=4"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"RANK=+1"}},
    {.name = "RANK out of range",
     .env = {"RANK=99999999999999999999", "WORLD_SIZE=4"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"RANK=99999999999999999999"}},
    {.name = "WORLD_SIZE zero",
     .env = {"RANK=0", "WORLD_SIZE=0"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"WORLD_SIZE=0", "positive integer"}},
    {.name = "WORLD_SIZE not a number",
     .env = {"RANK=0", "WORLD_SIZE=eight"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"WORLD_SIZE=eight"}},
    {.name = "no rank anywhere",
     .env = {"WORLD_SIZE=4"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"rank unknown", "\"box\"", "JOB_COMPLETION_INDEX"}},
    {.name = "a zero-padded ordinal is not one Kubernetes writes",
     .env = {"WORLD_SIZE=8"},
     .host = "node-007",
     .rc = PF_EUSAGE,
     .msg = {"rank unknown", "node-007"}},
    {.name = "rank > 0 and no way to find rank 0",
     .env = {"RANK=1", "WORLD_SIZE=2"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"rank 0's address unknown", "PREFLIGHT_COORDINATOR", "MASTER_ADDR"}},
    {.name = "MASTER_ADDR without a host",
     .env = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=:29500"},
     .host = "box",
     .rc = PF_EUSAGE,
     .msg = {"MASTER_ADDR", "expected HOST[:PORT]"}},
    {.name = "--coordinator with a bad port",
     .env = {"WORLD_SIZE=2"},
     .host = "trainer-1",
     .o_coord = "head:99999",
     .rc = PF_EUSAGE,
     .msg = {"--coordinator", "1..65535"}},
    {.name = "--coordinator with an unclosed bracket",
     .env = {"WORLD_SIZE=2"},
     .host = "trainer-1",
     .o_coord = "[fd00::1:80",
     .rc = PF_EUSAGE,
     .msg = {"--coordinator", "missing ']'"}},
};

/* Every launcher with the names, variables and labels it really gives a pod (docs/launchers.md
 * names the source of each). labels: a downward-API labels file; NULL: not mounted. */
struct launcher_case {
    const char *name;
    const char *host, *fqdn;
    const char *env[8];
    const char *labels;
    const char *annotations;
    int o_world;
    const char *o_coord;
    /* expected */
    int rc;
    const char *rule;
    int rank, world;
    const char *coord;
    bool not_member;
    const char *pod0, *pod_last; /* names of rank 0 and of rank world-1 ("" none) */
    const char *msg[2];
};

#define JS_LABELS(js, rj, R, G, ji, gi)                                                            \
    "jobset.sigs.k8s.io/global-replicas=\"" G "\"\n"                                               \
    "jobset.sigs.k8s.io/job-global-index=\"" gi "\"\n"                                             \
    "jobset.sigs.k8s.io/job-index=\"" ji "\"\n"                                                    \
    "jobset.sigs.k8s.io/jobset-name=\"" js "\"\n"                                                  \
    "jobset.sigs.k8s.io/replicatedjob-name=\"" rj "\"\n"                                           \
    "jobset.sigs.k8s.io/replicatedjob-replicas=\"" R "\""

static const struct launcher_case launcher_cases[] = {
    {.name = "JobSet, 1 replicatedJob x 2 replicas: myjs-workers-1-3 is rank 1 x 4 + 3",
     .host = "myjs-workers-1-3",
     .fqdn = "myjs-workers-1-3.myjs.ml.svc.cluster.local",
     .env = {"JOB_COMPLETION_INDEX=3"},
     .labels = JS_LABELS("myjs", "workers", "2", "2", "1", "1"),
     .o_world = 8,
     .rule = "jobset",
     .rank = 7,
     .world = 8,
     .coord = "myjs-workers-0-0.myjs.ml.svc.cluster.local",
     .pod0 = "myjs-workers-0-0",
     .pod_last = "myjs-workers-1-3"},
    {.name = "JobSet without the FQDN: rank 0 in the JobSet's default subdomain",
     .host = "myjs-workers-1-0",
     .env = {"JOB_COMPLETION_INDEX=0"},
     .labels = JS_LABELS("myjs", "workers", "2", "2", "1", "1"),
     .o_world = 4,
     .rule = "jobset",
     .rank = 2,
     .world = 4,
     .coord = "myjs-workers-0-0.myjs",
     .pod_last = "myjs-workers-1-1"},
    {.name = "JobSet, 2 replicatedJobs x 2 replicas: the second one needs the coordinator label",
     .host = "js2-beta-1-1",
     .env = {"JOB_COMPLETION_INDEX=1"},
     .labels = JS_LABELS("js2", "beta", "2", "4", "1", "3"),
     .o_world = 8,
     .rc = PF_EUSAGE,
     .msg = {"rank 0's address unknown", "spec.coordinator"}},
    {.name = "JobSet, 2 replicatedJobs: spec.coordinator's label names rank 0",
     .host = "js2-beta-1-1",
     .env = {"JOB_COMPLETION_INDEX=1"},
     .labels = "jobset.sigs.k8s.io/coordinator=\"js2-alpha-0-0.js2\"\n" JS_LABELS(
         "js2", "beta", "2", "4", "1", "3"),
     .o_world = 8,
     .rule = "jobset",
     .rank = 7,
     .world = 8,
     .coord = "js2-alpha-0-0.js2",
     .pod0 = ""},
    {.name = "JobSet of several Jobs without a world size: the global rank needs it",
     .host = "myjs-workers-1-3",
     .env = {"JOB_COMPLETION_INDEX=3"},
     .labels = JS_LABELS("myjs", "workers", "2", "2", "1", "1"),
     .rc = PF_EUSAGE,
     .msg = {"rank unknown", "PREFLIGHT_WORLD_SIZE"}},
    {.name = "JobSet of Jobs of unequal size",
     .host = "myjs-workers-1-3",
     .env = {"JOB_COMPLETION_INDEX=3"},
     .labels = JS_LABELS("myjs", "workers", "2", "2", "1", "1"),
     .o_world = 7,
     .rc = PF_EUSAGE,
     .msg = {"not of one size", "PREFLIGHT_RANK"}},
    {.name = "JobSet name without labels: ambiguous with an Indexed Job, never guessed",
     .host = "myjs-workers-1-3",
     .env = {"JOB_COMPLETION_INDEX=3", "WORLD_SIZE=8"},
     .rc = PF_EUSAGE,
     .msg = {"Job 1 of a JobSet", "podinfo labels"}},
    {.name = "JobSet name without labels, Job 0: JobSet and Indexed Job agree",
     .host = "llm-workers-0-3",
     .fqdn = "llm-workers-0-3.llm.default.svc.cluster.local",
     .env = {"JOB_COMPLETION_INDEX=3", "WORLD_SIZE=4"},
     .rule = "indexed-job",
     .rank = 3,
     .world = 4,
     .coord = "llm-workers-0-0.llm.default.svc.cluster.local"},
    {.name = "TrainJob with envInjection: PET_* (init containers too)",
     .host = "tj-node-0-2",
     .env = {"PET_NNODES=4", "PET_NODE_RANK=2", "PET_MASTER_ADDR=tj-node-0-0.tj",
             "PET_MASTER_PORT=29500", "PET_NPROC_PER_NODE=8", "JOB_COMPLETION_INDEX=2"},
     .labels = JS_LABELS("tj", "node", "1", "3", "0", "2"),
     .rule = "trainjob",
     .rank = 2,
     .world = 4,
     .coord = "tj-node-0-0.tj",
     .pod0 = "tj-node-0-0",
     .pod_last = "tj-node-0-3"},
    {.name = "TrainJob without PET_*: initializer Jobs before node are no ranks",
     .host = "tj-node-0-3",
     .env = {"JOB_COMPLETION_INDEX=3"},
     .labels = JS_LABELS("tj", "node", "1", "3", "0", "2"),
     .o_world = 4,
     .rule = "trainjob",
     .rank = 3,
     .world = 4,
     .coord = "tj-node-0-0.tj",
     .pod_last = "tj-node-0-3"},
    {.name = "torchrun's PET_* written by hand, elastic range of one size",
     .host = "box",
     .env = {"PET_NNODES=2:2", "PET_NODE_RANK=1", "PET_MASTER_ADDR=head.ml:29500"},
     .rule = "torchrun",
     .rank = 1,
     .world = 2,
     .coord = "head.ml"},
    {.name = "PET_NNODES as an elastic range is no pod count",
     .host = "box",
     .env = {"PET_NNODES=1:4", "PET_NODE_RANK=1", "PET_MASTER_ADDR=head"},
     .rc = PF_EUSAGE,
     .msg = {"PET_NNODES=1:4", "elastic"}},
    {.name = "PyTorchJob initContainer: no RANK/WORLD_SIZE, labels give the rank",
     .host = "bert-worker-2",
     .labels = "training.kubeflow.org/job-name=\"bert\"\n"
               "training.kubeflow.org/operator-name=\"pytorchjob-controller\"\n"
               "training.kubeflow.org/replica-index=\"2\"\n"
               "training.kubeflow.org/replica-type=\"worker\"",
     .o_world = 4,
     .rule = "pytorchjob",
     .rank = 3,
     .world = 4,
     .coord = "bert-master-0",
     .pod0 = "bert-master-0",
     .pod_last = "bert-worker-2"},
    {.name = "PyTorchJob initContainer without PREFLIGHT_WORLD_SIZE",
     .host = "bert-worker-2",
     .labels = "training.kubeflow.org/operator-name=\"pytorchjob-controller\"",
     .rc = PF_EUSAGE,
     .msg = {"main containers only", "PREFLIGHT_WORLD_SIZE"}},
    {.name = "PyTorchJob main container: WORLD_SIZE counts processes, PET_NNODES pods",
     .host = "bert-worker-0",
     .env = {"RANK=1", "WORLD_SIZE=16", "PET_NNODES=2", "PET_NPROC_PER_NODE=8",
             "MASTER_ADDR=bert-master-0", "MASTER_PORT=23456"},
     .labels = "training.kubeflow.org/operator-name=\"pytorchjob-controller\"\n"
               "training.kubeflow.org/replica-index=\"0\"\n"
               "training.kubeflow.org/replica-type=\"worker\"",
     .rule = "pytorchjob",
     .rank = 1,
     .world = 2,
     .coord = "bert-master-0"},
    {.name = "MPIJob worker with labels: rank i, rank 0 is worker-0, not a master",
     .host = "myjob-worker-0",
     .fqdn = "myjob-worker-0.myjob.ml.svc.cluster.local",
     .labels = "training.kubeflow.org/job-name=\"myjob\"\n"
               "training.kubeflow.org/job-role=\"worker\"\n"
               "training.kubeflow.org/operator-name=\"mpi-operator\"\n"
               "training.kubeflow.org/replica-index=\"0\"",
     .o_world = 2,
     .rule = "mpijob",
     .rank = 0,
     .world = 2,
     .pod0 = "myjob-worker-0",
     .pod_last = "myjob-worker-1"},
    {.name = "MPIJob worker-3 without labels: the subdomain <job> tells MPIJob from PyTorchJob",
     .host = "myjob-worker-3",
     .fqdn = "myjob-worker-3.myjob.ml.svc.cluster.local",
     .o_world = 4,
     .rule = "mpijob",
     .rank = 3,
     .world = 4,
     .coord = "myjob-worker-0.myjob.ml.svc.cluster.local"},
    {.name = "MPIJob with runLauncherAsWorker: worker i is rank i+1, the launcher rank 0",
     .host = "myjob-worker-1",
     .fqdn = "myjob-worker-1.myjob.ml.svc.cluster.local",
     .labels = "training.kubeflow.org/job-role=\"worker\"\n"
               "training.kubeflow.org/operator-name=\"mpi-operator\"\n"
               "training.kubeflow.org/replica-index=\"2\"",
     .o_world = 3,
     .rule = "mpijob",
     .rank = 2,
     .world = 3,
     .coord = "myjob-launcher.myjob.ml.svc.cluster.local",
     .pod0 = "myjob-launcher",
     .pod_last = "myjob-worker-1"},
    {.name = "MPIJob launcher: no rank of the all-reduce",
     .host = "myjob-launcher",
     .fqdn = "myjob-launcher.myjob.ml.svc.cluster.local",
     .labels = "training.kubeflow.org/job-role=\"launcher\"\n"
               "training.kubeflow.org/operator-name=\"mpi-operator\"",
     .rule = "mpijob",
     .not_member = true},
    {.name = "MPIJob worker without a world size",
     .host = "myjob-worker-1",
     .labels = "training.kubeflow.org/operator-name=\"mpi-operator\"",
     .rc = PF_EUSAGE,
     .msg = {"MPIJob", "PREFLIGHT_WORLD_SIZE"}},
    {.name = "Volcano Job, one task: VC_TASK_INDEX, VC_WORKER_NUM, VC_WORKER_HOSTS",
     .host = "vcjob-worker-2",
     .env = {"VC_TASK_INDEX=2", "VK_TASK_INDEX=2", "VC_WORKER_NUM=4",
             "VC_WORKER_HOSTS=vcjob-worker-0.vcjob,vcjob-worker-1.vcjob,vcjob-worker-2.vcjob,"
             "vcjob-worker-3.vcjob"},
     .rule = "volcano",
     .rank = 2,
     .world = 4,
     .coord = "vcjob-worker-0.vcjob",
     .pod_last = "vcjob-worker-3"},
    {.name = "Volcano Job with a dashed task name",
     .host = "vc-gpu-workers-1",
     .env = {"VC_TASK_INDEX=1", "VC_GPU_WORKERS_NUM=2", "VC_GPU_WORKERS_HOSTS=vc-gpu-workers-0.vc"},
     .labels = "volcano.sh/job-name=\"vc\"\nvolcano.sh/task-spec=\"gpu-workers\"",
     .rule = "volcano",
     .rank = 1,
     .world = 2,
     .coord = "vc-gpu-workers-0.vc"},
    {.name = "Volcano Job master + worker: ranks across tasks are never guessed",
     .host = "vcjob-worker-0",
     .env = {"VC_TASK_INDEX=0", "VC_MASTER_NUM=1", "VC_WORKER_NUM=3"},
     .rc = PF_EUSAGE,
     .msg = {"MASTER", "PREFLIGHT_RANK"}},
    {.name = "Volcano mpi plugin master: a launcher",
     .host = "vcjob-master-0",
     .env = {"VC_TASK_INDEX=0", "VC_MASTER_NUM=1", "VC_WORKER_NUM=3", "MPI_HOST=a,b,c"},
     .rule = "volcano",
     .not_member = true},
    {.name = "LeaderWorkerSet worker: LWS_* in init containers too",
     .host = "vllm-1-2",
     .env = {"LWS_LEADER_ADDRESS=vllm-1.vllm.default", "LWS_GROUP_SIZE=4", "LWS_WORKER_INDEX=2"},
     .rule = "lws",
     .rank = 2,
     .world = 4,
     .coord = "vllm-1.vllm.default",
     .pod0 = "vllm-1",
     .pod_last = "vllm-1-3"},
    {.name = "LeaderWorkerSet leader is rank 0",
     .host = "vllm-1",
     .env = {"LWS_LEADER_ADDRESS=vllm-1.vllm.default", "LWS_GROUP_SIZE=4", "LWS_WORKER_INDEX=0"},
     .rule = "lws",
     .rank = 0,
     .world = 4},
    {.name = "StatefulSet with its labels",
     .host = "trainer-3",
     .fqdn = "trainer-3.trainers.ml.svc.cluster.local",
     .labels =
         "apps.kubernetes.io/pod-index=\"3\"\nstatefulset.kubernetes.io/pod-name=\"trainer-3\"",
     .o_world = 4,
     .rule = "statefulset",
     .rank = 3,
     .world = 4,
     .coord = "trainer-0.trainers.ml.svc.cluster.local"},
    {.name = "Indexed Job with its job-name label",
     .host = "train-2",
     .env = {"JOB_COMPLETION_INDEX=2"},
     .labels =
         "batch.kubernetes.io/job-completion-index=\"2\"\nbatch.kubernetes.io/job-name=\"train\"",
     .o_world = 3,
     .rule = "indexed-job",
     .rank = 2,
     .world = 3,
     .coord = "train-0"},
    {.name = "flags win over a launcher's variables",
     .host = "vllm-1-2",
     .env = {"LWS_LEADER_ADDRESS=vllm-1.vllm.default", "LWS_GROUP_SIZE=4", "LWS_WORKER_INDEX=2"},
     .o_world = 8,
     .o_coord = "other:31000",
     .rule = "lws",
     .rank = 2,
     .world = 8,
     .coord = "other"},
};

static void map_of(struct pf_k8s_map *m, const char *text)
{
    memset(m, 0, sizeof(*m));
    if (text) assert_int_equal(pf_k8s_map_parse(m, "labels", text, strlen(text)), 0);
}

static void test_identify_launchers(void **state)
{
    (void)state;
    for (size_t k = 0; k < PF_ARRAY_LEN(launcher_cases); k++) {
        const struct launcher_case *tc = &launcher_cases[k];
        print_message("launcher: %s\n", tc->name);
        struct pf_env env = {0};
        for (int i = 0; i < 8 && tc->env[i]; i++) {
            const char *eq = strchr(tc->env[i], '=');
            char key[64];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - tc->env[i]), tc->env[i]);
            pf_env_set(&env, key, eq + 1, "test");
        }
        struct pf_k8s_map labels, annotations;
        map_of(&labels, tc->labels);
        map_of(&annotations, tc->annotations);
        struct pf_identity_podinfo pi = {.hostname = tc->host,
                                         .fqdn = tc->fqdn,
                                         .labels = tc->labels ? &labels : NULL,
                                         .annotations = tc->annotations ? &annotations : NULL};
        struct pf_identity_opts o = {.rank = -1, .world_size = tc->o_world ? tc->o_world : -1};
        if (tc->o_coord) snprintf(o.coordinator, sizeof(o.coordinator), "%s", tc->o_coord);
        struct pf_identity id;
        int rc = pf_identity_derive_pod(&id, &o, &env, &pi, DEFPORT);
        if (tc->rc) {
            assert_int_equal(rc, tc->rc);
            for (int i = 0; i < 2 && tc->msg[i]; i++)
                if (!strstr(pf_err_msg(), tc->msg[i]))
                    fail_msg("'%s' not in: %s", tc->msg[i], pf_err_msg());
        } else {
            if (rc != 0) fail_msg("%s: %s", tc->name, pf_err_msg());
            assert_string_equal(id.rule, tc->rule);
            assert_true(id.explain[0] != '\0');
            assert_true(id.nfrom > 0);
            assert_int_equal(id.member, !tc->not_member);
            if (!tc->not_member) {
                assert_int_equal(id.rank, tc->rank);
                assert_int_equal(id.world_size, tc->world);
            }
            if (tc->coord) assert_string_equal(id.coordinator, tc->coord);
            char name[300];
            if (tc->pod0) {
                pf_identity_pod_name(name, sizeof(name), &id, 0);
                assert_string_equal(name, tc->pod0);
            }
            if (tc->pod_last) {
                pf_identity_pod_name(name, sizeof(name), &id, tc->world - 1);
                assert_string_equal(name, tc->pod_last);
            }
        }
        pf_k8s_map_free(&labels);
        pf_k8s_map_free(&annotations);
        pf_env_free(&env);
    }
}

static void test_identify_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(ident_cases); i++) {
        const struct ident_case *tc = &ident_cases[i];
        print_message("identify: %s\n", tc->name);
        struct pf_env env = {0};
        for (int k = 0; k < 6 && tc->env[k]; k++) {
            char kv[128];
            snprintf(kv, sizeof(kv), "%s", tc->env[k]);
            char *eq = strchr(kv, '=');
            assert_non_null(eq);
            *eq = '\0';
            pf_env_set(&env, kv, eq + 1, "environment");
        }
        struct pf_identity_opts o = {.rank = -1, .world_size = -1};
        if (tc->o_rank) o.rank = tc->o_rank;
        if (tc->o_world) o.world_size = tc->o_world;
        o.port = tc->o_port;
        if (tc->o_coord) snprintf(o.coordinator, sizeof(o.coordinator), "%s", tc->o_coord);
        struct pf_identity id;
        pf_err_clear();
        int rc = pf_identity_derive(&id, &o, &env, tc->host, tc->fqdn, tc->hint, DEFPORT);
        if (rc != tc->rc) print_message("  got rc %d: %s\n", rc, pf_err_msg());
        assert_int_equal(rc, tc->rc);
        if (rc < 0) {
            for (int k = 0; k < 3 && tc->msg[k]; k++) {
                if (!strstr(pf_err_msg(), tc->msg[k]))
                    print_message("  message \"%s\" lacks \"%s\"\n", pf_err_msg(), tc->msg[k]);
                assert_non_null(strstr(pf_err_msg(), tc->msg[k]));
            }
        } else {
            assert_int_equal(id.rank, tc->rank);
            assert_int_equal(id.world_size, tc->world);
            if (tc->rank_from) assert_string_equal(id.rank_from, tc->rank_from);
            if (tc->world_from) assert_string_equal(id.world_from, tc->world_from);
            if (tc->coord) assert_string_equal(id.coordinator, tc->coord);
            if (tc->coord_from) assert_string_equal(id.coord_from, tc->coord_from);
            if (tc->port) assert_int_equal(id.port, tc->port);
            if (tc->coord || tc->naming) assert_int_equal(id.naming, tc->naming);
            if (tc->prefix) assert_string_equal(id.prefix, tc->prefix);
            if (tc->domain) assert_string_equal(id.domain, tc->domain);
        }
        pf_env_free(&env);
    }
}

static void test_identify_without_env_or_opts(void **state)
{
    (void)state;
    struct pf_identity id;
    /* no env, no opts: nothing to go on but the hostname, and no world size */
    assert_int_equal(pf_identity_derive(&id, NULL, NULL, "trainer-2", NULL, 0, DEFPORT), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "world size unknown"));
    assert_int_equal(pf_identity_derive(&id, NULL, NULL, NULL, NULL, 0, DEFPORT), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "rank unknown"));
}

static void test_pod_name(void **state)
{
    (void)state;
    struct pf_identity id = {0};
    char s[64];
    id.naming = PF_IDENTITY_NAMING_ORDINAL;
    snprintf(id.prefix, sizeof(id.prefix), "trainer");
    pf_identity_pod_name(s, sizeof(s), &id, 5);
    assert_string_equal(s, "trainer-5");
    pf_identity_pod_name(s, sizeof(s), &id, 0);
    assert_string_equal(s, "trainer-0");
    pf_identity_pod_name(s, sizeof(s), &id, -1);
    assert_string_equal(s, "");
    /* too small to hold the name: empty rather than cut */
    pf_identity_pod_name(s, 6, &id, 12);
    assert_string_equal(s, "");

    id.naming = PF_IDENTITY_NAMING_PYTORCH;
    snprintf(id.prefix, sizeof(id.prefix), "bert");
    pf_identity_pod_name(s, sizeof(s), &id, 0);
    assert_string_equal(s, "bert-master-0");
    pf_identity_pod_name(s, sizeof(s), &id, 1);
    assert_string_equal(s, "bert-worker-0");
    pf_identity_pod_name(s, sizeof(s), &id, 7);
    assert_string_equal(s, "bert-worker-6");

    id.naming = PF_IDENTITY_NAMING_NONE;
    pf_identity_pod_name(s, sizeof(s), &id, 3);
    assert_string_equal(s, "");

    /* names derived by identify round-trip to the hostname they came from */
    static const char *const hosts[] = {"trainer-3", "llm-w-1-7", "bert-master-0", "bert-worker-4"};
    for (size_t i = 0; i < PF_ARRAY_LEN(hosts); i++) {
        struct pf_identity_opts o = {.rank = -1, .world_size = 100};
        assert_int_equal(pf_identity_derive(&id, &o, NULL, hosts[i], NULL, 0, DEFPORT), 0);
        pf_identity_pod_name(s, sizeof(s), &id, id.rank);
        assert_string_equal(s, hosts[i]);
    }
}

/* ---- host:port */

struct hp_case {
    const char *text;
    int rc;
    const char *host;
    int port; /* expected port; 7 means "left alone" */
};

static const struct hp_case hp_cases[] = {
    {"head", 0, "head", 7},
    {"head:29400", 0, "head", 29400},
    {"10.0.0.1:1", 0, "10.0.0.1", 1},
    {"head.svc.cluster.local:65535", 0, "head.svc.cluster.local", 65535},
    {"[fd00::1]:8080", 0, "fd00::1", 8080},
    {"[fd00::1]", 0, "fd00::1", 7},
    {"fd00::1", 0, "fd00::1", 7},
    {"::1", 0, "::1", 7},
    {"fe80::1%eth0", 0, "fe80::1%eth0", 7},
    {"head:0", PF_EINVAL, NULL, 0},
    {"head:65536", PF_EINVAL, NULL, 0},
    {"head:", PF_EINVAL, NULL, 0},
    {"head:http", PF_EINVAL, NULL, 0},
    {"head:-1", PF_EINVAL, NULL, 0},
    {"head: 80", PF_EINVAL, NULL, 0},
    {"[fd00::1]:", PF_EINVAL, NULL, 0},
    {"[fd00::1]80", PF_EINVAL, NULL, 0},
    {"[fd00::1", PF_EINVAL, NULL, 0},
    {"[]:80", PF_EINVAL, NULL, 0},
    {":80", PF_EINVAL, NULL, 0},
    {"", PF_EINVAL, NULL, 0},
};

/* The job each launcher's labels name (docs/launchers.md, "The job"), as a JOIN carries it,
 * and which pairs are shown to be two jobs */
static void test_job_of(void **state)
{
    (void)state;
    static const struct {
        const char *name, *env[3], *labels, *text;
    } cases[] = {
        {"nothing", {"POD_NAMESPACE=ml"}, NULL, "unknown"},
        {"PREFLIGHT_JOB wins",
         {"PREFLIGHT_JOB=exp-17", "POD_NAMESPACE=ml"},
         "batch.kubernetes.io/job-name=\"t\"",
         "run ml/exp-17"},
        {"JobSet before its child Job",
         {"POD_NAMESPACE=ml"},
         "jobset.sigs.k8s.io/jobset-name=\"js\"\njobset.sigs.k8s.io/jobset-uid=\"u1\"\n"
         "batch.kubernetes.io/job-name=\"js-w-0\"\nbatch.kubernetes.io/controller-uid=\"u2\"",
         "JobSet ml/js (uid u1)"},
        {"Indexed Job",
         {"POD_NAMESPACE=ml"},
         "batch.kubernetes.io/job-name=\"train\"\nbatch.kubernetes.io/controller-uid=\"u3\"",
         "Job ml/train (uid u3)"},
        {"Job, the older labels",
         {NULL},
         "job-name=\"train\"\ncontroller-uid=\"u4\"",
         "Job train (uid u4)"},
        {"LeaderWorkerSet: a group",
         {"POD_NAMESPACE=ml"},
         "leaderworkerset.sigs.k8s.io/name=\"vllm\"\nleaderworkerset.sigs.k8s.io/group-index=\"2\"",
         "LeaderWorkerSet ml/vllm group 2"},
        {"Volcano",
         {NULL},
         "volcano.sh/job-name=\"vj\"\nvolcano.sh/job-namespace=\"team\"",
         "Volcano Job team/vj"},
        {"PyTorchJob",
         {"POD_NAMESPACE=ml"},
         "training.kubeflow.org/job-name=\"pj\"\ntraining.kubeflow.org/operator-name=\"pytorchjob-"
         "controller\"",
         "PyTorchJob ml/pj"},
        {"StatefulSet",
         {"POD_NAMESPACE=ml"},
         "statefulset.kubernetes.io/pod-name=\"db-3\"",
         "StatefulSet ml/db"},
    };
    for (size_t k = 0; k < PF_ARRAY_LEN(cases); k++) {
        struct pf_env env = {0};
        for (int i = 0; i < 3 && cases[k].env[i]; i++) {
            const char *eq = strchr(cases[k].env[i], '=');
            char key[64];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - cases[k].env[i]), cases[k].env[i]);
            pf_env_set(&env, key, eq + 1, "test");
        }
        struct pf_k8s_map labels;
        map_of(&labels, cases[k].labels);
        struct pf_identity_podinfo pi = {.hostname = "h",
                                         .labels = cases[k].labels ? &labels : NULL};
        struct pf_identity_job j;
        pf_identity_job_of(&j, &env, &pi);
        char t[512];
        pf_identity_job_text(t, sizeof(t), &j);
        if (strcmp(t, cases[k].text) != 0)
            fail_msg("%s: \"%s\", expected \"%s\"", cases[k].name, t, cases[k].text);
        assert_true(cases[k].labels == NULL || k == 1 || j.from[0]);
        pf_k8s_map_free(&labels);
        pf_env_free(&env);
    }
    struct pf_identity_job a = {.kind = "Job", .ns = "ml", .name = "t", .uid = "u1"};
    struct pf_identity_job b = a, unknown = {0}, run = {.kind = "run", .name = "t"};
    assert_false(pf_identity_job_other(&a, &b));
    pf_strcpy(b.uid, sizeof(b.uid), "u2"); /* re-created under the same name */
    assert_true(pf_identity_job_other(&a, &b));
    b.uid[0] = '\0'; /* uid unknown on one side: the name and namespace agree */
    assert_false(pf_identity_job_other(&a, &b));
    pf_strcpy(b.ns, sizeof(b.ns), "dev");
    assert_true(pf_identity_job_other(&a, &b));
    assert_false(pf_identity_job_other(&a, &unknown));
    assert_false(pf_identity_job_other(&unknown, &a));
    assert_false(pf_identity_job_other(&a, &run)); /* named another way: no proof */
}

/* The label selector that lists a job's pods (rendezvous.explainMissing), from the pod's own
 * labels only: the uid label first, a value no label may hold is no selector */
static void test_selector(void **state)
{
    (void)state;
    static const struct {
        const char *name, *labels, *annotations, *want;
    } cases[] = {
        {"no labels file", NULL, NULL, ""},
        {"JobSet's uid before its child Job's",
         "jobset.sigs.k8s.io/jobset-name=\"js\"\njobset.sigs.k8s.io/jobset-uid=\"u-1\"\n"
         "batch.kubernetes.io/job-name=\"js-w-0\"\nbatch.kubernetes.io/controller-uid=\"u2\"",
         NULL, "jobset.sigs.k8s.io/jobset-uid=u-1"},
        {"Indexed Job: controller-uid",
         "batch.kubernetes.io/job-name=\"train\"\n"
         "batch.kubernetes.io/controller-uid=\"5c3b\"",
         NULL, "batch.kubernetes.io/controller-uid=5c3b"},
        {"Job, the older labels", "job-name=\"train\"", NULL, "job-name=train"},
        {"LWS: name and group",
         "leaderworkerset.sigs.k8s.io/name=\"vllm\"\n"
         "leaderworkerset.sigs.k8s.io/group-index=\"2\"",
         NULL, "leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/group-index=2"},
        {"LWS without its group: no selector", "leaderworkerset.sigs.k8s.io/name=\"vllm\"", NULL,
         ""},
        {"Volcano", "volcano.sh/job-name=\"vj\"", NULL, "volcano.sh/job-name=vj"},
        {"Kubeflow", "training.kubeflow.org/job-name=\"pj\"", NULL,
         "training.kubeflow.org/job-name=pj"},
        {"StatefulSet: nothing of its own", "statefulset.kubernetes.io/pod-name=\"db-3\"", NULL,
         ""},
        {"an annotation is no label", "app=\"x\"", "batch.kubernetes.io/job-name=\"train\"", ""},
        {"a value a label cannot hold", "job-name=\"a,b=c\"", NULL, ""},
    };
    for (size_t k = 0; k < PF_ARRAY_LEN(cases); k++) {
        struct pf_k8s_map labels, ann;
        map_of(&labels, cases[k].labels);
        map_of(&ann, cases[k].annotations);
        struct pf_identity_podinfo pi = {.hostname = "h",
                                         .labels = cases[k].labels ? &labels : NULL,
                                         .annotations = cases[k].annotations ? &ann : NULL};
        char sel[600] = "junk";
        pf_identity_selector(sel, sizeof(sel), &pi);
        if (strcmp(sel, cases[k].want) != 0)
            fail_msg("%s: \"%s\", expected \"%s\"", cases[k].name, sel, cases[k].want);
        pf_k8s_map_free(&labels);
        pf_k8s_map_free(&ann);
    }
}

static void test_split_hostport(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(hp_cases); i++) {
        const struct hp_case *tc = &hp_cases[i];
        char host[64] = "unchanged";
        int port = 7;
        int rc = pf_identity_split_hostport(host, sizeof(host), &port, tc->text);
        if (rc != tc->rc) print_message("split \"%s\": rc %d (%s)\n", tc->text, rc, pf_err_msg());
        assert_int_equal(rc, tc->rc);
        if (rc == 0) {
            assert_string_equal(host, tc->host);
            assert_int_equal(port, tc->port);
        } else {
            /* the message quotes the input; nothing is written on failure */
            assert_non_null(strstr(pf_err_msg(), tc->text));
            assert_string_equal(host, "unchanged");
            assert_int_equal(port, 7);
        }
    }
    char small[5];
    int port = 0;
    assert_int_equal(pf_identity_split_hostport(small, sizeof(small), &port, "hostname:80"),
                     PF_ETOOBIG);
    assert_int_equal(pf_identity_split_hostport(small, sizeof(small), &port, NULL), PF_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identify_table),
        cmocka_unit_test(test_identify_launchers),
        cmocka_unit_test(test_identify_without_env_or_opts),
        cmocka_unit_test(test_pod_name),
        cmocka_unit_test(test_split_hostport),
        cmocka_unit_test(test_job_of),
        cmocka_unit_test(test_selector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
