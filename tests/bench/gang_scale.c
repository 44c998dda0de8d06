/* What check gang costs rank 0 at N ranks (tests/bench/bench_gang.sh): every rank's
 * inventory encoded as a rank sends it, decoded and kept as rank 0 keeps it
 * (pf_fleet_inv_decode, pf_fleet_gang_add), then judged (pf_fleet_gang_judge) with one
 * outlier. Prints, for each N, the heap the inventories hold (mallinfo2, the fleet's table
 * of values; the per-rank indices live in struct pf_fleet_rank, counted from its size), the
 * time to decode and to judge, and the culprits (1 expected). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/fleet/fleet.h"

static void inventory(struct pf_fleet_inv *inv, int r, int outlier)
{
    pf_fleet_inv_init(inv);
    const char *v[PF_GANG_NTRAITS] = {
        [PF_GANG_GPUS] = "8",
        [PF_GANG_GPU_MODEL] = "NVIDIA H100 80GB HBM3",
        [PF_GANG_DRIVER] = "550.90.07",
        [PF_GANG_HCAS] = "8",
        [PF_GANG_PROVIDER] = "mlx5",
        [PF_GANG_PORTS] = r == outlier ? "7" : "8",
        [PF_GANG_RATE] = "400 Gb/s",
        [PF_GANG_LINK] = "InfiniBand",
        [PF_GANG_PCIE] = "x16 at 32.0 GT/s",
        [PF_GANG_FIRMWARE] = "28.39.1002",
        [PF_GANG_NICS] = "eth0",
        [PF_GANG_NCCL] = "2.21.5",
        [PF_GANG_NETWORKS] =
            "ml/rail-0,ml/rail-1,ml/rail-2,ml/rail-3,ml/rail-4,ml/rail-5,ml/rail-6,"
            "ml/rail-7",
    };
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        if (v[t]) snprintf(inv->v[t], PF_GANG_VALUE, "%s", v[t]);
    inv->ports_down = r == outlier ? 1 : 0;
}

int main(int argc, char **argv)
{
    printf("| N | inventory on the wire (bytes a rank) | rank 0 heap for the values | "
           "per rank in struct pf_fleet_rank | decode + keep (s) | judge (s) | culprits |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int a = 1; a < argc; a++) {
        int n = atoi(argv[a]);
        struct pf_fleet f;
        pf_fleet_init(&f, n);
        int *roster = calloc((size_t)n, sizeof(int));
        size_t before = mallinfo2().uordblks, wire = 0;
        double t0 = pf_now();
        for (int r = 0; r < n; r++) {
            struct pf_fleet_inv inv, back;
            inventory(&inv, r, n / 2 + 1);
            struct pf_buf b;
            pf_buf_init(&b, PF_BUF_TEXT);
            pf_fleet_inv_encode(&b, &inv);
            wire = b.len;
            pf_fleet_inv_decode(&back, (const uint8_t *)b.data, b.len);
            pf_buf_free(&b);
            pf_fleet_gang_add(&f, r, &back);
            roster[r] = r;
        }
        double t1 = pf_now();
        size_t heap = mallinfo2().uordblks - before;
        f.n = n;
        f.roster = roster;
        struct pf_fleet_gang_result res;
        pf_fleet_gang_judge(&f, NULL, &res, NULL);
        double t2 = pf_now();
        size_t per = sizeof(((struct pf_fleet_rank *)0)->inv) +
                     sizeof(((struct pf_fleet_rank *)0)->ports_down) + 2;
        printf("| %d | %zu | %zu B | %zu B | %.3f | %.3f | %zu |\n", n, wire, heap, per, t1 - t0,
               t2 - t1, f.out.nculprits);
        pf_fleet_free(&f);
        free(roster);
    }
    return 0;
}
