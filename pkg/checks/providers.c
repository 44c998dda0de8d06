/* The RDMA providers: how the kernel says which driver a device of /sys/class/infiniband
 * belongs to, and what that driver legitimately reports. One table; every RDMA check asks it
 * instead of guessing from a device's name (rdma-core's udev rules rename devices: an EFA
 * device is efa_0 from the kernel and rdmap16s27 after rdma_rename, an mlx5 device may be
 * ibp12s0). A device is recognised, in this order, by the basename of its device/driver link
 * (the PCI driver bound to the function the RDMA device hangs off), by the PCI vendor id in
 * device/vendor when exactly one row claims it; a software device by what its driver writes
 * (rxe's "parent" attribute, siw's node_desc), never by a missing device link; with no device
 * link, by the family its hca_type names (mlx4/mlx5 "MT<id>"), else "unknown". What sysfs writes
 * comes from the kernel's drivers/infiniband/core/sysfs.c (torvalds/linux v6.6): link_layer is
 * "InfiniBand", "Ethernet" or "Unknown" (rdma_port_get_link_layer, core/verbs.c: a driver's
 * get_link_layer, else by node type, IB_LINK_LAYER_UNSPECIFIED for RDMA_NODE_UNSPECIFIED),
 * node_type is "N: CA", "N: RNIC", "N: unspecified"; state "4: ACTIVE" and phys_state "5: LinkUp"
 * for every driver (ib_port_state / ib_port_phys_state names). */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYS_IB "/sys/class/infiniband"

/* hw_counters/ names that count errors, per driver (the rest count traffic or are settings) */

/* drivers/infiniband/hw/mlx5/counters.c (v6.6): retrans_stats, out_of_seq_q_cnts, ... */
static const char *const mlx5_errors[] = {
    "local_ack_timeout_err",
    "packet_seq_err",
    "out_of_sequence",
    "rnr_nak_retry_err",
    "implied_nak_seq_err",
    "req_cqe_error",
    "resp_cqe_error",
    "req_remote_access_errors",
    "req_remote_invalid_request",
    "resp_local_length_error",
    "rx_icrc_encapsulated",
    "out_of_buffer",
    "duplicate_request",
    NULL,
};
/* drivers/infiniband/hw/efa/efa_verbs.c (v6.6) EFA_DEFINE_PORT_STATS; the remote-event counters
 * came with later kernels */
static const char *const efa_errors[] = {
    "rdma_read_wr_err",           "rdma_write_wr_err",           "retrans_timeout_events",
    "unresponsive_remote_events", "impaired_remote_conn_events", NULL,
};
/* drivers/infiniband/sw/rxe/rxe_hw_counters.c (v6.6) rxe_counter_descs */
static const char *const rxe_errors[] = {
    "duplicate_request",
    "out_of_seq_request",
    "rcvd_rnr_err",
    "send_rnr_err",
    "rcvd_seq_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "send_err",
    NULL,
};
/* drivers/infiniband/hw/bnxt_re/hw_counters.c (v6.6) bnxt_re_stat_descs; later kernels renamed
 * some to mlx5's names (rnr_nak_retry_err, implied_nak_seq_err, req_remote_invalid_request,
 * req_remote_access_errors, duplicate_request): both are listed */
static const char *const bnxt_errors[] = {
    "to_retransmits",
    "seq_err_naks_rcvd",
    "max_retry_exceeded",
    "rnr_naks_rcvd",
    "missing_resp",
    "unrecoverable_err",
    "bad_resp_err",
    "local_qp_op_err",
    "local_protection_err",
    "remote_invalid_req_err",
    "remote_access_err",
    "remote_op_err",
    "dup_req",
    "rnr_nak_retry_err",
    "implied_nak_seq_err",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "duplicate_request",
    NULL,
};
/* drivers/infiniband/hw/irdma/verbs.c (v6.6) irdma_hw_stat_names (i40iw's before 5.14) */
static const char *const irdma_errors[] = {
    "ip4InDiscards",  "ip4InTruncatedPkts", "ip6InDiscards", "ip6InTruncatedPkts",
    "tcpInOptErrors", "tcpInProtoErrors",   "rxVlanErrors",  NULL,
};

