/* Fuzz target: pf_dl_elf_shared (pkg/dl/trust.c), the ELF header check that proves torch's
 * library is a shared object for this machine before its NCCL is taken first. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/dl/dl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[200];
    why[0] = '\0';
    bool ok = pf_dl_elf_shared(data, size, why, sizeof(why));
    if (!ok && !why[0]) abort(); /* a refusal always says why */
    if (ok && (size < 20 || memcmp(data, "\177ELF", 4) != 0)) abort();
    if (memchr(why, '\0', sizeof(why)) == NULL) abort();
    return 0;
}
