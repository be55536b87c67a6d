//! @file 02_fused_online_softmax.cuh
//! @brief Attention step 2 (beyond the sources): one fused kernel with the online softmax; the scores and
//!        probabilities stay in shared memory (FlashAttention's tiling, with WMMA).
//!
//! Step 1 writes the scores S = Q K^T and the probabilities P to global memory and reads them back: seq^2 values a
//! head each way. Here a block of 4 warps takes 64 query rows and walks over 64-key tiles of K and V staged in
//! shared memory. Each warp multiplies its 16 rows of Q (held in registers as WMMA fragments) by the tile of K into
//! shared memory, turns those scores into probabilities with the online softmax (Milakov and Gimelshein, as in the
//! softmax chapter's step 5: a rise of a row's maximum scales what was summed by exp(old max - new max)), and adds P
//! times the tile of V to its rows of O, kept in shared memory in fp32. Only O and each row's log-sum-exp are
//! written. Both products run on the tensor cores (bf16 in, fp32 out); P is rounded to bf16 for the second.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::attention::fused_online_softmax {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int warps = 4;                 //!< a block's warps, 16 query rows each
constexpr int block_rows = warps * 16;   //!< query rows of a block
constexpr int key_tile = 64;             //!< keys staged at a time
constexpr int threads = warps * 32;
constexpr float log2e = 1.44269504088896340736f;  //!< exp(x) = 2^(x log2(e)): the scores are kept in base 2

//! @brief Sizes of one problem: Q and O [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

//! @brief Where each array lies in the block's shared memory, for a head dimension of `HeadDim`. Rows are padded
//!        (by 16 bytes for bf16, 16 bytes for fp32) so that a fragment's rows fall in different banks, and every
//!        fragment starts on 32 bytes, as WMMA's loads and stores require.
template <int HeadDim>
struct Layout {
    static constexpr int ld_kv = HeadDim + 8;       //!< bf16: K, V and the staged Q
    static constexpr int ld_s = key_tile + 4;       //!< fp32 scores
    static constexpr int ld_p = key_tile + 8;       //!< bf16 probabilities
    static constexpr int ld_o = HeadDim + 4;        //!< fp32 output
    static constexpr std::size_t k = 0;
    static constexpr std::size_t v = k + sizeof(bf16) * key_tile * ld_kv;
    static constexpr std::size_t s = v + sizeof(bf16) * key_tile * ld_kv;  //!< first Q, then the scores
    static constexpr std::size_t p = s + sizeof(float) * block_rows * ld_s;
    static constexpr std::size_t o = p + sizeof(bf16) * block_rows * ld_p;
    static constexpr std::size_t bytes = o + sizeof(float) * block_rows * ld_o;
    static_assert(sizeof(bf16) * block_rows * ld_kv <= p - s + (o - p), "the staged Q fits where S and P go");
    static_assert(v % 32 == 0 && s % 32 == 0 && p % 32 == 0 && o % 32 == 0, "fragments start on 32 bytes");
};

