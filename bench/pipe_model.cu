/* SPDX-License-Identifier: Apache-2.0 */
// pipe_model.cu - gpuq_pipe_model: the device-only floor of gpuqd's pipelined
// jobs (server/backends/cuda/backend_cuda_pipe.c), with no daemon, socket or client.
//
// It tells the link's and the pattern's share of a job's time from gpuqd's:
// - copies: 64 MiB and 16 MB each way alone, then both ways at once (the
//   duplex ceiling; p50 of 12).
// - one job, gpuqd's three-stream pattern (IN uploads chunk k, C waits and
//   runs the op on it, OUT waits and downloads it): a 4096 x 4096 f32
//   row-wise l2 normalize and a haversine of 10^6 f64 points to one, in
//   gpuqd's chunk plan and variants (nominal size, halving end chunks),
//   p50 of 25 runs by CUDA events. "gated": every call is enqueued behind
//   a 3 ms spin kernel, so the enqueue is off the critical path; "live":
//   enqueued while the device runs, as gpuqd does. "copies only": the same
//   chunks with no kernel and no waits.
// - many sessions: 4 sessions x 2 in flight of flat 64 MiB normalizes (a
//   reduction per upload chunk, then the scale and a two-piece download),
//   driven by a host loop that polls events (gpuqd's loop without sockets).
// The figures are the floor a gpuqd request of the same pattern can reach
// on this machine (bench/gpu_run.sh, step "model"; docs/gpu-results.md).
// Every CUDA call is checked; exit 0 when all ran.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/mman.h>
#include <time.h>
#include <cuda_runtime.h>
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t ck_ = (x);                                                                     \
        if (ck_ != cudaSuccess) {                                                                  \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(ck_));                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static void *hostreg(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, n);
    CK(cudaHostRegister(p, n, cudaHostRegisterMapped));
    return p;
}
__global__ void spin_ns(unsigned long long ns)
{
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > ns)
            break;
    }
}
__global__ void rowl2(const float4 *__restrict__ in, float4 *__restrict__ out, int rows)
{
    __shared__ float red[8];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float4 *row = in + (size_t)r * 1024;
        float4 v[4];
        float s = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[k] = row[threadIdx.x + 256 * k];
            s += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
        }
        for (int o = 16; o; o >>= 1)
            s += __shfl_xor_sync(~0u, s, o);
        if ((threadIdx.x & 31) == 0)
            red[threadIdx.x >> 5] = s;
        __syncthreads();
        float t = 0;
        for (int w = 0; w < 8; w++)
            t += red[w];
        __syncthreads();
        float inv = t > 0 ? rsqrtf(t) : 0;
        float4 *o = out + (size_t)r * 1024;
