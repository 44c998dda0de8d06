/* The HCAs the RDMA checks share (rdma_hca.c): read once a check from sysfs and /dev/infiniband
 * under the root prefix, for rdma.devices (rdma.c), rdma.ports (rdma_ports.c) and rdma.gpudirect
 * (rdma_gpudirect.c). */
#ifndef PF_CHECKS_RDMA_HCA_H
#define PF_CHECKS_RDMA_HCA_H

#include "checks.h"

#define SYS_IB "/sys/class/infiniband"
#define SYS_VERBS "/sys/class/infiniband_verbs"
#define DEV_IB "/dev/infiniband"

enum node_state {
    NODE_NO_UVERBS = 0, /* no uverbsN in sysfs names this HCA */
    NODE_MISSING,       /* /dev/infiniband/uverbsN is not in the pod */
    NODE_PRESENT,       /* present (not opened) */
    NODE_OPENABLE,      /* opened and closed */
    NODE_UNOPENABLE,    /* present, open failed */
};

struct hca {
    char name[64];
    char uverbs[32]; /* "uverbs3", "" when none */
    enum node_state node;
    char why[256];           /* for NODE_NO_UVERBS / NODE_UNOPENABLE */
    bool ibdev_unread;       /* NODE_NO_UVERBS while some uverbsN/ibdev could not be read */
    struct pf_rdma_ident id; /* its provider, from sysfs */
};

struct hca_set {
    struct hca *v;
    size_t n;
    bool dev_dir; /* /dev/infiniband exists */
};

/* expect.rdma is none: the RDMA checks skip. */
bool pf_rdma_expect_none(const struct pf_ctx *ctx);
/* Lists the HCAs of ctx, maps each to its uverbsN through sysfs, and looks for its node
 * (opening it when open_nodes). */
void pf_rdma_hca_scan(struct hca_set *s, struct pf_ctx *ctx, bool open_nodes);
void pf_rdma_hca_set_free(struct hca_set *s);
/* the pod was given it: its uverbs node is in the pod */
bool pf_rdma_hca_in_pod(const struct hca *h);
/* in the pod, or cannot tell (no uverbs mapping in sysfs) */
bool pf_rdma_hca_in_scope(const struct hca *h);
/* How many HCAs of s pass. */
size_t pf_rdma_hca_count(const struct hca_set *s, bool (*pass)(const struct hca *));

#endif
