/* checks: the local checks of one pod, each a function of one shape listed in one table. */
#ifndef PF_CHECKS_H
#define PF_CHECKS_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../config/config.h"
#include "../context/context.h"
#include "../host/host.h"
#include "../verdict/verdict.h"

typedef void (*pf_check_fn)(struct pf_check *out, struct pf_ctx *ctx);

enum pf_check_mode {
    PF_MODE_LOCAL = 1 << 0, /* `check` and `run` */
    PF_MODE_ENV = 1 << 1,   /* `env` */
    PF_MODE_STAGE = 1 << 2, /* fed by stages of pkg/run (`stages`), no function here */
    PF_MODE_LOG = 1 << 3,   /* `log`: the NCCL log reader, pkg/nccllog */
    PF_MODE_WATCH = 1 << 4, /* `watch`: the trainer's NCCL logs followed, pkg/watch */
};

struct pf_check_def {
    const char *id;
    pf_check_fn fn; /* the local checks' function, pf_check_<id with '_' for '.'>; else NULL */
    unsigned modes;
    const char *what; /* one line: what it looks at */
    /* the file of its code, from the repository's root; a stage check: the files that decide
     * its findings, separated by spaces (a stage's `timeout` is the guard's, for every stage) */
    const char *source;
    const char *doc;    /* its docs fragment (docs/checks/NN-*.md), which has "## `<id>`" */
    const char *test;   /* the test that exercises it most directly */
    const char *stages; /* PF_MODE_STAGE: the ids of the pkg/run stages that feed it */
};

/* Every check id, once: the local checks in the order they run (inventory-style checks
 * first), then those the stages among pods feed, then `preflight log`'s and `preflight watch`'s. */
extern const struct pf_check_def pf_checks_table[];
extern const size_t pf_checks_count;

/* Lists HCAs and GPUs under the root prefix into ctx. */
void pf_checks_inventory(struct pf_ctx *ctx);
/* Runs every check of the mode, in table order, adding results to ctx->verdict. */
void pf_checks_run(struct pf_ctx *ctx, unsigned mode);
/* Records kernel, hostname, GPUs, HCAs and NCCL_* variables (secrets masked) in the
 * verdict's environment. */
void pf_checks_environment(struct pf_ctx *ctx);

/* The driver version in the text of /proc/driver/nvidia/version, from its "NVRM version:"
 * line in every form the driver writes: proprietary ("NVIDIA UNIX x86_64 Kernel Module
 * 550.90.07  Fri May 31 ...", aarch64 too) and open ("NVIDIA UNIX Open Kernel Module for
 * x86_64  565.57.01  Release Build  (builder@host)  <date>"), whatever the date's locale. */
bool pf_nvidia_driver_version(char *out, size_t n, const char *text);

/* The GPUs and NICs an NCCL topology file places: the busid="..." of each <pci> element whose
 * class is a GPU's or a NIC's (0x03..., 0x02...) or that holds a <gpu> or <nic> element, as
 * written (NCCL compares bus ids as strings), each once, at most PF_TOPO_BUSIDS_MAX. PCI switches
 * and values that are not hex digits, ':' and '.' are left out. Returns how many were added. */
#define PF_TOPO_BUSID_MAX 32
#define PF_TOPO_BUSIDS_MAX 1024
size_t pf_topo_busids(struct pf_strlist *out, const char *text, size_t len);

/* ---- RDMA providers (providers.c): which driver a device of /sys/class/infiniband belongs to,
 * told by what the kernel says in sysfs (rxe's parent, siw's node_desc, the device/driver link,
 * the PCI vendor id, mlx4/mlx5's hca_type), never by the device's name nor by a missing device
 * link ("unknown" then), and what that driver legitimately reports. */