static const char efa_advice[] =
    "NCCL reaches EFA only through the aws-ofi-nccl net plugin (libfabric's efa provider, SRD): "
    "NCCL_NET=OFI, never IB; no rdma_cm and no RoCE GID are involved";
static const char ib_advice[] =
    "NCCL's IB transport drives it (NCCL_NET=IB): InfiniBand ports by LID, Ethernet ports by a "
    "RoCE v2 GID";
static const char iwarp_advice[] =
    "an iWARP device: NCCL's IB transport speaks InfiniBand and RoCE only, so NCCL runs over TCP "
    "sockets here unless the device runs in RoCE mode";
static const char soft_advice[] =
    "a software device on top of a netdev: it works with NCCL_NET=IB but is no faster than TCP "
    "sockets; for testing, not for training";

/* Per row: recognised by | reports | NCCL. Sources: the Linux driver (torvalds/linux v6.6,
 * drivers/infiniband/hw/<drv>/ or sw/) where it sets node_type, link layer and port
 * attributes, and rdma-core (linux-rdma/rdma-core v50.0) providers/<name>/ where libibverbs
 * matches the device (VERBS_PCI_MATCH vendor ids, VERBS_DRIVER_ID). */
const struct pf_rdma_provider pf_rdma_providers[] = {
    {"efa", "AWS Elastic Fabric Adapter", "efa", "0x1d0f", false, "Unknown", "rdmap16s27",
     "7: unspecified", false, PF_RDMA_CM_NO, false, efa_errors, "OFI", efa_advice,
     "efa/efa_main.c: node_type RDMA_NODE_UNSPECIFIED, parent the PCI function; efa_verbs.c: "
     "efa_port_link_layer returns IB_LINK_LAYER_UNSPECIFIED (sysfs \"Unknown\"), efa_query_port "
     "ACTIVE/LinkUp, no process_mad (no PMA counters/); rdma-core providers/efa/efa.c: "
     "PCI_VENDOR_ID_AMAZON 0x1d0f, devices 0xefa0-0xefa3; kernel-boot/rdma_rename.c names it "
     "rdmap<bus>s<slot>"},
    {"mlx5", "NVIDIA/Mellanox ConnectX-4 and later", "mlx5_core", "0x15b3", false,
     "InfiniBand|Ethernet", "mlx5_0", NULL, true, PF_RDMA_CM_USEFUL, true, mlx5_errors, "IB",
     ib_advice,
     "mlx5/main.c: mlx5_ib_port_link_layer from the port_type capability (IB or ETH), parent "
     "the mlx5_core PCI function; mlx5/counters.c hw_counters; rdma-core providers/mlx5/mlx5.c "
     "PCI_VENDOR_ID_MELLANOX 0x15b3"},
    {"mlx4", "Mellanox ConnectX-3", "mlx4_core", "", false, "InfiniBand|Ethernet", "mlx4_0", NULL,
     true, PF_RDMA_CM_USEFUL, true, NULL, "IB", ib_advice,
     "mlx4/main.c: mlx4_ib_port_link_layer per port (IB or ETH); rdma-core providers/mlx4/mlx4.c "
     "PCI_VENDOR_ID_MELLANOX 0x15b3 (claimed by mlx5 too: recognised by its driver)"},
    {"irdma", "Intel Ethernet 800 (ice) / X722 (i40e) RDMA", "ice i40e", "0x8086", false,
     "Ethernet", "irdma0", NULL, true, PF_RDMA_CM_USEFUL, false, irdma_errors, "IB", ib_advice,
     "irdma/verbs.c: irdma_init_rdma_device node_type RDMA_NODE_RNIC (iWARP) or RDMA_NODE_IB_CA "
     "(RoCEv2), link layer Ethernet, parent the ice/i40e PCI function; i40iw before 5.14; "
     "rdma-core providers/irdma/umain.c PCI_VENDOR_ID_INTEL 0x8086"},
    {"bnxt_re", "Broadcom NetXtreme-E RoCE", "bnxt_en", "0x14e4", false, "Ethernet", "bnxt_re0",
     "1: CA", true, PF_RDMA_CM_USEFUL, false, bnxt_errors, "IB", ib_advice,
     "bnxt_re/main.c: node_type RDMA_NODE_IB_CA, bnxt_re_get_link_layer Ethernet, parent the "
     "bnxt_en PCI function; bnxt_re/hw_counters.c; rdma-core providers/bnxt_re/main.c "
     "PCI_VENDOR_ID_BROADCOM 0x14e4"},
    {"erdma", "Alibaba Elastic RDMA", "erdma", "0x1ded", false, "Ethernet", "erdma_0", NULL, true,
     PF_RDMA_CM_USEFUL, false, NULL, "IB", ib_advice,
     "erdma/erdma_main.c: node_type RDMA_NODE_RNIC (iWARP; RoCEv2 on later kernels), "
     "erdma_get_link_layer Ethernet; rdma-core providers/erdma/erdma.c PCI_VENDOR_ID_ALIBABA "
     "0x1ded"},
    {"mana", "Microsoft Azure Network Adapter (mana_ib)", "mana", "0x1414", false, "Ethernet",
     "mana_0", NULL, false, PF_RDMA_CM_USEFUL, false, NULL, NULL,
     "Azure's MANA: NCCL's IB transport does not use it; Azure GPU VMs carry NCCL over their "
     "mlx5 InfiniBand functions",
     "mana/device.c: parent the mana PCI function (gdma; PCI_VENDOR_ID_MICROSOFT 0x1414), link "
     "layer Ethernet; rdma-core "
     "providers/mana/mana.c VERBS_DRIVER_ID(RDMA_DRIVER_MANA)"},
    {"hns", "HiSilicon RoCE (hns_roce_hw_v2)", "hns3", "0x19e5", false, "Ethernet", "hns_0",
     "1: CA", true, PF_RDMA_CM_USEFUL, false, NULL, "IB", ib_advice,
     "hns/hns_roce_main.c: node_type RDMA_NODE_IB_CA, hns_roce_get_link_layer Ethernet; "
     "rdma-core providers/hns/hns_roce_u.c PCI_VENDOR_ID_HUAWEI 0x19e5"},
    {"qedr", "Marvell/QLogic FastLinQ RDMA", "qede", "0x1077", false, "Ethernet", "qedr0", NULL,
     true, PF_RDMA_CM_USEFUL, false, NULL, "IB", ib_advice,
     "qedr/main.c: node_type RDMA_NODE_RNIC (iWARP) or RDMA_NODE_IB_CA (RoCE) by the NIC's "
     "personality, link layer Ethernet; rdma-core providers/qedr/qelr_main.c "
     "PCI_VENDOR_ID_QLOGIC 0x1077"},
    {"ionic", "AMD Pensando RDMA", "ionic", "0x1dd8", false, "Ethernet", "ionic_0", "1: CA", true,
     PF_RDMA_CM_USEFUL, false, NULL, "IB", ib_advice,
     "drivers/infiniband/hw/ionic/ (merged after v6.6): RoCE over the ionic PCI function (AMD "
     "Pensando, PCI vendor 0x1dd8); rdma-core v64.0 providers/ionic/ionic.c matches it by "
     "VERBS_DRIVER_ID(RDMA_DRIVER_IONIC) only"},
    {"cxgb4", "Chelsio T4/T5/T6 iWARP", "cxgb4", "0x1425", false, "Ethernet", "cxgb4_0", "4: RNIC",
     false, PF_RDMA_CM_NEEDED, false, NULL, NULL, iwarp_advice,
     "cxgb4/provider.c: node_type RDMA_NODE_RNIC, link layer Ethernet by node type (core/verbs.c); "
     "rdma-core providers/cxgb4/dev.c PCI_VENDOR_ID_CHELSIO 0x1425"},
    {"vmw_pvrdma", "VMware paravirtual RDMA", "vmw_pvrdma", "0x15ad", false, "Ethernet",
     "vmw_pvrdma0", "1: CA", true, PF_RDMA_CM_USEFUL, false, NULL, "IB", ib_advice,
     "vmw_pvrdma/pvrdma_main.c: node_type RDMA_NODE_IB_CA, pvrdma_port_link_layer Ethernet; "
     "rdma-core providers/vmw_pvrdma/pvrdma_main.c PCI_VENDOR_ID_VMWARE 0x15ad"},
    {"hfi1", "Intel/Cornelis Omni-Path HFI", "hfi1", "", false, "InfiniBand", "hfi1_0", "1: CA",
     false, PF_RDMA_CM_USEFUL, true, NULL, "IB", ib_advice,
     "hfi1/verbs.c through rdmavt: node_type RDMA_NODE_IB_CA, link layer InfiniBand, a PMA; "
     "rdma-core providers/hfi1verbs/hfiverbs.c PCI_VENDOR_ID_INTEL 0x8086 (claimed by irdma "
     "too: recognised by its driver)"},
    {"rxe", "Soft-RoCE (software)", "", "", true, "Ethernet", "rxe0", "1: CA", true,
     PF_RDMA_CM_USEFUL, false, rxe_errors, "IB", soft_advice,
     "sw/rxe/rxe_verbs.c: node_type RDMA_NODE_IB_CA, rxe_get_link_layer Ethernet, a \"parent\" "
     "attribute naming the netdev, no PCI parent; rxe_hw_counters.c; rdma-core "
     "providers/rxe/rxe.c VERBS_DRIVER_ID(RDMA_DRIVER_RXE)"},
    {"siw", "Soft-iWARP (software)", "", "", true, "Ethernet", "siw0", "4: RNIC", false,
     PF_RDMA_CM_NEEDED, false, NULL, NULL, iwarp_advice,
     "sw/siw/siw_main.c: node_type RDMA_NODE_RNIC, link layer Ethernet by node type, no PCI "
     "parent; rdma-core providers/siw/siw.c VERBS_DRIVER_ID(RDMA_DRIVER_SIW)"},
    /* the last row: a driver this table does not know; judged as before, by what it reports */
    {"unknown", "an RDMA driver preflight does not know", "", "", false,
     "InfiniBand|Ethernet|Unknown", "roce0", NULL, true, PF_RDMA_CM_USEFUL, true, mlx5_errors, "IB",
     ib_advice, "none: its reports are judged generically"},
};
const size_t pf_rdma_providers_count = PF_ARRAY_LEN(pf_rdma_providers);

