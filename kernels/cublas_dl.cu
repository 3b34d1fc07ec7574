/* SPDX-License-Identifier: Apache-2.0 */
/* cublas_dl.cu - see cublas_dl.h. Host code only. */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_dl.h"
#include "gpuq_kernels.h"

#define GPUQ_STR_(x) #x
#define GPUQ_STR(x) GPUQ_STR_(x)
#define GPUQ_CUBLAS_SONAME "libcublas.so." GPUQ_STR(CUBLAS_VER_MAJOR)

namespace
{

gpuq_cublas_api g_api;
bool g_loaded;
char g_why[768]; /* the path when loaded, else why not */
pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* dlopen name; on failure append dlerror() to err. */
void *open_lib(const char *name, char *err, size_t cap)
{
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        size_t used = strlen(err);
        snprintf(err + used, cap - used, "%s%s", used ? "; " : "", e ? e : name);
    }
    return lib;
}

template <typename F> bool resolve(void *lib, const char *name, F *out)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(g_why, sizeof g_why, "%s: no symbol %s", GPUQ_CUBLAS_SONAME, name);
        return false;
    }
    *out = reinterpret_cast<F>(p);
    return true;
}

void load(void)
{
    const char *off = getenv("GPUQ_NO_CUBLAS");
    if (off && *off && strcmp(off, "0") != 0) {
        snprintf(g_why, sizeof g_why, "disabled by GPUQ_NO_CUBLAS=%.32s", off);
        return;
    }
    char err[sizeof g_why] = "";
    void *lib = open_lib(GPUQ_CUBLAS_SONAME, err, sizeof err);
#ifdef GPUQ_CUDA_LIBDIR
    if (!lib)
        lib = open_lib(GPUQ_CUDA_LIBDIR "/" GPUQ_CUBLAS_SONAME, err, sizeof err);
#endif
    if (!lib) {
        snprintf(g_why, sizeof g_why, "%s", err);
        return;
    }
    gpuq_cublas_api api;
    if (!resolve(lib, "cublasCreate_v2", &api.create) ||
        !resolve(lib, "cublasDestroy_v2", &api.destroy) ||
        !resolve(lib, "cublasSetStream_v2", &api.set_stream) ||
        !resolve(lib, "cublasSetMathMode", &api.set_math_mode) ||
        !resolve(lib, "cublasSetPointerMode_v2", &api.set_pointer_mode) ||
        !resolve(lib, "cublasDgemm_v2", &api.dgemm) ||
        !resolve(lib, "cublasGetStatusString", &api.status_string)) {
        dlclose(lib);
        return;
    }
    struct link_map *lm = NULL;
    const char *path = GPUQ_CUBLAS_SONAME;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        path = lm->l_name;
    snprintf(g_why, sizeof g_why, "%s", path);
    g_api = api;
    g_loaded = true;
}

} /* namespace */

const gpuq_cublas_api *gpuq_cublas(void)
{
    pthread_once(&g_once, load);
    return g_loaded ? &g_api : NULL;
}

extern "C" int gpuq_cuda_gemm_status(char *why, size_t cap)
{
    const gpuq_cublas_api *api = gpuq_cublas();
    if (why && cap)
        snprintf(why, cap, "%s", g_why);
    return api ? 1 : 0;
}
