// runtime_kernels.cu — hand-written CUDA kernels for tests/gpu/test_runtime_gpu.c.
// Regenerate runtime_kernels_ptx.h after editing:
//   nvcc -ptx -arch=compute_80 -O2 runtime_kernels.cu -o k.ptx  (then paste as a C string)
// The runtime is tested on them so that its tests do not depend on the Kiln compiler.
#include <cuda_fp16.h>
extern "C" __global__ void axpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void kinds(double *out, double d, long long i64, signed char i8, unsigned short u16,
                                 __half h, bool flag, unsigned int u32)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = d; out[1] = (double)i64; out[2] = (double)i8; out[3] = (double)u16;
        out[4] = (double)__half2float(h); out[5] = flag ? 1.0 : 0.0; out[6] = (double)u32;
        out[7] = (double)blockDim.x;
    }
}
extern "C" __global__ void big_smem(float *out, int nfloats)
{
    extern __shared__ float s[];
    for (int j = threadIdx.x; j < nfloats; j += blockDim.x) s[j] = (float)j;
    __syncthreads();
    out[threadIdx.x] = s[nfloats - 1 - threadIdx.x];
}