/* Whether word is one of the words of list, separated by sep. */
static bool in_list(const char *list, char sep, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && n > 0 && memcmp(p, word, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

const struct pf_rdma_provider *pf_rdma_provider_unknown(void)
{
    return &pf_rdma_providers[pf_rdma_providers_count - 1];
}

const struct pf_rdma_provider *pf_rdma_provider_named(const char *name)
{
    for (size_t i = 0; i < pf_rdma_providers_count; i++)
        if (strcmp(pf_rdma_providers[i].name, name) == 0) return &pf_rdma_providers[i];
    return NULL;
}

void pf_rdma_identify(struct pf_rdma_ident *out, const struct pf_host *h, const char *hca)
{
    memset(out, 0, sizeof(*out));
    out->provider = pf_rdma_provider_unknown();
    char text[128];
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/node_type", hca) > 0) {
        pf_trim(text);
        snprintf(out->node_type, sizeof(out->node_type), "%.31s", text);
        /* RDMA_NODE_RNIC is 4 (include/rdma/ib_verbs.h) */
        out->iwarp = strcmp(text, "4: RNIC") == 0;
    }
    bool has_device = pf_host_exists(h, SYS_IB "/%s/device", hca);
    /* The software devices first: kernels before 5.x gave rxe and siw the netdev's PCI function
     * as parent, so their device link leads to another driver's function. rxe has a "parent"
     * attribute (sw/rxe/rxe_verbs.c), siw's node_desc is SIW_NODE_DESC_COMMON (sw/siw/siw.h). */
    if (pf_host_exists(h, SYS_IB "/%s/parent", hca)) {
        out->provider = pf_rdma_provider_named("rxe");
        snprintf(out->how, sizeof(out->how), "a \"parent\" attribute (software RoCE)");
        goto done;
    }
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/node_desc", hca) > 0 &&
        strncmp(text, "Software iWARP stack", 20) == 0) {
        out->provider = pf_rdma_provider_named("siw");
        snprintf(out->how, sizeof(out->how), "node_desc \"Software iWARP stack\"");
        goto done;
    }
    if (pf_host_link_basename(text, sizeof(text), h, SYS_IB "/%s/device/driver", hca) == 0) {
        snprintf(out->driver, sizeof(out->driver), "%.31s", text);
        for (size_t i = 0; i + 1 < pf_rdma_providers_count; i++)
            if (in_list(pf_rdma_providers[i].drivers, ' ', text)) {
                out->provider = &pf_rdma_providers[i];
                snprintf(out->how, sizeof(out->how), "driver %.31s", text);
                goto done;
            }
    }
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/device/vendor", hca) > 0) {
        pf_trim(text);
        for (char *p = text; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        snprintf(out->vendor, sizeof(out->vendor), "%.15s", text);
        const struct pf_rdma_provider *hit = NULL;
        size_t hits = 0;
        for (size_t i = 0; i + 1 < pf_rdma_providers_count; i++)
            if (in_list(pf_rdma_providers[i].vendors, ' ', text)) {
                hit = &pf_rdma_providers[i];
                hits++;
            }
        if (hits == 1) {
            out->provider = hit;
            snprintf(out->how, sizeof(out->how), "PCI vendor %s", out->vendor);
            goto done;
        }
    }
    /* Where neither the driver link nor the vendor told, the device's own attributes may name
     * its family: mlx4 and mlx5 write hca_type "MT<PCI device id>" (mlx5/main.c hca_type_show,
     * mlx4/main.c show_hca, torvalds/linux v6.6), board_id "MT_...". */
    char hca_type[64] = "";
    if (pf_host_read(hca_type, sizeof(hca_type), h, SYS_IB "/%s/hca_type", hca) > 0)
        pf_trim(hca_type);
    if (strncmp(hca_type, "MT", 2) == 0 && isdigit((unsigned char)hca_type[2])) {
        /* ConnectX-3 (Pro) and their VFs are 0x1003, 0x1004, 0x1007, 0x1008 */
        int dev = atoi(hca_type + 2);
        bool cx3 = dev == 4099 || dev == 4100 || dev == 4103 || dev == 4104;
        out->provider = pf_rdma_provider_named(cx3 ? "mlx4" : "mlx5");
        snprintf(out->how, sizeof(out->how), "hca_type %.20s%s", hca_type,
                 has_device ? "" : " (no device link)");
        goto done;
    }
    if (!has_device) {
        /* No device link is no proof of a software device: a container's sysfs or a driver this
         * table does not know shows none either, and rxe and siw are named positively above
         * (their "parent" attribute, their node_desc). */
        snprintf(out->how, sizeof(out->how),
                 "unknown: no device link, no \"parent\" attribute%s%.20s%s",
                 hca_type[0] ? ", hca_type " : "", hca_type, hca_type[0] ? "" : ", no hca_type");
        goto done;
    }
    snprintf(out->how, sizeof(out->how), "driver %s, PCI vendor %s not in the table",
             out->driver[0] ? out->driver : "unknown", out->vendor[0] ? out->vendor : "unknown");
done:
    pf_err_clear();
}

