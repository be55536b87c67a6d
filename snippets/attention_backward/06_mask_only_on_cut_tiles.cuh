//! @file 06_mask_only_on_cut_tiles.cuh
//! @brief Attention backward step 6 (beyond the sources): only the tiles that the causal mask or the sequence's end
//!        cuts test which of their entries a query sees; the others compute P and dS without a test.
//!
//! Steps 3 to 5 test every entry of P and of dS of every tile: is the query inside the sequence, is the key, does the
//! query see the key. Only three kinds of tile can fail a test: the tiles across the causal diagonal (the query tile
//! that starts at the block's first key), the last tile of queries and the last tile of keys where the sequence ends
//! inside them. Every other tile sees all of its entries. The test is the same for a whole block at each tile, so the
//! block branches once a tile: the elementwise code of P and of dS is compiled twice, with the test and without it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace stepwise::attention_backward::mask_only_on_cut_tiles {

using bf16 = __nv_bfloat16;

constexpr int tile = 64;              //!< a block's tile of keys, and each tile of queries it walks
constexpr int warp_threads = 32;
constexpr int warps = 4;              //!< each owns 16 keys of the tile, and 16 of its query rows for dQ
constexpr int warp_rows = tile / warps;
constexpr int gemm_threads = warps * warp_threads;
constexpr int dot_threads = 256;      //!< the blocks of D: a warp a row
constexpr int convert_threads = 256;  //!< the blocks that round dQ
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q, O, dO and dQ [batch, heads, seq, head_dim], K, V, dK and dV [batch, kv_heads, seq,
//!        head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

constexpr int buffers = 2;  //!< of the query side: one computed on, one being filled

//! @brief The block's shared memory: K, V, two buffers of the query tile's Q and dO (bf16), dS^T of the tile (bf16, a
//!        row a key), and two buffers of the query rows' log-sum-exp and D.
template <int HeadDim>
struct Layout {
    static constexpr int ld = HeadDim + 8;  //!< bf16 rows of K, V, Q and dO: ldmatrix's 8 rows in different banks
    static constexpr int ld_ds = tile + 8;  //!< bf16 rows of dS^T
    static constexpr std::size_t tile_bytes = sizeof(bf16) * tile * ld;  //!< 64 rows of K, V, Q or dO
    static constexpr std::size_t k = 0;
    static constexpr std::size_t v = k + tile_bytes;
    static constexpr std::size_t q = v + tile_bytes;
    static constexpr std::size_t d_o = q + buffers * tile_bytes;
    static constexpr std::size_t ds = d_o + buffers * tile_bytes;
    static constexpr std::size_t lse = ds + sizeof(bf16) * tile * ld_ds;
    static constexpr std::size_t d = lse + buffers * sizeof(float) * tile;
    static constexpr std::size_t bytes = d + buffers * sizeof(float) * tile;
    static_assert(v % 16 == 0 && q % 16 == 0 && d_o % 16 == 0 && ds % 16 == 0, "ldmatrix rows start on 16 bytes");
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
//! @brief The shared-memory address of `p`, as `ldmatrix` takes it. The loops below add constant byte offsets to one
//!        such address a lane, which the instruction takes as its immediate, rather than converting every pointer.
__device__ __forceinline__ std::uint32_t smem_address(const void* p)
{
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

//! @brief Four 8 x 8 bf16 matrices; lane l gives the shared address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void load_matrices(std::uint32_t (&r)[4], std::uint32_t row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(row));
}

//! @brief As load_matrices(), each matrix transposed.
__device__ __forceinline__ void load_matrices_transposed(std::uint32_t (&r)[4], std::uint32_t row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(row));
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

//! @brief Copies `Bytes` (16, or 4) from global to shared memory without waiting (`cp.async`); `valid` false: writes
//!        zeros and reads nothing (`d_global` must still be a valid address).
template <int Bytes>
__device__ __forceinline__ void copy_async(void* d_shared, const void* d_global, bool valid)
{
    if constexpr (Bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address(d_shared)), "l"(d_global),
                     "r"(valid ? 16 : 0)
                     : "memory");
    } else {
        static_assert(Bytes == 4, "cp.async copies 4, 8 or 16 bytes; this step uses 16 and 4");
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_address(d_shared)), "l"(d_global),
                     "r"(valid ? 4 : 0)
                     : "memory");
    }
}

