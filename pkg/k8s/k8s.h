/* k8s: what a pod knows about itself from Kubernetes (docs/kubernetes.md, "What the pod
 * tells preflight about itself"): the downward-API files (`key="Go-quoted value"` lines),
 * the Multus network-status annotation (JSON, parsed with jansson), and the SR-IOV device
 * plugin's PCIDEVICE_* variables. Files are read under the root prefix; nothing here waits,
 * prints or exits. */
#ifndef PF_K8S_H
#define PF_K8S_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../host/host.h"
#include "../verdict/verdict.h"

#define PF_K8S_NETSTATUS_ANNOT "k8s.v1.cni.cncf.io/network-status"
#define PF_K8S_NETSTATUS_ANNOT_OLD "k8s.v1.cni.cncf.io/networks-status"
#define PF_K8S_NETWORKS_ANNOT "k8s.v1.cni.cncf.io/networks" /* what the pod asked for */
#define PF_K8S_PODINFO_DEFAULT "/etc/podinfo"
#define PF_K8S_FILE_MAX (1u << 20) /* a downward-API file (annotations are <= 256 KiB) */
#define PF_K8S_MAX_NETWORKS 256    /* elements of a network-status */
#define PF_K8S_BDF_MAX 16          /* "dddd:bb:dd.f" + NUL */

/* Go-quoted literals and the downward-API map files: map.h (no verdict or host types, so
 * that pkg/rendezvous can take a map). */
#include "map.h"

/* ---- Multus network-status (struct NetworkStatus of the NAD client). */
struct pf_k8s_network {
    char *name;            /* "namespace/nad" (old Multus: bare "nad") */
    char *interface;       /* "" when omitted */
    struct pf_strlist ips; /* bare addresses; a CIDR's "/len" is dropped */
    char *mac;             /* "" when omitted */
    int mtu;               /* 0 when omitted */
    bool is_default;       /* "default": true (the cluster network) */
    struct pf_strlist gateway;
    struct pf_strlist dns_nameservers;
    bool has_device_info;
    char *di_type;     /* "pci", "vdpa", "vhost-user", "memif" or "" */
    char *di_version;  /* "1.0.0", "1.1.0" or "" */
    char *pci_address; /* device-info.pci.pci-address, "" when none */
    char *pf_pci_address;
    char *vhost_net;
    char *representor;
    struct pf_strlist rdma_devices; /* device-info.pci.rdma-device split at commas */
};
struct pf_k8s_netstatus {
    struct pf_k8s_network *v;
    size_t n;
};

/* Parses the annotation's JSON (an array of objects). Unknown keys are ignored; a missing
 * name, a wrong type, or text that is not JSON is PF_EINVAL with a message naming the element;
 * an empty or all-blank text is PF_ENOENT. *out is empty on error. */
int pf_k8s_netstatus_parse(struct pf_k8s_netstatus *out, const char *json, size_t len);
/* The element marked default (the cluster network), or NULL. */
const struct pf_k8s_network *pf_k8s_netstatus_default(const struct pf_k8s_netstatus *s);
/* True for an element that is the cluster network: marked default, or (when no element is
 * marked) the first one, as Multus always lists the cluster network first. */
bool pf_k8s_network_is_cluster(const struct pf_k8s_netstatus *s, size_t i);
void pf_k8s_netstatus_free(struct pf_k8s_netstatus *s);

/* The networks the pod's request annotation k8s.v1.cni.cncf.io/networks asks for, each as
 * "ns/name" (the pod's namespace when the request names none and pod_ns is not NULL or empty,
 * else the bare name), once. Read as Multus reads it (k8snetworkplumbingwg/multus-cni
 * pkg/k8sclient/k8sclient.go parsePodNetworkAnnotation, v4.1): JSON when the text holds one of
 * '[', '{', '"' (a list of NetworkSelectionElement objects: name, namespace, interface), else
 * a comma-separated list of "[ns/]name[@ifname]". An element without a name, more than one '/'
 * or '@', or text that is not such JSON is PF_EINVAL naming it; *out is empty then. */
int pf_k8s_network_requests_parse(struct pf_strlist *out, const char *text, size_t len,
                                  const char *pod_ns);

/* Whether an expected network ("ns/name" or "name") is the status element named status_name
 * ("ns/name", or a bare "name" as old Multus wrote it). */