bool pf_rdma_link_layer_ok(const struct pf_rdma_provider *p, const char *link_layer)
{
    return in_list(p->link_layers, '|', link_layer);
}

bool pf_rdma_wants_roce_gid(const struct pf_rdma_ident *id)
{
    return id->provider->roce_gids && !id->iwarp;
}

bool pf_rdma_hw_error(const struct pf_rdma_provider *p, const char *name)
{
    const char *const *list = p && p->hw_errors ? p->hw_errors : mlx5_errors;
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0) return true;
    return false;
}

const char *pf_rdma_advice(const struct pf_rdma_ident *id)
{
    return id->iwarp && id->provider->nccl_net ? iwarp_advice : id->provider->advice;
}

const char *pf_rdma_nccl_net(const struct pf_rdma_ident *id)
{
    return id->iwarp ? NULL : id->provider->nccl_net;
}

/* ---- the PCIe link of a device (drivers/pci/pci-sysfs.c, v6.6: current_link_speed and
 * max_link_speed print pci_speed_string(), drivers/pci/probe.c pci_bus_speed_strings:
 * "2.5 GT/s PCIe" ... "64.0 GT/s PCIe", "Unknown" outside them; kernels before 4.19 printed
 * "2.5 GT/s", "5 GT/s", "8 GT/s" and "Unknown speed". The widths print as "%u"; a VF's link
 * registers read zero) */

