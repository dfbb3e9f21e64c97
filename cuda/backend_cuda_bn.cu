// backend_cuda_bn — batch normalisation on the GPU, the twin of backend_cpu_bn.c.
//
// Our kernels rather than cuDNN's: the CPU sums each channel's statistics and gradient sums in
// double (issue 13 measured float sums 2e-5 to 2e-4 off a float64 reference), and it writes the
// batch mean and biased variance that the layer folds into its running statistics; cuDNN sums in
// float and returns the inverse standard deviation instead. Here up to 64 blocks per channel sum in
// double, the per-channel coefficients come from the same functions as the CPU's
// (elementwise.h), and an elementwise pass applies them. With dt_bn_cfg's relu the forward writes
// max(y, 0) and the backward takes dy where that output is > 0 (ew_relu_mask), inside the same
// kernels, as the CPU's fused batch norm does: the relu layer after it then runs no kernels.
#include "backend_cuda.h"
#include "elementwise.h"

#define THREADS 256

// Sums over one channel's N x H x W values into s[0..k) (block-wide, in double); thread 0 gets the totals.
__device__ static void block_sum(double *v, int k, double (*sh)[THREADS])
{
    for (int j = 0; j < k; j++) sh[j][threadIdx.x] = v[j];
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            for (int j = 0; j < k; j++) sh[j][threadIdx.x] += sh[j][threadIdx.x + w];
        __syncthreads();
    }
    for (int j = 0; j < k; j++) v[j] = sh[j][0];
    __syncthreads(); // read by all before the block's next channel writes sh again
}

// A channel's N x H x W values are summed by PARTS blocks (fewer for small layers), each into
// its own slot of part[C][PARTS][k]; one thread per channel then adds its slots in order. So the
// GPU is filled whatever the channel count, and the sums come out the same on every run.
#define PARTS 64

static int parts_for(size_t n)
{
    size_t p = (n + 8 * THREADS - 1) / (8 * THREADS);
    return p < 1 ? 1 : p > PARTS ? PARTS : (int)p;
}

// gridDim.y is at most 65535: a block takes channels blockIdx.y, blockIdx.y + gridDim.y, ...
static unsigned channel_blocks(int C) { return C > 65535 ? 65535u : (unsigned)C; }

// slot blockIdx.x of channel blockIdx.y (and every gridDim.y-th after it): the sums of x - k and
// (x - k)^2 (k: the channel's first value)
// (Index arithmetic in I: 32-bit where the tensor allows, as 64-bit division is slow on a GPU.)
template <typename I>
__global__ void k_bn_stats_part(int C, int hw, I n, int parts, const float *x, double *part)
{
    __shared__ double sh[2][THREADS];
    for (int c = blockIdx.y; c < C; c += gridDim.y) { // the same trip count for every thread of the block
        double k = x[(size_t)c * hw], v[2] = {0.0, 0.0};
        for (I t = blockIdx.x * (I)THREADS + threadIdx.x; t < n; t += (I)parts * THREADS) {
            I r = t / (I)hw;
            double d = (double)x[((size_t)r * C + c) * (size_t)hw + (t - r * (I)hw)] - k;
            v[0] += d, v[1] += d * d;
        }
        block_sum(v, 2, sh);
        if (threadIdx.x == 0)
            part[((size_t)c * parts + blockIdx.x) * 2] = v[0], part[((size_t)c * parts + blockIdx.x) * 2 + 1] = v[1];
    }
}

// Training: the batch's mean and variance (to mean, var) and the affine map (m, a) in tmp.
__global__ void k_bn_stats(int C, int hw, size_t n, int parts, float eps, const float *x, const float *scale,
                           const double *part, float *mean, float *var, double *tmp)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double s1 = 0.0, s2 = 0.0, dm, dv;
        for (int p = 0; p < parts; p++)
            s1 += part[((size_t)c * parts + p) * 2], s2 += part[((size_t)c * parts + p) * 2 + 1];
        ew_bn_stats(s1, s2, (double)x[(size_t)c * hw], (double)n, &mean[c], &var[c], &dm, &dv);
        tmp[c] = (float)dm;
        tmp[C + c] = ew_bn_scale(dv, eps, scale[c]);
    }
}

// Evaluation: the affine map from the running statistics.
__global__ void k_bn_coeffs(int C, float eps, const float *scale, const float *mean, const float *var, double *tmp)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        tmp[c] = mean[c];
        tmp[C + c] = ew_bn_scale((double)var[c], eps, scale[c]);
    }
}

template <typename I>
__global__ void k_bn_norm(int C, int hw, I n, const float *x, const float *shift, const double *tmp, int relu, float *y)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        int c = (int)(i / (I)hw % (I)C);
        float v = ew_bn_norm(x[i], (float)tmp[c], (float)tmp[C + c], shift[c]);
        y[i] = relu ? ew_relu(v) : v;
    }
}

// Backward, slot blockIdx.x of channel blockIdx.y (and every gridDim.y-th after it): the sums of
// dy, dy (x - mean), x - mean; y: the fused relu's output (dy taken where it is > 0), or NULL.
template <typename I>
__global__ void k_bn_grad_part(int C, int hw, I n, int parts, const float *x, const float *dy, const float *y,
                               const float *mean, double *part)
{
    __shared__ double sh[3][THREADS];
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        double m = mean[c], v[3] = {0.0, 0.0, 0.0};
        for (I t = blockIdx.x * (I)THREADS + threadIdx.x; t < n; t += (I)parts * THREADS) {
            I r = t / (I)hw;
            size_t o = ((size_t)r * C + c) * (size_t)hw + (t - r * (I)hw);
            double xm = (double)x[o] - m, d = y ? ew_relu_mask(dy[o], y[o]) : dy[o];
            v[0] += d, v[1] += d * xm, v[2] += xm;
        }
        block_sum(v, 3, sh);
        if (threadIdx.x == 0)
            for (int j = 0; j < 3; j++) part[((size_t)c * parts + blockIdx.x) * 3 + j] = v[j];
    }
}

