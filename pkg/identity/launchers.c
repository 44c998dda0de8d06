/* The launcher rules: what each launcher gives a pod (variables, labels, annotations, names),
 * and how rank, world size (a count of pods) and rank 0's address follow from it. Every fact
 * here is from the launcher's own source, named at each rule; docs/launchers.md has them all. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_rule(struct pf_identity_guess *g, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_rule(struct pf_identity_guess *g, const char *rule, const char *fmt, ...)
{
    pf_strcpy(g->id->rule, sizeof(g->id->rule), rule);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->id->explain, sizeof(g->id->explain), fmt, ap);
    va_end(ap);
}

static void missing(char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void missing(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, n, fmt, ap);
    va_end(ap);
}
#define RANK_MISSING(g, ...) missing((g)->rank_missing, sizeof((g)->rank_missing), __VA_ARGS__)
#define WORLD_MISSING(g, ...) missing((g)->world_missing, sizeof((g)->world_missing), __VA_ARGS__)
#define COORD_MISSING(g, ...) missing((g)->coord_missing, sizeof((g)->coord_missing), __VA_ARGS__)

/* A count from a variable ("NAME") or a label ("label NAME"): PF_EUSAGE naming it when it is
 * not a number; positive: 0 is refused too. */
static int count_of(long *out, const char *what, const char *s, bool positive)
{
    if (pf_identity_parse_count(s, out) < 0 || (positive && *out < 1))
        return pf_err_set(PF_EUSAGE, "%s=%s: expected a %s integer", what, s,
                          positive ? "positive" : "non-negative");
    return 0;
}

static int set_rank(struct pf_identity_guess *g, const char *what, const char *s)
{
    long v;
    if (count_of(&v, what, s, false) < 0) return PF_EUSAGE;
    g->id->rank = (int)v;
    pf_strcpy(g->id->rank_from, sizeof(g->id->rank_from), what);
    pf_identity_from(g->id, "%s=%s", what, s);
    return 0;
}

static int set_world(struct pf_identity_guess *g, const char *what, const char *s)
{
    long v;
    if (count_of(&v, what, s, true) < 0) return PF_EUSAGE;
    g->id->world_size = (int)v;
    pf_strcpy(g->id->world_from, sizeof(g->id->world_from), what);
    pf_identity_from(g->id, "%s=%s", what, s);
    return 0;
}

static void set_coord(struct pf_identity_guess *g, const char *what, const char *addr)
{
    int port = g->id->port; /* a launcher's port is the training's, not ours */
    if (pf_identity_split_hostport(g->id->coordinator, sizeof(g->id->coordinator), &port, addr) <
        0) {
        g->id->coordinator[0] = '\0';
        return;
    }
    pf_strcpy(g->id->coord_from, sizeof(g->id->coord_from), what);
    pf_identity_from(g->id, "%s=%s", what, addr);
    g->coord_strong = true;
}

/* The world size the options give; the rules that compute a global rank need it. */
static int opt_world(const struct pf_identity_guess *g)
{
    return g->opts && g->opts->world_size > 0 ? g->opts->world_size : -1;
}

/* The first DNS label of name into out ("a.b.c" -> "a"). */
static void first_label(char *out, size_t n, const char *name)
{
    size_t l = strcspn(name, ".");
    if (l >= n) l = n - 1;
    memcpy(out, name, l);
    out[l] = '\0';
}

/* The hostname's ordinal naming (<prefix>-N) into the identity, when it has one. */
static bool ordinal_naming(struct pf_identity_guess *g, long *ord)
{
    long o;
    if (!pf_identity_trailing_ordinal(g->host, g->id->prefix, sizeof(g->id->prefix), &o))
        return false;
    g->id->naming = PF_IDENTITY_NAMING_ORDINAL;
    if (ord) *ord = o;
    return true;
}

/* ---- LeaderWorkerSet (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go AddLWSVariables: the
 * variables go to containers and init containers; api/leaderworkerset/v1 for the keys). Each
 * group is its own collective. */