bool pf_pcie_speed_parse(double *gts, const char *text)
{
    if (!isdigit((unsigned char)text[0])) return false;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || v > 1024) return false;
    if (strncmp(end, " GT/s", 5) != 0) return false;
    end += 5;
    if (*end && strcmp(end, " PCIe") != 0) return false;
    *gts = v;
    return true;
}

bool pf_pcie_width_parse(int *width, const char *text)
{
    if (!isdigit((unsigned char)text[0])) return false;
    long v = 0;
    const char *p = text;
    while (isdigit((unsigned char)*p) && v <= 64)
        v = v * 10 + (*p++ - '0');
    if (*p || v > 64) return false;
    *width = (int)v;
    return true;
}

/* Reads one attribute of the device's PCI function, trimmed; false when absent. */
static bool read_pci(char *out, size_t n, const struct pf_host *h, const char *hca,
                     const char *attr)
{
    if (pf_host_read(out, n, h, SYS_IB "/%s/device/%s", hca, attr) <= 0) return false;
    pf_trim(out);
    return out[0] != '\0';
}

/* "16.0 GT/s" of "16.0 GT/s PCIe" */
static void speed_text(char *out, size_t n, const char *sysfs)
{
    snprintf(out, n, "%s", sysfs);
    size_t len = strlen(out);
    if (len > 5 && strcmp(out + len - 5, " PCIe") == 0) out[len - 5] = '\0';
}

