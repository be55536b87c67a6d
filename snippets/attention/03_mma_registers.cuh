//! @file 03_mma_registers.cuh
//! @brief Attention step 3 (beyond the sources): `mma.sync` with `ldmatrix`; Q, the scores, P and O in registers
//!        (FlashAttention-2's partitioning: a warp owns its query rows for the whole walk over the keys).
//!
//! Step 2 sends every tile of scores through shared memory three times (stored by WMMA, read by the softmax, P
//! written and read back by WMMA) and keeps O in shared memory, because a WMMA fragment does not say which of its
//! elements a thread holds. `mma.sync` does: in its m16n8k16 layout a thread holds two columns of rows g and g + 8
//! (g = lane / 4) of each 16 x 8 tile. So the softmax runs on the accumulators in registers (the row's maximum and
//! sum need only the four threads of a row: two shuffles), O is rescaled in registers, and the accumulators of two
//! neighbouring key tiles, rounded to bf16, are exactly the A operand of P V. `ldmatrix` loads the operands from
//! shared memory (V transposed on the way).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace stepwise::attention::mma_registers {

using bf16 = __nv_bfloat16;

constexpr int warps = 4;                 //!< a block's warps, 16 query rows each
constexpr int block_rows = warps * 16;
constexpr int key_tile = 64;             //!< keys staged at a time: 8 tiles of 8 for the first product
constexpr int threads = warps * 32;
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q and O [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
//! @brief The shared-memory address of `p`, as `ldmatrix` takes it.
__device__ __forceinline__ std::uint32_t smem_address(const void* p)
{
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

//! @brief Four 8 x 8 bf16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void load_matrices(std::uint32_t (&r)[4], const bf16* row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(row)));
}

//! @brief As load_matrices(), each matrix transposed.
__device__ __forceinline__ void load_matrices_transposed(std::uint32_t (&r)[4], const bf16* row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(row)));
}

//! @brief d += a b for a 16 x 16 bf16 A (4 registers), a 16 x 8 bf16 B (2) and a 16 x 8 fp32 accumulator.
__device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

//! @brief Two floats as a bf16 pair (the lower column in the lower half).
__device__ __forceinline__ std::uint32_t pack(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::uint32_t out;
    std::memcpy(&out, &v, sizeof(out));
    return out;
}
#endif