// The gradients of scale and shift, and dx's coefficients (u, k, a) in tmp.
__global__ void k_bn_grad(int C, size_t n, int parts, float eps, const float *scale, const float *var,
                          const double *part, float *dscale, float *dshift, double *tmp)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        double v[3] = {0.0, 0.0, 0.0};
        for (int p = 0; p < parts; p++)
            for (int j = 0; j < 3; j++) v[j] += part[((size_t)c * parts + p) * 3 + j];
        float ds, dsh, u, k, a;
        ew_bn_bwd_coeffs(v[0], v[1], v[2], (double)n, var[c], eps, scale[c], &ds, &dsh, &u, &k, &a);
        if (dscale) dscale[c] = ds;
        if (dshift) dshift[c] = dsh;
        tmp[c] = u, tmp[C + c] = k, tmp[2 * C + c] = a;
    }
}

template <typename I>
__global__ void k_bn_dx(int C, int hw, I n, const float *x, const float *dy, const float *y, const float *mean,
                        const double *tmp, float beta, float *dx)
{
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        int c = (int)(i / (I)hw % (I)C);
        float d = y ? ew_relu_mask(dy[i], y[i]) : dy[i];
        dx[i] = ew_bn_dx(dx[i], d, x[i], mean[c], (float)tmp[c], (float)tmp[C + c], (float)tmp[2 * C + c], beta);
    }
}

static unsigned blocks(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return b > 65536 ? 65536u : b ? (unsigned)b : 1u;
}

extern "C" {

int cuk_bn_fwd(cudaStream_t s, const dt_bn_cfg *c, int rows, int train, const float *x, const float *scale,
               const float *shift, float *mean, float *var, float *y, double *tmp)
{
    int hw = c->h * c->w;
    size_t n = (size_t)rows * c->c * hw;
    int small = n + 65536u * THREADS < 0xffffffffu; /* every index, and the strides past the end, fit 32 bits */
    if (n == 0) return 0;
    size_t per = (size_t)rows * hw;
    int parts = parts_for(per);
    double *part = tmp + 3 * (size_t)c->c;
    if (train) {
        if (small)
            k_bn_stats_part<unsigned>
                <<<dim3(parts, channel_blocks(c->c)), THREADS, 0, s>>>(c->c, hw, (unsigned)per, parts, x, part);
        else
            k_bn_stats_part<size_t>
                <<<dim3(parts, channel_blocks(c->c)), THREADS, 0, s>>>(c->c, hw, per, parts, x, part);
        k_bn_stats<<<blocks((size_t)c->c), THREADS, 0, s>>>(c->c, hw, per, parts, c->eps, x, scale, part, mean, var,
                                                            tmp);
    } else k_bn_coeffs<<<blocks((size_t)c->c), THREADS, 0, s>>>(c->c, c->eps, scale, mean, var, tmp);
    if (small) k_bn_norm<unsigned><<<blocks(n), THREADS, 0, s>>>(c->c, hw, (unsigned)n, x, shift, tmp, c->relu, y);
    else k_bn_norm<size_t><<<blocks(n), THREADS, 0, s>>>(c->c, hw, n, x, shift, tmp, c->relu, y);
    return (int)cudaGetLastError();
}

int cuk_bn_bwd(cudaStream_t s, const dt_bn_cfg *c, int rows, const float *x, const float *scale, const float *mean,
               const float *var, const float *dy, const float *y, float *dx, float beta, float *dscale, float *dshift,
               double *tmp)
{
    if (!c->relu) y = NULL;
    int hw = c->h * c->w;
    size_t n = (size_t)rows * c->c * hw;
    int small = n + 65536u * THREADS < 0xffffffffu; /* every index, and the strides past the end, fit 32 bits */
    if (n == 0) return 0;
    size_t per = (size_t)rows * hw;
    int parts = parts_for(per);
    double *part = tmp + 3 * (size_t)c->c;
    if (small)
        k_bn_grad_part<unsigned><<<dim3(parts, channel_blocks(c->c)), THREADS, 0, s>>>(c->c, hw, (unsigned)per, parts,
                                                                                       x, dy, y, mean, part);
    else
        k_bn_grad_part<size_t>
            <<<dim3(parts, channel_blocks(c->c)), THREADS, 0, s>>>(c->c, hw, per, parts, x, dy, y, mean, part);
    k_bn_grad<<<blocks((size_t)c->c), THREADS, 0, s>>>(c->c, per, parts, c->eps, scale, var, part, dscale, dshift, tmp);
    if (dx && small)
        k_bn_dx<unsigned><<<blocks(n), THREADS, 0, s>>>(c->c, hw, (unsigned)n, x, dy, y, mean, tmp, beta, dx);
    else if (dx) k_bn_dx<size_t><<<blocks(n), THREADS, 0, s>>>(c->c, hw, n, x, dy, y, mean, tmp, beta, dx);
    return (int)cudaGetLastError();
}

} // extern "C"