int pf_identity_rule_lws(struct pf_identity_guess *g, const struct pf_env *env,
                         const struct pf_identity_podinfo *pi)
{
    const char *idx = pf_identity_env(env, "LWS_WORKER_INDEX");
    const char *size = pf_identity_env(env, "LWS_GROUP_SIZE");
    const char *lead = pf_identity_env(env, "LWS_LEADER_ADDRESS");
    const char *lidx = pf_identity_meta(pi, "leaderworkerset.sigs.k8s.io/worker-index");
    const char *lsize = pf_identity_meta(pi, "leaderworkerset.sigs.k8s.io/size");
    if (!idx && !size && !lead && !lidx) return 0;
    set_rule(g, "lws",
             "LeaderWorkerSet: each group meets alone; rank = worker index (0 is the leader), "
             "world = the group size, rank 0 = the group's leader");
    if (idx ? set_rank(g, "LWS_WORKER_INDEX", idx) < 0
            : lidx && set_rank(g, "label leaderworkerset.sigs.k8s.io/worker-index", lidx) < 0)
        return PF_EUSAGE;
    if (size ? set_world(g, "LWS_GROUP_SIZE", size) < 0
             : lsize && set_world(g, "annotation leaderworkerset.sigs.k8s.io/size", lsize) < 0)
        return PF_EUSAGE;
    if (lead) {
        set_coord(g, "LWS_LEADER_ADDRESS", lead);
        first_label(g->id->prefix, sizeof(g->id->prefix), lead);
        g->id->naming = PF_IDENTITY_NAMING_LWS;
    } else {
        const char *ln = pf_identity_meta(pi, "leaderworkerset.sigs.k8s.io/leader-name");
        long ord;
        if (g->id->rank == 0)
            pf_strcpy(g->id->prefix, sizeof(g->id->prefix), g->host);
        else if (ln)
            pf_strcpy(g->id->prefix, sizeof(g->id->prefix), ln);
        else if (!pf_identity_trailing_ordinal(g->host, g->id->prefix, sizeof(g->id->prefix), &ord))
            g->id->prefix[0] = '\0';
        if (g->id->prefix[0]) g->id->naming = PF_IDENTITY_NAMING_LWS;
    }
    if (!size && !lsize)
        WORLD_MISSING(g, "LeaderWorkerSet sets LWS_GROUP_SIZE in every container, init "
                         "containers too; it is not set here: set PREFLIGHT_WORLD_SIZE");
    return 1;
}

/* ---- Volcano Job (volcano-sh/volcano pkg/controllers/job/plugins/svc/svc.go: hostname = pod
 * name, subdomain = job name, VC_<TASK>_NUM and VC_<TASK>_HOSTS for every task, task upper
 * case with '-' as '_', containers and init containers; plugins/env/env.go: VC_TASK_INDEX;
 * labels from batch/v1alpha1/labels.go). */
