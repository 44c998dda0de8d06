/* Fuzz target: the messages of stage rails: a rank's rails (what rank 0 gathers), rank 0's
 * answer (a rank's probe tasks), a rank's probe results. The same bytes go to each decoder;
 * then rank 0 plans, records and judges what was decoded, as with real peers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/fleet/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { N = 3 };
    struct pf_fleet_rails *rails = calloc(N, sizeof(*rails));
    if (!rails) return 0;
    (void)pf_fleet_rails_decode(&rails[1], data, size);
    if (rails[1].n > PF_FLEET_RAILS_MAX) abort();
    rails[0] = rails[1];
    rails[2] = rails[1];
    rails[2].reported = true;
    struct pf_fleet_rail_task t[PF_FLEET_RAIL_TASKS];
    size_t nt = 0;
    int nets = 0;
    (void)pf_fleet_rail_tasks_decode(&nets, t, &nt, PF_FLEET_RAIL_TASKS, N, data, size);
    for (size_t i = 0; i < nt; i++)
        if (t[i].peer < 0 || t[i].peer >= N || t[i].net < 0 || t[i].net >= PF_FLEET_RAIL_NETS)
            abort();
    struct pf_fleet_railplan plan;
    pf_fleet_rails_plan(&plan, rails, N);
    struct pf_fleet_rail_result r[PF_FLEET_RAIL_TASKS];
    size_t nr = 0;
    (void)pf_fleet_rail_results_decode(r, &nr, PF_FLEET_RAIL_TASKS, plan.nnet > 0 ? plan.nnet : 1,
                                       N, data, size);
    for (size_t i = 0; i < nr; i++)
        if (r[i].dst < 0 || r[i].dst >= N || !(r[i].gbps >= 0)) abort();
    for (int pos = 0; pos < N; pos++) {
        (void)pf_fleet_rails_tasks(t, &plan, pos);
        pf_fleet_rails_add(&plan, pos, r, nr);
    }
    struct pf_fleet f;
    pf_fleet_init(&f, N);
    int roster[N] = {0, 1, 2};
    f.n = N;
    f.roster = roster;
    pf_fleet_rails_agree(&f, &plan);
    pf_fleet_rails_judge(&f, &plan);
    pf_fleet_railplan_free(&plan);
    pf_fleet_free(&f);
    free(rails);
    return 0;
}
