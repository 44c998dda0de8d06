/* k8s/attach.h: the pod's network attachments, one list filled from every source that
 * describes them (docs/kubernetes.md, "How the pod got its networks"). Each source is read as
 * its writer writes it:
 *
 *   source      what                                   writer (repository, file, release)
 *   multus      k8s.v1.cni.cncf.io/network-status      k8snetworkplumbingwg/multus-cni, pkg/
 *               (pf_k8s_netstatus_parse, k8s.h)        (network-attachment-definition-client
 *                                                      pkg/apis/.../types.go NetworkStatus)
 *   gke         networking.gke.io/interfaces (asked)   GoogleCloudPlatform/gke-networking-api,
 *               networking.gke.io/interface-status     apis/network/v1/annotations.go
 *               (what GKE attached: networkName,       (InterfaceRef, InterfaceStatus)
 *               ipAddresses, macAddress)
 *   dra         a ResourceClaim (resource.k8s.io v1,   kubernetes/kubernetes staging/src/
 *               v1beta1, v1beta2): status.allocation.  k8s.io/api/resource/v1/types.go
 *               devices.results[] {request, driver,    (DeviceRequestAllocationResult,
 *               pool, device}, status.devices[]        AllocatedDeviceStatus, NetworkDeviceData;
 *               {driver, pool, device, networkData     KEP-4817); google/dranet writes
 *               {interfaceName, ips, hardwareAddress}} networkData (site/content/docs/concepts/
 *                                                      interface-status.md, v1.0)
 *   device      extended resources in the pod's        AWS's EFA device plugin (aws/eks-
 *   plugin      limits: vpc.amazonaws.com/efa,         charts stable/aws-efa-k8s-device-plugin
 *               rdma/<name> (rdma/hca_shared_devices_a installs it; the resource name as AWS's
 *               rdma/ib ...), as PREFLIGHT_DEVICE_     EKS docs request it); Mellanox/k8s-rdma-
 *               RESOURCES "name=count,..." (the        shared-dev-plugin README (configList
 *               downward API cannot expose extended    resourceName hca_shared_devices_a, under
 *                                                      the plugin's default prefix "rdma")
 *               resources: Kubernetes validates
 *               resourceFieldRef to cpu, memory,
 *               ephemeral-storage and hugepages)
 *
 * Pure text parsers; pf_k8s_rdma_list reads /sys/class/infiniband under the root. */
#ifndef PF_K8S_ATTACH_H
#define PF_K8S_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../host/host.h"

#define PF_K8S_GKE_INTERFACES_ANNOT "networking.gke.io/interfaces"
#define PF_K8S_GKE_DEFAULT_IF_ANNOT "networking.gke.io/default-interface"
#define PF_K8S_GKE_STATUS_ANNOT "networking.gke.io/interface-status"
#define PF_K8S_DEVICE_RESOURCES_ENV "PREFLIGHT_DEVICE_RESOURCES"
#define PF_K8S_MAX_ATTACH 256

enum pf_k8s_attach_src { PF_K8S_SRC_MULTUS, PF_K8S_SRC_GKE, PF_K8S_SRC_DRA, PF_K8S_SRC_DEVPLUGIN };

struct pf_k8s_attach {
    enum pf_k8s_attach_src src;
    char *name;             /* Multus "ns/nad", GKE network, DRA "claim/request", a resource name */
    char *interface;        /* the netdev in the pod the source promises; "" when it names none */
    char *device;           /* DRA "driver/pool/device"; "" otherwise */
    char *mac;              /* "" when not said */
    struct pf_strlist ips;  /* bare addresses (a CIDR's "/len" dropped) */
    struct pf_strlist rdma; /* RDMA devices the source names */
    char pci[32];           /* PCI address the source names, "" when none */
    int mtu;                /* the MTU the source records, 0 when none */
    long count;             /* device plugin: devices the resource promises; else 0 */
    bool cluster;           /* the cluster network (Multus default, GKE network "default") */
    bool reported;          /* GKE: interface-status lists it; DRA: status.devices has it */
    char not_ready[256];    /* DRA: a condition of type Ready with status False, as
                               "reason: message"; "" otherwise */
};
struct pf_k8s_attachments {
    struct pf_k8s_attach *v;
    size_t n;
};

