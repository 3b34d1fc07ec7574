/* SPDX-License-Identifier: Apache-2.0 */
/* demo.c - a user of an installed libgpuq: includes <gpuq/gpuq.h> (which
 * must need no header that is not installed), links, and runs without a
 * daemon: the error table, the default socket path, the request builder
 * (setters, their sticky error), a result, and a convenience call on a
 * connection that could not connect. Also compiled as C++ (demo_cxx.cpp) to
 * check the headers' linkage. */
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

    /* A pairwise request built with the generic builder. */
    double x[2][3] = {{1, 2, 3}, {4, 5, 6}}, d[2][2];
    const uint64_t shape[2] = {2, 3};
    gpuq_req *r = gpuq_req_new("pairwise");
    gpuq_result *res = gpuq_result_new();
    if (!r || !res)
        return 1;
    if (gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, shape, x, sizeof x) != 0 ||
        gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, shape, x, sizeof x) != 0 ||
        gpuq_req_set_str(r, "metric", "euclidean") != 0 ||
        gpuq_req_set_output(r, 0, d, sizeof d) != 0 || gpuq_req_set_timing(r, true) != 0)
        return 1;
    /* An input whose length is not its shape's: refused, and the error sticks. */
    if (gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, shape, x, sizeof x - 1) != GPUQ_E_SIZE_MISMATCH ||
        !*gpuq_req_errmsg(r))
        return 1;

    /* No daemon at this path: connect fails, and calls on the dead
     * connection return its code. */
    gpuq_connect_opts o = {"/nonexistent/gpuq-demo.sock", "demo", GPUQ_PRIO_NORMAL, -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    if (rc != GPUQ_E_IO || !c)
        return 1;
    double v[3] = {1, 2, 3}, y[3];
    if (gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_L2, v, 3, y) != GPUQ_E_IO ||
        gpuq_call_req(c, r, res) != GPUQ_E_IO || gpuq_result_status(res) != GPUQ_E_IO)
        return 1;
    printf("busy: %s; default socket %s; without a daemon: %s\n", msg, sock, gpuq_errmsg(c));
    gpuq_close(c);
    gpuq_result_free(res);
    gpuq_req_free(r);
    return 0;
}
