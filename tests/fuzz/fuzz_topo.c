/* Fuzz target: the GPU/NIC bus id scanner for NCCL topology files (NCCL_TOPO_FILE, from the user).
 */
#include <stddef.h>
#include <stdint.h>

#include "../../pkg/checks/checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_strlist ids = {0};
    (void)pf_topo_busids(&ids, (const char *)data, size);
    pf_strlist_free(&ids);
    return 0;
}
