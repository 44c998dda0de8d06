/* OpenMPI's MPI_Allreduce as a yardstick for `make bench`: float32 sum of BYTES (default
 * 64 MiB) in place, one checked warm-up, then ITERS timed iterations. Rank 0 prints one line:
 *   ranks=N bytes=B seconds=T algbw=X busbw=Y correct=0|1
 * with algbw = B / T / 1e9 and busbw = algbw * 2(n-1)/n (nccl-tests' formulas). Built with
 * mpicc at bench time; not part of preflight. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static float seed(int rank, size_t j)
{
    return (float)((int)((j * 7u + (size_t)rank * 13u) & 63u) - 32);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (64u << 20);
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    size_t count = bytes / sizeof(float);
    float *buf = malloc(count * sizeof(float));
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t j = 0; j < count; j++)
        buf[j] = seed(rank, j);
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int ok = 1;
    for (size_t j = 0; j < count && ok; j++) {
        float s = 0;
        for (int r = 0; r < n; r++)
            s += seed(r, j);
        if (buf[j] != s) ok = 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters;
    /* nccl-tests averages the time over the ranks */
    double tsum = 0;
    int oksum = 0;
    MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &oksum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double tavg = tsum / n;
        double algbw = (double)(count * sizeof(float)) / tavg / 1e9;
        printf("ranks=%d bytes=%zu seconds=%.6f algbw=%.3f busbw=%.3f correct=%d\n", n,
               count * sizeof(float), tavg, algbw, algbw * 2.0 * (n - 1) / n, oksum == n);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
