/* Fuzz target: the SUMMARY rank 0 sends every rank (findings, culprits, the TCP result, the
 * fleet verdict as nested fields). A decoded summary encodes again and decodes to the same
 * counts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/fleet/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_fleet_summary s;
    if (pf_fleet_summary_decode(&s, data, size) < 0) return 0;
    struct pf_buf b;
    pf_buf_init(&b, 64u << 20);
    if (pf_fleet_summary_encode(&b, &s) == 0) {
        struct pf_fleet_summary t;
        if (pf_fleet_summary_decode(&t, (const uint8_t *)pf_buf_str(&b), b.len) < 0) abort();
        if (t.nfindings != s.nfindings || t.nculprits != s.nculprits) abort();
        if (strcmp(t.verdict, s.verdict) != 0) abort();
        pf_fleet_summary_free(&t);
    }
    pf_buf_free(&b);
    pf_fleet_summary_free(&s);
    return 0;
}
