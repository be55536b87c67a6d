//! @file 01_three_kernels.cuh
//! @brief Attention step 1 (beyond the sources): three kernels, S = Q K^T, the softmax of each row, O = P V, with S
//!        and P in global memory.
//!
//! The operation as it reads: the scores S = scale Q K^T of every query against every key (a batched GEMM on the
//! tensor cores, as the tensor-core chapter's step 1, fp32 out), the softmax of each row of S under the mask (the
//! softmax chapter's, with each row's log-sum-exp kept), and O = P V (a second batched GEMM, P in bf16). S and P
//! are seq x seq a head: at 4 x 16 heads of 4096 that is 4 GiB of S and 2 GiB of P written and read again, more
//! than the products themselves take. The caller provides that memory, as in CUB (`d_temp_storage`).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::attention::three_kernels {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int tile = 64;                  //!< a block's tile of S (64 x 64) or of O (64 rows)
constexpr int gemm_threads = 128;         //!< 4 warps, 16 rows of the tile each
constexpr int softmax_threads = 256;      //!< a block a row of S
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q and O [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

//! @brief Stages rows [first, first + 64) of a [seq, width] bf16 matrix into shared rows of `ld` values (0 past the
//!        sequence), 16 bytes at a time.
template <int Width>
__device__ __forceinline__ void stage_rows(bf16* d_shared, int ld, const bf16* d_rows, int first, int seq)
{
    constexpr int vectors = Width / 8;
    for (int i = static_cast<int>(threadIdx.x); i < tile * vectors; i += gemm_threads) {
        const int r = i / vectors, c = (i % vectors) * 8;
        uint4 value = make_uint4(0, 0, 0, 0);
        if (first + r < seq) {
            value = *reinterpret_cast<const uint4*>(d_rows + static_cast<std::size_t>(first + r) * Width + c);
        }
        *reinterpret_cast<uint4*>(d_shared + r * ld + c) = value;
    }
}

//! @brief S = scale Q K^T for a 64 x 64 tile of one head: block (key tile, query tile, batch * heads + head).
template <int HeadDim>
static __global__ void __launch_bounds__(gemm_threads)
    scores_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, float* __restrict__ d_s, Shape sh,
                  float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld = HeadDim + 8;
    __shared__ __align__(128) bf16 q_tile[tile * ld], k_tile[tile * ld];
    __shared__ __align__(128) float staging[gemm_threads / 32][16 * 16];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int bh = static_cast<int>(blockIdx.z), batch = bh / sh.heads, head = bh % sh.heads;
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_key = static_cast<int>(blockIdx.x) * tile, first_row = static_cast<int>(blockIdx.y) * tile;
    stage_rows<HeadDim>(q_tile, ld, d_q + static_cast<std::size_t>(bh) * sh.seq * HeadDim, first_row, sh.seq);
    stage_rows<HeadDim>(k_tile, ld,
                        d_k + (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim,
                        first_key, sh.seq);
    __syncthreads();
    float* s_head = d_s + static_cast<std::size_t>(bh) * sh.seq * sh.seq;
    for (int j = 0; j < tile / 16; ++j) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < HeadDim / 16; ++kk) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;  // K's rows are B's columns
            wmma::load_matrix_sync(a, q_tile + warp * 16 * ld + kk * 16, ld);
            wmma::load_matrix_sync(b, k_tile + j * 16 * ld + kk * 16, ld);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(staging[warp], acc, 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 16 * 16; e += 32) {  // only what lies in the sequence
            const int row = first_row + warp * 16 + e / 16, key = first_key + j * 16 + e % 16;
            if (row < sh.seq && key < sh.seq) {
                s_head[static_cast<std::size_t>(row) * sh.seq + key] = staging[warp][e] * scale;
            }
        }
        __syncwarp();
    }
#endif
}