#pragma unroll
        for (int k = 0; k < 4; k++)
            o[threadIdx.x + 256 * k] =
                make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
    }
}
__global__ void hav(const double2 *__restrict__ in, double *__restrict__ out, size_t n, double la0,
                    double lo0)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 p = in[i];
        double a = sin((p.x - la0) * 0.5), b = sin((p.y - lo0) * 0.5);
        double h = a * a + cos(p.x) * cos(la0) * b * b;
        out[i] = 2 * 6371.0 * asin(sqrt(h));
    }
}
__global__ void reduce(const float4 *__restrict__ in, size_t n4, double *acc)
{
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = in[i];
        s += v.x + v.y + v.z + v.w;
    }
    for (int o = 16; o; o >>= 1)
        s += __shfl_xor_sync(~0u, s, o);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(acc, (double)s);
}
__global__ void scale(const float4 *__restrict__ in, float4 *__restrict__ out, size_t n4,
                      const double *acc)
{
    float inv = (float)(1.0 / *acc);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = in[i];
        out[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
}

struct Sess {
    cudaStream_t c, in, out;
    cudaEvent_t ev_in, ev_comp, ev_out, t0, t1;
};
static void sess_init(Sess &s)
{
    CK(cudaStreamCreateWithFlags(&s.c, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s.in, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s.out, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&s.ev_in, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&s.ev_comp, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&s.ev_out, cudaEventDisableTiming));
    CK(cudaEventCreate(&s.t0));
    CK(cudaEventCreate(&s.t1));
}
static int nsm;

// gpuqd's plan: nominal c rows, ramp 4 halving chunks at the end, at the start too if head
static std::vector<size_t> plan(size_t rows, size_t c, int head, int ramp)
{
    std::vector<size_t> st;
    if (ramp == 0) {
        for (size_t a = 0; a < rows; a += c)
            st.push_back(a);
        st.push_back(rows);
        return st;
    }
    std::vector<size_t> rp;
    size_t sum = 0;
    for (int i = 0; i < ramp; i++) {
        rp.push_back(c >> (ramp - i));
        sum += rp.back();
    }
    size_t ends = head ? 2 : 1, mid = rows - ends * sum, nmid = (mid + c - 1) / c,
           mc = (mid + nmid - 1) / nmid, at = 0;
    if (head)
        for (int i = 0; i < ramp; i++) {
            st.push_back(at);
            at += rp[i];
        }
    for (size_t e = at + mid; at < e; at += mc)
        st.push_back(at);
    at = rows - sum;
    for (int i = ramp - 1; i >= 0; i--) {
        st.push_back(at);
        at += rp[i];
    }
    st.push_back(rows);
    return st;
}

enum Op { L2, HAV };
enum Mode { CUR, NOKERNEL_WAIT, COPIES_ONLY };
// one job, gpuqd's pattern; returns nothing; t0 on IN before, t1 on C after the join
static void job(Sess &s, Op op, const std::vector<size_t> &st, const char *hin, char *hout,
                char *din, char *dout, Mode m)
{
    size_t ir = op == L2 ? 16384 : 16, orow = op == L2 ? 16384 : 8;
    CK(cudaEventRecord(s.t0, s.in));
    CK(cudaStreamWaitEvent(s.out, s.t0, 0));
    for (size_t k = 0; k + 1 < st.size(); k++) {
        size_t r0 = st[k], nr = st[k + 1] - st[k];
        CK(cudaMemcpyAsync(din + r0 * ir, hin + r0 * ir, nr * ir, cudaMemcpyHostToDevice, s.in));
        if (m == COPIES_ONLY) {
            CK(cudaMemcpyAsync(hout + r0 * orow, dout + r0 * orow, nr * orow,
                               cudaMemcpyDeviceToHost, s.out));
            continue;
        }
        CK(cudaEventRecord(s.ev_in, s.in));
        CK(cudaStreamWaitEvent(s.c, s.ev_in, 0));
        if (op == L2)
            rowl2<<<std::min<size_t>(nr, nsm * 8), 256, 0, s.c>>>(
                (const float4 *)(din + r0 * ir), (float4 *)(dout + r0 * orow), (int)nr);
        else
            hav<<<std::min<size_t>((nr + 255) / 256, nsm * 8), 256, 0, s.c>>>(
                (const double2 *)(din + r0 * ir), (double *)(dout + r0 * orow), nr, 0.5, 0.5);
        CK(cudaGetLastError());
        CK(cudaEventRecord(s.ev_comp, s.c));
        CK(cudaStreamWaitEvent(s.out, s.ev_comp, 0));
        CK(cudaMemcpyAsync(hout + r0 * orow, dout + r0 * orow, nr * orow, cudaMemcpyDeviceToHost,
                           s.out));
    }
    CK(cudaEventRecord(s.ev_out, s.out));
    CK(cudaStreamWaitEvent(s.c, s.ev_out, 0));
    CK(cudaStreamWaitEvent(s.c, s.t0, 0));
    CK(cudaEventRecord(s.ev_in, s.in));
    CK(cudaStreamWaitEvent(s.c, s.ev_in, 0));
    CK(cudaEventRecord(s.t1, s.c));
}

static double p50(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void single(const char *name, Op op, const std::vector<size_t> &st, Mode m, int gated,
                   const char *hin, char *hout, char *din, char *dout, Sess &s)
{
    std::vector<double> dev, host;
    for (int r = 0; r < 27; r++) {
        if (gated) {
            spin_ns<<<1, 1, 0, s.in>>>(3000000);
            CK(cudaGetLastError());
        }
        double h0 = now_us();
        job(s, op, st, hin, hout, din, dout, m);
        double h1 = now_us();
        CK(cudaEventSynchronize(s.t1));
        float ms;
        CK(cudaEventElapsedTime(&ms, s.t0, s.t1));
        if (r >= 2) {
            dev.push_back(ms * 1000);
            host.push_back(h1 - h0);
        }
    }
    printf("%-44s %-6s chunks %3zu  device p50 %7.1f us  (min %7.1f)  enqueue %6.1f us\n", name,
           gated ? "gated" : "live", st.size() - 1, p50(dev),
           *std::min_element(dev.begin(), dev.end()), p50(host));
}

// One copy alone on st, timed by events a and b: GB/s.
static double one_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t st,
                       cudaEvent_t a, cudaEvent_t b)
{
    float ms;
    CK(cudaEventRecord(a, st));
    CK(cudaMemcpyAsync(dst, src, n, kind, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    return n / (ms * 1e6);
}

static void copies(char *hin, char *hout, char *din, char *dout, size_t n, Sess &s)
{
    std::vector<double> up, down, both;
    cudaEvent_t a, b, c, d;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreate(&c));
    CK(cudaEventCreate(&d));
    for (int r = 0; r < 12; r++) {
        up.push_back(one_copy(din, hin, n, cudaMemcpyHostToDevice, s.in, a, b));
        down.push_back(one_copy(hout, dout, n, cudaMemcpyDeviceToHost, s.out, a, b));
        spin_ns<<<1, 1, 0, s.in>>>(1000000);
        CK(cudaEventRecord(a, s.in));
        CK(cudaStreamWaitEvent(s.out, a, 0));
        CK(cudaMemcpyAsync(din, hin, n, cudaMemcpyHostToDevice, s.in));
        CK(cudaMemcpyAsync(hout, dout, n, cudaMemcpyDeviceToHost, s.out));
        CK(cudaEventRecord(b, s.in));
        CK(cudaEventRecord(c, s.out));
        CK(cudaEventSynchronize(b));
        CK(cudaEventSynchronize(c));
        float m1, m2;
        CK(cudaEventElapsedTime(&m1, a, b));
        CK(cudaEventElapsedTime(&m2, a, c));
        both.push_back(n / (std::max(m1, m2) * 1e6));
        if (r == 11)
            printf("duplex last run: up %.1f us, down %.1f us\n", m1 * 1000, m2 * 1000);
    }
    printf("copies %zu MiB: H2D %.1f GB/s, D2H %.1f GB/s, both at once %.1f GB/s each way (p50)\n",
           n >> 20, p50(up), p50(down), p50(both));
}

// multi-session flat normalize: 4 sessions, depth in flight each, njobs each
struct Job {
    cudaEvent_t done;
    char *din, *dout;
    double *acc;
};
static void flat_job(Sess &s, Job &j, const char *hin, char *hout, size_t n, size_t chunk,
                     size_t head_bytes)
{
    CK(cudaMemsetAsync(j.acc, 0, 8, s.c));
    for (size_t a = 0; a < n; a += chunk) {
        size_t len = std::min(chunk, n - a);
        CK(cudaMemcpyAsync(j.din + a, hin + a, len, cudaMemcpyHostToDevice, s.in));
        CK(cudaEventRecord(s.ev_in, s.in));
        CK(cudaStreamWaitEvent(s.c, s.ev_in, 0));
        reduce<<<nsm * 4, 256, 0, s.c>>>((const float4 *)(j.din + a), len / 16, j.acc);
    }
    size_t head = head_bytes ? head_bytes : n;
    for (size_t a = 0; a < n; a = head, head = n) {
        scale<<<nsm * 4, 256, 0, s.c>>>((const float4 *)(j.din + a), (float4 *)(j.dout + a),
                                        (head - a) / 16, j.acc);
        CK(cudaEventRecord(s.ev_comp, s.c));
        CK(cudaStreamWaitEvent(s.out, s.ev_comp, 0));
        CK(cudaMemcpyAsync(hout + a, j.dout + a, head - a, cudaMemcpyDeviceToHost, s.out));
    }
    CK(cudaEventRecord(s.ev_out, s.out));
    CK(cudaStreamWaitEvent(s.c, s.ev_out, 0));
    CK(cudaEventRecord(j.done, s.c));
}
static void multi(int nsess, int depth, int njobs, size_t n, size_t chunk, size_t head, int upfront)
{
    std::vector<Sess> ss(nsess);
    std::vector<std::vector<Job>> jobs(nsess, std::vector<Job>(depth));
    std::vector<char *> hin(nsess), hout(nsess);
    for (int i = 0; i < nsess; i++) {
        sess_init(ss[i]);
        hin[i] = (char *)hostreg(n);
        hout[i] = (char *)hostreg(n);
        for (auto &j : jobs[i]) {
            CK(cudaMalloc(&j.din, n));
            CK(cudaMalloc(&j.dout, n));
            CK(cudaMalloc(&j.acc, 8));
            CK(cudaEventCreateWithFlags(&j.done, cudaEventDisableTiming));
        }
    }
    CK(cudaDeviceSynchronize());
    std::vector<int> sent(nsess, 0), fin(nsess, 0);
    double t0 = now_us();
    if (upfront) {
        for (int i = 0; i < nsess; i++)
            spin_ns<<<1, 1, 0, ss[i].in>>>(2000000);
    }
    for (int d = 0; d < depth; d++)
        for (int i = 0; i < nsess; i++) {
            flat_job(ss[i], jobs[i][d], hin[i], hout[i], n, chunk, head);
            sent[i]++;
        }
    double tgate = upfront ? 2000 : 0;
    int left = nsess * njobs;
    while (left) {
        for (int i = 0; i < nsess; i++) {
            if (fin[i] == sent[i])
                continue;
            Job &j = jobs[i][fin[i] % depth];
            cudaError_t e = cudaEventQuery(j.done);
            if (e == cudaErrorNotReady)
                continue;
            CK(e);
            fin[i]++;
            left--;
            if (sent[i] < njobs) {
                flat_job(ss[i], jobs[i][sent[i] % depth], hin[i], hout[i], n, chunk, head);
                sent[i]++;
            }
        }
    }
    double us = now_us() - t0 - tgate;
    printf("multi %d sess x %d in flight, %d jobs each, %zu MiB flat, chunk %zu MiB, download head "
           "%zu MiB: input %.1f GB/s\n",
           nsess, depth, njobs, n >> 20, chunk >> 20, head >> 20,
           (double)nsess * njobs * n / (us * 1e3));
    for (int i = 0; i < nsess; i++) {
        for (auto &j : jobs[i]) {
            CK(cudaFree(j.din));
            CK(cudaFree(j.dout));
            CK(cudaFree(j.acc));
            CK(cudaEventDestroy(j.done));
        }
        CK(cudaHostUnregister(hin[i]));
        CK(cudaHostUnregister(hout[i]));
        munmap(hin[i], n);
        munmap(hout[i], n);
    }
}

int main()
{
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("device %s, %d SMs\n", pr.name, nsm);
    size_t N = 64 << 20;
    char *hin = (char *)hostreg(N), *hout = (char *)hostreg(N), *din, *dout;
    CK(cudaMalloc(&din, N));
    CK(cudaMalloc(&dout, N));
    Sess s;
    sess_init(s);
    copies(hin, hout, din, dout, N, s);
    copies(hin, hout, din, dout, 16000000, s);
    // row-wise l2, 4096 rows of 16 KiB; gpuqd today: 8 MiB nominal (512 rows), ramp 4 both ends
    struct {
        const char *name;
        size_t c;
        int head, ramp;
    } pl[] = {{"l2 8MiB ramp4 both (gpuqd)", 512, 1, 4}, {"l2 8MiB even", 512, 0, 0},
              {"l2 4MiB ramp4 both", 256, 1, 4},         {"l2 16MiB ramp4 both", 1024, 1, 4},
              {"l2 8MiB ramp3 both", 512, 1, 3},         {"l2 2MiB even", 128, 0, 0},
              {"l2 16MiB ramp5 both", 1024, 1, 5}};
    for (auto &p : pl)
        for (int g = 1; g >= 0; g--)
            single(p.name, L2, plan(4096, p.c, p.head, p.ramp), CUR, g, hin, hout, din, dout, s);
    single("l2 8MiB ramp4 both, copies only", L2, plan(4096, 512, 1, 4), COPIES_ONLY, 1, hin, hout,
           din, dout, s);
    single("l2 whole, copies only", L2, plan(4096, 4096, 0, 0), COPIES_ONLY, 1, hin, hout, din,
           dout, s);
    // haversine 1M f64 rows of 16 B in, 8 B out; gpuqd: 8 MiB / 16 B = 524288 rows nominal, ramp 4
    // at the end
    struct {
        const char *name;
        size_t c;
        int head, ramp;
    } ph[] = {
        {"hav 8MiB ramp4 end (gpuqd)", 524288, 0, 4}, {"hav 8MiB even", 524288, 0, 0},
        {"hav 4MiB ramp4 end", 262144, 0, 4},         {"hav 4MiB even", 262144, 0, 0},
        {"hav 2MiB ramp3 end", 131072, 0, 3},         {"hav 16MiB(whole) ramp5 end", 1000000, 0, 5},
        {"hav 8MiB ramp6 end", 524288, 0, 6}};
    for (auto &p : ph)
        for (int g = 1; g >= 0; g--)
            single(p.name, HAV, plan(1000000, p.c, p.head, p.ramp), CUR, g, hin, hout, din, dout,
                   s);
    single("hav whole, copies only", HAV, plan(1000000, 1000000, 0, 0), COPIES_ONLY, 1, hin, hout,
           din, dout, s);
    CK(cudaFree(din));
    CK(cudaFree(dout));
    // gpuqd before (8 MiB chunks, the first chunk downloaded first), gated and live; since (32 MiB,
    // 8 MiB head)
    multi(4, 2, 48, N, 8 << 20, 8 << 20, 1);
    multi(4, 2, 48, N, 8 << 20, 8 << 20, 0);
    multi(4, 2, 48, N, 16 << 20, 8 << 20, 0);
    multi(4, 2, 48, N, 32 << 20, 8 << 20, 0);
    multi(4, 2, 48, N, 64 << 20, 8 << 20, 0);
    multi(4, 3, 48, N, 32 << 20, 8 << 20, 0);
    multi(2, 2, 48, N, 32 << 20, 8 << 20, 0);
    multi(1, 2, 48, N, 32 << 20, 8 << 20, 0);
    printf("pipe_model: ok\n");
    return 0;
}