//! @brief One block: query rows [blockIdx.x * 64, + 64) of head blockIdx.y of batch blockIdx.z.
template <int HeadDim>
static __global__ void __launch_bounds__(threads)
    attention_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, const bf16* __restrict__ d_v,
                     bf16* __restrict__ d_o, float* __restrict__ d_lse, Shape sh, float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using L = Layout<HeadDim>;
    extern __shared__ __align__(128) unsigned char shared[];
    bf16* k_tile = reinterpret_cast<bf16*>(shared + L::k);
    bf16* v_tile = reinterpret_cast<bf16*>(shared + L::v);
    bf16* q_tile = reinterpret_cast<bf16*>(shared + L::s);  // until Q is in registers
    float* s_tile = reinterpret_cast<float*>(shared + L::s);
    bf16* p_tile = reinterpret_cast<bf16*>(shared + L::p);
    float* o_tile = reinterpret_cast<float*>(shared + L::o);

    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
    const int kv_head = head / (sh.heads / sh.kv_heads);
    const int first_row = static_cast<int>(blockIdx.x) * block_rows;
    const std::size_t q_base = (static_cast<std::size_t>(batch) * sh.heads + head) * sh.seq * HeadDim;
    const std::size_t kv_base = (static_cast<std::size_t>(batch) * sh.kv_heads + kv_head) * sh.seq * HeadDim;
    constexpr int vectors = HeadDim / 8;  // 16-byte vectors a row

    // Stage the block's rows of Q (0 past the sequence), then each warp keeps its 16 rows as fragments.
    for (int i = static_cast<int>(threadIdx.x); i < block_rows * vectors; i += threads) {
        const int r = i / vectors, c = (i % vectors) * 8;
        uint4 value = make_uint4(0, 0, 0, 0);
        if (first_row + r < sh.seq) {
            value = *reinterpret_cast<const uint4*>(d_q + q_base + static_cast<std::size_t>(first_row + r) * HeadDim + c);
        }
        *reinterpret_cast<uint4*>(q_tile + r * L::ld_kv + c) = value;
    }
    for (int i = static_cast<int>(threadIdx.x); i < block_rows * HeadDim; i += threads) {
        o_tile[(i / HeadDim) * L::ld_o + i % HeadDim] = 0.0f;
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> q_frag[HeadDim / 16];
#pragma unroll
    for (int kk = 0; kk < HeadDim / 16; ++kk) {
        wmma::load_matrix_sync(q_frag[kk], q_tile + warp * 16 * L::ld_kv + kk * 16, L::ld_kv);
    }

    // Lanes 2r and 2r + 1 keep row r of the warp's 16: its maximum and sum (base 2), each over half the columns.
    const int r = lane / 2, half = lane % 2;
    const int row = first_row + warp * 16 + r;
    const int row_keys = row >= sh.seq ? 0 : sh.causal ? row + 1 : sh.seq;  // keys [0, row_keys) are the row's
    const int warp_keys = min(sh.seq, sh.causal ? first_row + warp * 16 + 16 : sh.seq);  // any of the warp's rows
    const int block_keys = min(sh.seq, sh.causal ? first_row + block_rows : sh.seq);
    float max = -INFINITY, sum = 0.0f;
    bool nan_score = false;
    float* s_row = s_tile + (warp * 16 + r) * L::ld_s + half * 32;
    bf16* p_row = p_tile + (warp * 16 + r) * L::ld_p + half * 32;
    float* o_row = o_tile + (warp * 16 + r) * L::ld_o + half * (HeadDim / 2);

    for (int tile = 0; tile < block_keys; tile += key_tile) {
        __syncthreads();  // the previous tile is no longer read (nor Q's staging, at the first)
        for (int i = static_cast<int>(threadIdx.x); i < key_tile * vectors; i += threads) {
            const int key = i / vectors, c = (i % vectors) * 8;
            uint4 k_value = make_uint4(0, 0, 0, 0), v_value = make_uint4(0, 0, 0, 0);
            if (tile + key < sh.seq) {
                const std::size_t at = kv_base + static_cast<std::size_t>(tile + key) * HeadDim + c;
                k_value = *reinterpret_cast<const uint4*>(d_k + at);
                v_value = *reinterpret_cast<const uint4*>(d_v + at);
            }
            *reinterpret_cast<uint4*>(k_tile + key * L::ld_kv + c) = k_value;
            *reinterpret_cast<uint4*>(v_tile + key * L::ld_kv + c) = v_value;
        }
        __syncthreads();
        if (tile >= warp_keys) {
            continue;  // warp-uniform: none of the warp's rows sees a key of this tile
        }
        // S = Q K^T for the warp's 16 rows and the tile's 64 keys: K's rows are B's columns (column-major B).
#pragma unroll
        for (int j = 0; j < key_tile / 16; ++j) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < HeadDim / 16; ++kk) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> k_frag;
                wmma::load_matrix_sync(k_frag, k_tile + j * 16 * L::ld_kv + kk * 16, L::ld_kv);
                wmma::mma_sync(acc, q_frag[kk], k_frag, acc);
            }
            wmma::store_matrix_sync(s_tile + warp * 16 * L::ld_s + j * 16, acc, L::ld_s, wmma::mem_row_major);
        }
        __syncwarp();
        // The online softmax of the row's half of the tile; keys the row does not see weigh 0.
        float score[32];
        float tile_max = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; ++c) {
            const bool seen = tile + half * 32 + c < row_keys;
            const float x = s_row[c] * (scale * log2e);
            nan_score = nan_score || (seen && isnan(x));
            score[c] = seen ? x : -INFINITY;
            tile_max = fmaxf(tile_max, score[c]);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        const float new_max = fmaxf(max, tile_max);
        const bool none_yet = new_max == -INFINITY;  // a row past the sequence, or before its first key
        const float rescale = none_yet ? 1.0f : exp2f(max - new_max);
        float tile_sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 32; ++c) {
            const float w = none_yet ? 0.0f : exp2f(score[c] - new_max);
            tile_sum += w;
            p_row[c] = __float2bfloat16_rn(w);
        }
        tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
        sum = sum * rescale + tile_sum;
        max = new_max;
