/* minimpi: the few MPI calls nccl-tests makes (src/common.cu, NCCL_TESTS_VERSION 2.19.6, built
 * with MPI=1), for GPU machines that have no MPI. nccl-tests uses MPI only to start: the rank
 * and size, the host hashes (Allgather), the NCCL unique id (Bcast), and to add up its timings
 * and error counts (Allreduce, Gather); every timed call is NCCL's own. One communicator
 * (MPI_COMM_WORLD; MPI_Comm_split with one colour returns it). Ranks meet on a Unix socket,
 * which also crosses network namespaces: MINIMPI_RANK, MINIMPI_SIZE, MINIMPI_SOCK (a path);
 * MINIMPI_WAIT_S: how long a rank tries to reach rank 0 (default 60). */
#ifndef MINIMPI_MPI_H
#define MINIMPI_MPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype; /* MPI_Datatype() is 0: MPI_DATATYPE_NULL */
typedef int MPI_Op;       /* MPI_Op() is 0: MPI_OP_NULL */

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 16
#define MPI_COMM_WORLD 1
#define MPI_IN_PLACE ((void *)1)

#define MPI_DATATYPE_NULL 0
#define MPI_BYTE 1
#define MPI_CHAR 2
#define MPI_INT 3
#define MPI_LONG 4
#define MPI_LONG_LONG 5
#define MPI_INT64_T 6
#define MPI_UINT64_T 7
#define MPI_FLOAT 8
#define MPI_DOUBLE 9

#define MPI_OP_NULL 0
#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);

#ifdef __cplusplus
}
#endif
#endif
