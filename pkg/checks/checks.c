#define _GNU_SOURCE
#include "checks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* One name per check: LOCAL(fam, name, ...) makes the id "fam.name" and the function
 * pf_check_fam_name from the same two words, so they cannot drift apart. Each entry also
 * names the file of its code, its docs fragment and the test that exercises it;
 * tests/unit/checks/test_table.c holds every entry to them, and tests/unit/run/test_stages.c
 * holds the stage checks to pkg/run's stage tables. */
#define LOCAL(fam, name, modes, src, doc, test, what)                                              \
    {                                                                                              \
#fam "." #name, pf_check_##fam##_##name, modes, what, "pkg/checks/" src,                   \
            "docs/checks/" doc, "tests/" test, NULL                                                \
    }
#define STAGE(id, stages, src, doc, test, what)                                                    \
    {                                                                                              \
        id, NULL, PF_MODE_STAGE, what, src, "docs/checks/" doc, "tests/" test, stages              \
    }

const struct pf_check_def pf_checks_table[] = {
    LOCAL(gpu, devices, PF_MODE_LOCAL, "gpu.c", "10-gpu.md", "unit/checks/test_gpu.c",
          "GPUs visible in the pod, driver version"),
    LOCAL(gpu, fabric, PF_MODE_LOCAL, "gpu_fabric.c", "10-gpu.md", "unit/checks/test_gpu_fabric.c",
          "multi-node NVLink: IMEX channel in the pod (when NCCL_MNNVL_ENABLE asks for it)"),
    LOCAL(gpu, health, PF_MODE_LOCAL, "gpu_health.c", "11-gpu-health.md",
          "unit/checks/test_gpu_health.c",
          "each GPU through NVML: ECC, remapped rows, NVLinks, slowdowns, PCIe width, Xid"),
    LOCAL(rdma, devices, PF_MODE_LOCAL, "rdma.c", "20-rdma.md", "unit/checks/test_rdma.c",
          "/dev/infiniband: uverbsN openable, rdma_cm, sysfs and device nodes agree"),
    LOCAL(rdma, ports, PF_MODE_LOCAL, "rdma_ports.c", "20-rdma.md", "unit/checks/test_rdma.c",
          "every HCA port: state, phys_state, rate, link layer, RoCE GIDs"),
    LOCAL(rdma, memlock, PF_MODE_LOCAL, "memlock.c", "20-rdma.md", "unit/checks/test_rdma.c",
          "RLIMIT_MEMLOCK"),
    LOCAL(rdma, verbs, PF_MODE_LOCAL, "verbs.c", "25-rdma-verbs.md", "e2e/test_rdma.sh",
          "libibverbs: open every device, query ports, alloc a PD, register 1 MiB, dma-buf probe"),
    LOCAL(rdma, efa, PF_MODE_LOCAL, "efa.c", "27-rdma-efa.md", "unit/checks/test_rdma.c",
          "AWS EFA: aws-ofi-nccl plugin where NCCL looks, FI_PROVIDER, NCCL_NET"),
    LOCAL(rdma, gpudirect, PF_MODE_LOCAL, "rdma_gpudirect.c", "20-rdma.md",
          "unit/checks/test_rdma.c", "nvidia_peermem or dma-buf: can NICs reach GPU memory"),
    LOCAL(net, interfaces, PF_MODE_LOCAL, "net.c", "30-net-interfaces.md", "e2e/test_netif.sh",
          "NCCL_SOCKET_IFNAME against the pod's real interfaces"),
    LOCAL(net, multus, PF_MODE_LOCAL, "multus.c", "35-net-multus.md", "unit/checks/test_multus.c",
          "Multus network-status annotation against the pod's interfaces"),
    LOCAL(net, sriov, PF_MODE_LOCAL, "sriov.c", "36-net-sriov.md", "unit/checks/test_sriov.c",
          "PCIDEVICE_* devices: present, bound, netdev/RDMA children visible"),
    LOCAL(topology, locality, PF_MODE_LOCAL, "locality.c", "37-locality.md",
          "unit/checks/test_sriov.c", "NUMA node and PCIe path between each GPU and the RDMA NICs"),
    LOCAL(nccl, env, PF_MODE_LOCAL | PF_MODE_ENV, "nccl_env.c", "40-nccl-env.md",
          "e2e/test_nccl_env.sh", "NCCL_* variables"),
    LOCAL(nccl, library, PF_MODE_LOCAL, "nccl_lib.c", "41-nccl-library.md", "e2e/test_static.sh",
          "libnccl loads, version"),
    LOCAL(sys, shm, PF_MODE_LOCAL, "sys.c", "50-sys.md", "unit/checks/test_sys.c", "/dev/shm size"),
    LOCAL(sys, ports, PF_MODE_LOCAL, "sys.c", "50-sys.md", "unit/checks/test_sys.c",
          "ephemeral port range"),
    /* ---- the checks the stages of pkg/run feed (stages: their ids in pkg/run/run.c) */
    STAGE("rdma.counters", "counters", "pkg/checks/counters.c", "26-rdma-counters.md",
          "unit/checks/test_rdma.c", "port error counters before and after the traffic"),
    STAGE("rendezvous", "meet agree", "pkg/fleet/agree.c pkg/run/meet.c", "60-rendezvous.md",
          "e2e/test_rendezvous.sh", "the pods meet: identity, admission, roster, agreement"),
    STAGE("collective.tcp", "collective.tcp summary", "pkg/fleet/judge.c pkg/run/summary.c",
          "70-collective-tcp.md", "e2e/test_scale_faults.sh",
          "TCP all-reduce among the pods, link probes, blame"),
    STAGE("net.rails", "rails", "pkg/fleet/rails.c", "38-net-rails.md", "e2e/test_rails.sh",
          "every Multus rail of every pod: agreement and a probe pod to pod on the rail"),
    STAGE("gang", "summary gang",
          "pkg/fleet/gang.c pkg/run/inventory.c pkg/run/summary.c pkg/run/run.c", "39-gang.md",
          "e2e/test_gang.sh",
          "every pod's inventory (GPUs, HCAs, ports, PCIe, NICs, firmware, driver, NCCL, "
          "networks) against the rest of its gang"),
    STAGE("collective.nccl", "gpu", "pkg/nccl/stage.c", "80-collective-nccl.md", "e2e/test_nccl.sh",
          "NCCL collectives among every GPU of every pod"),
    STAGE("report.kubernetes", "report", "pkg/report/k8s.c", "90-report.md", "e2e/test_report.sh",
          "the verdict as a Kubernetes Event and pod annotation"),
    STAGE("report.metrics", "report push",
          "pkg/report/k8s.c pkg/report/push.c pkg/report/results.c", "90-report.md",
          "e2e/test_pushgateway.sh",
          "the verdict as Prometheus metrics: a textfile, a Pushgateway push, nccl-tests JSON"),
    STAGE("report.node", "report", "pkg/report/node.c", "90-report.md", "e2e/test_report.sh",
          "the failing node labelled or tainted"),
    STAGE("preflight", "local report", "pkg/run/run.c pkg/verdict/guard.c", "99-run.md",
          "unit/run/test_stages.c", "the run itself: its deadline, signals, the verdict file"),
    /* ---- `preflight log`, the command of its own */
    {"nccl.log", NULL, PF_MODE_LOG, "an NCCL_DEBUG=INFO log: transport, fallbacks, warnings",
     "pkg/nccllog/verdict.c", "docs/checks/80-collective-nccl.md", "tests/e2e/test_nccl_log.sh",
     NULL},
    /* ---- `preflight watch`, the sidecar beside the trainer */
    {"watch", NULL, PF_MODE_WATCH,
     "the trainer's NCCL logs as written: network, NICs, GPUDirect, version, init stall",
     "pkg/watch/judge.c", "docs/checks/85-watch.md", "tests/e2e/test_watch.sh", NULL},
};
const size_t pf_checks_count = PF_ARRAY_LEN(pf_checks_table);

