/* The calls nccl-tests makes, in its patterns, on N processes: each result is checked against
 * what MPI defines, and the program exits 1 on the first difference. */
#include "mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int n, me, i;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);

    uint64_t *h = calloc((size_t)n, sizeof *h);
    h[me] = 1000u + (uint64_t)me * 7u;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, sizeof(uint64_t), MPI_BYTE,
                  MPI_COMM_WORLD);
    for (i = 0; i < n; i++)
        CHECK(h[i] == 1000u + (uint64_t)i * 7u, "rank %d: allgather[%d] = %llu\n", me, i,
              (unsigned long long)h[i]);

    MPI_Comm c;
    int cn, cr;
    MPI_Comm_split(MPI_COMM_WORLD, 0, me, &c);
    MPI_Comm_size(c, &cn);
    MPI_Comm_rank(c, &cr);
    CHECK(cn == n && cr == me, "rank %d: split gave %d of %d\n", me, cr, cn);

    char id[128];
    memset(id, me == 0 ? 'u' : 'x', sizeof id);
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, c);
    for (i = 0; i < (int)sizeof id; i++)
        CHECK(id[i] == 'u', "rank %d: bcast byte %d = %c\n", me, i, id[i]);
    MPI_Barrier(MPI_COMM_WORLD);

    int arch = 900 - me;
    MPI_Allreduce(MPI_IN_PLACE, &arch, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    CHECK(arch == 900 - (n - 1), "rank %d: min = %d\n", me, arch);
    double t[2] = {1.5 * me, 2.0};
    MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(t[0] == 1.5 * n * (n - 1) / 2 && t[1] == 2.0 * n, "rank %d: sum = %g %g\n", me, t[0],
          t[1]);
    long long m = (long long)me << 33;
    MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(m == (long long)(n - 1) << 33, "rank %d: max = %lld\n", me, m);
    long long s = me + 1, r = 0;
    MPI_Allreduce(&s, &r, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(r == (long long)n * (n + 1) / 2 && s == me + 1, "rank %d: sum = %lld\n", me, r);

    double mine[3] = {me, me + 0.25, me + 0.5}, *all = calloc((size_t)n * 3, sizeof(double));
    MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (me == 0)
        for (i = 0; i < n * 3; i++)
            CHECK(all[i] == i / 3 + 0.25 * (i % 3), "gather[%d] = %g\n", i, all[i]);
    MPI_Comm_free(&c);
    MPI_Finalize();
    free(h);
    free(all);
    if (!fails && me == 0) printf("minimpi: %d ranks agree\n", n);
    return fails ? 1 : 0;
}
