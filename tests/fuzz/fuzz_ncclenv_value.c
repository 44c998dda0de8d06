/* Fuzz target: NCCL's integer parameters (strtoll base 0, partial and out-of-range text), the
 * level names of NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL, and the variable-name lookups
 * (known, obsolete, foreign, did-you-mean) on arbitrary names. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/ncclenv/ncclenv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    bool clean = false;
    long long a = pf_ncclenv_int(s, &clean);
    long long v = 0;
    enum pf_ncclenv_int_kind k = pf_ncclenv_param(s, -2, &v);
    if (k == PF_NCCLENV_INT_UNSET && v != -2) abort();
    if (k == PF_NCCLENV_INT_CLEAN && (!clean || v != a)) abort();
    (void)pf_ncclenv_is_octal(s);

    const char *lvl = pf_ncclenv_level(s);
    if (lvl && !strstr(pf_ncclenv_level_names(), lvl)) abort();

    (void)pf_ncclenv_known(s);
    (void)pf_ncclenv_is_int_param(s);
    (void)pf_ncclenv_obsolete(s);
    (void)pf_ncclenv_foreign(s);
    const char *sug = pf_ncclenv_suggest(s);
    if (sug && !pf_ncclenv_known(sug)) abort();
    free(s);
    return 0;
}
