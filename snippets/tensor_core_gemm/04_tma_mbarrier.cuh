//! @file 04_tma_mbarrier.cuh
//! @brief Tensor-core GEMM step 4: tiles loaded by the Tensor Memory Accelerator, one thread issuing the copies,
//!        stages handed over through `mbarrier`s (beyond the sources; needs compute capability 9.0).
//!
//! In step 3 every thread computes addresses and issues eight 16-byte
//! copies per tile, and the whole block meets at a `__syncthreads()` before
//! each tile. Hopper's TMA copies a whole 2D box of a matrix, described once
//! on the host (`CUtensorMap`), into shared memory with the 128-byte swizzle
//! of step 2 applied by the hardware, and counts the bytes that land on an
//! `mbarrier`. One thread issues the copies; a warp waits on the stage's
//! "full" barrier and, once done with the stage, arrives on its "empty"
//! barrier, which the issuing thread waits on before refilling it. No
//! barrier of the whole block is left in the main loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

namespace stepwise::tensor_core_gemm::tma_mbarrier {

using bf16 = __nv_bfloat16;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 128;
constexpr int BK = 64;   // 64 bf16: one 128-byte row per row of A or B
constexpr int WM = 64;   // warp tile of C: 4 x 4 mma tiles of 16 x 8
constexpr int WN = 32;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int chunks = BK / 8;                        // 16-byte chunks per row
constexpr int stages = 4;                             // tiles of A and B in flight or in use
constexpr int stage_elems = (BM + BN) * BK;
constexpr unsigned stage_bytes = stage_elems * sizeof(bf16);  // what lands on a stage's "full" barrier
//! The stages, and 1 KiB to align them: the swizzle repeats every 8 rows of 128 bytes, and the TMA applies it to
//! addresses, so a tile must start on a multiple of 1024 bytes for `swizzled()` to find its elements.
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * stage_bytes + 1024;
static_assert(chunks == 8, "the swizzle XORs the chunk index with the row's low 3 bits");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief Where element 8 * `chunk` of row `row` of a swizzled tile is (in elements from the tile's start).
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * BK + ((chunk ^ (row % 8)) * 8); }

//! @brief The address of `p` in the shared window, as PTX's `.shared` instructions take it.
__device__ __forceinline__ unsigned smem_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

//! @brief Sets up an mbarrier whose phase completes after `arrivals` arrivals (and the bytes announced to it).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

//! @brief Arrives on `bar` and announces `bytes` more that copies will complete on it.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint64_t* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}

//! @brief Arrives on `bar`.
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

//! @brief Waits until the phase of `bar` with this parity (0 for its first phase, 1 for its second, ...) completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned parity)
{
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_address(bar)), "r"(parity)
                     : "memory");
    }
}

//! @brief Starts the TMA copy of the box at (`k`, `row`) of `map` into `smem_dst`; its bytes complete on `bar`.
__device__ __forceinline__ void tma_load(void* smem_dst, const CUtensorMap* map, int k, int row, std::uint64_t* bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(k), "r"(row), "r"(smem_address(bar))
                 : "memory");
}

//! @brief Loads four 8 x 8 bf16 tiles; lane `l` gives the address of row `l % 8` of tile `l / 8`.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const bf16* smem_row)
{
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

//! @brief d += a b for one 16 x 8 x 16 tile: a row-major 16 x 16, b column-major 16 x 8, fp32 accumulators.
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

//! @brief One 16 x 16 slice of K of the warp's tile: 4 + 2 `ldmatrix.x4`, 16 `mma.sync`.
__device__ __forceinline__ void warp_tile_k16(float (&acc)[WM / 16][WN / 8][4], const bf16* As, const bf16* Bs,
                                              int warp_m, int warp_n, int kk, int lane)
{
    unsigned a[WM / 16][4];
    unsigned b[WN / 16][4];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {  // tiles: rows 0-7 | 8-15, k 0-7 | 8-15: a0..a3 of mma's A fragment
        const int row = warp_m * WM + i * 16 + lane % 16;
        ldmatrix_x4(a[i], &As[swizzled(row, kk * 2 + lane / 16)]);
    }
#pragma unroll
    for (int j = 0; j < WN / 16; ++j) {  // tiles: n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15
        const int row = warp_n * WN + j * 16 + lane % 8 + (lane / 16) * 8;
        ldmatrix_x4(b[j], &Bs[swizzled(row, kk * 2 + (lane / 8) % 2)]);
    }
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            mma_16x8x16(acc[i][j], a[i], b[j / 2][(j % 2) * 2], b[j / 2][(j % 2) * 2 + 1]);
        }
    }
}

//! @brief Rounds the warp's accumulators to bf16 and writes them to C: each thread holds, per 16 x 8 tile, two
//!        adjacent columns of row `lane / 4` and of row `lane / 4 + 8`.
__device__ __forceinline__ void store_warp_tile(const float (&acc)[WM / 16][WN / 8][4], bf16* C, int N,
                                                std::size_t row0, std::size_t col0, int lane)
{
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const std::size_t row = row0 + i * 16 + lane / 4;
            const std::size_t col = col0 + j * 8 + (lane % 4) * 2;
            *reinterpret_cast<__nv_bfloat162*>(&C[row * N + col]) = __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<__nv_bfloat162*>(&C[(row + 8) * N + col]) =
                __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
        }
    }
}