enum pf_rdma_cm {
    PF_RDMA_CM_NO,     /* not used with this device (EFA: libfabric opens uverbs only) */
    PF_RDMA_CM_USEFUL, /* UCX, MPI and libfabric use it; NCCL's IB transport does not */
    PF_RDMA_CM_NEEDED, /* iWARP: connections are set up through the RDMA CM */
};
struct pf_rdma_provider {
    const char *name;        /* rdma-core's provider name: "efa", "mlx5", ... */
    const char *what;        /* the hardware, in words */
    const char *drivers;     /* PCI driver names (the device/driver link), ' '-separated */
    const char *vendors;     /* PCI vendor ids as sysfs writes them ("0x1d0f"), ' '-separated */
    bool software;           /* no PCI device (rxe, siw) */
    const char *link_layers; /* the link_layer values it legitimately reports, '|'-separated */
    const char *example;     /* a device name it goes by */
    const char *node_type;   /* its node_type file, NULL when it depends (iWARP or RoCE mode) */
    bool roce_gids;          /* its Ethernet ports carry the RoCE v2 GIDs NCCL needs */
    enum pf_rdma_cm rdma_cm;
    bool pma_counters;            /* ports/N/counters/ (an InfiniBand PMA) */
    const char *const *hw_errors; /* its hw_counters/ that count errors; NULL: the generic list */
    const char *nccl_net;         /* the NCCL_NET that fits ("IB", "OFI"); NULL: none does */
    const char *advice;           /* what NCCL does with it */
    const char *source;           /* where the facts come from */
};
extern const struct pf_rdma_provider pf_rdma_providers[];
extern const size_t pf_rdma_providers_count; /* the last row is "unknown" */

/* One device: its provider and what told it. */
struct pf_rdma_ident {
    const struct pf_rdma_provider *provider; /* never NULL ("unknown" at worst) */
    bool iwarp;                              /* node_type "4: RNIC" */
    char node_type[32], driver[32], vendor[16];
    char how[96]; /* "driver efa", "PCI vendor 0x1d0f", "no PCI device (software)" */
};
void pf_rdma_identify(struct pf_rdma_ident *out, const struct pf_host *h, const char *hca);
const struct pf_rdma_provider *pf_rdma_provider_named(const char *name);
const struct pf_rdma_provider *pf_rdma_provider_unknown(void);
bool pf_rdma_link_layer_ok(const struct pf_rdma_provider *p, const char *link_layer);
/* Whether an Ethernet port of the device needs a RoCE v2 GID (not on iWARP, not on EFA). */
bool pf_rdma_wants_roce_gid(const struct pf_rdma_ident *id);
/* Whether the hw_counters/ entry name counts errors on this provider (NULL: generic list). */
bool pf_rdma_hw_error(const struct pf_rdma_provider *p, const char *name);
/* What NCCL does with the device, one sentence (iWARP: that NCCL's IB transport cannot). */
const char *pf_rdma_advice(const struct pf_rdma_ident *id);
/* The NCCL_NET that fits the device, NULL when NCCL's nets cannot use it. */
const char *pf_rdma_nccl_net(const struct pf_rdma_ident *id);

/* The PCIe link of an RDMA device's PCI function, as drivers/pci/pci-sysfs.c writes it:
 * speeds "16.0 GT/s PCIe" (older kernels "8 GT/s"; "Unknown" is not a speed), widths as
 * integers. */
struct pf_pcie_link {
    bool known;    /* all four attributes parsed, widths non-zero */
    bool degraded; /* trained below its capability */
    double cur_gts, max_gts;
    int cur_width, max_width;
    char cur[32], max[32]; /* "16.0 GT/s" */
    char why[160];         /* when not known */
};
bool pf_pcie_speed_parse(double *gts, const char *text);
bool pf_pcie_width_parse(int *width, const char *text);
/* -1 when the device has no such attributes (software device, no PCIe capability). */
int pf_pcie_link_read(struct pf_pcie_link *out, const struct pf_host *h, const char *hca);

/* nccl.env's rules for settings that NCCL releases changed (renamed, removed, added, the RoCE
 * GID choice), against the NCCL of version code `version` (0: unknown, and the messages say from
 * which release a rule applies). pf_check_nccl_env calls it with the loaded NCCL's version. */
void pf_nccl_env_version_rules(struct pf_check *out, struct pf_ctx *ctx, int version);