//! @brief One block: query rows [blockIdx.x * 64, + 64) of head blockIdx.y of batch blockIdx.z; warp w owns rows
//!        16 w to 16 w + 15 of them, lane l rows g = l / 4 and g + 8 and, in each 8-column tile, columns 2 (l % 4)
//!        and 2 (l % 4) + 1.
template <int HeadDim>
static __global__ void __launch_bounds__(threads)
    attention_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, const bf16* __restrict__ d_v,
                     bf16* __restrict__ d_o, float* __restrict__ d_lse, Shape sh, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld = HeadDim + 8;  // a shared row of 16 bytes more: ldmatrix's 8 rows fall in different banks
    constexpr int vectors = HeadDim / 8;
    constexpr int key_tiles = key_tile / 8, d_tiles = HeadDim / 8;
    __shared__ __align__(128) bf16 k_tile[key_tile * ld], v_tile[key_tile * ld];  // Q passes through k_tile first

    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int g = lane / 4, quad = lane % 4;
    const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_row = static_cast<int>(blockIdx.x) * block_rows;
    const std::size_t q_base = (static_cast<std::size_t>(batch) * sh.heads + head) * sh.seq * HeadDim;
    const std::size_t kv_base = (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim;
    const auto stage = [&](bf16* d_shared, const bf16* d_rows, int first) {  // 64 rows, 0 past the sequence
        for (int i = static_cast<int>(threadIdx.x); i < key_tile * vectors; i += threads) {
            const int r = i / vectors, c = (i % vectors) * 8;
            uint4 value = make_uint4(0, 0, 0, 0);
            if (first + r < sh.seq) {
                value = *reinterpret_cast<const uint4*>(d_rows + static_cast<std::size_t>(first + r) * HeadDim + c);
            }
            *reinterpret_cast<uint4*>(d_shared + r * ld + c) = value;
        }
    };

    // Q: the warp's 16 rows as A operands, HeadDim / 16 of them.
    stage(k_tile, d_q + q_base, first_row);
    __syncthreads();
    std::uint32_t q_frag[HeadDim / 16][4];
#pragma unroll
    for (int kk = 0; kk < HeadDim / 16; ++kk) {
        load_matrices(q_frag[kk], k_tile + (warp * 16 + lane % 16) * ld + kk * 16 + (lane / 16) * 8);
    }

    const int rows[2] = {first_row + warp * 16 + g, first_row + warp * 16 + g + 8};
    int row_keys[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        row_keys[h] = rows[h] >= sh.seq ? 0 : sh.causal ? rows[h] + 1 : sh.seq;
    }
    const int warp_keys = min(sh.seq, sh.causal ? first_row + warp * 16 + 16 : sh.seq);
    const int block_keys = min(sh.seq, sh.causal ? first_row + block_rows : sh.seq);
    float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
    bool nan_score[2] = {false, false};
    float out[d_tiles][4] = {};

    for (int tile = 0; tile < block_keys; tile += key_tile) {
        __syncthreads();  // the previous tile (and Q's staging) is no longer read
        stage(k_tile, d_k + kv_base, tile);
        stage(v_tile, d_v + kv_base, tile);
        __syncthreads();
        if (tile >= warp_keys) {
            continue;  // warp-uniform: none of the warp's rows sees a key of this tile
        }
        // S = Q K^T: eight 16 x 8 tiles of keys. An x4 load gives B for two steps of 16 along HeadDim.
        float s[key_tiles][4] = {};
#pragma unroll
        for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
            for (int kk = 0; kk < HeadDim / 16; kk += 2) {
                std::uint32_t b[4];  // keys 8t..8t+7, dims 16kk..16kk+31 in four 8-dim matrices
                load_matrices(b, k_tile + (t * 8 + lane % 8) * ld + kk * 16 + (lane / 8) * 8);
                mma(s[t], q_frag[kk], b[0], b[1]);
                mma(s[t], q_frag[kk + 1], b[2], b[3]);
            }
        }
        // The online softmax of rows g (elements 0, 1) and g + 8 (2, 3), base 2; unseen keys weigh 0.
        float rescale[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float tile_max = -INFINITY;
#pragma unroll
            for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = tile + t * 8 + quad * 2 + e;
                    const float x = s[t][2 * h + e] * (scale * log2e);
                    const bool seen = key < row_keys[h];
                    nan_score[h] = nan_score[h] || (seen && isnan(x));
                    s[t][2 * h + e] = seen ? x : -INFINITY;
                    tile_max = fmaxf(tile_max, s[t][2 * h + e]);
                }
            }
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            const float new_max = fmaxf(max[h], tile_max);
            const bool none_yet = new_max == -INFINITY;  // a row past the sequence
            rescale[h] = none_yet ? 1.0f : exp2f(max[h] - new_max);
            float tile_sum = 0.0f;
#pragma unroll
            for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float w = none_yet ? 0.0f : exp2f(s[t][2 * h + e] - new_max);
                    s[t][2 * h + e] = w;
                    tile_sum += w;
                }
            }
            tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
            tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 2);
            sum[h] = sum[h] * rescale[h] + tile_sum;
            max[h] = new_max;
        }
#pragma unroll
        for (int j = 0; j < d_tiles; ++j) {
            out[j][0] *= rescale[0];
            out[j][1] *= rescale[0];
            out[j][2] *= rescale[1];
            out[j][3] *= rescale[1];
        }
        // O += P V: the accumulators of key tiles 2k and 2k + 1 are the A operand of keys 16k..16k+15.
