/* TEST DOUBLES, FOR ERROR-HANDLING TESTS ONLY. libcuda-double.so and libnccl-double.so export
 * the CUDA driver and NCCL symbols pkg/dl loads, with plain host memory for "device" memory,
 * so tests/e2e/test_nccl.sh can drive preflight's GPU stage (collective.nccl) through chosen
 * failures on a machine without a GPU. They prove that preflight reacts correctly to what the
 * real libraries return; they prove nothing about the GPU path itself: no kernel runs, no byte
 * crosses a network, and the bandwidth they let preflight compute is made up. Only a run on a
 * real GPU (tests/gpu/e2e.sh) says the GPU path works.
 *
 * Both doubles share this header: a stream carries a virtual clock that every collective
 * advances by DOUBLE_OP_US microseconds, so the elapsed time, and the bandwidth preflight
 * derives from it, is known in advance. */
#ifndef PF_TEST_DOUBLE_H
#define PF_TEST_DOUBLE_H

struct CUstream_st {
    int dev;
    long long clock_ns; /* virtual time of the work queued on this stream */
};

struct CUevent_st {
    long long t_ns;
};

#endif