#pragma unroll 8
        for (int c = 0; c < HeadDim / 2; ++c) {
            o_row[c] *= rescale;
        }
        __syncwarp();
        // O += P V for the warp's rows: V's rows are B's rows (row-major B).
#pragma unroll
        for (int n = 0; n < HeadDim / 16; ++n) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            float* o_block = o_tile + warp * 16 * L::ld_o + n * 16;
            wmma::load_matrix_sync(acc, o_block, L::ld_o, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < key_tile / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> p_frag;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> v_frag;
                wmma::load_matrix_sync(p_frag, p_tile + warp * 16 * L::ld_p + kk * 16, L::ld_p);
                wmma::load_matrix_sync(v_frag, v_tile + kk * 16 * L::ld_kv + n * 16, L::ld_kv);
                wmma::mma_sync(acc, p_frag, v_frag, acc);
            }
            wmma::store_matrix_sync(o_block, acc, L::ld_o, wmma::mem_row_major);
        }
        __syncwarp();
    }
    const bool nan_row = nan_score || __shfl_xor_sync(0xffffffffu, nan_score ? 1 : 0, 1) != 0;  // the whole warp
    if (row >= sh.seq) {
        return;
    }
    bf16* out = d_o + q_base + static_cast<std::size_t>(row) * HeadDim + half * (HeadDim / 2);
    for (int c = 0; c < HeadDim / 2; ++c) {
        out[c] = __float2bfloat16_rn(nan_row ? NAN : o_row[c] / sum);
    }
    if (half == 0) {
        d_lse[(static_cast<std::size_t>(batch) * sh.heads + head) * sh.seq + row] =
            nan_row ? NAN : (max + log2f(sum)) / log2e;
    }
#endif
}

//! What this step needs of the GPU and the build: bf16 tensor-core instructions, compute capability 8.0 or higher.
constexpr const char* requirement = "sm_80";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
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
        cudaGetLastError();  // no code for this GPU at all: reported as cudaErrorNotSupported instead
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

template <int HeadDim>
inline cudaError_t launch(const bf16* d_q, const bf16* d_k, const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s,
                          float scale, cudaStream_t stream)
{
    const auto kernel = attention_kernel<HeadDim>;
    const int bytes = static_cast<int>(Layout<HeadDim>::bytes);
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        e != cudaSuccess) {
        return e;  // a GPU with less shared memory a block
    }
    const dim3 grid((s.seq + block_rows - 1) / block_rows, s.heads, s.batch);
    kernel<<<grid, threads, bytes, stream>>>(d_q, d_k, d_v, d_o, d_lse, s, scale);
    return cudaGetLastError();
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
//!      K, V, O and the LSE not null, Q, K, V, O 16-byte aligned, the LSE 4-byte aligned; a GPU of compute capability
//!      8.0 or higher with 96 KiB of shared memory a block (head_dim 128)
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), else the launch's error
inline cudaError_t attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                             const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s, float scale,
                             cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || s.heads > 65535 || s.batch > 65535 || !aligned(d_q) ||
        !aligned(d_k) || !aligned(d_v) || !aligned(d_o) || reinterpret_cast<std::uintptr_t>(d_lse) % 4 != 0 ||
        d_q == nullptr || d_k == nullptr || d_v == nullptr || d_o == nullptr || d_lse == nullptr ||
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
    return s.head_dim == 64 ? launch<64>(d_q, d_k, d_v, d_o, d_lse, s, scale, stream)
                            : launch<128>(d_q, d_k, d_v, d_o, d_lse, s, scale, stream);
}

}  // namespace stepwise::attention::fused_online_softmax
