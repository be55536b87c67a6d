//! @file 01_products_through_global_memory.cuh
//! @brief Attention backward step 1 (beyond the sources): the gradients' formulas as five kernels, with the
//!        probabilities P and the scores' gradient dS in global memory.
//!
//! With the forward's O and the log-sum-exp of each row (LSE), and dO, the gradient of the loss by O:
//!
//!     D  = rowsum(dO * O)                 P  = exp(scale Q K^T - LSE)   (0 where the causal mask hides a key)
//!     dV = P^T dO                         dS = P * (dO V^T - D)
//!     dQ = scale dS K                     dK = scale dS^T Q
//!
//! Written as they read: a kernel for D; a kernel that recomputes the scores tile by tile on the tensor cores and
//! writes P; one that computes dP = dO V^T the same way and writes dS; and the three products that use P and dS,
//! with dV and dK summed over the query heads that share a K/V head. P and dS are seq x seq a head, in bf16: at 4 x 16
//! heads of 4096 that is 2 GiB each written and read again, in the workspace the caller provides (as CUB's
//! `d_temp_storage`). The backward pass does five products where the forward does two; this step spends most of its
//! time moving P and dS.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::attention_backward::products_through_global_memory {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int tile = 64;            //!< a block's tile: 64 queries by 64 keys, or 64 rows of a gradient
constexpr int gemm_threads = 128;   //!< 4 warps, 16 rows of the tile each
constexpr int dot_threads = 256;    //!< the blocks of D: a warp a row
constexpr int warp_threads = 32;
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q, O, dO and dQ [batch, heads, seq, head_dim], K, V, dK and dV [batch, kv_heads, seq,
//!        head_dim].
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

//! @brief Stages the 64 x 64 tile (rows `first_row`.., columns `first_col`..) of a head's seq x seq bf16 matrix into
//!        shared rows of `ld` values, 0 outside the sequence; a value at a time (a row of seq values need not start
//!        on 16 bytes).
__device__ __forceinline__ void stage_square(bf16* d_shared, int ld, const bf16* d_head, int first_row, int first_col,
                                             int seq)
{
    for (int i = static_cast<int>(threadIdx.x); i < tile * tile; i += gemm_threads) {
        const int r = i / tile, c = i % tile;
        const bool inside = first_row + r < seq && first_col + c < seq;
        d_shared[r * ld + c] =
            inside ? d_head[static_cast<std::size_t>(first_row + r) * seq + first_col + c] : __float2bfloat16(0.0f);
    }
}

//! @brief D of every row (blockIdx.x * 8 + its warp: batch * heads * seq rows), fp32: sum over head_dim of dO * O.
template <int HeadDim>
__global__ void __launch_bounds__(dot_threads)
    row_dot_kernel(const bf16* __restrict__ d_o, const bf16* __restrict__ d_do, float* __restrict__ d_d,
                   std::size_t rows)
{
    const std::size_t row = static_cast<std::size_t>(blockIdx.x) * (dot_threads / warp_threads) +
                            threadIdx.x / warp_threads;
    if (row >= rows) {
        return;
    }
    const int lane = static_cast<int>(threadIdx.x) % warp_threads;
    float sum = 0.0f;
    for (int d = lane; d < HeadDim; d += warp_threads) {
        sum += __bfloat162float(d_do[row * HeadDim + d]) * __bfloat162float(d_o[row * HeadDim + d]);
    }
    for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) {
        d_d[row] = sum;
    }
}

//! @brief The 64 x 64 tile (block: key tile, query tile, batch * heads + head) of A B^T on the tensor cores, A's rows
//!        the tile's queries (Q or dO, of the query head), B's rows its keys (K or V, of the K/V head): `write(row,
//!        key, value)` for each value in the sequence, 16 x 16 values of a warp at a time through shared memory.
//!        A tile that lies wholly past the causal mask is neither computed nor written.
template <int HeadDim, typename Write>
__device__ __forceinline__ void tile_product(const bf16* d_a, const bf16* d_b, const Shape& sh, Write&& write)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld = HeadDim + 8;
    __shared__ __align__(128) bf16 a_tile[tile * ld], b_tile[tile * ld];
    __shared__ __align__(128) float staging[gemm_threads / warp_threads][16 * 16];
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int bh = static_cast<int>(blockIdx.z), batch = bh / sh.heads, head = bh % sh.heads;
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_key = static_cast<int>(blockIdx.x) * tile, first_row = static_cast<int>(blockIdx.y) * tile;
    if (sh.causal && first_key > first_row + tile - 1) {
        return;  // every key of the tile lies after every query of it
    }
    stage_rows<HeadDim>(a_tile, ld, d_a + static_cast<std::size_t>(bh) * sh.seq * HeadDim, first_row, sh.seq);
    stage_rows<HeadDim>(b_tile, ld,
                        d_b + (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim,
                        first_key, sh.seq);
    __syncthreads();
    for (int j = 0; j < tile / 16; ++j) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < HeadDim / 16; ++kk) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;  // B's rows are its columns
            wmma::load_matrix_sync(a, a_tile + warp * 16 * ld + kk * 16, ld);
            wmma::load_matrix_sync(b, b_tile + j * 16 * ld + kk * 16, ld);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(staging[warp], acc, 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 16 * 16; e += warp_threads) {
            const int row = first_row + warp * 16 + e / 16, key = first_key + j * 16 + e % 16;
            if (row < sh.seq && key < sh.seq) {
                write(row, key, staging[warp][e]);
            }
        }
        __syncwarp();
    }
