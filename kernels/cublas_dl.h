/* SPDX-License-Identifier: Apache-2.0 */
/* cublas_dl.h - cuBLAS, loaded at run time with dlopen. C++ only.
 *
 * libcublas is not a link dependency of gpuqd, so the daemon starts (and
 * serves on the CPU backend, or on a GPU with only the driver installed) on
 * machines without the CUDA toolkit. The first call of gpuq_cublas() tries
 * the soname libcublas.so.<CUBLAS_VER_MAJOR> (the dynamic loader's search
 * path), then the same file in the toolkit's library directory known at
 * build time (GPUQ_CUDA_LIBDIR), and resolves with dlsym every function the
 * kernels use, each checked. It fails when neither file loads, when a symbol
 * is missing, or when GPUQ_NO_CUBLAS is set (to anything but "" or "0"; read
 * once, an ops and test switch); callers then use the tiled kernel.
 *
 * The outcome is decided once for the life of the process (pthread_once, so
 * a first call from any thread is safe; gpuqd makes it on the loop thread
 * when the CUDA backend is created) and the library is never unloaded:
 * handles may be destroyed as late as process exit.
 */
#ifndef GPUQ_CUBLAS_DL_H
#define GPUQ_CUBLAS_DL_H

#include <cublas_v2.h>

/* The cuBLAS functions gpuq calls, typed from the toolkit's own headers. */
struct gpuq_cublas_api {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetPointerMode_v2) set_pointer_mode;
    decltype(&cublasDgemm_v2) dgemm;
    decltype(&cublasGetStatusString) status_string;
};

/* The loaded API (borrowed, valid for the process), or NULL when cuBLAS is
 * not available; loads on the first call. */
const gpuq_cublas_api *gpuq_cublas(void);

#endif