int pf_identity_rule_volcano(struct pf_identity_guess *g, const struct pf_env *env,
                             const struct pf_identity_podinfo *pi)
{
    const char *idx = pf_identity_env(env, "VC_TASK_INDEX");
    const char *idx_name = "VC_TASK_INDEX";
    if (!idx) idx = pf_identity_env(env, (idx_name = "VK_TASK_INDEX"));
    if (!idx) idx = pf_identity_meta(pi, (idx_name = "volcano.sh/task-index"));
    const char *job = pf_identity_meta(pi, "volcano.sh/job-name");
    if (!idx && !job) return 0;
    /* the tasks, from the VC_<TASK>_NUM variables every container gets */
    char tasks[8][64];
    int ntasks = 0;
    for (size_t i = 0; env && i < env->vars.n && ntasks < 8; i++) {
        const char *kv = env->vars.v[i];
        const char *eq = strchr(kv, '=');
        size_t kl = eq ? (size_t)(eq - kv) : 0;
        if (kl > 7 && kl - 7 < sizeof(tasks[0]) && strncmp(kv, "VC_", 3) == 0 &&
            strncmp(kv + kl - 4, "_NUM", 4) == 0) {
            memcpy(tasks[ntasks], kv + 3, kl - 7);
            tasks[ntasks++][kl - 7] = '\0';
        }
    }
    char task[64] = "";
    const char *spec = pf_identity_meta(pi, "volcano.sh/task-spec");
    if (spec) {
        size_t k;
        for (k = 0; spec[k] && k + 1 < sizeof(task); k++)
            task[k] = spec[k] == '-' ? '_' : (char)toupper((unsigned char)spec[k]);
        task[k] = '\0';
    } else if (ntasks == 1) {
        pf_strcpy(task, sizeof(task), tasks[0]);
    }
    if (idx && set_rank(g, idx_name, idx) < 0) return PF_EUSAGE;
    char name[96];
    snprintf(name, sizeof(name), "VC_%s_NUM", task);
    const char *num = task[0] ? pf_identity_env(env, name) : NULL;
    if (num && set_world(g, name, num) < 0) return PF_EUSAGE;
    long ord;
    ordinal_naming(g, &ord);
    if (job) pf_strcpy(g->default_domain, sizeof(g->default_domain), job);
    if (pf_identity_env(env, "MPI_HOST")) {
        set_rule(g, "volcano",
                 "Volcano mpi plugin: this is the master task, which runs mpirun; it is no rank "
                 "of the all-reduce (MPI_HOST is set)");
        pf_identity_from(g->id, "MPI_HOST");
        g->id->member = false;
        return 1;
    }
    if (ntasks > 1) {
        char list[300] = "";
        for (int i = 0; i < ntasks; i++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                     tasks[i]);
        set_rule(g, "volcano",
                 "Volcano Job with tasks %s: how ranks span tasks depends on the framework "
                 "plugin (pytorch: the master is rank 0; mpi: the master is a launcher)",
                 list);
        g->id->rank = -1;
        g->id->world_size = -1;
        RANK_MISSING(g,
                     "Volcano Job with tasks %s: VC_TASK_INDEX counts within a task, and how "
                     "ranks span tasks depends on the plugin; set PREFLIGHT_RANK",
                     list);
        WORLD_MISSING(g,
                      "Volcano Job with tasks %s: set PREFLIGHT_WORLD_SIZE (the pods that "
                      "train)",
                      list);
        COORD_MISSING(g, "Volcano Job with tasks %s: set PREFLIGHT_COORDINATOR or MASTER_ADDR",
                      list);
        g->id->naming = PF_IDENTITY_NAMING_NONE;
        return 1;
    }
    set_rule(g, "volcano",
             "Volcano Job, one task%s%s: rank = VC_TASK_INDEX, world = VC_<TASK>_NUM, rank 0 = "
             "the task's first host",
             task[0] ? " " : "", task);
    snprintf(name, sizeof(name), "VC_%s_HOSTS", task);
    const char *hosts = task[0] ? pf_identity_env(env, name) : NULL;
    char first[300] = "";
    if (hosts) {
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(hosts, ","), hosts);
    } else if (pi->volcano_hosts && task[0]) {
        /* /etc/volcano/<task>.host, the task's name as written in the spec */
        for (size_t i = 0; i < pi->volcano_hosts->n; i++) {
            char up[64];
            size_t k;
            const char *t = pi->volcano_hosts->v[i].key;
            for (k = 0; t[k] && k + 1 < sizeof(up); k++)
                up[k] = t[k] == '-' ? '_' : (char)toupper((unsigned char)t[k]);
            up[k] = '\0';
            if (strcmp(up, task) != 0) continue;
            const char *text = pi->volcano_hosts->v[i].value;
            snprintf(first, sizeof(first), "%.*s", (int)strcspn(text, "\n \t"), text);
            snprintf(name, sizeof(name), "/etc/volcano/%s.host", t);
        }
    }
    if (first[0]) {
        set_coord(g, name, first);
    }
    if (!num)
        WORLD_MISSING(g,
                      "Volcano's svc plugin sets VC_<TASK>_NUM; it is not here (no svc plugin?): "
                      "set PREFLIGHT_WORLD_SIZE");
    if (!idx)
        RANK_MISSING(g, "Volcano's env plugin sets VC_TASK_INDEX; it is not here: add the env "
                        "plugin or set PREFLIGHT_RANK");
    return 1;
}

/* PyTorchJob's "<job>-master-0" or "<job>-worker-N" (kubeflow/training-operator
 * pkg/controller.v1/common/util.go GenGeneralName). */
static bool kubeflow_name(const char *h, char *job, size_t n, char *role, size_t rn, long *ord)
{
    char prefix[256];
    if (!pf_identity_trailing_ordinal(h, prefix, sizeof(prefix), ord)) {
        /* MPIJob's launcher: "<job>-launcher" */
        size_t hl = strlen(h);
        if (hl > 9 && strcmp(h + hl - 9, "-launcher") == 0 && hl - 9 < n) {
            memcpy(job, h, hl - 9);
            job[hl - 9] = '\0';
            pf_strcpy(role, rn, "launcher");
            *ord = 0;
            return true;
        }
        return false;
    }
    size_t pl = strlen(prefix);
    static const char *const roles[] = {"-master", "-worker"};
    for (int r = 0; r < 2; r++) {
        size_t rl = strlen(roles[r]);
        if (pl <= rl || strcmp(prefix + pl - rl, roles[r]) != 0) continue;
        if (r == 0 && *ord != 0) return false;
        if (pl - rl >= n) return false;
        memcpy(job, prefix, pl - rl);
        job[pl - rl] = '\0';
        pf_strcpy(role, rn, roles[r] + 1);
        return true;
    }
    return false;
}

static int rule_mpijob(struct pf_identity_guess *g, const struct pf_identity_podinfo *pi,
                       const char *job, const char *role, long ord, const char *why);

/* ---- Kubeflow PyTorchJob (training-operator v1.9 pkg/controller.v1/pytorch/envvar.go: RANK,
 * WORLD_SIZE = pods x nprocPerNode, PET_NNODES, MASTER_ADDR in the main containers only) and
 * MPIJob v2 (mpi-operator pkg/controller/mpi_job_controller.go: workers <job>-worker-<i> with
 * subdomain <job>, launcher <job>-launcher; labels training.kubeflow.org/operator-name,
 * job-role, replica-index). */
