//! @file 02_fused_key_tiles.cuh
//! @brief Attention backward step 2 (beyond the sources): one fused kernel in FlashAttention-2's order, a block for
//!        each tile of 64 keys, so that P and dS never leave shared memory.
//!
//! Step 1 writes P and dS, seq x seq a head, to global memory and reads them back for the three products. Here a
//! block keeps its tile of K and V in shared memory and walks the query tiles that see it (in every query head that
//! shares its K/V head): it recomputes S = Q K^T and P, computes dP = dO V^T and dS, all for a 64 x 64 tile in shared
//! memory, and adds P^T dO and dS^T Q into dV and dK, which stay in the warps' accumulators until the last query tile.
//! dQ sums over every key tile, held by other blocks: each block adds its dS K into an fp32 copy of dQ in the
//! workspace with atomics, and a last kernel scales and rounds it to bf16. D keeps its own small kernel. The atomics
//! add in the order the blocks reach them: dQ's last bits may differ from run to run (dK and dV do not).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::attention_backward::fused_key_tiles {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int tile = 64;            //!< a block's tile of keys, and each tile of queries it walks
constexpr int gemm_threads = 128;   //!< 4 warps: 16 keys (dK, dV) and 16 queries (S, dP, dQ) of the tiles each
constexpr int dot_threads = 256;    //!< the blocks of D: a warp a row
constexpr int convert_threads = 256;  //!< the blocks that round dQ
constexpr int warp_threads = 32;
constexpr int warps = gemm_threads / warp_threads;
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q, O, dO and dQ [batch, heads, seq, head_dim], K, V, dK and dV [batch, kv_heads, seq,
//!        head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

//! @brief The block's shared memory: K, V, the query tile's Q and dO (bf16), P and dS (bf16), the scores or dP of the
//!        tile (fp32), and the query rows' log-sum-exp and D.
template <int HeadDim>
struct Layout {
    static constexpr int ld = HeadDim + 8;        //!< bf16 rows of K, V, Q and dO
    static constexpr int ld_p = tile + 8;         //!< bf16 rows of P and dS
    static constexpr int ld_s = tile + 4;         //!< fp32 rows of S and dP
    static constexpr std::size_t k = 0;
    static constexpr std::size_t v = k + sizeof(bf16) * tile * ld;
    static constexpr std::size_t q = v + sizeof(bf16) * tile * ld;
    static constexpr std::size_t d_o = q + sizeof(bf16) * tile * ld;
    static constexpr std::size_t p = d_o + sizeof(bf16) * tile * ld;
    static constexpr std::size_t ds = p + sizeof(bf16) * tile * ld_p;
    static constexpr std::size_t s = ds + sizeof(bf16) * tile * ld_p;
    static constexpr std::size_t lse = s + sizeof(float) * tile * ld_s;
    static constexpr std::size_t d = lse + sizeof(float) * tile;
    static constexpr std::size_t bytes = d + sizeof(float) * tile;
    static_assert(v % 32 == 0 && q % 32 == 0 && d_o % 32 == 0 && p % 32 == 0 && ds % 32 == 0 && s % 32 == 0,
                  "fragments start on 32 bytes");
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

//! @brief One block: keys [blockIdx.x * 64, + 64) of K/V head (blockIdx.y % kv_heads) of batch (blockIdx.y /
//!        kv_heads). Their dK and dV, summed over the query tiles that see them in every query head of the group, and
//!        their share of dQ, added into `d_dq_sum` (fp32, unscaled).
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    key_tile_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, const bf16* __restrict__ d_v,
                    const float* __restrict__ d_lse, const bf16* __restrict__ d_do, const float* __restrict__ d_d,
                    float* __restrict__ d_dq_sum, bf16* __restrict__ d_dk, bf16* __restrict__ d_dv, Shape sh,
                    float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using L = Layout<HeadDim>;
    constexpr int n_frags = HeadDim / 16;
    extern __shared__ __align__(128) unsigned char shared[];
    bf16* k_tile = reinterpret_cast<bf16*>(shared + L::k);
    bf16* v_tile = reinterpret_cast<bf16*>(shared + L::v);
    bf16* q_tile = reinterpret_cast<bf16*>(shared + L::q);
    bf16* do_tile = reinterpret_cast<bf16*>(shared + L::d_o);
    bf16* p_tile = reinterpret_cast<bf16*>(shared + L::p);
    bf16* ds_tile = reinterpret_cast<bf16*>(shared + L::ds);
    float* s_tile = reinterpret_cast<float*>(shared + L::s);
    float* lse_rows = reinterpret_cast<float*>(shared + L::lse);
    float* d_rows = reinterpret_cast<float*>(shared + L::d);
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int kv_bh = static_cast<int>(blockIdx.y), batch = kv_bh / sh.kv_heads, kv_head = kv_bh % sh.kv_heads;
    const int group = sh.heads / sh.kv_heads;
    const int first_key = static_cast<int>(blockIdx.x) * tile;
    const std::size_t kv_offset = static_cast<std::size_t>(kv_bh) * sh.seq * HeadDim;
    stage_rows<HeadDim>(k_tile, L::ld, d_k + kv_offset, first_key, sh.seq);
    stage_rows<HeadDim>(v_tile, L::ld, d_v + kv_offset, first_key, sh.seq);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dk_acc[n_frags], dv_acc[n_frags];
#pragma unroll
    for (int n = 0; n < n_frags; ++n) {
        wmma::fill_fragment(dk_acc[n], 0.0f);
        wmma::fill_fragment(dv_acc[n], 0.0f);
    }
    const int first_query = sh.causal ? first_key : 0;  // the rows before the tile see none of its keys
    for (int g = 0; g < group; ++g) {
        const std::size_t bh = static_cast<std::size_t>(batch) * sh.heads + kv_head * group + g;
        for (int first_row = first_query; first_row < sh.seq; first_row += tile) {
            __syncthreads();  // the previous tile's products are done with Q, dO, P and dS
            stage_rows<HeadDim>(q_tile, L::ld, d_q + bh * sh.seq * HeadDim, first_row, sh.seq);
            stage_rows<HeadDim>(do_tile, L::ld, d_do + bh * sh.seq * HeadDim, first_row, sh.seq);
            for (int r = static_cast<int>(threadIdx.x); r < tile; r += gemm_threads) {
                const bool inside = first_row + r < sh.seq;
                lse_rows[r] = inside ? d_lse[bh * sh.seq + first_row + r] : 0.0f;
                d_rows[r] = inside ? d_d[bh * sh.seq + first_row + r] : 0.0f;
            }
            __syncthreads();
            // The warp's 16 query rows: S = Q K^T into s_tile, then P; dP = dO V^T into s_tile, then dS.
            float* s_rows = s_tile + warp * 16 * L::ld_s;
            const auto row_times_keys = [&](const bf16* a_rows) {
                for (int j = 0; j < tile / 16; ++j) {
                    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
                    for (int kk = 0; kk < HeadDim / 16; ++kk) {
                        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
                        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;  // rows of K or V
                        wmma::load_matrix_sync(a, a_rows + warp * 16 * L::ld + kk * 16, L::ld);
                        wmma::load_matrix_sync(b, (a_rows == q_tile ? k_tile : v_tile) + j * 16 * L::ld + kk * 16,
                                               L::ld);
                        wmma::mma_sync(acc, a, b, acc);
                    }
                    wmma::store_matrix_sync(s_rows + j * 16, acc, L::ld_s, wmma::mem_row_major);
                }
                __syncwarp();
            };
            const auto visible = [&](int r, int c) {
                const int row = first_row + r, key = first_key + c;
                return row < sh.seq && key < sh.seq && !(sh.causal && key > row);
            };
            row_times_keys(q_tile);
            for (int e = lane; e < 16 * tile; e += warp_threads) {
                const int r = warp * 16 + e / tile, c = e % tile;
                const float p = visible(r, c) ? exp2f((s_rows[(e / tile) * L::ld_s + c] * scale - lse_rows[r]) * log2e)
                                              : 0.0f;
                p_tile[r * L::ld_p + c] = __float2bfloat16_rn(p);
            }
            __syncwarp();
            row_times_keys(do_tile);
            for (int e = lane; e < 16 * tile; e += warp_threads) {
                const int r = warp * 16 + e / tile, c = e % tile;
                const float ds = visible(r, c) ? __bfloat162float(p_tile[r * L::ld_p + c]) *
                                                     (s_rows[(e / tile) * L::ld_s + c] - d_rows[r])
                                               : 0.0f;
                ds_tile[r * L::ld_p + c] = __float2bfloat16_rn(ds);
            }
            __syncthreads();  // every warp's rows of P and dS
            // dV += P^T dO and dK += dS^T Q: the warp's 16 keys are 16 columns of P and dS, the tile's queries its rows.
#pragma unroll 1
            for (int kk = 0; kk < tile / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> pt, dst;
                wmma::load_matrix_sync(pt, p_tile + kk * 16 * L::ld_p + warp * 16, L::ld_p);
                wmma::load_matrix_sync(dst, ds_tile + kk * 16 * L::ld_p + warp * 16, L::ld_p);
#pragma unroll
                for (int n = 0; n < n_frags; ++n) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
                    wmma::load_matrix_sync(b, do_tile + kk * 16 * L::ld + n * 16, L::ld);
                    wmma::mma_sync(dv_acc[n], pt, b, dv_acc[n]);
                    wmma::load_matrix_sync(b, q_tile + kk * 16 * L::ld + n * 16, L::ld);
                    wmma::mma_sync(dk_acc[n], dst, b, dk_acc[n]);
                }
            }
            // The block's share of dQ for the warp's 16 query rows: dS K, added into the fp32 sum.
            float* dq_head = d_dq_sum + bh * sh.seq * HeadDim;
#pragma unroll 1  // one fragment of dQ at a time: dK's and dV's accumulators hold most of the registers
            for (int n = 0; n < n_frags; ++n) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq;
                wmma::fill_fragment(dq, 0.0f);
#pragma unroll
                for (int kk = 0; kk < tile / 16; ++kk) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;  // K's rows are B's rows
                    wmma::load_matrix_sync(a, ds_tile + warp * 16 * L::ld_p + kk * 16, L::ld_p);
                    wmma::load_matrix_sync(b, k_tile + kk * 16 * L::ld + n * 16, L::ld);
                    wmma::mma_sync(dq, a, b, dq);
                }
                wmma::store_matrix_sync(s_rows, dq, L::ld_s, wmma::mem_row_major);  // the warp's rows of s_tile
                __syncwarp();
                for (int e = lane; e < 16 * 16; e += warp_threads) {
                    const int row = first_row + warp * 16 + e / 16;
                    if (row < sh.seq) {
                        atomicAdd(dq_head + static_cast<std::size_t>(row) * HeadDim + n * 16 + e % 16,
                                  s_rows[(e / 16) * L::ld_s + e % 16]);
                    }
                }
                __syncwarp();
            }
        }
    }
    // dK (scaled) and dV of the warp's 16 keys, through its rows of s_tile.
    float* staging = s_tile + warp * 16 * L::ld_s;
    const auto store = [&](wmma::fragment<wmma::accumulator, 16, 16, 16, float>(&acc)[n_frags], bf16* out,
                           float factor) {
#pragma unroll
        for (int n = 0; n < n_frags; ++n) {
            wmma::store_matrix_sync(staging, acc[n], L::ld_s, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 16 * 16; e += warp_threads) {
                const int key = first_key + warp * 16 + e / 16;
                if (key < sh.seq) {
                    out[kv_offset + static_cast<std::size_t>(key) * HeadDim + n * 16 + e % 16] =
                        __float2bfloat16_rn(staging[(e / 16) * L::ld_s + e % 16] * factor);
                }
            }
            __syncwarp();
        }
    };
    store(dk_acc, d_dk, scale);
    store(dv_acc, d_dv, 1.0f);
