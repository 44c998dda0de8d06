/* TEST DOUBLE data: what the NVML double (nvml.c) answers for gpu.health, per GPU model, taken
 * from real `nvidia-smi -q` (and `nvidia-smi nvlink -s`, `nvidia-smi topo -m`) output published
 * in public repositories and issues. nvidia-smi prints what NVML answers, field by field:
 *   Persistence Mode          nvmlDeviceGetPersistenceMode
 *   MIG Mode / Current        nvmlDeviceGetMigMode
 *   ECC Mode / Current        nvmlDeviceGetEccMode
 *   ECC Errors / Volatile     nvmlDeviceGetTotalEccErrors (VOLATILE; "DRAM Uncorrectable")
 *   Retired Pages             nvmlDeviceGetRetiredPages, ..PendingStatus ("N/A": NOT_SUPPORTED)
 *   Remapped Rows             nvmlDeviceGetRemappedRows
 *   Clocks Event Reasons      nvmlDeviceGetCurrentClocksEventReasons ("Active" sets the bit)
 *   PCI / Link Width          nvmlDeviceGetMaxPcieLinkWidth, nvmlDeviceGetCurrPcieLinkWidth
 *   nvlink -s "Link N: <inactive>" / "NV18" in topo -m    nvmlDeviceGetNvLinkState
 * Each profile names its source; a field the source does not show is marked "assumed" and
 * holds the healthy value. No profile is a GPU: they are tables to test preflight's reading. */
#ifndef PF_TEST_NVML_PROFILES_H
#define PF_TEST_NVML_PROFILES_H

#define PROF_MAX_GPUS 8
#define NOT_SUP 0xffffffffu /* the field is "N/A" in the capture: NVML_ERROR_NOT_SUPPORTED */

struct prof {
    const char *id;   /* DOUBLE_NVML_PROFILE */
    const char *name; /* Product Name */
    const char *driver;
    int cuda; /* "CUDA Version: 12.2" as nvmlSystemGetCudaDriverVersion_v2 gives it: 12020 */
    unsigned ngpus;
    unsigned bus[PROF_MAX_GPUS]; /* the captures' PCI buses, domain 0 device 0 */
    unsigned persistence;        /* 1 Enabled */
    unsigned mig;                /* 1 Enabled, NOT_SUP "N/A" */
    unsigned ecc_mode;
    unsigned ecc_unc, ecc_cor; /* volatile DRAM counts */
    unsigned retired;          /* NOT_SUP: "Retired Pages ... N/A" (Ampere on: rows are remapped) */
    unsigned remap_cor, remap_unc, remap_pending, remap_failed; /* NOT_SUP: "N/A" */
    unsigned long long clocks;                                  /* event reason bits */
    unsigned pcie_max, pcie_cur;
    unsigned nvlinks;       /* links the GPU has (NVML answers for 0..nvlinks-1) */
    unsigned inactive_mask; /* links that answer inactive */
    unsigned faulty_gpu;    /* the one GPU a fault capture describes; the others healthy */
    const char *source;
};