int pf_identity_rule_kubeflow(struct pf_identity_guess *g, const struct pf_env *env,
                              const struct pf_identity_podinfo *pi)
{
    const char *op = pf_identity_meta(pi, "training.kubeflow.org/operator-name");
    const char *jl = pf_identity_meta(pi, "training.kubeflow.org/job-name");
    const char *role_l = pf_identity_meta(pi, "training.kubeflow.org/job-role");
    const char *rtype = pf_identity_meta(pi, "training.kubeflow.org/replica-type");
    const char *ridx = pf_identity_meta(pi, "training.kubeflow.org/replica-index");
    const char *kmpi = pf_identity_env(env, "K_MPI_JOB_ROLE");
    char job[256] = "", role[16] = "";
    long ord = -1;
    bool named = kubeflow_name(g->host, job, sizeof(job), role, sizeof(role), &ord);
    if (jl) pf_strcpy(job, sizeof(job), jl);
    bool mpi, why_label = op != NULL;
    if (op) {
        if (strcmp(op, "mpi-operator") == 0)
            mpi = true;
        else if (strcmp(op, "pytorchjob-controller") == 0)
            mpi = false;
        else
            return 0; /* another Kubeflow job kind: its names are no rule of ours */
        pf_identity_from(g->id, "label training.kubeflow.org/operator-name=%s", op);
    } else if (kmpi) {
        mpi = true;
        pf_identity_from(g->id, "K_MPI_JOB_ROLE=%s", kmpi);
    } else {
        /* names alone: not in a Job (an Indexed Job "<x>-worker" names its pods alike), and
         * not when the labels are mounted and are no Kubeflow labels */
        if (!named || pf_identity_env(env, "JOB_COMPLETION_INDEX")) return 0;
        if (pi->labels && !pf_identity_meta_prefix(pi, "training.kubeflow.org/")) return 0;
        /* MPIJob's pods have the subdomain <job>; PyTorchJob's have none */
        g->id->wants_fqdn = true;
        char sub[256];
        first_label(sub, sizeof(sub), g->id->domain);
        mpi = strcmp(role, "master") != 0 && strcmp(sub, job) == 0;
        if (!mpi && strcmp(role, "launcher") == 0) return 0;
    }
    if (mpi) {
        if (kmpi && !role_l) role_l = kmpi;
        if (role_l) pf_strcpy(role, sizeof(role), role_l);
        if (ridx && !named) pf_identity_parse_count(ridx, &ord);
        char why[200];
        snprintf(why, sizeof(why), "%s",
                 why_label || kmpi ? "MPIJob (its labels)"
                                   : "MPIJob (a <job>-worker-N or <job>-launcher name in the "
                                     "subdomain <job>)");
        return rule_mpijob(g, pi, job, role, ord, why);
    }
    /* PyTorchJob */
    if (rtype && ridx) {
        if (strcmp(rtype, "master") != 0 && strcmp(rtype, "worker") != 0)
            return pf_err_set(PF_EUSAGE,
                              "label training.kubeflow.org/replica-type=%s: expected master or "
                              "worker",
                              rtype);
        long i;
        if (pf_identity_parse_count(ridx, &i) < 0)
            return pf_err_set(PF_EUSAGE,
                              "label training.kubeflow.org/replica-index=%s: expected a "
                              "non-negative integer",
                              ridx);
        g->id->rank = strcmp(rtype, "master") == 0 ? 0 : (int)i + 1;
        snprintf(g->id->rank_from, sizeof(g->id->rank_from), "label replica-type %s, index %ld",
                 rtype, i);
        pf_identity_from(g->id, "label training.kubeflow.org/replica-type=%s", rtype);
        pf_identity_from(g->id, "label training.kubeflow.org/replica-index=%s", ridx);
    } else if (named) {
        g->id->rank = strcmp(role, "master") == 0 ? 0 : (int)ord + 1;
        snprintf(g->id->rank_from, sizeof(g->id->rank_from), "hostname %.80s", g->host);
        pf_identity_from(g->id, "hostname %s", g->host);
    } else {
        RANK_MISSING(g,
                     "PyTorchJob pod \"%s\" has neither a <job>-master-0 / <job>-worker-N name "
                     "nor the replica-type and replica-index labels: set PREFLIGHT_RANK",
                     g->host);
    }
    if (job[0]) {
        g->id->naming = PF_IDENTITY_NAMING_PYTORCH;
        pf_strcpy(g->id->prefix, sizeof(g->id->prefix), job);
    }
    const char *nn = pf_identity_env(env, "PET_NNODES"), *ws = pf_identity_env(env, "WORLD_SIZE");
    if (nn) {
        if (set_world(g, "PET_NNODES", nn) < 0) return PF_EUSAGE;
    } else if (ws) {
        if (set_world(g, "WORLD_SIZE", ws) < 0) return PF_EUSAGE;
    } else {
        WORLD_MISSING(g, "PyTorchJob sets WORLD_SIZE (processes: pods x nprocPerNode) and "
                         "PET_NNODES in its main containers only, not in initContainers: set "
                         "PREFLIGHT_WORLD_SIZE to the number of pods (master + workers)");
    }
    set_rule(g, "pytorchjob",
             "Kubeflow PyTorchJob (%s): <job>-master-0 is rank 0, <job>-worker-N rank N+1; rank "
             "0's address is the master's own Service <job>-master-0; world = pods (PET_NNODES, "
             "never WORLD_SIZE, which counts processes)",
             why_label ? "its labels"
                       : "a <job>-master-0 / <job>-worker-N name without a subdomain");
    return 1;
}