void pf_checks_inventory(struct pf_ctx *ctx)
{
    pf_strlist_free(&ctx->hcas);
    pf_strlist_free(&ctx->gpus);
    (void)pf_host_list(&ctx->hcas, &ctx->host, "/sys/class/infiniband");
    (void)pf_host_list(&ctx->gpus, &ctx->host, "/proc/driver/nvidia/gpus");
}

void pf_checks_run(struct pf_ctx *ctx, unsigned mode)
{
    for (size_t i = 0; i < pf_checks_count; i++) {
        const struct pf_check_def *d = &pf_checks_table[i];
        if (!(d->modes & mode) || !d->fn) continue;
        double t0 = pf_now();
        struct pf_check *c = pf_verdict_add_check(ctx->verdict, d->id);
        d->fn(c, ctx);
        c->seconds = pf_now() - t0;
    }
}

void pf_checks_environment(struct pf_ctx *ctx)
{
    struct pf_node *env = ctx->verdict->environment;
    struct utsname u;
    if (uname(&u) == 0) {
        pf_node_set_strf(env, "kernel", "%s %s", u.sysname, u.release);
        pf_node_set_str(env, "machine", u.machine);
    }
    char host[256];
    if (gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        pf_node_set_str(env, "hostname", host);
    }
    pf_node_set_str(env, "root", ctx->host.root[0] ? ctx->host.root : "/");

    struct pf_node *gpus = pf_node_set_seq(env, "gpus");
    for (size_t i = 0; i < ctx->gpus.n; i++) {
        char model[256] = "";
        struct pf_node *g = pf_node_add_map(gpus);
        pf_node_set_str(g, "busId", ctx->gpus.v[i]);
        char *info = NULL;
        if (pf_host_read_all(&info, NULL, 1 << 16, &ctx->host,
                             "/proc/driver/nvidia/gpus/%s/information", ctx->gpus.v[i]) == 0) {
            for (char *line = strtok(info, "\n"); line; line = strtok(NULL, "\n")) {
                if (strncmp(line, "Model:", 6) == 0) {
                    snprintf(model, sizeof(model), "%s", line + 6);
                    pf_trim(model);
                    pf_node_set_str(g, "model", model);
                } else if (strncmp(line, "GPU UUID:", 9) == 0) {
                    char uuid[128];
                    snprintf(uuid, sizeof(uuid), "%s", line + 9);
                    pf_node_set_str(g, "uuid", pf_trim(uuid));
                }
            }
        }
        free(info);
    }
    char ver[1024], v[64];
    if (pf_host_read(ver, sizeof(ver), &ctx->host, "/proc/driver/nvidia/version") >= 0 &&
        pf_nvidia_driver_version(v, sizeof(v), ver))
        pf_node_set_str(env, "driverVersion", v);
    struct pf_node *hcas = pf_node_set_seq(env, "hcas");
    for (size_t i = 0; i < ctx->hcas.n; i++)
        pf_node_add_str(hcas, ctx->hcas.v[i]);

    struct pf_node *nccl = pf_node_set_map(env, "ncclEnv");
    struct pf_strlist names = {0};
    for (size_t i = 0; i < ctx->env.vars.n; i++)
        if (pf_str_starts(ctx->env.vars.v[i], "NCCL_")) pf_strlist_add(&names, ctx->env.vars.v[i]);
    pf_strlist_sort(&names);
    for (size_t i = 0; i < names.n; i++) {
        char *eq = strchr(names.v[i], '=');
        if (!eq) continue;
        *eq = '\0';
        pf_node_set_str(nccl, names.v[i], pf_verdict_is_secret_name(names.v[i]) ? "***" : eq + 1);
    }
    pf_strlist_free(&names);
}
