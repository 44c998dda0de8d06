/* Fuzz target: `preflight inject` on any input. Either a refusal with a message, or an output
 * that holds every input byte in order (only insertions, unless fields the API server wrote
 * were removed), that a second run refuses nothing
 * in and leaves byte for byte as it is; with and without --watch. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/inject/inject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* in[0..n) is a subsequence of out[0..m) */
static int kept(const char *in, size_t n, const char *out, size_t m)
{
    size_t i = 0;
    for (size_t j = 0; i < n && j < m; j++)
        if (in[i] == out[j]) i++;
    return i == n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int watch = 0; watch < 2; watch++) {
        struct pf_inject_opts o = {NULL, watch == 1, "fuzz"};
        struct pf_inject_result res;
        char *out = NULL;
        size_t len = 0;
        if (pf_inject(&o, (const char *)data, size, &out, &len, &res) < 0) {
            if (!pf_err_msg()[0] || out) abort();
            continue;
        }
        if (!out || (!res.removed && !kept((const char *)data, size, out, len))) abort();
        struct pf_inject_result again;
        char *out2 = NULL;
        size_t len2 = 0;
        if (pf_inject(&o, out, len, &out2, &len2, &again) < 0) abort();
        if (again.gated || len2 != len || memcmp(out, out2, len) != 0) abort();
        free(out2);
        pf_inject_result_free(&again);
        free(out);
        pf_inject_result_free(&res);
    }
    return 0;
}