static int rule_mpijob(struct pf_identity_guess *g, const struct pf_identity_podinfo *pi,
                       const char *job, const char *role, long ord, const char *why)
{
    const char *ridx = pf_identity_meta(pi, "training.kubeflow.org/replica-index");
    bool launcher = strcmp(role, "launcher") == 0;
    /* runLauncherAsWorker: the launcher is rank 0 and has a replica index; worker i has i+1 */
    long ri = -1;
    if (ridx && pf_identity_parse_count(ridx, &ri) < 0) ri = -1;
    bool as_worker = launcher ? ri >= 0 : (ri >= 0 && ord >= 0 && ri == ord + 1);
    if (ridx) pf_identity_from(g->id, "label training.kubeflow.org/replica-index=%s", ridx);
    pf_identity_from(g->id, "hostname %s", g->host);
    pf_strcpy(g->id->prefix, sizeof(g->id->prefix), job);
    g->id->naming = PF_IDENTITY_NAMING_MPI;
    g->id->per_job = as_worker ? 1 : 0;
    pf_strcpy(g->default_domain, sizeof(g->default_domain), job);
    if (launcher && !as_worker) {
        set_rule(g, "mpijob",
                 "%s launcher: it runs mpirun and is no rank of the all-reduce (no replica-index "
                 "label: runLauncherAsWorker is off%s)",
                 why,
                 pi->labels ? ""
                            : "; without the podinfo labels this cannot be told: set "
                              "PREFLIGHT_RANK=0 when the launcher trains too");
        g->id->member = false;
        return 1;
    }
    if (!job[0] || ord < 0) {
        RANK_MISSING(g, "MPIJob pod \"%s\" is not named <job>-worker-N: set PREFLIGHT_RANK",
                     g->host);
    } else {
        g->id->rank = launcher ? 0 : (int)ord + (as_worker ? 1 : 0);
        snprintf(g->id->rank_from, sizeof(g->id->rank_from), "hostname %.80s", g->host);
    }
    WORLD_MISSING(g,
                  "MPIJob puts no pod count on its pods (the hostfile is the launcher's): set "
                  "PREFLIGHT_WORLD_SIZE to the number of workers%s",
                  as_worker ? " plus the launcher" : "");
    set_rule(g, "mpijob",
             "%s: worker i is rank i%s; rank 0 is %s in the subdomain %s; the launcher is %s", why,
             as_worker ? "+1" : "", as_worker ? "<job>-launcher" : "<job>-worker-0", job,
             as_worker ? "rank 0 (runLauncherAsWorker)" : "no rank");
    return 1;
}

/* ---- PET_* variables: Kubeflow Trainer v2 (kubeflow/trainer
 * pkg/runtime/framework/plugins/torch/torch.go: PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR; in
 * init containers only with mlPolicy.torch.envInjection) and torchrun's own
 * (torch/distributed/run.py: every option from PET_<OPTION>). */
