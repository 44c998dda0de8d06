/* checks/attach.h: net.multus's view of the attachments other sources than Multus promise
 * (pkg/k8s/attach.h), shared by multus.c and attach.c only. */
#ifndef PF_CHECKS_ATTACH_H
#define PF_CHECKS_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

#include "../k8s/attach.h"
#include "../netif/netif.h"
#include "checks.h"

/* "1" or "true": read the pod's ResourceClaims from the API server (needs get on pods and
 * resourceclaims in the pod's namespace). */
#define PF_ATTACH_READ_CLAIMS_ENV "PREFLIGHT_READ_CLAIMS"

struct pf_k8s_podinfo;
/* Every source's attachments for this pod (the podinfo annotations, PREFLIGHT_DEVICE_RESOURCES,
 * and, when PREFLIGHT_READ_CLAIMS asks, the pod's ResourceClaims through the API server, with
 * evidence "dra" when out is not NULL); a source that does not parse goes to errs (may be
 * NULL). */
void pf_attach_load(struct pf_k8s_attachments *a, struct pf_strlist *errs, struct pf_check *out,
                    const struct pf_ctx *ctx, const struct pf_k8s_podinfo *pi);
/* Whether a source other than Multus answers to an expect.networks entry. */
bool pf_attach_other_match(const struct pf_k8s_attachments *a, const char *want);
/* "name (source)" of every attachment of another source than Multus, the cluster's left out. */
void pf_attach_other_names(struct pf_strlist *out, const struct pf_k8s_attachments *a);
/* Checks the attachments of the other sources against the namespace (finding
 * attachment-missing, iface-down, ip-missing), with evidence "attachments"; appends
 * "name on iface" of each healthy one to okdesc. Returns how many were checked. */
size_t pf_attach_check_other(struct pf_check *out, const struct pf_ctx *ctx,
                             const struct pf_k8s_attachments *a, const struct pf_netif_list *ifs,
                             struct pf_strlist *okdesc);
/* Evidence "namespace": the netdevs with addresses and the RDMA devices (PCI address, NUMA
 * node, netdevs), for a pod no source describes. */
void pf_attach_list_namespace(struct pf_check *out, const struct pf_ctx *ctx,
                              const struct pf_netif_list *ifs);

#endif