int pf_pcie_link_read(struct pf_pcie_link *out, const struct pf_host *h, const char *hca)
{
    memset(out, 0, sizeof(*out));
    char cs[64], ms[64], cw[32], mw[32];
    bool have = read_pci(cs, sizeof(cs), h, hca, "current_link_speed") &&
                read_pci(ms, sizeof(ms), h, hca, "max_link_speed") &&
                read_pci(cw, sizeof(cw), h, hca, "current_link_width") &&
                read_pci(mw, sizeof(mw), h, hca, "max_link_width");
    pf_err_clear();
    if (!have) return -1;
    speed_text(out->cur, sizeof(out->cur), cs);
    speed_text(out->max, sizeof(out->max), ms);
    if (!pf_pcie_speed_parse(&out->cur_gts, cs) || !pf_pcie_speed_parse(&out->max_gts, ms) ||
        !pf_pcie_width_parse(&out->cur_width, cw) || !pf_pcie_width_parse(&out->max_width, mw) ||
        out->cur_width == 0 || out->max_width == 0) {
        snprintf(out->why, sizeof(out->why),
                 "not judged: current \"%.20s\" x\"%.8s\", max \"%.20s\" x\"%.8s\"", cs, cw, ms,
                 mw);
        return 0;
    }
    out->known = true;
    out->degraded = out->cur_gts < out->max_gts || out->cur_width < out->max_width;
    return 0;
}