static const struct prof profiles[] = {
    /* leptonai/gpud, components/accelerator/nvidia/query/testdata/
     * nvidia-smi-query.535.183.01.out.0.valid (commit a7cdf53): 8 x NVIDIA H100 80GB HBM3,
     * driver 535.183.01, CUDA 12.2, Persistence Enabled, MIG Disabled, ECC Enabled with every
     * counter 0, Retired Pages N/A, Remapped Rows 0/0/No/No, Clocks Event Reasons: Idle Active
     * only, Link Width 16x/16x. NVLinks: 18 each, "NV18" between every pair in
     * `nvidia-smi topo -m` of an HGX H100 (NVIDIA/nccl issue 1264). */
    {"h100-sxm",
     "NVIDIA H100 80GB HBM3",
     "535.183.01",
     12020,
     8,
     {0x53, 0x64, 0x75, 0x86, 0x97, 0xA8, 0xB9, 0xCA},
     1,
     0,
     1,
     0,
     0,
     NOT_SUP,
     0,
     0,
     0,
     0,
     0x1,
     16,
     16,
     18,
     0,
     NOT_SUP,
     "gpud nvidia-smi-query.535.183.01.out.0.valid"},
    /* leptonai/gpud, the same folder, nvidia-smi-query.535.161.08.out.0.valid: 8 x NVIDIA H100
     * 80GB HBM3, driver 535.161.08, on every GPU "HW Slowdown: Active" and "HW Power Brake
     * Slowdown: Active" (0x8 | 0x80), all else as above. */
    {"h100-sxm-powerbrake",
     "NVIDIA H100 80GB HBM3",
     "535.161.08",
     12020,
     8,
     {0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB},
     1,
     0,
     1,
     0,
     0,
     NOT_SUP,
     0,
     0,
     0,
     0,
     0x88,
     16,
     16,
     18,
     0,
     NOT_SUP,
     "gpud nvidia-smi-query.535.161.08.out.0.valid"},
    /* NVIDIA/DCGM issue 149 ("No NVLINK activity on DGX-A100 320GB"): 8 x A100 SXM4 40GB
     * with "NV12" between every pair in `nvidia-smi topo -m`: 12 NVLinks each. Driver, ECC,
     * rows and clocks are not in the issue: assumed healthy, with the driver of the DGX
     * A100's R470 (assumed). */
    {"a100-sxm",
     "NVIDIA A100-SXM4-40GB",
     "470.199.02",
     11040,
     8,
     {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD},
     1,
     0,
     1,
     0,
     0,
     NOT_SUP,
     0,
     0,
     0,
     0,
     0x1,
     16,
     16,
     12,
     0,
     NOT_SUP,
     "NVIDIA/DCGM#149 topo NV12; the rest assumed"},
    /* leptonai/gpud pull request 80 ("track row remapping, RMA/GPU reset status"): a GPU whose
     * "Remapped Rows" read Correctable 0, Uncorrectable 4, Pending Yes ("requires a reset to
     * actually remap the rows"). The model is not in the quote: an H100 SXM is assumed, GPU 2
     * carries it. The uncorrected errors that caused the remaps are counted in the volatile
     * DRAM counter (4, assumed: one per remapped row). */
    {"h100-remap-pending",
     "NVIDIA H100 80GB HBM3",
     "535.183.01",
     12020,
     8,
     {0x53, 0x64, 0x75, 0x86, 0x97, 0xA8, 0xB9, 0xCA},
     1,
     0,
     1,
     4,
     0,
     NOT_SUP,
     0,
     4,
     1,
     0,
     0x1,
     16,
     16,
     18,
     0,
     2,
     "gpud#80 Remapped Rows 0/4/Pending Yes"},
    /* wtdcode/vllm-backport issue 62: 4 x A100 80GB PCIe, driver 580.178.04; GPU2 (PCI
     * 0000:9c:00) logged Xid 48 (double-bit ECC), Xid 63 (row remap pending) and Xid 94/154,
     * its Remapped Rows grew from 11 to 12, and after a reboot a row failed again. Here: GPU 2
     * with 12 uncorrectable remapped rows, one pending, and the volatile uncorrected counter 1
     * (the one Xid 48 since the driver loaded; assumed). A PCIe A100 has NVLink only through a
     * bridge: no links here (NOT_SUPPORTED). */
    {"a100-pcie-ecc",
     "NVIDIA A100 80GB PCIe",
     "580.178.04",
     13000,
     4,
     {0x1b, 0x3d, 0x9c, 0xbc},
     1,
     0,
     1,
     1,
     0,
     NOT_SUP,
     0,
     12,
     1,
     0,
     0x1,
     16,
     16,
     0,
     0,
     2,
     "wtdcode/vllm-backport#62 GPU2 Xid 48/63, 12 remapped rows"},
    /* Azure/azhpc-diagnostics issue 73 ("Check for inactive NVLinks"): `nvidia-smi nvlink -s`
     * of a Tesla V100-SXM2-32GB, GPU 3 with "Link 3: <inactive>" and "Link 5: <inactive>", the
     * other 4 of its 6 links at 25.781 GB/s. Before Ampere: pages are retired, not rows
     * remapped (Remapped Rows N/A). */
    {"v100-nvlink-down",
     "Tesla V100-SXM2-32GB",
     "470.199.02",
     11040,
     8,
     {0x06, 0x07, 0x08, 0x09, 0x85, 0x86, 0x87, 0x88},
     1,
     NOT_SUP,
     1,
     0,
     0,
     0,
     NOT_SUP,
     NOT_SUP,
     NOT_SUP,
     NOT_SUP,
     0x1,
     16,
     16,
     6,
     (1u << 3) | (1u << 5),
     3,
     "Azure/azhpc-diagnostics#73 nvlink -s links 3,5 inactive"},
    /* GB200 (NVL72 compute tray, 4 GPUs): NVIDIA/k8s-test-infra issue 371 shows `nvidia-smi
     * nvlink -s` with Link 0..17 at 53.125 GB/s on every "NVIDIA GB200" (the nvml-mock
     * reproduces a real tray); leptonai/gpud pull request 1106 a real GB200 node's fabric
     * state Completed/Success. Driver 570.133.20 and CUDA 12.8 assumed; PCIe is the Grace C2C
     * link on this board (x16 assumed). */
    {"gb200",
     "NVIDIA GB200",
     "570.133.20",
     12080,
     4,
     {0x01, 0x02, 0x03, 0x04},
     1,
     0,
     1,
     0,
     0,
     NOT_SUP,
     0,
     0,
     0,
     0,
     0x1,
     16,
     16,
     18,
     0,
     NOT_SUP,
     "NVIDIA/k8s-test-infra#371 nvlink -s 18 links; gpud#1106"},
};

#endif