#endif
}

//! @brief P = exp(scale Q K^T - LSE) of a 64 x 64 tile, bf16, 0 at the keys the causal mask hides (a NaN LSE: NaN).
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    probabilities_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, const float* __restrict__ d_lse,
                         bf16* __restrict__ d_p, Shape sh, float scale)
{
    const std::size_t bh = blockIdx.z;
    bf16* p_head = d_p + bh * sh.seq * sh.seq;
    tile_product<HeadDim>(d_q, d_k, sh, [&](int row, int key, float score) {
        const float p =
            sh.causal && key > row ? 0.0f : exp2f((score * scale - d_lse[bh * sh.seq + row]) * log2e);
        p_head[static_cast<std::size_t>(row) * sh.seq + key] = __float2bfloat16_rn(p);
    });
}

//! @brief dS = P * (dO V^T - D) of a 64 x 64 tile, bf16, 0 at the keys the causal mask hides.
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    score_gradients_kernel(const bf16* __restrict__ d_do, const bf16* __restrict__ d_v, const float* __restrict__ d_d,
                           const bf16* __restrict__ d_p, bf16* __restrict__ d_ds, Shape sh)
{
    const std::size_t bh = blockIdx.z, head = bh * sh.seq * sh.seq;
    tile_product<HeadDim>(d_do, d_v, sh, [&](int row, int key, float dp) {
        const std::size_t at = head + static_cast<std::size_t>(row) * sh.seq + key;
        const float ds = sh.causal && key > row ? 0.0f : __bfloat162float(d_p[at]) * (dp - d_d[bh * sh.seq + row]);
        d_ds[at] = __float2bfloat16_rn(ds);
    });
}

//! @brief 64 rows of dQ (block: row tile, batch * heads + head): scale dS K over the keys the rows see.
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    query_gradient_kernel(const bf16* __restrict__ d_ds, const bf16* __restrict__ d_k, bf16* __restrict__ d_dq,
                          Shape sh, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld_s = tile + 8, ld_k = HeadDim + 8;
    __shared__ __align__(128) bf16 ds_tile[tile * ld_s], k_tile[tile * ld_k];
    __shared__ __align__(128) float staging[gemm_threads / warp_threads][16 * 16];
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int bh = static_cast<int>(blockIdx.y), batch = bh / sh.heads, head = bh % sh.heads;
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_row = static_cast<int>(blockIdx.x) * tile;
    const bf16* ds_head = d_ds + static_cast<std::size_t>(bh) * sh.seq * sh.seq;
    const bf16* k_head = d_k + (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[HeadDim / 16];
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::fill_fragment(acc[n], 0.0f);
    }
    const int keys = sh.causal ? min(sh.seq, first_row + tile) : sh.seq;  // dS is 0 past them
    for (int first_key = 0; first_key < keys; first_key += tile) {
        __syncthreads();
        stage_square(ds_tile, ld_s, ds_head, first_row, first_key, sh.seq);
        stage_rows<HeadDim>(k_tile, ld_k, k_head, first_key, sh.seq);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < tile / 16; ++kk) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
            wmma::load_matrix_sync(a, ds_tile + warp * 16 * ld_s + kk * 16, ld_s);
#pragma unroll
            for (int n = 0; n < HeadDim / 16; ++n) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;  // K's rows are B's rows
                wmma::load_matrix_sync(b, k_tile + kk * 16 * ld_k + n * 16, ld_k);
                wmma::mma_sync(acc[n], a, b, acc[n]);
            }
        }
    }
    bf16* dq_head = d_dq + static_cast<std::size_t>(bh) * sh.seq * HeadDim;
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::store_matrix_sync(staging[warp], acc[n], 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 16 * 16; e += warp_threads) {
            const int row = first_row + warp * 16 + e / 16;
            if (row < sh.seq) {
                dq_head[static_cast<std::size_t>(row) * HeadDim + n * 16 + e % 16] =
                    __float2bfloat16_rn(staging[warp][e] * scale);
            }
        }
        __syncwarp();
    }
