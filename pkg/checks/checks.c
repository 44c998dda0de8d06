#define _GNU_SOURCE
#include "checks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

const struct pf_check_def pf_checks_table[] = {
    {"gpu.devices", pf_check_gpu_devices, PF_MODE_LOCAL, "GPUs visible in the pod, driver version"},
    {"gpu.fabric", pf_check_gpu_fabric, PF_MODE_LOCAL,
     "multi-node NVLink: IMEX channel in the pod (when NCCL_MNNVL_ENABLE asks for it)"},
    {"rdma.devices", pf_check_rdma_devices, PF_MODE_LOCAL,
     "/dev/infiniband: uverbsN openable, rdma_cm, sysfs and device nodes agree"},
    {"rdma.ports", pf_check_rdma_ports, PF_MODE_LOCAL,
     "every HCA port: state, phys_state, rate, link layer, RoCE GIDs"},
    {"rdma.memlock", pf_check_rdma_memlock, PF_MODE_LOCAL, "RLIMIT_MEMLOCK"},
    {"rdma.verbs", pf_check_rdma_verbs, PF_MODE_LOCAL,
     "libibverbs: open every device, query ports, alloc a PD, register 1 MiB, dma-buf probe"},
    {"rdma.efa", pf_check_rdma_efa, PF_MODE_LOCAL,
     "AWS EFA: aws-ofi-nccl plugin where NCCL looks, FI_PROVIDER, NCCL_NET"},
    {"rdma.gpudirect", pf_check_rdma_gpudirect, PF_MODE_LOCAL,
     "nvidia_peermem or dma-buf: can NICs reach GPU memory"},
    {"net.interfaces", pf_check_net_interfaces, PF_MODE_LOCAL,
     "NCCL_SOCKET_IFNAME against the pod's real interfaces"},
    {"net.multus", pf_check_net_multus, PF_MODE_LOCAL,
     "Multus network-status annotation against the pod's interfaces"},
    {"net.sriov", pf_check_net_sriov, PF_MODE_LOCAL,
     "PCIDEVICE_* devices: present, bound, netdev/RDMA children visible"},
    {"topology.locality", pf_check_topology_locality, PF_MODE_LOCAL,
     "NUMA node and PCIe path between each GPU and the RDMA NICs"},
    {"nccl.env", pf_check_nccl_env, PF_MODE_LOCAL | PF_MODE_ENV, "NCCL_* variables"},
    {"nccl.library", pf_check_nccl_library, PF_MODE_LOCAL, "libnccl loads, version"},
    {"sys.shm", pf_check_sys_shm, PF_MODE_LOCAL, "/dev/shm size"},
    {"sys.ports", pf_check_sys_ports, PF_MODE_LOCAL, "ephemeral port range"},
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
        if (!(d->modes & mode)) continue;
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
    char root[PF_HOST_PATH_MAX];
    pf_node_set_str(env, "root", ctx->host.root[0] ? ctx->host.root : "/");
    (void)root;

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
