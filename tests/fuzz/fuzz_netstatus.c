/* Fuzz target: the Multus network-status JSON (elements, device-info, name matching). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/k8s/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_k8s_netstatus st;
    if (pf_k8s_netstatus_parse(&st, (const char *)data, size) < 0) {
        if (st.n != 0 || st.v != NULL) abort(); /* documented: empty on error */
        return 0;
    }
    (void)pf_k8s_netstatus_default(&st);
    static const char *const wanted[] = {"ml/sriov-a", "sriov-a", "/", "", "a/b/c"};
    for (size_t i = 0; i < st.n; i++) {
        const struct pf_k8s_network *n = &st.v[i];
        if (!n->name || !n->interface || !n->mac) abort();
        (void)pf_k8s_network_is_cluster(&st, i);
        for (size_t w = 0; w < sizeof(wanted) / sizeof(wanted[0]); w++)
            (void)pf_k8s_network_name_match(wanted[w], n->name);
        (void)pf_k8s_network_name_match(n->name, n->name);
        char bdf[PF_K8S_BDF_MAX];
        if (n->pci_address) (void)pf_k8s_bdf_parse(bdf, n->pci_address);
        if (n->pf_pci_address) (void)pf_k8s_bdf_parse(bdf, n->pf_pci_address);
        for (size_t k = 0; k < n->rdma_devices.n; k++)
            if (!n->rdma_devices.v[k]) abort();
    }
    pf_k8s_netstatus_free(&st);
    return 0;
}
