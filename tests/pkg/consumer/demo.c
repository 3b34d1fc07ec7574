/* demo.c - a user of an installed libgpuq: includes <gpuq/gpuq.h>, links
 * and runs without a daemon (the error table and the default socket path).
 * Also compiled as C++ (demo_cxx.cpp) to check the headers' linkage. */
#include <gpuq/gpuq.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    char sock[256];
    const char *msg = gpuq_strerror(GPUQ_E_BUSY);
    if (!msg || !*msg || strcmp(gpuq_errname(GPUQ_E_BUSY), "busy") != 0)
        return 1;
    if (gpuq_default_socket(sock, sizeof sock) != 0)
        return 1;
    printf("busy: %s; default socket %s\n", msg, sock);
    return 0;
}