//! @brief Computes the block's 128 x 128 tile of C = A B.
static __global__ void __launch_bounds__(threads)
    gemm_kernel(int M, int N, int K, const __grid_constant__ CUtensorMap map_a,
                const __grid_constant__ CUtensorMap map_b, bf16* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ unsigned char smem_raw[];
    bf16* smem = reinterpret_cast<bf16*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t full[stages];   // a stage's tiles have landed
    __shared__ std::uint64_t empty[stages];  // every warp is done with a stage
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int lane = t % 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int tiles = K / BK;

    const auto load_tile = [&](int kt, int stage) {  // thread 0 only
        bf16* As = smem + stage * stage_elems;
        mbarrier_arrive_expect_bytes(&full[stage], stage_bytes);
        tma_load(As, &map_a, kt * BK, row0, &full[stage]);
        tma_load(As + BM * BK, &map_b, kt * BK, col0, &full[stage]);
    };
    if (t == 0) {
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], threads / 32);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit too
        for (int s = 0; s < stages && s < tiles; ++s) {
            load_tile(s, s);
        }
    }
    __syncthreads();

    float acc[WM / 16][WN / 8][4] = {};
    for (int kt = 0; kt < tiles; ++kt) {
        const int stage = kt % stages;
        const unsigned parity = (kt / stages) % 2;
        mbarrier_wait(&full[stage], parity);
        const bf16* As = smem + stage * stage_elems;
        const bf16* Bs = As + BM * BK;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            warp_tile_k16(acc, As, Bs, warp_m, warp_n, kk, lane);
        }
        __syncwarp();  // the warp's ldmatrix reads are done
        if (lane == 0) {
            mbarrier_arrive(&empty[stage]);
        }
        if (t == 0 && kt + stages < tiles) {
            mbarrier_wait(&empty[stage], parity);
            load_tile(kt + stages, stage);
        }
    }
    store_warp_tile(acc, C, N, static_cast<std::size_t>(row0) + warp_m * WM,
                    static_cast<std::size_t>(col0) + warp_n * WN, lane);
#endif
}

//! What this step needs of the GPU and the build: the TMA and `mbarrier` transaction counts, compute capability 9.0
//! or higher.
constexpr const char* requirement = "sm_90";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
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

//! @brief The driver's `cuTensorMapEncodeTiled`, reached through the runtime: no `-lcuda` needed.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static void* const function = [] {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            cudaGetLastError();  // reported as cudaErrorNotSupported by the launcher instead
            return static_cast<void*>(nullptr);
        }
        return f;
    }();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

//! @brief Describes a `rows` x K bf16 matrix stored K-contiguous to the TMA: boxes of BK x `box_rows`, 128-byte
//!        swizzle, elements outside the matrix read as zero.
inline bool encode_k_major(CUtensorMap* map, const bf16* base, int rows, int K, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(K) * sizeof(bf16)};
    const cuuint32_t box[2] = {BK, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, row_stride, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief C = A B in bf16 with fp32 accumulation.
//! @param[in]  M       rows of A and C
//! @param[in]  N       columns of B and C
//! @param[in]  K       columns of A, rows of B
//! @param[in]  d_A     M x K bf16, row-major (`A[m * K + k]`)
//! @param[in]  d_B     K x N bf16, column-major (`B[n * K + k]`)
//! @param[out] d_C     M x N bf16, row-major (`C[m * N + n]`)
//! @param[in]  stream  stream to launch on
//! @pre M, N multiples of 128, K a multiple of 64, `M <= 65535 * 128`; buffers not null and 16-byte aligned; a GPU
//!      of compute capability 9.0 or higher (the TMA)
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on a GPU without the TMA (or code
//!         built only for one, or a driver without `cuTensorMapEncodeTiled`), the error of the shared-memory
//!         opt-in, else the launch's error
inline cudaError_t gemm(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream = 0)
{
    if (M <= 0 || N <= 0 || K <= 0 || M % BM != 0 || N % BN != 0 || K % BK != 0 || M / BM > 65535 ||
        !aligned(d_A, 16) || !aligned(d_B, 16) || !aligned(d_C, 16) || d_A == nullptr || d_B == nullptr ||
        d_C == nullptr) {
        return cudaErrorInvalidValue;
    }
    CUtensorMap map_a{};
    CUtensorMap map_b{};
    if (!requirement_met() || !encode_k_major(&map_a, d_A, M, K, BM) || !encode_k_major(&map_b, d_B, N, K, BN)) {
        return cudaErrorNotSupported;
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    const cudaError_t opt_in = cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(smem_bytes));
    if (opt_in != cudaSuccess) {
        return opt_in;
    }
    gemm_kernel<<<dim3(N / BN, M / BM), threads, smem_bytes, stream>>>(M, N, K, map_a, map_b, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::tensor_core_gemm::tma_mbarrier