#pragma unroll
        for (int k = 0; k < key_tile / 16; ++k) {
            const std::uint32_t p[4] = {pack(s[2 * k][0], s[2 * k][1]), pack(s[2 * k][2], s[2 * k][3]),
                                        pack(s[2 * k + 1][0], s[2 * k + 1][1]), pack(s[2 * k + 1][2], s[2 * k + 1][3])};
#pragma unroll
            for (int j = 0; j < d_tiles; j += 2) {
                std::uint32_t b[4];  // keys 16k..16k+15 by dims 8j..8j+15, transposed: B for dim tiles j and j + 1
                load_matrices_transposed(b, v_tile + (k * 16 + lane % 16) * ld + j * 8 + (lane / 16) * 8);
                mma(out[j], p, b[0], b[1]);
                mma(out[j + 1], p, b[2], b[3]);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // every lane of the quad, before any leaves
        nan_score[h] = __shfl_xor_sync(0xffffffffu, nan_score[h] ? 1 : 0, 1) != 0 || nan_score[h];
        nan_score[h] = __shfl_xor_sync(0xffffffffu, nan_score[h] ? 1 : 0, 2) != 0 || nan_score[h];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (rows[h] >= sh.seq) {
            continue;
        }
        bf16* o_row = d_o + q_base + static_cast<std::size_t>(rows[h]) * HeadDim;
#pragma unroll
        for (int j = 0; j < d_tiles; ++j) {
            const float lo = nan_score[h] ? NAN : out[j][2 * h] / sum[h];
            const float hi = nan_score[h] ? NAN : out[j][2 * h + 1] / sum[h];
            *reinterpret_cast<__nv_bfloat162*>(o_row + j * 8 + quad * 2) = __floats2bfloat162_rn(lo, hi);
        }
        if (quad == 0) {
            d_lse[(static_cast<std::size_t>(batch) * sh.heads + head) * sh.seq + rows[h]] =
                nan_score[h] ? NAN : (max[h] + log2f(sum[h])) / log2e;
        }
    }
#endif
}

//! What this step needs of the GPU and the build: bf16 `mma.sync` and `ldmatrix`, compute capability 8.0 or higher.
constexpr const char* requirement = "sm_80";

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr int marker_threads = 128;
#else
constexpr int marker_threads = 32;
#endif
static __global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code the driver loaded for the current GPU has the instructions this step uses.
static inline bool requirement_met()
{
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, requirement_marker_kernel) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

//! @brief O = softmax(scale Q K^T (+ causal mask)) V and each row's log-sum-exp, for bf16 Q, K, V, O.
//!        Causal, a NaN in row j of V reaches the rows that see key j and also the rows before j in j's tile
//!        (a tile of 64 keys): P multiplies V a whole tile at a time, and a masked weight of 0 times NaN is NaN. The
//!        rows before that tile stay exact.
//! @param[in] d_temp_storage device workspace (this step needs none), or nullptr: only `temp_storage_bytes` is set
//! @param[in,out] temp_storage_bytes the workspace's size (1)
//! @param[in] d_q, d_k, d_v Q [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim], contiguous
//! @param[out] d_o O, as Q
//! @param[out] d_lse log(sum_j exp(scale q_i k_j)) of each row (natural log), fp32 [batch, heads, seq]
//! @param[in] s the problem: batch, heads, kv_heads, seq, head_dim, causal
//! @param[in] scale multiplies the scores (1 / sqrt(head_dim) in the usual attention)
//! @param[in] stream stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; every size >= 1, heads and batch <= 65535, batch * heads < 2^31; Q,
//!      K, V, O and the LSE not null, Q, K, V 16-byte aligned, O and the LSE 4-byte aligned; compute capability 8.0 or
//!      higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), else the launch's error
inline cudaError_t attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                             const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s, float scale,
                             cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || s.heads > 65535 || s.batch > 65535 || !aligned(d_q, 16) ||
        !aligned(d_k, 16) || !aligned(d_v, 16) || !aligned(d_o, 4) || !aligned(d_lse, 4) || d_q == nullptr ||
        d_k == nullptr || d_v == nullptr || d_o == nullptr || d_lse == nullptr ||
        static_cast<long long>(s.batch) * s.heads >= (1LL << 31)) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    const dim3 grid((s.seq + block_rows - 1) / block_rows, s.heads, s.batch);
    if (s.head_dim == 64) {
        attention_kernel<64><<<grid, threads, 0, stream>>>(d_q, d_k, d_v, d_o, d_lse, s, scale);
    } else {
        attention_kernel<128><<<grid, threads, 0, stream>>>(d_q, d_k, d_v, d_o, d_lse, s, scale);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::attention::mma_registers