int pf_identity_rule_torchrun(struct pf_identity_guess *g, const struct pf_env *env,
                              const struct pf_identity_podinfo *pi)
{
    const char *nr = pf_identity_env(env, "PET_NODE_RANK");
    const char *nn = pf_identity_env(env, "PET_NNODES");
    const char *ma = pf_identity_env(env, "PET_MASTER_ADDR");
    if (!nr && !nn && !ma) return 0;
    const char *js = pf_identity_meta(pi, "jobset.sigs.k8s.io/jobset-name");
    char prefix[256];
    long ord;
    bool tj_name = pf_identity_trailing_ordinal(g->host, prefix, sizeof(prefix), &ord) &&
                   strlen(prefix) > 7 && strcmp(prefix + strlen(prefix) - 7, "-node-0") == 0;
    bool trainjob = js || tj_name;
    if (nr) {
        if (set_rank(g, "PET_NODE_RANK", nr) < 0) return PF_EUSAGE;
    } else {
        const char *jci = pf_identity_env(env, "JOB_COMPLETION_INDEX");
        const char *rk = pf_identity_env(env, "RANK");
        if (jci ? set_rank(g, "JOB_COMPLETION_INDEX", jci) < 0 : rk && set_rank(g, "RANK", rk) < 0)
            return PF_EUSAGE;
    }
    if (nn) {
        const char *colon = strchr(nn, ':');
        if (colon && (size_t)(colon - nn) == strlen(colon + 1) &&
            strncmp(nn, colon + 1, (size_t)(colon - nn)) == 0) {
            char n1[32];
            snprintf(n1, sizeof(n1), "%.*s", (int)(colon - nn), nn);
            if (set_world(g, "PET_NNODES", n1) < 0) return PF_EUSAGE;
        } else if (colon) {
            WORLD_MISSING(g,
                          "PET_NNODES=%s is an elastic range, not a pod count: set "
                          "PREFLIGHT_WORLD_SIZE",
                          nn);
        } else if (set_world(g, "PET_NNODES", nn) < 0) {
            return PF_EUSAGE;
        }
    }
    if (ma) set_coord(g, "PET_MASTER_ADDR", ma);
    if (tj_name) {
        pf_strcpy(g->id->prefix, sizeof(g->id->prefix), prefix);
        g->id->prefix[strlen(prefix) - 2] = '\0'; /* "<tj>-node" */
        g->id->naming = PF_IDENTITY_NAMING_JOBSET;
        g->id->per_job = 0; /* one Job: <tj>-node-0-<rank> */
        if (js) pf_strcpy(g->default_domain, sizeof(g->default_domain), js);
    } else if (!ma) {
        ordinal_naming(g, NULL);
    }
    if (trainjob)
        set_rule(g, "trainjob",
                 "Kubeflow Trainer TrainJob (PET_* given to this container by "
                 "mlPolicy.torch.envInjection): rank = PET_NODE_RANK, world = PET_NNODES (nodes, "
                 "not processes), rank 0 = PET_MASTER_ADDR");
    else
        set_rule(g, "torchrun",
                 "torchrun's PET_* variables: rank = PET_NODE_RANK, world = PET_NNODES (nodes, "
                 "not processes), rank 0 = PET_MASTER_ADDR");
    if (g->id->rank < 0)
        RANK_MISSING(g, "PET_NNODES is set but PET_NODE_RANK is not: set it, or "
                        "PREFLIGHT_RANK");
    return 1;
}

/* ---- JobSet (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go labelAndAnnotateObject:
 * jobset-name, replicatedjob-name, replicatedjob-replicas, global-replicas, job-index,
 * job-global-index as labels and annotations; Job names <js>-<rjob>-<jobIndex> from
 * pkg/util/placement/placement.go; Indexed completion by default, so JOB_COMPLETION_INDEX and
 * hostnames <js>-<rjob>-<jobIndex>-<podIndex>; the subdomain defaults to the JobSet's name). */
static int meta_count(long *out, const struct pf_identity_podinfo *pi, struct pf_identity *id,
                      const char *key)
{
    const char *s = pf_identity_meta(pi, key);
    *out = -1;
    if (!s) return 0;
    char what[128];
    snprintf(what, sizeof(what), "label %s", key);
    if (count_of(out, what, s, false) < 0) return PF_EUSAGE;
    pf_identity_from(id, "%s=%s", what, s);
    return 0;
}