#endif
}

//! @brief dQ = scale times its fp32 sum, rounded to bf16: a thread a value (a grid-stride loop).
__global__ void __launch_bounds__(convert_threads)
    convert_dq_kernel(const float* __restrict__ d_dq_sum, bf16* __restrict__ d_dq, std::size_t count, float scale)
{
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * convert_threads + threadIdx.x; i < count;
         i += static_cast<std::size_t>(gridDim.x) * convert_threads) {
        d_dq[i] = __float2bfloat16_rn(d_dq_sum[i] * scale);
    }
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

//! @brief D, the fused kernel and dQ's rounding, dQ's sum zeroed first; each launch checked.
template <int HeadDim>
cudaError_t launch(const bf16* d_q, const bf16* d_k, const bf16* d_v, const bf16* d_o, const float* d_lse,
                   const bf16* d_do, bf16* d_dq, bf16* d_dk, bf16* d_dv, float* d_d, float* d_dq_sum, const Shape& s,
                   float scale, cudaStream_t stream)
{
    const auto kernel = key_tile_kernel<HeadDim>;
    const int bytes = static_cast<int>(Layout<HeadDim>::bytes);
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        e != cudaSuccess) {
        return e;  // a GPU with less shared memory a block
    }
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * s.seq, values = rows * HeadDim;
    if (const cudaError_t e = cudaMemsetAsync(d_dq_sum, 0, values * sizeof(float), stream); e != cudaSuccess) {
        return e;
    }
    constexpr unsigned rows_per_block = dot_threads / warp_threads;
    row_dot_kernel<HeadDim><<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), dot_threads, 0,
                              stream>>>(d_o, d_do, d_d, rows);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    const unsigned tiles = static_cast<unsigned>((s.seq + tile - 1) / tile);
    const unsigned kv_heads = static_cast<unsigned>(s.batch) * s.kv_heads;
    kernel<<<dim3(tiles, kv_heads), gemm_threads, bytes, stream>>>(d_q, d_k, d_v, d_lse, d_do, d_d, d_dq_sum, d_dk,
                                                                   d_dv, s, scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    const unsigned convert_blocks =
        static_cast<unsigned>(std::min<std::size_t>((values + convert_threads - 1) / convert_threads, 1u << 20));
    convert_dq_kernel<<<convert_blocks, convert_threads, 0, stream>>>(d_dq_sum, d_dq, values, scale);
    return cudaGetLastError();
}

