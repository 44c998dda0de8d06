/* Fuzz target: what a rank sends rank 0 in the steps after the rendezvous: its all-reduce
 * result, its probe samples and its report (verdict and check
 * statuses); and what rank 0 answers in a probe round (the probes of the next round). The
 * same bytes go to each decoder; then the fleet judges what was decoded. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/fleet/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_fleet f;
    pf_fleet_init(&f, 2);
    int roster[2] = {0, 1};
    f.n = 2;
    f.roster = roster;
    (void)pf_fleet_ar_decode(&f.r[1], data, size);
    if (f.r[1].ar_done && !isfinite(f.r[1].ar_seconds)) abort();
    (void)pf_fleet_report_decode(&f, 1, data, size);
    if (f.r[1].nbad > 256 || f.r[1].nst > f.ids.n || f.ids.n > PF_FLEET_IDS_MAX) abort();
    struct pf_coll_sample smp[PF_COLL_TASKS_MAX];
    size_t nsmp = 0;
    (void)pf_fleet_samples_decode(smp, &nsmp, PF_COLL_TASKS_MAX, data, size);
    if (nsmp > PF_COLL_TASKS_MAX) abort();
    for (size_t i = 0; i < nsmp; i++)
        if (!(smp[i].seconds > 0) || !isfinite(smp[i].seconds) || smp[i].bytes == 0) abort();
    struct pf_coll_cpu cpu;
    if (pf_fleet_cpu_decode(&cpu, data, size) == 0 &&
        (cpu.wait > 1 || cpu.steal > 1 || cpu.psi > 1 || cpu.psi_avg10 > 100 ||
         !isfinite(cpu.wait) || !isfinite(cpu.psi_avg10)))
        abort();
    struct pf_coll_task tk[PF_COLL_TASKS_MAX];
    size_t ntk = 0;
    bool more = false;
    (void)pf_fleet_tasks_decode(&more, tk, &ntk, PF_COLL_TASKS_MAX, 2, data, size);
    for (size_t i = 0; i < ntk; i++)
        if (tk[i].peer < 0 || tk[i].peer >= 2 || tk[i].bytes == 0) abort();
    struct pf_wire_marks none = {0};
    struct pf_fleet_tcp t = {.ran = true,
                             .ok = true,
                             .bytes = 1024,
                             .iterations = 1,
                             .min_busbw = -1,
                             .lost = &none,
                             .failed = &none};
    f.r[0].ar_done = true;
    f.r[0].ar_seconds = 0.001;
    pf_fleet_judge_tcp(&f, &t);
    pf_fleet_judge_reports(&f);
    pf_fleet_conclude(&f, PF_PASS, 0, NULL);
    pf_fleet_free(&f);
    return 0;
}