int pf_identity_rule_jobset(struct pf_identity_guess *g, const struct pf_env *env,
                            const struct pf_identity_podinfo *pi)
{
    const char *js = pf_identity_meta(pi, "jobset.sigs.k8s.io/jobset-name");
    const char *rj = pf_identity_meta(pi, "jobset.sigs.k8s.io/replicatedjob-name");
    if (!js || !rj) return 0;
    struct pf_identity *id = g->id;
    pf_identity_from(id, "label jobset.sigs.k8s.io/jobset-name=%s", js);
    pf_identity_from(id, "label jobset.sigs.k8s.io/replicatedjob-name=%s", rj);
    long ji, gi, G, R, c = -1;
    if (meta_count(&ji, pi, id, "jobset.sigs.k8s.io/job-index") < 0 ||
        meta_count(&gi, pi, id, "jobset.sigs.k8s.io/job-global-index") < 0 ||
        meta_count(&G, pi, id, "jobset.sigs.k8s.io/global-replicas") < 0 ||
        meta_count(&R, pi, id, "jobset.sigs.k8s.io/replicatedjob-replicas") < 0)
        return PF_EUSAGE;
    const char *jci = pf_identity_env(env, "JOB_COMPLETION_INDEX");
    const char *what = "JOB_COMPLETION_INDEX";
    if (!jci) jci = pf_identity_meta(pi, (what = "label batch.kubernetes.io/job-completion-index"));
    if (jci) {
        if (count_of(&c, what, jci, false) < 0) return PF_EUSAGE;
        pf_identity_from(id, "%s=%s", what, jci);
    } else {
        char p[256];
        if (pf_identity_trailing_ordinal(g->host, p, sizeof(p), &c))
            pf_identity_from(id, "hostname %s", g->host);
    }
    snprintf(id->prefix, sizeof(id->prefix), "%s-%s", js, rj);
    pf_strcpy(g->default_domain, sizeof(g->default_domain), js);
    const char *co = pf_identity_meta(pi, "jobset.sigs.k8s.io/coordinator");
    if (co) set_coord(g, "label jobset.sigs.k8s.io/coordinator", co);
    int W = opt_world(g);
    const char *ws = pf_identity_env(env, "WORLD_SIZE");
    if (W < 0 && ws) {
        if (set_world(g, "WORLD_SIZE", ws) < 0) return PF_EUSAGE;
        W = id->world_size;
    }
    if (c < 0) {
        RANK_MISSING(g, "JobSet pod without JOB_COMPLETION_INDEX or a <js>-<rjob>-<job>-<pod> "
                        "hostname: set PREFLIGHT_RANK");
        return 1;
    }
    /* TrainJob: the trainer replicatedJob "node" has 1 replica and numNodes pods; initializer
     * replicatedJobs before it are no ranks (kubeflow/trainer
     * pkg/runtime/framework/plugins/jobset/jobset.go) */
    if (strcmp(rj, "node") == 0 && R == 1) {
        id->rank = (int)c;
        snprintf(id->rank_from, sizeof(id->rank_from), "%s", what);
        id->naming = PF_IDENTITY_NAMING_JOBSET;
        id->per_job = 0;
        snprintf(id->prefix, sizeof(id->prefix), "%s-node", js);
        set_rule(g, "trainjob",
                 "Kubeflow Trainer TrainJob without PET_* in this container: the replicatedJob "
                 "\"node\" (1 replica) holds every rank: rank = completion index, rank 0 = "
                 "%s-node-0-0; initializer Jobs are no ranks",
                 js);
        WORLD_MISSING(g, "TrainJob gives PET_NNODES to the node container only, unless the "
                         "runtime lists this initContainer in mlPolicy.torch.envInjection: set "
                         "PREFLIGHT_WORLD_SIZE to numNodes");
        return 1;
    }
    if (G < 0) G = 1;
    if (gi < 0) gi = ji >= 0 ? ji : 0;
    if (ji < 0) ji = gi;
    int per_job = -1;
    if (G == 1) {
        id->rank = (int)c;
        per_job = 0;
    } else if (W > 0 && W % G == 0 && c < W / G) {
        per_job = (int)(W / G);
        id->rank = (int)(gi * per_job + c);
    } else if (W > 0) {
        RANK_MISSING(g,
                     "JobSet with %ld Jobs and %d pods: the Jobs are not of one size (or the "
                     "completion index %ld is too large), so the global rank cannot be told "
                     "from job-global-index %ld: set PREFLIGHT_RANK",
                     G, W, c, gi);
    } else {
        RANK_MISSING(g,
                     "JobSet with %ld Jobs: the global rank is job-global-index (%ld) x pods "
                     "per Job + completion index (%ld), and pods per Job is the world size / "
                     "%ld: set PREFLIGHT_WORLD_SIZE to the JobSet's pod count",
                     G, gi, c, G);
    }
    if (id->rank >= 0)
        snprintf(id->rank_from, sizeof(id->rank_from), "%s%s", G == 1 ? "" : "job-global-index, ",
                 what);
    if (W < 0)
        WORLD_MISSING(g, "JobSet puts no pod count on its pods: set PREFLIGHT_WORLD_SIZE to the "
                         "number of pods of the whole JobSet");
    if (gi == ji && per_job >= 0) {
        /* this pod's replicatedJob is the first one: rank 0 is its Job 0, pod 0 */
        id->naming = PF_IDENTITY_NAMING_JOBSET;
        id->per_job = per_job;
        if (per_job > 0 && R > 0) id->named_ranks = (int)(R * per_job);
    } else if (!co) {
        COORD_MISSING(g,
                      "rank 0 is pod 0 of Job 0 of the JobSet's first replicatedJob, and this "
                      "pod's replicatedJob \"%s\" is not the first (job-global-index %ld, "
                      "job-index %ld): set spec.coordinator on the JobSet, MASTER_ADDR or "
                      "PREFLIGHT_COORDINATOR",
                      rj, gi, ji);
    }
    set_rule(g, "jobset",
             "JobSet: global rank = job-global-index x pods per Job + completion index (pods per "
             "Job = world size / global-replicas, Jobs of one size); rank 0 = pod 0 of Job 0 of "
             "the first replicatedJob");
    return 1;
}

