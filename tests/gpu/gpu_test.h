/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_test.h - what the CUDA kernel suites share: the rule for a machine
 * without a GPU, and CK for the runtime calls they make. */
#ifndef GPUQ_GPU_TEST_H
#define GPUQ_GPU_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* A CUDA runtime call that must succeed (a Check assertion naming it). */
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                 \
    } while (0)

/* cudaMemcpy from host to device and cudaMemset, complete when they
 * return. Both run on the legacy default stream, which the suites' streams
 * (cudaStreamNonBlocking) do not wait for, and neither waits for its DMA or
 * its fill on return (pageable cudaMemcpy may return once the bytes are
 * staged): a kernel launched next on a suite's stream could read the buffer
 * before it holds what the test put there. */
#define CK_UPLOAD(d, h, bytes)                                                                     \
    do {                                                                                           \
        CK(cudaMemcpy((d), (h), (bytes), cudaMemcpyHostToDevice));                                 \
        CK(cudaDeviceSynchronize());                                                               \
    } while (0)
#define CK_MEMSET(d, byte, bytes)                                                                  \
    do {                                                                                           \
        CK(cudaMemset((d), (byte), (bytes)));                                                      \
        CK(cudaDeviceSynchronize());                                                               \
    } while (0)

/* ctest's SKIP_RETURN_CODE for the gpu-labelled tests (tests/gpu/CMakeLists.txt). */
#define GPU_TEST_EXIT_SKIP 77

/* GPUQ_REQUIRE_GPU=1: a missing GPU is a failure, never a skip. */
static inline int gpu_required(void)
{
    const char *v = getenv("GPUQ_REQUIRE_GPU");
    return v && strcmp(v, "1") == 0;
}

/* No CUDA device: says why (name: the test's) and returns the exit status
 * (GPU_TEST_EXIT_SKIP; EXIT_FAILURE under GPUQ_REQUIRE_GPU=1). A device:
 * -1, run the suite. */
static inline int gpu_test_no_device(const char *name)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e == cudaSuccess && ndev > 0)
        return -1;
    int required = gpu_required();
    printf("%s: no CUDA device (%s)%s\n", name,
           e != cudaSuccess ? cudaGetErrorString(e) : "count 0",
           required ? ", GPUQ_REQUIRE_GPU=1: failing" : ": skipped (exit 77)");
    return required ? EXIT_FAILURE : GPU_TEST_EXIT_SKIP;
}

/* Run suite s in this process (CUDA state does not survive fork: the
 * suites keep one stream and context for the whole run); the number of
 * failed tests. */
static inline int gpu_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

#endif