//! @brief Closes the group of the thread's copies issued since the last one.
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

//! @brief Waits until at most `Pending` of the thread's groups of copies are still in flight (the newest ones).
template <int Pending>
__device__ __forceinline__ void wait_copies()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

//! @brief Adds four floats to `d_sum[0..3]` (16-byte aligned) atomically: one 16-byte operation on compute capability
//!        9.0 and higher, four 4-byte ones before.
__device__ __forceinline__ void add_four(float* d_sum, float4 values)
{
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(d_sum), values);
#else
    atomicAdd(d_sum, values.x);
    atomicAdd(d_sum + 1, values.y);
    atomicAdd(d_sum + 2, values.z);
    atomicAdd(d_sum + 3, values.w);
#endif
}

//! @brief The bf16 pair of `pair` as floats.
__device__ __forceinline__ float2 unpack(std::uint32_t pair)
{
    __nv_bfloat162 v;
    std::memcpy(&v, &pair, sizeof(pair));
    return __bfloat1622float2(v);
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
//! @brief Starts the copies of rows [first, first + 64) of a [seq, Width] bf16 matrix into shared rows of `ld` values
//!        (0 past the sequence), 16 bytes at a time.
template <int Width>
__device__ __forceinline__ void copy_rows(bf16* d_shared, int ld, const bf16* d_rows, int first, int seq)
{
    constexpr int vectors = Width / 8;
    for (int i = static_cast<int>(threadIdx.x); i < tile * vectors; i += gemm_threads) {
        const int r = i / vectors, c = (i % vectors) * 8;
        const bool inside = first + r < seq;
        copy_async<16>(d_shared + r * ld + c, d_rows + static_cast<std::size_t>(inside ? first + r : 0) * Width + c,
                       inside);
    }
}

//! @brief Starts the copies of values [first, first + 64) of a row of `seq` floats (0 past the sequence).
__device__ __forceinline__ void copy_values(float* d_shared, const float* d_values, int first, int seq)
{
    for (int r = static_cast<int>(threadIdx.x); r < tile; r += gemm_threads) {
        const bool inside = first + r < seq;
        copy_async<4>(d_shared + r, d_values + (inside ? first + r : 0), inside);
    }
}
#endif

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
//!        kv_heads); warp w owns keys 16 w to 16 w + 15 of them, lane l keys g = l / 4 and g + 8 and, in each 8-column
//!        tile of queries (or of head_dim for dK and dV), columns 2 (l % 4) and 2 (l % 4) + 1. Their dK and dV,
//!        summed over the query tiles that see them in every query head of the group, and their share of dQ, added
//!        into `d_dq_sum` (fp32, unscaled).
template <int HeadDim>
__global__ void __launch_bounds__(gemm_threads)
    key_tile_kernel(const bf16* __restrict__ d_q, const bf16* __restrict__ d_k, const bf16* __restrict__ d_v,
                    const float* __restrict__ d_lse, const bf16* __restrict__ d_do, const float* __restrict__ d_d,
                    float* __restrict__ d_dq_sum, bf16* __restrict__ d_dk, bf16* __restrict__ d_dv, Shape sh,
                    float scale)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using L = Layout<HeadDim>;
    constexpr int query_tiles = tile / 8, d_tiles = HeadDim / 8;  // 8-column tiles of the accumulators
    extern __shared__ __align__(128) unsigned char shared[];
    bf16* k_tile = reinterpret_cast<bf16*>(shared + L::k);
    bf16* v_tile = reinterpret_cast<bf16*>(shared + L::v);
    bf16* ds_tile = reinterpret_cast<bf16*>(shared + L::ds);
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int g = lane / 4, quad = lane % 4;
    const int kv_bh = static_cast<int>(blockIdx.y), batch = kv_bh / sh.kv_heads, kv_head = kv_bh % sh.kv_heads;
    const int group = sh.heads / sh.kv_heads;
    const int first_key = static_cast<int>(blockIdx.x) * tile;
    const std::size_t kv_offset = static_cast<std::size_t>(kv_bh) * sh.seq * HeadDim;
    // The query side of a tile, in buffer `b`: Q, dO, the log-sum-exp and D of rows [first_row, + 64) of a head.
    const auto q_buffer = [&](int b) { return reinterpret_cast<bf16*>(shared + L::q + b * L::tile_bytes); };
    const auto do_buffer = [&](int b) { return reinterpret_cast<bf16*>(shared + L::d_o + b * L::tile_bytes); };
    const auto lse_buffer = [&](int b) { return reinterpret_cast<float*>(shared + L::lse) + b * tile; };
    const auto d_buffer = [&](int b) { return reinterpret_cast<float*>(shared + L::d) + b * tile; };
    const auto copy_query_tile = [&](int gh, int first_row, int b) {
        const std::size_t bh = static_cast<std::size_t>(batch) * sh.heads + kv_head * group + gh;
        copy_rows<HeadDim>(q_buffer(b), L::ld, d_q + bh * sh.seq * HeadDim, first_row, sh.seq);
        copy_rows<HeadDim>(do_buffer(b), L::ld, d_do + bh * sh.seq * HeadDim, first_row, sh.seq);
        copy_values(lse_buffer(b), d_lse + bh * sh.seq, first_row, sh.seq);
        copy_values(d_buffer(b), d_d + bh * sh.seq, first_row, sh.seq);
    };
    const int first_query = sh.causal ? first_key : 0;  // the rows before the tile see none of its keys
    copy_rows<HeadDim>(k_tile, L::ld, d_k + kv_offset, first_key, sh.seq);
    copy_rows<HeadDim>(v_tile, L::ld, d_v + kv_offset, first_key, sh.seq);
    copy_query_tile(0, first_query, 0);
    commit_copies();
    const int keys[2] = {first_key + warp * warp_rows + g, first_key + warp * warp_rows + g + 8};  // the lane's rows
    float dk_acc[d_tiles][4] = {}, dv_acc[d_tiles][4] = {};

    // acc[t] += (the warp's 16 rows of `rows`) times (the query tile's `columns`)^T: rows of K or V by Q or dO.
    const auto keys_times_queries = [&](float (&acc)[query_tiles][4], const bf16* rows, const bf16* columns) {
        const std::uint32_t a_lane = smem_address(rows + (warp * warp_rows + lane % 16) * L::ld + (lane / 16) * 8);
        const std::uint32_t b_lane = smem_address(columns + (lane % 8) * L::ld + (lane / 8) * 8);
#pragma unroll 1
        for (int kk = 0; kk < HeadDim / 16; kk += 2) {
            std::uint32_t a0[4], a1[4];
            load_matrices(a0, a_lane + sizeof(bf16) * kk * 16);
            load_matrices(a1, a_lane + sizeof(bf16) * (kk + 1) * 16);
#pragma unroll
            for (int t = 0; t < query_tiles; ++t) {
                std::uint32_t b[4];  // queries 8t..8t+7, dims 16kk..16kk+31 in four 8-dim matrices
                load_matrices(b, b_lane + sizeof(bf16) * (t * 8 * L::ld + kk * 16));
                mma(acc[t], a0, b[0], b[1]);
                mma(acc[t], a1, b[2], b[3]);
            }
        }
    };
    // acc[j] += a[k] times the query tile's `columns` (queries 16k..16k+15 as B, transposed on the way).
    const auto add_keys_by_dims = [&](float (&acc)[d_tiles][4], const std::uint32_t (&a)[tile / 16][4],
                                      const bf16* columns) {
        const std::uint32_t b_lane = smem_address(columns + (lane % 16) * L::ld + (lane / 16) * 8);
#pragma unroll
        for (int k = 0; k < tile / 16; ++k) {
#pragma unroll
            for (int j = 0; j < d_tiles; j += 2) {
                std::uint32_t b[4];  // queries 16k..16k+15 by dims 8j..8j+15: B for dim tiles j and j + 1
                load_matrices_transposed(b, b_lane + sizeof(bf16) * (k * 16 * L::ld + j * 8));
                mma(acc[j], a[k], b[0], b[1]);
                mma(acc[j + 1], a[k], b[2], b[3]);
            }
        }
    };

    int buffer = 0;
    for (int gh = 0; gh < group; ++gh) {
        const std::size_t bh = static_cast<std::size_t>(batch) * sh.heads + kv_head * group + gh;
        for (int first_row = first_query; first_row < sh.seq; first_row += tile, buffer ^= 1) {
            // The next tile's copies, into the other buffer: the previous tile read it before its barrier below.
            const bool last_of_head = first_row + tile >= sh.seq;
            if (!last_of_head || gh + 1 < group) {
                copy_query_tile(last_of_head ? gh + 1 : gh, last_of_head ? first_query : first_row + tile, buffer ^ 1);
            }
            commit_copies();   // an empty group after the last tile, so that the wait below is the same
            wait_copies<1>();  // this thread's copies of this tile (and of K and V) have landed
            __syncthreads();   // everyone's; and the previous tile's dQ is done with dS^T
            const bf16* q_tile = q_buffer(buffer);
            const bf16* do_tile = do_buffer(buffer);
            const float* lse_rows = lse_buffer(buffer);
            const float* d_rows = d_buffer(buffer);
            // Whether the tile is cut: by the causal diagonal (the query tile that starts at the block's first key), or
            // by the sequence's end among its queries or its keys. The same for the whole block.
            const bool cut = (sh.causal && first_row == first_key) || first_row + tile > sh.seq ||
                             first_key + tile > sh.seq;
            // Whether key `key` is seen by query `query`; in a tile that is not cut (cut_tile false), always, untested.
            const auto seen = [&](auto cut_tile, int key, int query) {
                if constexpr (decltype(cut_tile)::value) {
                    return query < sh.seq && key < sh.seq && !(sh.causal && key > query);
                } else {
                    return true;
                }
            };
            // P^T = exp(scale K Q^T - L), rounded to bf16: the A operand of dV += P^T dO, 16 queries at a time.
            std::uint32_t p[tile / 16][4];
            {
                float s[query_tiles][4] = {};
                keys_times_queries(s, k_tile, q_tile);
                const auto probabilities = [&](auto cut_tile) {
#pragma unroll
                    for (int t = 0; t < query_tiles; ++t) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int column = t * 8 + quad * 2 + e % 2;
                            s[t][e] = seen(cut_tile, keys[e / 2], first_row + column)
                                          ? exp2f((s[t][e] * scale - lse_rows[column]) * log2e)
                                          : 0.0f;
                        }
                    }
                };
                if (cut) {
                    probabilities(std::true_type{});
                } else {
                    probabilities(std::false_type{});
                }
#pragma unroll
                for (int k = 0; k < tile / 16; ++k) {
                    p[k][0] = pack(s[2 * k][0], s[2 * k][1]);
                    p[k][1] = pack(s[2 * k][2], s[2 * k][3]);
                    p[k][2] = pack(s[2 * k + 1][0], s[2 * k + 1][1]);
                    p[k][3] = pack(s[2 * k + 1][2], s[2 * k + 1][3]);
                }
            }
            add_keys_by_dims(dv_acc, p, do_tile);
            // dS^T = P^T (V dO^T - D), rounded to bf16 in place of P^T, and stored a row a key for dQ.
            {
                float dp[query_tiles][4] = {};
                keys_times_queries(dp, v_tile, do_tile);
                const auto score_gradients = [&](auto cut_tile) {
#pragma unroll
                    for (int k = 0; k < tile / 16; ++k) {
#pragma unroll
                        for (int r = 0; r < 4; ++r) {  // the registers of p[k]: key half r % 2, query tile 2k + r / 2
                            const int t = 2 * k + r / 2, h = r % 2, column = t * 8 + quad * 2;
                            const float2 pv = unpack(p[k][r]);
                            const bool seen0 = seen(cut_tile, keys[h], first_row + column);
                            const bool seen1 = seen(cut_tile, keys[h], first_row + column + 1);
                            p[k][r] = pack(seen0 ? pv.x * (dp[t][2 * h] - d_rows[column]) : 0.0f,
                                           seen1 ? pv.y * (dp[t][2 * h + 1] - d_rows[column + 1]) : 0.0f);
                            *reinterpret_cast<std::uint32_t*>(ds_tile + (warp * warp_rows + g + 8 * h) * L::ld_ds +
                                                              column) = p[k][r];
                        }
                    }
                };
                if (cut) {
                    score_gradients(std::true_type{});
                } else {
                    score_gradients(std::false_type{});
                }
            }
            add_keys_by_dims(dk_acc, p, q_tile);
            __syncthreads();  // every warp's keys of dS^T
            // dQ of the warp's 16 query rows: dS K over the block's 64 keys, added into the fp32 sum 16 dims at a time,
            // four consecutive floats an addition: a thread of an even quad adds columns 2 quad..2 quad + 3 of the first
            // dim tile, its odd neighbour the same four of the second, each with two values that the other held.
            std::uint32_t ds[tile / 16][4];  // dS: query rows by keys 16k..16k+15, transposed from dS^T on the way
            const std::uint32_t ds_lane =
                smem_address(ds_tile + ((lane / 16) * 8 + lane % 8) * L::ld_ds + warp * warp_rows + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int k = 0; k < tile / 16; ++k) {
                load_matrices_transposed(ds[k], ds_lane + sizeof(bf16) * k * 16 * L::ld_ds);
            }
            const std::uint32_t k_lane = smem_address(k_tile + (lane % 16) * L::ld + (lane / 16) * 8);
            float* dq_head = d_dq_sum + bh * sh.seq * HeadDim;
            const int rows[2] = {first_row + warp * warp_rows + g, first_row + warp * warp_rows + g + 8};
#pragma unroll 1
            for (int j = 0; j < d_tiles; j += 2) {
                float dq[2][4] = {};
#pragma unroll
                for (int k = 0; k < tile / 16; ++k) {
                    std::uint32_t b[4];  // keys 16k..16k+15 by dims 8j..8j+15, transposed: B for dim tiles j, j + 1
                    load_matrices_transposed(b, k_lane + sizeof(bf16) * (k * 16 * L::ld + j * 8));
                    mma(dq[0], ds[k], b[0], b[1]);
                    mma(dq[1], ds[k], b[2], b[3]);
                }
                const bool even = quad % 2 == 0;
                const int column = even ? j * 8 + quad * 2 : (j + 1) * 8 + (quad - 1) * 2;  // a multiple of 4
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float lo = __shfl_xor_sync(0xffffffffu, even ? dq[1][2 * h] : dq[0][2 * h], 1);
                    const float hi = __shfl_xor_sync(0xffffffffu, even ? dq[1][2 * h + 1] : dq[0][2 * h + 1], 1);
                    if (rows[h] < sh.seq) {
                        add_four(dq_head + static_cast<std::size_t>(rows[h]) * HeadDim + column,
                                 even ? make_float4(dq[0][2 * h], dq[0][2 * h + 1], lo, hi)
                                      : make_float4(lo, hi, dq[1][2 * h], dq[1][2 * h + 1]));
                    }
                }
            }
        }
    }
    // dK (scaled) and dV of the lane's two keys, from the accumulators, two columns at a time.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (keys[h] >= sh.seq) {
            continue;
        }
        const std::size_t row = kv_offset + static_cast<std::size_t>(keys[h]) * HeadDim + quad * 2;
#pragma unroll
        for (int j = 0; j < d_tiles; ++j) {
            *reinterpret_cast<__nv_bfloat162*>(d_dk + row + j * 8) =
                __floats2bfloat162_rn(dk_acc[j][2 * h] * scale, dk_acc[j][2 * h + 1] * scale);
            *reinterpret_cast<__nv_bfloat162*>(d_dv + row + j * 8) =
                __floats2bfloat162_rn(dv_acc[j][2 * h], dv_acc[j][2 * h + 1]);
        }
    }
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

//! What this step needs of the GPU and the build: bf16 `mma.sync`, `ldmatrix` and `cp.async`, compute capability 8.0
//! or higher (the 16-byte atomics from 9.0 on).
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

}  // namespace stepwise::attention_backward::mask_only_on_cut_tiles