/* ---- Indexed Job (kubernetes pkg/controller/job/indexed_job_utils.go: JOB_COMPLETION_INDEX
 * in containers and init containers, hostname <job>-<index>; no subdomain of its own). */
int pf_identity_rule_indexed_job(struct pf_identity_guess *g, const struct pf_env *env,
                                 const struct pf_identity_podinfo *pi)
{
    const char *jci = pf_identity_env(env, "JOB_COMPLETION_INDEX");
    const char *what = "JOB_COMPLETION_INDEX";
    if (!jci) jci = pf_identity_meta(pi, (what = "label batch.kubernetes.io/job-completion-index"));
    if (!jci) return 0;
    if (set_rank(g, what, jci) < 0) return PF_EUSAGE;
    const char *ws = pf_identity_env(env, "WORLD_SIZE");
    if (ws && set_world(g, "WORLD_SIZE", ws) < 0) return PF_EUSAGE;
    const char *jn = pf_identity_meta(pi, "batch.kubernetes.io/job-name");
    long ord, a;
    char p2[256];
    if (jn) {
        pf_strcpy(g->id->prefix, sizeof(g->id->prefix), jn);
        g->id->naming = PF_IDENTITY_NAMING_ORDINAL;
        pf_identity_from(g->id, "label batch.kubernetes.io/job-name=%s", jn);
    } else if (ordinal_naming(g, &ord)) {
        /* "<x>-<a>-<index>" without labels: JobSet's Job a, or an Indexed Job named "<x>-<a>" */
        if (!pi->labels && ord == g->id->rank &&
            pf_identity_trailing_ordinal(g->id->prefix, p2, sizeof(p2), &a) && a > 0) {
            RANK_MISSING(g,
                         "hostname \"%s\" may be pod %ld of Job %ld of a JobSet or pod %ld of "
                         "an Indexed Job named \"%s\": mount the podinfo labels "
                         "(jobset.sigs.k8s.io/*) or set PREFLIGHT_RANK",
                         g->host, ord, a, ord, g->id->prefix);
            COORD_MISSING(g, "see the rank");
            g->id->rank = -1;
            g->id->naming = PF_IDENTITY_NAMING_NONE;
        }
    }
    set_rule(g, "indexed-job",
             "Indexed Job: rank = JOB_COMPLETION_INDEX, rank 0 = <job>-0 in the pod's subdomain "
             "(an Indexed Job has none of its own: set spec.subdomain to a headless Service)");
    return 1;
}

/* ---- RANK and WORLD_SIZE written into the pod spec, or a StatefulSet's <sts>-<ordinal>
 * (kubernetes pkg/controller/statefulset/stateful_set_utils.go: hostname = pod name, subdomain
 * = serviceName), or any hostname with an ordinal. */
int pf_identity_rule_ordinal(struct pf_identity_guess *g, const struct pf_env *env,
                             const struct pf_identity_podinfo *pi)
{
    const char *rk = pf_identity_env(env, "RANK");
    const char *ws = pf_identity_env(env, "WORLD_SIZE");
    long ord = -1;
    bool named = ordinal_naming(g, &ord);
    if (rk) {
        if (set_rank(g, "RANK", rk) < 0) return PF_EUSAGE;
        set_rule(g, "env", "RANK and WORLD_SIZE from the pod spec (counting pods)");
    } else if (named) {
        g->id->rank = (int)ord;
        snprintf(g->id->rank_from, sizeof(g->id->rank_from), "hostname %.80s", g->host);
        pf_identity_from(g->id, "hostname %s", g->host);
        bool sts = pf_identity_meta(pi, "statefulset.kubernetes.io/pod-name") ||
                   pf_identity_meta(pi, "apps.kubernetes.io/pod-index");
        set_rule(g, sts ? "statefulset" : "hostname",
                 "%s: rank = the hostname's ordinal, rank 0 = <name>-0 in the pod's subdomain",
                 sts ? "StatefulSet (its labels)" : "a hostname <name>-N (StatefulSet or alike)");
    }
    if (ws && set_world(g, "WORLD_SIZE", ws) < 0) return PF_EUSAGE;
    return rk || named || ws ? 1 : 0;
}