#endif
}

//! @brief 64 rows of dV or dK (block: key tile, batch * kv_heads + K/V head): `scale` M^T R summed over the query
//!        heads of the group and the queries that see the keys, M = P and R = dO for dV, M = dS and R = Q for dK.
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    key_gradient_kernel(const bf16* __restrict__ d_m, const bf16* __restrict__ d_r, bf16* __restrict__ d_out, Shape sh,
                        float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int ld_m = tile + 8, ld_r = HeadDim + 8;
    __shared__ __align__(128) bf16 m_tile[tile * ld_m], r_tile[tile * ld_r];
    __shared__ __align__(128) float staging[gemm_threads / warp_threads][16 * 16];
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int kv_bh = static_cast<int>(blockIdx.y), batch = kv_bh / sh.kv_heads, kv_head = kv_bh % sh.kv_heads;
    const int group = sh.heads / sh.kv_heads;
    const int first_key = static_cast<int>(blockIdx.x) * tile;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[HeadDim / 16];
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::fill_fragment(acc[n], 0.0f);
    }
    const int first_query = sh.causal ? first_key / tile * tile : 0;  // the rows before it see none of the keys
    for (int g = 0; g < group; ++g) {
        const std::size_t bh = static_cast<std::size_t>(batch) * sh.heads + kv_head * group + g;
        const bf16* m_head = d_m + bh * sh.seq * sh.seq;
        const bf16* r_head = d_r + bh * sh.seq * HeadDim;
        for (int first_row = first_query; first_row < sh.seq; first_row += tile) {
            __syncthreads();
            stage_square(m_tile, ld_m, m_head, first_row, first_key, sh.seq);
            stage_rows<HeadDim>(r_tile, ld_r, r_head, first_row, sh.seq);
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < tile / 16; ++kk) {
                // A = M^T: the warp's 16 keys are 16 columns of the staged tile, its queries the tile's rows.
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> a;
                wmma::load_matrix_sync(a, m_tile + kk * 16 * ld_m + warp * 16, ld_m);
#pragma unroll
                for (int n = 0; n < HeadDim / 16; ++n) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
                    wmma::load_matrix_sync(b, r_tile + kk * 16 * ld_r + n * 16, ld_r);
                    wmma::mma_sync(acc[n], a, b, acc[n]);
                }
            }
        }
    }
    bf16* out_head = d_out + static_cast<std::size_t>(kv_bh) * sh.seq * HeadDim;