/* A GPU's fabric registration as NVML reports it (nvmlDeviceGetGpuFabricInfoV: state, status,
 * clusterUuid; values of nvml.h, which NCCL's src/include/nvmlwrap.h repeats). NCCL's MNNVL
 * set-up (src/mnnvl.cc) needs every rank's state COMPLETED and a cluster UUID that is not zero. */
#define PF_NVML_FABRIC_STATE_NOT_SUPPORTED 0
#define PF_NVML_FABRIC_STATE_NOT_STARTED 1
#define PF_NVML_FABRIC_STATE_IN_PROGRESS 2
#define PF_NVML_FABRIC_STATE_COMPLETED 3
enum pf_fabric_readiness {
    PF_FABRIC_NONE,      /* the GPU has no NVLink fabric (NOT_SUPPORTED): nothing to judge */
    PF_FABRIC_READY,     /* COMPLETED, status NVML_SUCCESS, a cluster UUID */
    PF_FABRIC_NOT_READY, /* fabric-not-ready; why says what NVML reports */
};
enum pf_fabric_readiness pf_gpu_fabric_readiness(char *why, size_t n, unsigned state, int status,
                                                 const unsigned char cluster_uuid[16]);

/* ---- gpu.health (gpu_health.c): each GPU's health through NVML (pkg/dl/nvml.h). */
struct pf_nvml_health;
struct pf_nvml_system;
/* The NVLink count a GPU model has, by its nvmlDeviceGetName ("NVIDIA H100 80GB HBM3": 18),
 * and the model's name in words; 0 (and NULL) for a model whose links depend on a bridge or
 * that the table does not know: its inactive links are evidence, not a fault. */
unsigned pf_gpu_nvlinks_expected(const char *name, const char **model);

/* Xid lines of the kernel log, as the NVIDIA driver writes them ("NVRM: Xid (PCI:0000:18:00):
 * 79, pid=..., GPU has fallen off the bus."), from /dev/kmsg records ("6,1234,5678,-;NVRM:
 * ...") or dmesg lines ("[  12.3] NVRM: ..."). */
#define PF_XID_MAX 256
struct pf_xid {
    unsigned domain, bus, dev; /* from "PCI:DDDD:BB:DD" */
    unsigned xid;
    char text[160]; /* the rest of the line after the number */
};
struct pf_xid_log {
    bool readable;   /* false: why says what it would take */
    char why[256];   /* "/dev/kmsg: Permission denied (...)" */
    char source[64]; /* "/dev/kmsg" */
    struct pf_xid *v;
    size_t n;       /* kept, at most PF_XID_MAX (the newest are dropped beyond it) */
    size_t dropped; /* Xid lines beyond PF_XID_MAX */
};
/* Adds every Xid line of text to log (log->v grows; free it with free). Returns how many. */
size_t pf_xid_parse(struct pf_xid_log *log, const char *text, size_t len);
/* What NVIDIA's Xid catalogue says of xid in a few words, NULL when it is not one that points at
 * the GPU or the node (those preflight warns about). */
const char *pf_xid_node_fault(unsigned xid);

/* Judges what NVML answered (sys, g[0..n)) and the kernel log (xid) into out: evidence per GPU
 * and the findings of docs/checks/11-gpu-health.md. Pure: the unit tests call it with tables. */
void pf_gpu_health_judge(struct pf_check *out, const struct pf_nvml_system *sys,
                         const struct pf_nvml_health *g, size_t n, const struct pf_xid_log *xid);

/* What the gang comparison reads of one pod's gpu.health: stable keys at the top of the
 * check's evidence (see docs/checks/11-gpu-health.md): model, gpuCount, nvlinksActive and
 * nvlinksSupported (summed over the pod's GPUs), nvlinksActiveMin (the fewest on one GPU),
 * migEnabled, persistenceDisabled (GPUs in MIG mode, with persistence off), driverVersion,
 * cudaVersion. A count the pod could not tell is absent from the evidence, -1 here; a string
 * is "" then. */
