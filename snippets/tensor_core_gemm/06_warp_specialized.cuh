//! @file 06_warp_specialized.cuh
//! @brief Tensor-core GEMM step 6: warp specialization, a producer warpgroup and two consumer warpgroups with
//!        registers moved between them, and 128 x 256 tiles (beyond the sources; needs sm_90a).
//!
//! In step 5 thread 0 both issues the copies and multiplies: its warpgroup
//! stalls whenever it waits to refill a stage, and the tile is as small as
//! registers for every thread allow. Here a third warpgroup only loads: one of
//! its threads issues every TMA copy, and the warpgroup gives most of its
//! registers back (`setmaxnreg.dec` to 40) so that the two consumer
//! warpgroups can take them (`setmaxnreg.inc` to 232). With those, each
//! consumer holds a 64 x 256 accumulator tile (128 floats a thread) and
//! multiplies with `m64n256k16`: twice the columns per byte of A read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

namespace stepwise::tensor_core_gemm::warp_specialized {

using bf16 = __nv_bfloat16;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 256;
constexpr int BK = 64;   // 64 bf16: one 128-byte swizzled row per row of A or B
constexpr int WGM = 64;  // a consumer warpgroup's rows of the tile (wgmma's M)
constexpr int consumers = BM / WGM;             // 2 warpgroups multiply
constexpr int threads = (consumers + 1) * 128;  // 384: and one loads
constexpr int producer_registers = 40;          // setmaxnreg: 40 * 128 + 2 * 232 * 128 <= 65536
constexpr int consumer_registers = 232;
constexpr int stages = 4;                       // tiles of A and B in flight or in use: 4 x 48 KiB
constexpr int stage_elems = (BM + BN) * BK;
constexpr unsigned stage_bytes = stage_elems * sizeof(bf16);  // what lands on a stage's "full" barrier
//! The stages, and 1 KiB to align them: the swizzle repeats every 8 rows of 128 bytes, and both the TMA and wgmma
//! apply it to addresses, so a tile must start on a multiple of 1024 bytes.
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * stage_bytes + 1024;
static_assert(BK * sizeof(bf16) == 128, "a row of a tile is one 128-byte swizzle row");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

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

//! @brief The wgmma descriptor of a K-major tile with the 128-byte swizzle, starting at `tile` (1024-byte aligned, or
//!        32 bytes further per slice of 16 along K): 8-row groups 1024 bytes apart.
__device__ __forceinline__ std::uint64_t smem_descriptor(const bf16* tile)
{
    return ((smem_address(tile) & 0x3FFFF) >> 4)    // start address, in 16-byte units
           | (std::uint64_t{1} << 16)               // leading byte offset: unused by K-major swizzled tiles
           | (std::uint64_t{1024 >> 4} << 32)       // stride byte offset: one 8-row group
           | (std::uint64_t{1} << 62);              // 128-byte swizzle
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 256 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64x256x16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

//! @brief Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

//! @brief Waits until at most `pending` committed groups of this warpgroup are still running.
template <int pending>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

//! @brief Tells the compiler the accumulators change here, so that no read of them moves above a wgmma_wait.
template <int n>
__device__ __forceinline__ void fence_accumulators(float (&d)[n])
{
#pragma unroll
    for (int i = 0; i < n; ++i) {
        asm volatile("" : "+f"(d[i])::"memory");
    }
}

//! @brief Lowers this warpgroup's registers per thread to `count` (all its threads execute it).
template <int count>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Raises this warpgroup's registers per thread to `count`, from what other warpgroups gave back.
template <int count>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Rounds a warpgroup's 64 x 256 accumulators to bf16 and writes them to C: for each 8 columns, a thread
//!        holds two adjacent ones of row `16 * warp + lane / 4` and of the row 8 below.
__device__ __forceinline__ void store_warpgroup_tile(const float (&d)[BN / 2], bf16* C, int N, std::size_t row0,
                                                     std::size_t col0, int thread_in_group)
{
    const std::size_t row = row0 + (thread_in_group / 32) * 16 + (thread_in_group % 32) / 4;
    const std::size_t col = col0 + (thread_in_group % 4) * 2;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        *reinterpret_cast<__nv_bfloat162*>(&C[row * N + col + j * 8]) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<__nv_bfloat162*>(&C[(row + 8) * N + col + j * 8]) =
            __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    }
}

//! @brief Computes the block's 128 x 256 tile of C = A B (an empty kernel where the code is not built for sm_90a).
static __global__ void __launch_bounds__(threads, 1)
    gemm_kernel(int M, int N, int K, const __grid_constant__ CUtensorMap map_a,
                const __grid_constant__ CUtensorMap map_b, bf16* __restrict__ C)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char smem_raw[];
    bf16* smem = reinterpret_cast<bf16*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t full[stages];   // a stage's tiles have landed
    __shared__ std::uint64_t empty[stages];  // every consumer warp is done with a stage
    const int t = threadIdx.x;
    const int group = t / 128;  // 0: the producer; 1, 2: consumers of rows [64 (group - 1), 64 group) of the tile
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int tiles = K / BK;

    if (t == 0) {
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], consumers * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit too
    }
    __syncthreads();

    if (group == 0) {
        setmaxnreg_dec<producer_registers>();
        if (t == 0) {
            for (int kt = 0; kt < tiles; ++kt) {
                const int stage = kt % stages;
                // Parity 1 at the first pass: the phase before a barrier's first counts as completed.
                mbarrier_wait(&empty[stage], (kt / stages) % 2 ^ 1);
                bf16* As = smem + stage * stage_elems;
                mbarrier_arrive_expect_bytes(&full[stage], stage_bytes);
                tma_load(As, &map_a, kt * BK, row0, &full[stage]);
                tma_load(As + BM * BK, &map_b, kt * BK, col0, &full[stage]);
            }
        }
    } else {
        setmaxnreg_inc<consumer_registers>();
        const int consumer = group - 1;
        float acc[BN / 2] = {};
        for (int kt = 0; kt < tiles; ++kt) {
            const int stage = kt % stages;
            mbarrier_wait(&full[stage], (kt / stages) % 2);
            const bf16* As = smem + stage * stage_elems + consumer * WGM * BK;
            const bf16* Bs = smem + stage * stage_elems + BM * BK;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                wgmma_64x256x16(acc, smem_descriptor(As + kk * 16), smem_descriptor(Bs + kk * 16), 1);
            }
            wgmma_commit();
            wgmma_wait<0>();  // the warpgroup's reads of the stage are done
            fence_accumulators(acc);
            if (t % 32 == 0) {
                mbarrier_arrive(&empty[stage]);
            }
        }
        store_warpgroup_tile(acc, C, N, static_cast<std::size_t>(row0) + consumer * WGM, col0, t % 128);
    }
#endif
}

//! What this step needs of the GPU and the build: `wgmma` and the rest of sm_90a, compute capability 9.0 and code
//! built for it (`-gencode=arch=compute_90a,code=sm_90a`).
constexpr const char* requirement = "sm_90a";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
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
//! @pre M a multiple of 128, N of 256, K of 64, `M <= 65535 * 128`; buffers not null and 16-byte aligned; a GPU
//!      of compute capability 9.0 and this file built for it as `sm_90a`
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` without sm_90a code for this GPU
//!         (or a driver without `cuTensorMapEncodeTiled`), the error of the shared-memory opt-in, else the launch's
//!         error
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

}  // namespace stepwise::tensor_core_gemm::warp_specialized