//! @brief P = softmax of each row of S over the keys the row sees (the others 0), in bf16, and the row's
//!        log-sum-exp: a block a row (blockIdx.x: batch * heads * seq + row). A NaN among the seen scores makes the
//!        row's P and log-sum-exp NaN.
static __global__ void __launch_bounds__(softmax_threads)
    softmax_kernel(const float* __restrict__ d_s, bf16* __restrict__ d_p, float* __restrict__ d_lse, Shape sh)
{
    __shared__ float partial[softmax_threads / 32];
    const std::size_t row_id = blockIdx.x;
    const int row = static_cast<int>(row_id % sh.seq);
    const int keys = sh.causal ? row + 1 : sh.seq;
    const float* s_row = d_s + row_id * sh.seq;
    bf16* p_row = d_p + row_id * sh.seq;
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const auto block_reduce = [&](float v, bool is_max) {
        for (int offset = 16; offset > 0; offset /= 2) {
            const float other = __shfl_xor_sync(0xffffffffu, v, offset);
            v = is_max ? fmaxf(v, other) : v + other;
        }
        __syncthreads();  // the previous reduction's partials are read
        if (lane == 0) {
            partial[warp] = v;
        }
        __syncthreads();
        v = lane < softmax_threads / 32 ? partial[lane] : (is_max ? -INFINITY : 0.0f);
        for (int offset = 16; offset > 0; offset /= 2) {
            const float other = __shfl_xor_sync(0xffffffffu, v, offset);
            v = is_max ? fmaxf(v, other) : v + other;
        }
        return v;
    };
    float max = -INFINITY, nan = 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += softmax_threads) {
        max = fmaxf(max, s_row[j]);
        nan += isnan(s_row[j]) ? 1.0f : 0.0f;
    }
    max = block_reduce(max, true);
    const bool nan_row = block_reduce(nan, false) > 0.0f;
    float sum = 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += softmax_threads) {
        sum += exp2f((s_row[j] - max) * log2e);
    }
    sum = block_reduce(sum, false);
    for (int j = static_cast<int>(threadIdx.x); j < sh.seq; j += softmax_threads) {
        const float p = j < keys ? exp2f((s_row[j] - max) * log2e) / sum : 0.0f;
        p_row[j] = __float2bfloat16_rn(nan_row ? NAN : p);
    }
    if (threadIdx.x == 0) {
        d_lse[row_id] = nan_row ? NAN : max + logf(sum);
    }
}

//! @brief O = P V for 64 rows of one head: block (row tile, batch * heads + head).
template <int HeadDim>
static __global__ void __launch_bounds__(gemm_threads)
    output_kernel(const bf16* __restrict__ d_p, const bf16* __restrict__ d_v, bf16* __restrict__ d_o, Shape sh)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld_p = tile + 8, ld_v = HeadDim + 8;
    __shared__ __align__(128) bf16 p_tile[tile * ld_p], v_tile[tile * ld_v];
    __shared__ __align__(128) float staging[gemm_threads / 32][16 * 16];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int bh = static_cast<int>(blockIdx.y), batch = bh / sh.heads, head = bh % sh.heads;
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_row = static_cast<int>(blockIdx.x) * tile;
    const bf16* p_head = d_p + static_cast<std::size_t>(bh) * sh.seq * sh.seq;
    const bf16* v_head = d_v + (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[HeadDim / 16];
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::fill_fragment(acc[n], 0.0f);
    }
    const int keys = sh.causal ? min(sh.seq, first_row + tile) : sh.seq;  // P is 0 past them
    for (int first_key = 0; first_key < keys; first_key += tile) {
        __syncthreads();
        for (int i = static_cast<int>(threadIdx.x); i < tile * tile; i += gemm_threads) {  // P rows are not aligned
            const int r = i / tile, c = i % tile;
            const bool inside = first_row + r < sh.seq && first_key + c < sh.seq;
            p_tile[r * ld_p + c] =
                inside ? p_head[static_cast<std::size_t>(first_row + r) * sh.seq + first_key + c] : __float2bfloat16(0.0f);
        }
        stage_rows<HeadDim>(v_tile, ld_v, v_head, first_key, sh.seq);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < tile / 16; ++kk) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
            wmma::load_matrix_sync(a, p_tile + warp * 16 * ld_p + kk * 16, ld_p);