bool pf_k8s_network_name_match(const char *expected, const char *status_name);

/* ---- The pod as the downward-API folder and the environment describe it. */
struct pf_k8s_podinfo {
    char dir[PF_HOST_PATH_MAX]; /* the folder (not prefixed with the root) */
    bool have_annotations;      /* DIR/annotations was there and parsed */
    bool have_labels;
    struct pf_k8s_map annotations;
    struct pf_k8s_map labels;
    char *netstatus; /* network-status JSON, NULL when absent or empty */
    char netstatus_source[PF_HOST_PATH_MAX + 64]; /* where netstatus came from */
    bool netstatus_empty;          /* the key (or variable) is there but its value is empty */
    bool networks_requested;       /* k8s.v1.cni.cncf.io/networks is set: Multus must attach */
    char *name, *namespace_, *uid; /* optional files DIR/name, DIR/namespace, DIR/uid */
};

/* Reads DIR/annotations and DIR/labels under the root (absent files are fine), and picks the
 * network-status: the annotation k8s.v1.cni.cncf.io/network-status, then the old
 * networks-status, then env_value (the raw value of a variable set with fieldPath; env_name
 * names it in messages; both may be NULL). PF_EINVAL when a file does not parse (message
 * "PATH:LINE: problem"); *out still holds what could be read. Free with pf_k8s_podinfo_free. */
int pf_k8s_podinfo_read(struct pf_k8s_podinfo *out, const struct pf_host *h, const char *dir,
                        const char *env_name, const char *env_value);
void pf_k8s_podinfo_free(struct pf_k8s_podinfo *p);
/* pf_k8s_podinfo_read with the pod's own settings from env: the folder PREFLIGHT_PODINFO
 * (PF_K8S_PODINFO_DEFAULT when unset or empty) and a network-status set as a variable with
 * fieldPath, PREFLIGHT_NETWORK_STATUS, else NETWORK_STATUS (docs/kubernetes.md). */
int pf_k8s_podinfo_read_env(struct pf_k8s_podinfo *out, const struct pf_host *h,
                            const struct pf_env *env);
/* The podinfo folder env names: PREFLIGHT_PODINFO, else PF_K8S_PODINFO_DEFAULT. */
const char *pf_k8s_podinfo_dir(const struct pf_env *env);

/* Records what the pod map (verdict.pod) lacks: name, namespace, uid and a `labels` map with
 * the labels that identify a training pod (Indexed Job, JobSet, StatefulSet, PyTorchJob). */
void pf_k8s_podinfo_record(const struct pf_k8s_podinfo *p, struct pf_node *pod);

/* ---- SR-IOV device plugin. */

/* The variable the SR-IOV device plugin sets for a resource: "mellanox.com/mlnx_sriov_rdma"
 * -> "PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA" ("PCIDEVICE_" + prefix + "_" + name, '.' ->
 * '_', upper-cased; hyphens stay). PF_EINVAL when resource is not "prefix/name". */
int pf_k8s_pcidevice_var(char *out, size_t n, const char *resource);

/* Normalises a PCI address "dddd:bb:dd.f" (hex; lower-cased into out). PF_EINVAL when s is
 * not one. */
int pf_k8s_bdf_parse(char out[PF_K8S_BDF_MAX], const char *s);

/* One device of a PCIDEVICE_*_INFO variable: {"<bdf>": {"generic": {...}, "rdma": {...}}}. */
struct pf_k8s_pciinfo_dev {
    char device[64];   /* the key: a PCI address (or an auxiliary device name) */
    bool rdma;         /* an "rdma" provider is listed */
    char rdma_dev[64]; /* rdma.rdma_dev, "" when none */
    char uverbs[256];  /* rdma.uverbs ("/dev/infiniband/uverbs3"), "" when none */
};
struct pf_k8s_pciinfo {
    struct pf_k8s_pciinfo_dev *v;
    size_t n;
};
/* Parses a PCIDEVICE_*_INFO value; PF_EINVAL when it is not that shape. */
int pf_k8s_pciinfo_parse(struct pf_k8s_pciinfo *out, const char *json, size_t len);
void pf_k8s_pciinfo_free(struct pf_k8s_pciinfo *p);

#endif
