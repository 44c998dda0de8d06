/* Fuzz target: a rank's inventory (check gang), as rank 0 reads it from the rank's report:
 * the inventory's fields alone, and the same bytes as a whole report; then rank 0 keeps what
 * was decoded for three ranks and judges them, as with real peers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/fleet/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { N = 3 };
    struct pf_fleet_inv inv;
    (void)pf_fleet_inv_decode(&inv, data, size);
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        if (strnlen(inv.v[t], PF_GANG_VALUE) >= PF_GANG_VALUE) abort();
    if (inv.ports_down < -1 || inv.ports_down > 4096) abort();
    struct pf_fleet f;
    pf_fleet_init(&f, N);
    int roster[N] = {0, 1, 2};
    f.n = N;
    f.roster = roster;
    pf_fleet_gang_add(&f, 0, &inv);
    (void)pf_fleet_report_decode(&f, 1, data, size);
    struct pf_fleet_inv other;
    pf_fleet_inv_init(&other);
    pf_fleet_gang_add(&f, 2, &other);
    struct pf_fleet_gang_opts o = {.rank0_apart = size & 1};
    struct pf_fleet_gang_result res;
    pf_fleet_gang_judge(&f, &o, &res, NULL);
    if (res.ranks > N) abort();
    pf_fleet_free(&f);
    return 0;
}