#pragma unroll
            for (int n = 0; n < HeadDim / 16; ++n) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;  // V's rows are B's rows
                wmma::load_matrix_sync(b, v_tile + kk * 16 * ld_v + n * 16, ld_v);
                wmma::mma_sync(acc[n], a, b, acc[n]);
            }
        }
    }
    bf16* o_head = d_o + static_cast<std::size_t>(bh) * sh.seq * HeadDim;
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::store_matrix_sync(staging[warp], acc[n], 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 16 * 16; e += 32) {
            const int row = first_row + warp * 16 + e / 16;
            if (row < sh.seq) {
                o_head[static_cast<std::size_t>(row) * HeadDim + n * 16 + e % 16] = __float2bfloat16_rn(staging[warp][e]);
            }
        }
        __syncwarp();
    }
#endif
}

//! What this step needs of the GPU and the build: bf16 tensor-core instructions, compute capability 8.0 or higher.
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

template <int HeadDim>
inline cudaError_t launch(const bf16* d_q, const bf16* d_k, const bf16* d_v, bf16* d_o, float* d_lse, float* d_s,
                          bf16* d_p, const Shape& s, float scale, cudaStream_t stream)
{
    const unsigned tiles = static_cast<unsigned>((s.seq + tile - 1) / tile);
    const unsigned heads = static_cast<unsigned>(s.batch) * s.heads;
    scores_kernel<HeadDim><<<dim3(tiles, tiles, heads), gemm_threads, 0, stream>>>(d_q, d_k, d_s, s, scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    softmax_kernel<<<static_cast<unsigned>(heads * static_cast<std::size_t>(s.seq)), softmax_threads, 0, stream>>>(
        d_s, d_p, d_lse, s);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    output_kernel<HeadDim><<<dim3(tiles, heads), gemm_threads, 0, stream>>>(d_p, d_v, d_o, s);
    return cudaGetLastError();
}

//! @brief O = softmax(scale Q K^T (+ causal mask)) V and each row's log-sum-exp, for bf16 Q, K, V, O.
//!        Causal, a NaN in row j of V reaches the rows that see key j and also the rows before j in j's tile
//!        (a tile of 64 keys): P multiplies V a whole tile at a time, and a masked weight of 0 times NaN is NaN. The
//!        rows before that tile stay exact.
//! @param[in]     d_temp_storage     device memory for S (fp32) and P (bf16); nullptr: only `temp_storage_bytes` is set
//! @param[in,out] temp_storage_bytes its size
//! @param[in]     d_q, d_k, d_v      Q [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim]
//! @param[out]    d_o                O, as Q
//! @param[out]    d_lse              log(sum_j exp(scale q_i k_j)) of each row (natural log), fp32 [batch, heads, seq]
//! @param[in]     s                  the problem: batch, heads, kv_heads, seq, head_dim, causal
//! @param[in]     scale              multiplies the scores (1 / sqrt(head_dim) in the usual attention)
//! @param[in]     stream             stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; every size >= 1; batch * heads <= 65535, batch * heads * seq <
//!      2^31; Q, K, V, O and the LSE not null, Q, K, V 16-byte aligned, the LSE 4-byte aligned, d_temp_storage 256-byte
//!      aligned; compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU, else the
//!         launches' first error
inline cudaError_t attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                             const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s, float scale,
                             cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    const std::size_t heads = static_cast<std::size_t>(s.batch) * s.heads;
    if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || heads > 65535 || heads * s.seq > 0x7fffffffu ||
        !aligned(d_q, 16) || !aligned(d_k, 16) || !aligned(d_v, 16) || !aligned(d_lse, 4) || d_q == nullptr ||
        d_k == nullptr || d_v == nullptr || d_o == nullptr || d_lse == nullptr) {
        return cudaErrorInvalidValue;
    }
    const std::size_t scores = heads * s.seq * s.seq;
    const std::size_t p_offset = (scores * sizeof(float) + 255) / 256 * 256;
    const std::size_t needed = p_offset + scores * sizeof(bf16);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed || !aligned(d_temp_storage, 256)) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    float* d_s = static_cast<float*>(d_temp_storage);
    bf16* d_p = reinterpret_cast<bf16*>(static_cast<unsigned char*>(d_temp_storage) + p_offset);
    return s.head_dim == 64 ? launch<64>(d_q, d_k, d_v, d_o, d_lse, d_s, d_p, s, scale, stream)
                            : launch<128>(d_q, d_k, d_v, d_o, d_lse, d_s, d_p, s, scale, stream);
}

}  // namespace stepwise::attention::three_kernels