#pragma unroll
    for (int n = 0; n < HeadDim / 16; ++n) {
        wmma::store_matrix_sync(staging[warp], acc[n], 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 16 * 16; e += warp_threads) {
            const int key = first_key + warp * 16 + e / 16;
            if (key < sh.seq) {
                out_head[static_cast<std::size_t>(key) * HeadDim + n * 16 + e % 16] =
                    __float2bfloat16_rn(staging[warp][e] * scale);
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
__global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code the driver loaded for the current GPU has the instructions this step uses.
inline bool requirement_met()
{
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, requirement_marker_kernel) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

//! @brief The six launches, D, P, dS, dV, dK and dQ in that order, each checked.
template <int HeadDim>
cudaError_t launch(const bf16* d_q, const bf16* d_k, const bf16* d_v, const bf16* d_o, const float* d_lse,
                   const bf16* d_do, bf16* d_dq, bf16* d_dk, bf16* d_dv, float* d_d, bf16* d_p, bf16* d_ds,
                   const Shape& s, float scale, cudaStream_t stream)
{
    const unsigned tiles = static_cast<unsigned>((s.seq + tile - 1) / tile);
    const unsigned heads = static_cast<unsigned>(s.batch) * s.heads, kv_heads = static_cast<unsigned>(s.batch) * s.kv_heads;
    const std::size_t rows = static_cast<std::size_t>(heads) * s.seq;
    constexpr unsigned rows_per_block = dot_threads / warp_threads;
    row_dot_kernel<HeadDim><<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), dot_threads, 0,
                              stream>>>(d_o, d_do, d_d, rows);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    probabilities_kernel<HeadDim><<<dim3(tiles, tiles, heads), gemm_threads, 0, stream>>>(d_q, d_k, d_lse, d_p, s,
                                                                                         scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    score_gradients_kernel<HeadDim><<<dim3(tiles, tiles, heads), gemm_threads, 0, stream>>>(d_do, d_v, d_d, d_p, d_ds,
                                                                                           s);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    key_gradient_kernel<HeadDim><<<dim3(tiles, kv_heads), gemm_threads, 0, stream>>>(d_p, d_do, d_dv, s, 1.0f);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    key_gradient_kernel<HeadDim><<<dim3(tiles, kv_heads), gemm_threads, 0, stream>>>(d_ds, d_q, d_dk, s, scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    query_gradient_kernel<HeadDim><<<dim3(tiles, heads), gemm_threads, 0, stream>>>(d_ds, d_k, d_dq, s, scale);
    return cudaGetLastError();
}

//! @brief dQ, dK and dV of attention O = softmax(scale Q K^T (+ causal mask)) V, for bf16 tensors, from the
//!        forward's O and log-sum-exp and the gradient dO of the loss by O. dK and dV of a K/V head sum over the query
//!        heads that share it. Causal, the products take whole 64 x 64 tiles, and a hidden entry of P or dS is 0:
//!        0 x NaN is NaN, so a NaN in row i of dO (or Q) also reaches dV (or dK) of the keys after i in i's tile of 64,
//!        and a NaN in row j of K also reaches dQ of the rows before j in j's tile.
//! @param[in]     d_temp_storage     device memory for D (fp32), P and dS (bf16); nullptr: only `temp_storage_bytes`
//!                                   is set
//! @param[in,out] temp_storage_bytes its size
//! @param[in]     d_q, d_k, d_v      Q [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim]
//! @param[in]     d_o                the forward's O, as Q
//! @param[in]     d_lse              the forward's log(sum_j exp(scale q_i k_j)) of each row (natural log), fp32
//!                                   [batch, heads, seq]
//! @param[in]     d_do               the gradient of the loss by O, as Q
//! @param[out]    d_dq               dQ, as Q
//! @param[out]    d_dk, d_dv         dK and dV, as K (overwritten, not added to)
//! @param[in]     s                  the problem: batch, heads, kv_heads, seq, head_dim, causal
//! @param[in]     scale              the forward's scale of the scores
//! @param[in]     stream             stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; every size >= 1; batch * heads <= 65535, batch * heads * seq <
//!      2^31; every pointer not null, the bf16 tensors 16-byte aligned, the LSE 4-byte aligned, d_temp_storage
//!      256-byte aligned; the outputs apart from every input and from each other; compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, `cudaErrorNotSupported` on
//!         an older GPU, else the launches' first error
inline cudaError_t attention_backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                      const bf16* d_k, const bf16* d_v, const bf16* d_o, const float* d_lse,
                                      const bf16* d_do, bf16* d_dq, bf16* d_dk, bf16* d_dv, const Shape& s, float scale,
                                      cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) {
        return p != nullptr && reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
    };
    const std::size_t heads = static_cast<std::size_t>(s.batch) * s.heads;
    if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || heads > 65535 || heads * s.seq > 0x7fffffffu ||
        !aligned(d_q, 16) || !aligned(d_k, 16) || !aligned(d_v, 16) || !aligned(d_o, 16) || !aligned(d_do, 16) ||
        !aligned(d_dq, 16) || !aligned(d_dk, 16) || !aligned(d_dv, 16) || !aligned(d_lse, 4)) {
        return cudaErrorInvalidValue;
    }
    const auto rounded = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
    const std::size_t squares = heads * s.seq * s.seq;
    const std::size_t p_offset = rounded(heads * s.seq * sizeof(float));
    const std::size_t ds_offset = p_offset + rounded(squares * sizeof(bf16));
    const std::size_t needed = ds_offset + squares * sizeof(bf16);
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
    auto* const base = static_cast<unsigned char*>(d_temp_storage);
    float* d_d = reinterpret_cast<float*>(base);
    bf16* d_p = reinterpret_cast<bf16*>(base + p_offset);
    bf16* d_ds = reinterpret_cast<bf16*>(base + ds_offset);
    return s.head_dim == 64
               ? launch<64>(d_q, d_k, d_v, d_o, d_lse, d_do, d_dq, d_dk, d_dv, d_d, d_p, d_ds, s, scale, stream)
               : launch<128>(d_q, d_k, d_v, d_o, d_lse, d_do, d_dq, d_dk, d_dv, d_d, d_p, d_ds, s, scale, stream);
}

}  // namespace stepwise::attention_backward::products_through_global_memory