/* "multus", "gke", "dra", "device-plugin" */
const char *pf_k8s_attach_src_name(enum pf_k8s_attach_src s);
/* Where the source is written, for messages ("annotation networking.gke.io/interfaces"). */
const char *pf_k8s_attach_src_where(enum pf_k8s_attach_src s);
void pf_k8s_attachments_free(struct pf_k8s_attachments *a);
/* Appends an attachment with every string empty; the caller fills it. NULL past the cap. */
struct pf_k8s_attach *pf_k8s_attach_add(struct pf_k8s_attachments *a, enum pf_k8s_attach_src s,
                                        const char *name);
/* Whether an expected network name is one this attachment answers to: the Multus rules of
 * pf_k8s_network_name_match, a GKE network, a DRA "claim/request" or the bare claim name, a
 * device-plugin resource. */
bool pf_k8s_attach_matches(const struct pf_k8s_attach *a, const char *expected);

/* Appends the Multus network-status's networks (the parsed annotation of k8s.h). */
struct pf_k8s_netstatus;
void pf_k8s_attach_from_netstatus(struct pf_k8s_attachments *out,
                                  const struct pf_k8s_netstatus *ns);

/* Parses networking.gke.io/interfaces (a JSON list of {"interfaceName", "network" or
 * "interface"}) and appends one attachment each; default_if (the default-interface
 * annotation, may be NULL) is only recorded. status (networking.gke.io/interface-status, may
 * be NULL) adds each network's addresses and MAC. PF_EINVAL naming the element when either is
 * not that shape; nothing is appended then. */
int pf_k8s_gke_parse(struct pf_k8s_attachments *out, const char *interfaces, size_t len,
                     const char *status, size_t status_len);

/* Parses one ResourceClaim (JSON, as the API server returns it) and appends one attachment
 * per allocated device (status.allocation.devices.results), named "claim/request", with what
 * status.devices says of it (networkData). An unallocated claim appends nothing. PF_EINVAL
 * when it is not a ResourceClaim of that shape. */
int pf_k8s_claim_parse(struct pf_k8s_attachments *out, const char *json, size_t len);

/* The ResourceClaims of a pod (JSON of a Pod, as the API server returns it): the names of
 * status.resourceClaimStatuses[].resourceClaimName (claims made from a template), of
 * spec.resourceClaims[].resourceClaimName (claims named directly) and of
 * status.extendedResourceClaimStatus.resourceClaimName (the claim kube-scheduler makes for
 * extended resources a DeviceClass backs), each once, appended to out. PF_EINVAL when it is
 * not a Pod of that shape. */
int pf_k8s_pod_claims_parse(struct pf_strlist *out, const char *json, size_t len);

/* Parses "name=count,name=count" (PF_K8S_DEVICE_RESOURCES_ENV; blanks and empty items
 * ignored) and appends one device-plugin attachment each. PF_EINVAL naming the item. */
int pf_k8s_resources_parse(struct pf_k8s_attachments *out, const char *text);

/* Reads the pod's attachments from every source it can see: the Multus network-status and
 * GKE's annotations (in the podinfo annotations map), and PREFLIGHT_DEVICE_RESOURCES (value,
 * may be NULL). A source that does not parse is skipped; its message goes to errs. */
struct pf_k8s_podinfo;
void pf_k8s_attach_gather(struct pf_k8s_attachments *out, struct pf_strlist *errs,
                          const struct pf_k8s_podinfo *pi, const char *resources);

/* ---- what the namespace holds: the RDMA devices under /sys/class/infiniband */
struct pf_k8s_rdmadev {
    char name[64];
    char pci[32];      /* "" when the device is not a PCI function */
    char driver[64];   /* the PCI driver ("mlx5_core", "efa"), "" when unknown */
    unsigned vendor;   /* PCI vendor (0x1d0f: Amazon, EFA), 0 when unknown */
    int numa;          /* -1 when unknown */
    char netdevs[256]; /* the entries of device/net joined with ',', "" when none (EFA has none) */
};
struct pf_k8s_rdmadevs {
    struct pf_k8s_rdmadev *v;
    size_t n;
};
/* 0 with an empty list when the folder is absent. */
int pf_k8s_rdma_list(struct pf_k8s_rdmadevs *out, const struct pf_host *h);
void pf_k8s_rdma_free(struct pf_k8s_rdmadevs *d);

#endif
