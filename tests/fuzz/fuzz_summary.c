/* Fuzz target: the SUMMARY rank 0 sends every rank (findings, culprits, the TCP result, the
 * fleet verdict as nested fields). Every number decoded is finite, a refusal is printable
 * text, and a decoded summary encodes again and decodes to the same counts. */
#include <math.h>
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
    if (s.have_tcp && !(isfinite(s.seconds) && isfinite(s.algbw) && isfinite(s.busbw))) abort();
    if (!isfinite(s.expected) || (s.have_links && !isfinite(s.median))) abort();
    if (s.slow_src >= 0 && !isfinite(s.slow_gbps)) abort();
    for (const char *c = s.bad; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
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
