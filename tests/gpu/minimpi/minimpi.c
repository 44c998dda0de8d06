/* minimpi: see mpi.h. Every collective is one allgather through rank 0: each rank sends its
 * part to rank 0 over a Unix socket, rank 0 sends the whole back to each; the rest is local. */
#define _GNU_SOURCE
#include "mpi.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1, g_size;
static int *g_fd; /* rank 0: one socket per rank (g_fd[0] unused); others: g_fd[0] */

static void die(const char *what)
{
    fprintf(stderr, "minimpi: rank %d: %s%s%s\n", g_rank, what, errno ? ": " : "",
            errno ? strerror(errno) : "");
    exit(70);
}

static void xfer(int fd, void *p, size_t n, int out)
{
    char *c = p;
    while (n) {
        ssize_t r = out ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            die(out ? "send to a peer failed" : "a peer closed its socket (it exited?)");
        }
        c += r;
        n -= (size_t)r;
    }
}

static size_t type_size(MPI_Datatype t)
{
    switch (t) {
    case MPI_BYTE:
    case MPI_CHAR:
        return 1;
    case MPI_INT:
    case MPI_FLOAT:
        return 4;
    case MPI_LONG:
    case MPI_LONG_LONG:
    case MPI_INT64_T:
    case MPI_UINT64_T:
    case MPI_DOUBLE:
        return 8;
    }
    fprintf(stderr, "minimpi: datatype %d not supported\n", t);
    exit(70);
}

/* all[r*n .. r*n+n) = rank r's mine, on every rank */
static void allgather(const void *mine, size_t n, void *all)
{
    char *a = all;
    if (mine != a + (size_t)g_rank * n) memmove(a + (size_t)g_rank * n, mine, n);
    if (g_size == 1) return;
    if (g_rank == 0) {
        for (int r = 1; r < g_size; r++)
            xfer(g_fd[r], a + (size_t)r * n, n, 0);
        for (int r = 1; r < g_size; r++)
            xfer(g_fd[r], a, n * (size_t)g_size, 1);
    } else {
        xfer(g_fd[0], a + (size_t)g_rank * n, n, 1);
        xfer(g_fd[0], a, n * (size_t)g_size, 0);
    }
}

static int env_int(const char *k)
{
    const char *s = getenv(k);
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    if (!s || !*s || *end || v < 0 || v > 65536) {
        fprintf(stderr, "minimpi: %s must be set to a number (got %s)\n", k, s ? s : "nothing");
        exit(70);
    }
    return (int)v;
}