//! @brief dQ, dK and dV of attention O = softmax(scale Q K^T (+ causal mask)) V, for bf16 tensors, from the
//!        forward's O and log-sum-exp and the gradient dO of the loss by O. dK and dV of a K/V head sum over the query
//!        heads that share it. dQ is summed over the key tiles with atomics: its last bits may differ from run to
//!        run. Causal, the products take whole 64 x 64 tiles, and a hidden entry of P or dS is 0: 0 x NaN is NaN, so a
//!        NaN in row i of dO (or Q) also reaches dV (or dK) of the keys after i in i's tile of 64, and a NaN in row j
//!        of K also reaches dQ of the rows before j in j's tile.
//! @param[in]     d_temp_storage     device memory for D and dQ's sum (fp32); nullptr: only `temp_storage_bytes` is set
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
    const std::size_t sum_offset = rounded(heads * s.seq * sizeof(float));
    const std::size_t needed = sum_offset + heads * s.seq * s.head_dim * sizeof(float);
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
    float* d_dq_sum = reinterpret_cast<float*>(base + sum_offset);
    return s.head_dim == 64
               ? launch<64>(d_q, d_k, d_v, d_o, d_lse, d_do, d_dq, d_dk, d_dv, d_d, d_dq_sum, s, scale, stream)
               : launch<128>(d_q, d_k, d_v, d_o, d_lse, d_do, d_dq, d_dk, d_dv, d_d, d_dq_sum, s, scale, stream);
}

}  // namespace stepwise::attention_backward::fused_key_tiles
