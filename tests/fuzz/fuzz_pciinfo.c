/* Fuzz target: the SR-IOV device plugin's variables: PCIDEVICE_*_INFO JSON, the PCI addresses
 * of PCIDEVICE_* and a resource name turned into its variable name. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/k8s/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_k8s_pciinfo info;
    if (pf_k8s_pciinfo_parse(&info, (const char *)data, size) == 0) {
        for (size_t i = 0; i < info.n; i++) {
            const struct pf_k8s_pciinfo_dev *d = &info.v[i];
            if (!memchr(d->device, 0, sizeof(d->device)) ||
                !memchr(d->rdma_dev, 0, sizeof(d->rdma_dev)) ||
                !memchr(d->uverbs, 0, sizeof(d->uverbs)))
                abort();
            char bdf[PF_K8S_BDF_MAX];
            (void)pf_k8s_bdf_parse(bdf, d->device);
        }
        pf_k8s_pciinfo_free(&info);
    }
    /* the same bytes as a NUL-terminated string: a PCI address, and a resource name */
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char bdf[PF_K8S_BDF_MAX];
    if (pf_k8s_bdf_parse(bdf, s) == 0 && strlen(bdf) != 12) abort();
    char var[256];
    if (pf_k8s_pcidevice_var(var, sizeof(var), s) == 0 && strncmp(var, "PCIDEVICE_", 10) != 0)
        abort();
    free(s);
    return 0;
}