int MPI_Init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_rank = env_int("MINIMPI_RANK");
    g_size = env_int("MINIMPI_SIZE");
    const char *path = getenv("MINIMPI_SOCK");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (g_size < 1 || g_rank >= g_size || !path || strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "minimpi: need MINIMPI_RANK < MINIMPI_SIZE and MINIMPI_SOCK (a path)\n");
        exit(70);
    }
    memcpy(sa.sun_path, path, strlen(path));
    g_fd = calloc((size_t)g_size, sizeof(int));
    if (!g_fd) die("out of memory");
    if (g_size == 1) return MPI_SUCCESS;
    if (g_rank == 0) {
        int l = socket(AF_UNIX, SOCK_STREAM, 0);
        unlink(path);
        if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, g_size))
            die("cannot listen on MINIMPI_SOCK");
        for (int i = 1; i < g_size; i++) {
            int fd = accept(l, NULL, NULL), r;
            if (fd < 0) die("accept");
            xfer(fd, &r, sizeof r, 0);
            if (r < 1 || r >= g_size || g_fd[r]) die("a peer sent a bad or repeated rank");
            g_fd[r] = fd;
        }
        close(l);
        unlink(path);
    } else {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct timespec pause = {0, 50 * 1000 * 1000};
        const char *w = getenv("MINIMPI_WAIT_S");
        int tries = 0, most = (w && atoi(w) > 0 ? atoi(w) : 60) * 20;
        while (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
            if (++tries > most) {
                errno = 0;
                die("rank 0 never listened on MINIMPI_SOCK (MINIMPI_WAIT_S, default 60)");
            }
            nanosleep(&pause, NULL);
        }
        g_fd[0] = fd;
        xfer(fd, &g_rank, sizeof g_rank, 1);
    }
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < g_size; i++)
        if (g_fd[i]) close(g_fd[i]);
    return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int code)
{
    (void)comm;
    fprintf(stderr, "minimpi: rank %d: MPI_Abort(%d)\n", g_rank, code);
    exit(code ? code : 1);
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    (void)comm;
    *size = g_size;
    return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    (void)comm;
    *rank = g_rank;
    return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    int *c = calloc((size_t)g_size, sizeof(int));
    (void)key;
    if (!c) die("out of memory");
    c[g_rank] = color;
    allgather(&c[g_rank], sizeof(int), c);
    for (int r = 1; r < g_size; r++)
        if (c[r] != c[0]) {
            fprintf(stderr, "minimpi: MPI_Comm_split with several colours is not supported\n");
            exit(70);
        }
    free(c);
    *out = comm;
    return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    *comm = 0;
    return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
    char *b = calloc((size_t)g_size, 1);
    (void)comm;
    if (!b) die("out of memory");
    allgather(&b[g_rank], 1, b);
    free(b);
    return MPI_SUCCESS;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    size_t n = (size_t)recvcount * type_size(recvtype);
    char *r = recvbuf;
    (void)comm;
    if (sendbuf != MPI_IN_PLACE && (size_t)sendcount * type_size(sendtype) != n) {
        fprintf(stderr, "minimpi: MPI_Allgather with unequal send and receive sizes\n");
        exit(70);
    }
    allgather(sendbuf == MPI_IN_PLACE ? r + (size_t)g_rank * n : sendbuf, n, r);
    return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    size_t n = (size_t)count * type_size(type);
    char *all = malloc(n * (size_t)g_size + 1);
    (void)comm;
    if (!all) die("out of memory");
    allgather(buf, n, all);
    memcpy(buf, all + (size_t)root * n, n);
    free(all);
    return MPI_SUCCESS;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    size_t n = (size_t)sendcount * type_size(sendtype);
    char *all = malloc(n * (size_t)g_size + 1);
    (void)recvcount;
    (void)recvtype;
    (void)comm;
    if (!all) die("out of memory");
    allgather(sendbuf == MPI_IN_PLACE ? (char *)recvbuf + (size_t)g_rank * n : sendbuf, n, all);
    if (g_rank == root) memcpy(recvbuf, all, n * (size_t)g_size);
    free(all);
    return MPI_SUCCESS;
}

#define REDUCE(T)                                                                                  \
    do {                                                                                           \
        T *o = (T *)out;                                                                           \
        const T *x = (const T *)in;                                                                \
        for (int i = 0; i < count; i++)                                                            \
            o[i] = op == MPI_SUM   ? o[i] + x[i]                                                   \
                   : op == MPI_MIN ? (x[i] < o[i] ? x[i] : o[i])                                   \
                                   : (x[i] > o[i] ? x[i] : o[i]);                                  \
    } while (0)

static void reduce(void *out, const void *in, int count, MPI_Datatype type, MPI_Op op)
{
    switch (type) {
    case MPI_INT:
        REDUCE(int);
        break;
    case MPI_LONG:
        REDUCE(long);
        break;
    case MPI_LONG_LONG:
    case MPI_INT64_T:
        REDUCE(long long);
        break;
    case MPI_UINT64_T:
        REDUCE(unsigned long long);
        break;
    case MPI_FLOAT:
        REDUCE(float);
        break;
    case MPI_DOUBLE:
        REDUCE(double);
        break;
    default:
        fprintf(stderr, "minimpi: MPI_Allreduce on datatype %d not supported\n", type);
        exit(70);
    }
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    size_t n = (size_t)count * type_size(type);
    char *all = malloc(n * (size_t)g_size + 1);
    (void)comm;
    if (!all) die("out of memory");
    if (op != MPI_SUM && op != MPI_MIN && op != MPI_MAX) {
        fprintf(stderr, "minimpi: MPI_Allreduce op %d not supported\n", op);
        exit(70);
    }
    allgather(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, n, all);
    memcpy(recvbuf, all, n);
    for (int r = 1; r < g_size; r++)
        reduce(recvbuf, all + (size_t)r * n, count, type, op);
    free(all);
    return MPI_SUCCESS;
}
