/* Fuzz target: the Multus request annotation k8s.v1.cni.cncf.io/networks (JSON list of
 * NetworkSelectionElement objects, or "[ns/]name[@ifname]" separated by commas). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/k8s/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_strlist req;
    static const char *const ns[] = {NULL, "", "ml"};
    for (size_t k = 0; k < 3; k++) {
        if (pf_k8s_network_requests_parse(&req, (const char *)data, size, ns[k]) < 0) {
            if (req.n != 0) abort(); /* documented: empty on error */
            continue;
        }
        for (size_t i = 0; i < req.n; i++) {
            if (!req.v[i] || !req.v[i][0]) abort();
            const char *slash = strchr(req.v[i], '/');
            if (slash && strchr(slash + 1, '/')) abort(); /* at most "ns/name" */
            (void)pf_k8s_network_name_match(req.v[i], "ml/sriov-a");
        }
        pf_strlist_free(&req);
    }
    return 0;
}