struct pf_gpu_inventory {
    bool known;               /* gpu.health read NVML on this pod */
    int gpus;                 /* GPUs NVML lists */
    char model[96];           /* their nvmlDeviceGetName; "mixed" when they differ */
    int nvlinks_active;       /* active NVLinks over all the pod's GPUs (8 x H100: 144) */
    int nvlinks_supported;    /* NVLinks NVML lists over all of them */
    int nvlinks_active_min;   /* the fewest active NVLinks of one GPU */
    int mig_enabled;          /* GPUs in MIG mode */
    int persistence_disabled; /* GPUs with persistence mode off */
    char driver[80];          /* nvmlSystemGetDriverVersion: "550.90.07" */
    char cuda[16];            /* nvmlSystemGetCudaDriverVersion_v2: "12.4" */
};
/* Reads it from a gpu.health check's evidence (NULL, or a check that read no GPU: known
 * false). */
void pf_gpu_inventory_read(struct pf_gpu_inventory *out, const struct pf_node *evidence);

/* ---- the checks (one function each; files in pkg/checks/) */
void pf_check_gpu_devices(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_gpu_fabric(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_gpu_health(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_devices(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_ports(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_memlock(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_gpudirect(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_net_interfaces(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_nccl_env(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_nccl_library(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_sys_shm(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_sys_ports(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_net_multus(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_net_sriov(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_topology_locality(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_verbs(struct pf_check *out, struct pf_ctx *ctx);
void pf_check_rdma_efa(struct pf_check *out, struct pf_ctx *ctx);

/* NCCL_NET advice (pkg/checks/advice.c). When NCCL_NET is unset and the pod means to use
 * RDMA (expect.transport IB or OFI, expect.rdma required, NCCL_IB_HCA set, or HCAs with uverbs
 * nodes in the pod), the net name NCCL_NET should hold ("IB", or "OFI" for an EFA-only pod)
 * with the reason in why; NULL otherwise. */
const char *pf_checks_net_advice(char *why, size_t n, const struct pf_ctx *ctx);
/* Appends "set NCCL_NET=<name> ... fails loudly" to the remedies of c's findings from index
 * from on whose code is in codes (NULL-terminated), when the advice applies. */
void pf_checks_net_remedies(struct pf_check *c, const struct pf_ctx *ctx, size_t from,
                            const char *const *codes);
/* Records the advice (when it applies) in c's evidence under `advice` (a sequence). */
void pf_checks_record_advice(struct pf_check *c, const struct pf_ctx *ctx);
/* Every check's `advice` evidence, as "<check id>: <text>", for the human form. */
void pf_checks_advice(struct pf_strlist *out, const struct pf_verdict *v);

/* The pod's attachments from every source net.multus reads (pkg/k8s/attach.h: Multus,
 * GKE, device-plugin resources, and the ResourceClaims when PREFLIGHT_READ_CLAIMS asks), for
 * the rails stage; no wait, no findings. Free with pf_k8s_attachments_free. */
struct pf_k8s_attachments;
void pf_checks_attachments(struct pf_k8s_attachments *out, const struct pf_ctx *ctx);

/* ifname-no-match for an NCCL_SOCKET_IFNAME list l that names none of the interfaces ifs, with
 * the nearest interface name as a did-you-mean (net.interfaces, and nccl.env under `preflight
 * env` in the pod). */
struct pf_netif_list;
struct pf_ncclenv_list;
void pf_checks_ifname_no_match(struct pf_check *out, struct pf_ctx *ctx,
                               const struct pf_netif_list *ifs, const struct pf_ncclenv_list *l);

/* rdma.counters runs around the collectives, not from the table: a snapshot of every port's
 * error counters before (pf_counters_snapshot, NULL when there are no HCAs), and the check
 * after, comparing a fresh read with it. `check` takes the snapshot before the local checks
 * and compares after them, at least PF_COUNTERS_MIN_INTERVAL_S later. */
#define PF_COUNTERS_MIN_INTERVAL_S 1.0
struct pf_counters;
struct pf_counters *pf_counters_snapshot(struct pf_ctx *ctx);
void pf_check_rdma_counters(struct pf_check *out, struct pf_ctx *ctx,
                            const struct pf_counters *before);
void pf_counters_free(struct pf_counters *s);

#endif
