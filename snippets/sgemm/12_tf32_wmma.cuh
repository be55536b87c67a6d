//! @file 12_tf32_wmma.cuh
//! @brief SGEMM step 12: TF32 tensor cores through WMMA (not the same operation: inputs rounded to TF32).
//!
//! Steps 1 to 11 are fp32 FMAs. The tensor cores multiply 16 x 16 x 8 fragments
//! with inputs rounded to TF32 (10 mantissa bits, a rounding error 2^13 times
//! fp32's) and accumulate in fp32, for many times the FMA units' throughput.
//! Tiles as step 9's, staged by 16-byte cp.async copies; each warp computes a
//! 64 x 32 tile as 4 x 2 fragments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mma.h>
#include <cuda_runtime.h>

namespace stepwise::sgemm::tf32_wmma {

//! @brief The arguments every launcher needs: positive sizes, buffers given.
inline bool basic_args_ok(int M, int N, int K, const float* A, const float* B, const float* C)
{
    return M > 0 && N > 0 && K > 0 && A != nullptr && B != nullptr && C != nullptr;
}

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief Starts a 16-byte copy from global to shared memory, bypassing L1; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(float* smem_dst, const float* gmem_src)
{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
}

//! @brief Closes the group of this thread's copies started since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

//! @brief Waits until at most `pending` of this thread's committed groups are still in flight. Other threads'
//!        copies are visible only after a __syncthreads() that follows their own wait.
template <int pending>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

namespace wmma = nvcuda::wmma;

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int WM = 64;
constexpr int WN = 32;
constexpr int stages = 3;
constexpr int frags_m = WM / 16;
constexpr int frags_n = WN / 16;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int lda = BK + 4;                          // row of As: 80 bytes
constexpr int ldb = BN + 4;                          // row of Bs: 528 bytes
constexpr int a_stage = BM * lda;
constexpr int b_stage = BK * ldb;
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * (a_stage + b_stage) * sizeof(float);
static_assert((a_stage + b_stage) % 8 == 0, "stages keep the 32-byte alignment WMMA loads need");

// WMMA's TF32 fragments exist only in code for sm_80 and newer (the kernel below is empty elsewhere).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <class Frag>
__device__ __forceinline__ void round_to_tf32(Frag& f)
{
#pragma unroll
    for (int i = 0; i < f.num_elements; ++i) {
        f.x[i] = wmma::__float_to_tf32(f.x[i]);
    }
}
#endif

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) float smem[];
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);

    A += static_cast<std::size_t>(blockIdx.y) * BM * K;
    B += static_cast<std::size_t>(blockIdx.x) * BN;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    const int tiles = K / BK;
    auto load_tile = [&](int kt, int stage) {
        float* As = smem + stage * (a_stage + b_stage);
        float* Bs = As + a_stage;
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / threads; ++i) {
            const int e = t + i * threads;
            const int m = e / (BK / 4);
            const int k = (e % (BK / 4)) * 4;
            cp_async_16(&As[m * lda + k], &A[static_cast<std::size_t>(m) * K + kt * BK + k]);
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / threads; ++i) {
            const int e = t + i * threads;
            const int k = e / (BN / 4);
            const int n = (e % (BN / 4)) * 4;
            cp_async_16(&Bs[k * ldb + n], &B[static_cast<std::size_t>(kt * BK + k) * N + n]);
        }
    };

#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < tiles) {
            load_tile(s, s);
        }
        cp_async_commit();
    }

    FragC acc[frags_m][frags_n];
#pragma unroll
    for (int i = 0; i < frags_m; ++i) {
#pragma unroll
        for (int j = 0; j < frags_n; ++j) {
            wmma::fill_fragment(acc[i][j], 0.0f);
        }
    }

    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<stages - 2>();
        __syncthreads();
        if (kt + stages - 1 < tiles) {
            load_tile(kt + stages - 1, (kt + stages - 1) % stages);
        }
        cp_async_commit();

        const float* As = smem + (kt % stages) * (a_stage + b_stage);
        const float* Bs = As + a_stage;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            FragA a[frags_m];
            FragB b[frags_n];
#pragma unroll
            for (int i = 0; i < frags_m; ++i) {
                wmma::load_matrix_sync(a[i], &As[(warp_m * WM + i * 16) * lda + kk], lda);
            }
#pragma unroll
            for (int j = 0; j < frags_n; ++j) {
                wmma::load_matrix_sync(b[j], &Bs[kk * ldb + warp_n * WN + j * 16], ldb);
            }
#pragma unroll
            for (int i = 0; i < frags_m; ++i) {
                round_to_tf32(a[i]);
            }
#pragma unroll
            for (int j = 0; j < frags_n; ++j) {
                round_to_tf32(b[j]);
            }
#pragma unroll
            for (int i = 0; i < frags_m; ++i) {
#pragma unroll
                for (int j = 0; j < frags_n; ++j) {
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < frags_m; ++i) {
#pragma unroll
        for (int j = 0; j < frags_n; ++j) {
            float* c = &C[static_cast<std::size_t>(warp_m * WM + i * 16) * N + warp_n * WN + j * 16];
            if (beta != 0.0f) {
                FragC old;
                wmma::load_matrix_sync(old, c, N, wmma::mem_row_major);
#pragma unroll
                for (int e = 0; e < old.num_elements; ++e) {
                    acc[i][j].x[e] = alpha * acc[i][j].x[e] + beta * old.x[e];
                }
            } else {
#pragma unroll
                for (int e = 0; e < acc[i][j].num_elements; ++e) {
                    acc[i][j].x[e] *= alpha;
                }
            }
            wmma::store_matrix_sync(c, acc[i][j], N, wmma::mem_row_major);
        }
    }
#endif
}

//! What this step needs of the GPU and the build: TF32 tensor-core instructions and `cp.async`, compute capability
//! 8.0 or higher.
constexpr const char* requirement = "sm_80";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr int marker_threads = 128;
#else
constexpr int marker_threads = 32;
#endif
static __global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code the driver loaded for the current GPU has the instructions this step uses
//!        (see `requirement`); where it does not, the kernels are empty and the launcher does not launch them.
static inline bool requirement_met()
{
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, requirement_marker_kernel) != cudaSuccess) {
        cudaGetLastError();  // no code for this GPU at all: reported as cudaErrorNotSupported instead
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

//! @brief `C = alpha * A * B + beta * C`, row-major; C is not read when `beta == 0`.
//! @param[in]     M       rows of A and C
//! @param[in]     N       columns of B and C
//! @param[in]     K       columns of A, rows of B
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre M, N multiples of 128, K a multiple of 16, `M <= 65535 * 128`; buffers not null; A and B 16-byte aligned
//!      (16-byte copies), C 32-byte aligned (WMMA loads and stores its fragments from 256-bit aligned addresses); a GPU
//!      of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % BM != 0 || N % BN != 0 || K % BK != 0 ||
        M / BM > 65535 || !aligned(d_A, 16) || !aligned(d_B, 16) || !aligned(d_C, 32)) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    const cudaError_t opt_in = cudaFuncSetAttribute(sgemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(smem_bytes));
    if (opt_in != cudaSuccess) {
        return opt_in;
    }
    sgemm_kernel<<<dim3(N / BN, M / BM), threads, smem_bytes, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::tf32_wmma
