//! @file 08_merge_launched_early.cuh
//! @brief Decode attention step 8 (beyond the sources): the merge kernel is launched while the split kernel's last
//!        blocks still run (programmatic dependent launch), and checks the pages before it waits for their results.
//!
//! Step 7 launches its two kernels one after the other in the stream: the merge kernel's blocks start only once the
//! split kernel has ended, and each then checks its sequence's pages, reading the table, before it reads a partial
//! result. On a cache of a few thousand tokens both launches, that gap and those reads are much of the call. Here
//! every block of the split kernel lets the next grid start (`griddepcontrol.launch_dependents`, compute capability
//! 9.0), the merge kernel is launched with programmatic stream serialization, and its blocks, resident as soon as
//! the split kernel's last blocks are, check the pages and then wait for the split kernel's writes
//! (`griddepcontrol.wait`). On older GPUs the attribute is not set and the launches run as step 7's.
//! Causal among new tokens, a NaN in the value of a key hidden from a row by that mask reaches the row anyway when
//! the key shares a tile with keys the row sees (P multiplies V a tile at a time, and 0 times NaN is NaN).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace stepwise::decode_attention::merge_launched_early {

using bf16 = __nv_bfloat16;

constexpr int block_warps = 4;           //!< warps of a block, each every block_warps-th tile of the split
constexpr int block_threads = block_warps * 32;
constexpr int tile_rows = 16;            //!< rows of the mma tile: a block's rows, the rest of the tile zero
constexpr int tile_keys = 16;            //!< keys of a tile: two 8-key tiles of S, one 16-deep k-step of P V
constexpr int stages = 3;                //!< tiles of K and V a warp holds in shared memory: one used, two in flight
constexpr int chunk_values = 8;          //!< bf16 values of 16 bytes: a `cp.async`, a row of an `ldmatrix` matrix
constexpr int swizzle_rows = 8;          //!< rows whose 16-byte chunks are permuted so that ldmatrix hits 8 banks
constexpr int min_split_keys = 256;      //!< no split holds fewer keys than this, unless the cache is shorter
constexpr int merge_threads = 128;       //!< a block of the merge kernel: a row, its head_dim columns
constexpr float log2e = 1.44269504088896340736f;

//! @brief The sizes of a decoding step: per sequence, q_len new tokens of `heads` query heads, grouped over
//!        `kv_heads` K/V heads of `head_dim` values.
struct Shape {
    int batch, q_len, heads, kv_heads, head_dim;
};

//! @brief A paged K/V cache: K and V pools [num_pages, page_size, kv_heads, head_dim] bf16, a page table [batch,
//!        max_pages] of pool pages, and each sequence's length (tokens cached, the new ones included) [batch].
struct Cache {
    const bf16* d_k;
    const bf16* d_v;
    const int* d_page_table;
    const int* d_lengths;
    int num_pages, max_pages, page_size;
};

//! @brief Whether sequence `b`'s length is within its pages and every page it reaches is in the pool, checked by
//!        all the block's threads at once (every thread calls it; it synchronizes the block).
__device__ __forceinline__ bool sequence_valid(const Cache& c, int b)
{
    const int length = c.d_lengths[b];
    if (length < 0 || static_cast<std::int64_t>(length) > static_cast<std::int64_t>(c.max_pages) * c.page_size) {
        return __syncthreads_or(1) == 0;  // every thread takes this branch: the barrier is reached by all
    }
    const int pages = (length + c.page_size - 1) / c.page_size;
    int outside = 0;
    for (int page = static_cast<int>(threadIdx.x); page < pages; page += static_cast<int>(blockDim.x)) {
        const int pool_page = c.d_page_table[static_cast<std::size_t>(b) * c.max_pages + page];
        outside |= pool_page < 0 || pool_page >= c.num_pages;
    }
    return __syncthreads_or(outside) == 0;
}

//! @brief Lets the grid launched after this one with programmatic stream serialization start its blocks, once every
//!        block of this grid has called it or ended (compute capability 9.0; nothing on older GPUs).
__device__ __forceinline__ void allow_next_grid()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

//! @brief Waits until the grid before this one has ended and its writes are visible (compute capability 9.0; on
//!        older GPUs the launch itself waited for it).
__device__ __forceinline__ void wait_for_previous_grid()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

//! @brief The keys query `i` of a sequence of `length` tokens sees: positions 0 to length - q_len + i (none below 0).
__device__ __forceinline__ int visible_keys(int length, int q_len, int i)
{
    return min(max(length - q_len + i + 1, 0), length);
}

//! @brief What a split leaves of a row for the merge: the maximum of its scores (base 2; -inf without keys, NaN
//!        where a score was not finite), the sum of exp2(score - max), and the unnormalized output, in the workspace.
struct Partials {
    float* d_max;  //!< [rows][splits]
    float* d_sum;  //!< [rows][splits]
    float* d_o;    //!< [rows][splits][head_dim]
    int splits, split_keys;
};

//! @brief The shared memory of a block at `head_dim`: the Q tile, then each warp's ring of K and V tiles (reused for
//!        the warps' results at the end).
constexpr std::size_t shared_bytes(int head_dim)
{
    return (static_cast<std::size_t>(tile_rows) + std::size_t{2} * block_warps * stages * tile_keys) * head_dim *
           sizeof(bf16);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
//! @brief The shared-memory address of `p`, as `ldmatrix` and `cp.async` take it.
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

//! @brief Copies 16 bytes from global to shared memory without waiting (`cp.async`, L2 only); `valid` false: writes
//!        16 zero bytes and reads nothing (`d_global` must still be a valid address).
__device__ __forceinline__ void copy_async(void* d_shared, const void* d_global, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address(d_shared)), "l"(d_global),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

//! @brief Closes the group of the thread's copies issued since the last one.
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

//! @brief Waits until at most `Pending` of the thread's groups of copies are still in flight (the newest ones).
template <int Pending>
__device__ __forceinline__ void wait_copies()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
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

//! @brief Where 16-byte chunk `chunk` of row `row` of a shared tile of `HeadDim` columns lies: the chunks of each row
//!        permuted by the row's index modulo 8, so that the 8 rows of an ldmatrix matrix fall in 8 different banks.
template <int HeadDim>
__device__ __forceinline__ int swizzled(int row, int chunk)
{
    return row * HeadDim + ((chunk ^ (row % swizzle_rows)) * chunk_values);
}

//! @brief One block over keys [split * split_keys, (split + 1) * split_keys) of one K/V head of one sequence, for
//!        the block's rows (up to 16 of the group's query heads times new tokens). Warp w takes the split's tiles w,
//!        w + block_warps, ...; lane l holds, as the mma accumulators lay them out, rows g = l / 4 and g + 8 of the
//!        tile and, in each 8-column tile of S and O, columns 2 (l % 4) and 2 (l % 4) + 1. blockIdx.x: ((b *
//!        kv_heads + kv_head) * passes + pass) * splits + split.
template <int HeadDim>
static __global__ void __launch_bounds__(block_threads)
    split_kernel(const bf16* __restrict__ d_q, Cache c, Shape s, float scale, Partials p, int passes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    allow_next_grid();  // the merge's blocks may take the SMs this grid leaves free from now on
    constexpr int chunks = HeadDim / chunk_values;  // 16-byte chunks of a row of q, K or V
    constexpr int k_steps = HeadDim / 16;           // 16-deep steps of S = Q K^T
    constexpr int o_tiles = HeadDim / 8;            // 8-column tiles of O
    extern __shared__ __align__(16) unsigned char shared[];
    bf16* const q_tile = reinterpret_cast<bf16*>(shared);
    const int group = s.heads / s.kv_heads;
    const int split = static_cast<int>(blockIdx.x % p.splits);
    const int pass = static_cast<int>(blockIdx.x / p.splits % passes);
    const int kv_head = static_cast<int>(blockIdx.x / p.splits / passes % s.kv_heads);
    const int b = static_cast<int>(blockIdx.x / p.splits / passes / s.kv_heads);
    const int first = pass * tile_rows;
    const int rows = min(tile_rows, s.q_len * group - first);
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const auto row_of = [&](int r) {  // the index of the block's row r in q, o and the LSE
        const int i = (first + r) / group, h = kv_head * group + (first + r) % group;
        return (static_cast<std::int64_t>(b) * s.q_len + i) * s.heads + h;
    };
    for (int e = static_cast<int>(threadIdx.x); e < tile_rows * HeadDim; e += block_threads) {
        const int r = e / HeadDim, col = e % HeadDim;
        q_tile[swizzled<HeadDim>(r, col / chunk_values) + col % chunk_values] =
            r < rows ? d_q[row_of(r) * s.head_dim + col] : __float2bfloat16_rn(0.0f);
    }
    // A length outside its pages reads nothing here; the merge makes the sequence's rows NaN.
    const int raw_length = c.d_lengths[b];
    const bool length_ok = raw_length >= 0 && static_cast<std::int64_t>(raw_length) <=
                                                  static_cast<std::int64_t>(c.max_pages) * c.page_size;
    const int length = length_ok ? raw_length : 0;
    const auto keys_of = [&](int r) {  // the keys row r sees: those of its token, none for the tile's empty rows
        return r < rows ? visible_keys(length, s.q_len, (first + r) / group) : 0;
    };
    const int key_begin = split * p.split_keys;
    const int key_end = min(keys_of(rows - 1), key_begin + p.split_keys);  // the block's last row sees the most
    const int tiles = max(key_end - key_begin, 0) / tile_keys + ((key_end - key_begin) % tile_keys > 0 ? 1 : 0);
    __syncthreads();
    std::uint32_t q_frag[k_steps][4];  // A operand of S = Q K^T, for every 16-deep step
#pragma unroll
    for (int kk = 0; kk < k_steps; ++kk) {
        load_matrices(q_frag[kk], q_tile + swizzled<HeadDim>((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
    }

    bf16* const ring = q_tile + tile_rows * HeadDim + warp * stages * 2 * tile_keys * HeadDim;  // K tile, V tile
    const bf16* const no_read = d_q;  // the address a zero-filling copy names (it reads nothing)
    // A lane copies one 16-byte chunk of keys lane / chunks, + 32 / chunks, ... of a tile (of K, and of V).
    constexpr int keys_a_copy = 32 / chunks;
    const int chunk = lane % chunks, first_key = lane / chunks;
    const std::size_t key_stride = static_cast<std::size_t>(s.kv_heads) * s.head_dim;  // from a token to the next
    const std::size_t head_offset = static_cast<std::size_t>(kv_head) * s.head_dim + chunk * chunk_values;
    const int* const table = c.d_page_table + static_cast<std::size_t>(b) * c.max_pages;
    // Where pages hold whole tiles (a multiple of 16 tokens), a tile lies in one page: one lookup and one division
    // a tile; otherwise each key finds its own page.
    const bool whole_tiles = c.page_size % tile_keys == 0;
    const auto load_tile = [&](int t, int stage) {  // tile t of the split into the warp's stage, zero past the split
        bf16* const k_tile = ring + stage * 2 * tile_keys * HeadDim;
        bf16* const v_tile = k_tile + tile_keys * HeadDim;
        const int j0 = key_begin + t * tile_keys;  // < key_end
        const int page_of_tile = j0 / c.page_size;
        const int tile_page = table[page_of_tile];
        const bool tile_page_valid = tile_page >= 0 && tile_page < c.num_pages;
        const std::size_t tile_at = (static_cast<std::size_t>(tile_page) * c.page_size + (j0 - page_of_tile * c.page_size)) * key_stride + head_offset;
#pragma unroll
        for (int copy = 0; copy < tile_keys / keys_a_copy; ++copy) {
            const int key = first_key + copy * keys_a_copy, j = j0 + key;
            bool valid = j < key_end;
            std::size_t at = 0;
            if (whole_tiles) {
                valid = valid && tile_page_valid;
                at = tile_at + key * key_stride;
            } else if (valid) {
                const int pool_page = table[j / c.page_size];
                valid = pool_page >= 0 && pool_page < c.num_pages;
                at = (static_cast<std::size_t>(pool_page) * c.page_size + j % c.page_size) * key_stride + head_offset;
            }
            copy_async(k_tile + swizzled<HeadDim>(key, chunk), valid ? c.d_k + at : no_read, valid);
            copy_async(v_tile + swizzled<HeadDim>(key, chunk), valid ? c.d_v + at : no_read, valid);
        }
    };

    const int g = lane / 4, pair = 2 * (lane % 4);  // the lane's rows g, g + 8 and first column of each 8-wide tile
    const int limit[2] = {min(keys_of(g), key_end), min(keys_of(g + 8), key_end)};  // keys each of its rows sees
    const float score_scale = scale * log2e;  // scores in base 2: exp2f, not expf
    float run_max[2] = {-INFINITY, -INFINITY}, run_sum[2] = {0.0f, 0.0f};
    float o[o_tiles][4] = {};
    unsigned bad = 0;  // bit h: the lane saw a score of its row g + 8 h that was not finite
#pragma unroll
    for (int ahead = 0; ahead < stages - 1; ++ahead) {  // the first tiles in flight (a group each, empty or not)
        const int t = warp + ahead * block_warps;
        if (t < tiles) {
            load_tile(t, ahead);
        }
        commit_copies();
    }
    for (int t = warp, u = 0; t < tiles; t += block_warps, ++u) {  // warp-uniform
        const int next = t + (stages - 1) * block_warps;
        if (next < tiles) {
            load_tile(next, (u + stages - 1) % stages);  // into the stage the previous iteration used
        }
        commit_copies();
        wait_copies<stages - 1>();  // tile t's group is complete
        __syncwarp();
        const bf16* const k_tile = ring + (u % stages) * 2 * tile_keys * HeadDim;
        const bf16* const v_tile = k_tile + tile_keys * HeadDim;

        float score[2][4] = {};  // S for keys 0-7 and 8-15 of the tile
#pragma unroll
        for (int kk = 0; kk < k_steps; ++kk) {
            std::uint32_t k_frag[4];  // B operands: keys 0-7 (columns 16 kk to + 15), then keys 8-15
            load_matrices(k_frag, k_tile + swizzled<HeadDim>((lane & 7) + (lane >> 4) * 8, 2 * kk + ((lane >> 3) & 1)));
            mma(score[0], q_frag[kk], k_frag[0], k_frag[1]);
            mma(score[1], q_frag[kk], k_frag[2], k_frag[3]);
        }
        const int key0 = key_begin + t * tile_keys + pair;
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int h = x / 2, j = key0 + n * 8 + x % 2;
                float v = score[n][x] * score_scale;
                if (j < limit[h]) {
                    bad |= isfinite(v) ? 0u : 1u << h;
                } else {
                    v = -INFINITY;  // past the split, past what the row sees, or a row the tile does not hold
                }
                score[n][x] = v;
                tile_max[h] = fmaxf(tile_max[h], v);
            }
        }
        float rescale[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
            const float max = fmaxf(run_max[h], tile_max[h]);
            rescale[h] = max == -INFINITY ? 1.0f : exp2f(run_max[h] - max);  // exp2f(-inf) = 0 at a row's first key
            run_max[h] = max;
            run_sum[h] *= rescale[h];
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int h = x / 2;
                score[n][x] = run_max[h] == -INFINITY ? 0.0f : exp2f(score[n][x] - run_max[h]);
                run_sum[h] += score[n][x];
            }
        }
#pragma unroll
        for (int d = 0; d < o_tiles; ++d) {
            o[d][0] *= rescale[0];
            o[d][1] *= rescale[0];
            o[d][2] *= rescale[1];
            o[d][3] *= rescale[1];
        }
        // P, rounded to bf16, is the A operand of O += P V as S's accumulators lay it out: keys 0-7, then 8-15.
        const std::uint32_t p_frag[4] = {pack(score[0][0], score[0][1]), pack(score[0][2], score[0][3]),
                                         pack(score[1][0], score[1][1]), pack(score[1][2], score[1][3])};
#pragma unroll
        for (int d = 0; d < o_tiles; d += 2) {
            std::uint32_t v_frag[4];  // B operands: columns 8 d to + 7 (keys 0-7, then 8-15), then 8 (d + 1) to + 7
            load_matrices_transposed(v_frag, v_tile + swizzled<HeadDim>((lane & 7) + ((lane >> 3) & 1) * 8, d + (lane >> 4)));
            mma(o[d], p_frag, v_frag[0], v_frag[1]);
            mma(o[d + 1], p_frag, v_frag[2], v_frag[3]);
        }
        __syncwarp();  // every lane is done with the stage before the next iteration copies into it
    }
    wait_copies<0>();
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // a row's sum over the four lanes that hold its columns
        run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], 1);
        run_sum[h] += __shfl_xor_sync(0xffffffffu, run_sum[h], 2);
    }
    bad = __reduce_or_sync(0xffffffffu, bad << (g % 8) * 2);  // bits 2 g and 2 g + 1: rows g and g + 8
    __syncthreads();  // every warp is done with its ring: it now holds the warps' results
    float* const warp_o = reinterpret_cast<float*>(ring - warp * stages * 2 * tile_keys * HeadDim);  // [warp][row][col]
    float* const warp_max = warp_o + block_warps * tile_rows * HeadDim;                                // [warp][row]
    float* const warp_sum = warp_max + block_warps * tile_rows;                                        // [warp][row]
    unsigned* const warp_bad = reinterpret_cast<unsigned*>(warp_sum + block_warps * tile_rows);        // [warp]
#pragma unroll
    for (int d = 0; d < o_tiles; ++d) {
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            warp_o[(warp * tile_rows + g + x / 2 * 8) * HeadDim + d * 8 + pair + x % 2] = o[d][x];
        }
    }
    if (lane % 4 == 0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            warp_max[warp * tile_rows + g + 8 * h] = run_max[h];
            warp_sum[warp * tile_rows + g + 8 * h] = run_sum[h];
        }
    }
    if (lane == 0) {
        warp_bad[warp] = bad;
    }
    __syncthreads();
    unsigned bad_pairs = 0;
    for (int w = 0; w < block_warps; ++w) {
        bad_pairs |= warp_bad[w];
    }
    for (int e = static_cast<int>(threadIdx.x); e < rows * HeadDim; e += block_threads) {
        const int r = e / HeadDim, col = e % HeadDim;
        float max = -INFINITY;
        for (int w = 0; w < block_warps; ++w) {
            max = fmaxf(max, warp_max[w * tile_rows + r]);
        }
        float sum = 0.0f, out = 0.0f;
        for (int w = 0; w < block_warps; ++w) {
            const float warp_row_max = warp_max[w * tile_rows + r];
            if (warp_row_max != -INFINITY) {  // a warp without keys of the row adds 0
                const float factor = exp2f(warp_row_max - max);
                sum += warp_sum[w * tile_rows + r] * factor;
                out += warp_o[(w * tile_rows + r) * HeadDim + col] * factor;
            }
        }
        const bool row_bad = ((bad_pairs >> (2 * (r % 8) + r / 8)) & 1u) != 0;
        const std::int64_t at = row_of(r) * p.splits + split;
        p.d_o[at * s.head_dim + col] = out;
        if (col == 0) {
            p.d_max[at] = row_bad ? NAN : max;
            p.d_sum[at] = sum;
        }
    }
#endif
}

//! @brief Merges the splits of each row (blockIdx.x): o = sum_s o_s 2^(max_s - max) / sum_s sum_s 2^(max_s - max),
//!        the LSE from the same; NaN for a row of an invalid sequence or one a split saw a non-finite score of, o = 0
//!        and LSE -inf for a row that sees no key.
//!        Launched as a dependent of split_kernel(): it checks the sequence's pages before it waits for that grid.
static __global__ void __launch_bounds__(merge_threads)
    merge_kernel(Cache c, Shape s, Partials p, bf16* __restrict__ d_o, float* __restrict__ d_lse)
{
    const std::int64_t row = blockIdx.x;
    const int b = static_cast<int>(row / (static_cast<std::int64_t>(s.q_len) * s.heads));
    const bool invalid = !sequence_valid(c, b);  // the inputs only: while the split kernel may still run
    wait_for_previous_grid();                     // its partial results, from here on
    const float* max_of = p.d_max + row * p.splits;
    const float* sum_of = p.d_sum + row * p.splits;
    float max = -INFINITY;
    bool bad = invalid;
    for (int split = 0; split < p.splits; ++split) {
        bad = bad || isnan(max_of[split]);
        max = fmaxf(max, max_of[split]);
    }
    float sum = 0.0f;
    for (int split = 0; split < p.splits; ++split) {
        sum += max_of[split] == -INFINITY ? 0.0f : sum_of[split] * exp2f(max_of[split] - max);
    }
    for (int col = static_cast<int>(threadIdx.x); col < s.head_dim; col += merge_threads) {
        float o = 0.0f;
        for (int split = 0; split < p.splits; ++split) {
            if (max_of[split] != -INFINITY) {  // a split without keys of the row adds 0
                o += p.d_o[(row * p.splits + split) * s.head_dim + col] * exp2f(max_of[split] - max);
            }
        }
        d_o[row * s.head_dim + col] = __float2bfloat16_rn(bad ? NAN : max == -INFINITY ? 0.0f : o / sum);
    }
    if (threadIdx.x == 0) {
        d_lse[row] = bad ? NAN : max == -INFINITY ? -INFINITY : max / log2e + logf(sum);
    }
}

//! @brief The splits of each sequence's keys: as many as fill the `resident` blocks the GPU holds at once, rounded
//!        down (a wave a little short of full, not a second wave nearly empty), at least one, no split shorter than
//!        `min_split_keys` (the pages' capacity, max_pages * page_size, stands for the longest sequence: the lengths
//!        are on the device).
inline int splits_for(std::int64_t group_blocks, std::int64_t max_keys, std::int64_t resident)
{
    const std::int64_t most = std::max<std::int64_t>(1, (max_keys + min_split_keys - 1) / min_split_keys);
    return static_cast<int>(std::clamp<std::int64_t>(resident / group_blocks, 1, most));
}

//! What this step needs of the GPU and the build: bf16 `mma.sync`, `ldmatrix` and `cp.async`, compute capability 8.0
//! or higher.
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

//! @brief Attention of each new query token over its sequence's paged cache: o = softmax(scale q K^T) V over the
//!        keys the query sees (positions 0 to length - q_len + i: the new tokens are the cache's last, causal among
//!        themselves), and each row's log-sum-exp. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets
//!        `temp_storage_bytes`.
//! @param[in]     d_temp_storage     device memory for each split's partial result of each row (fp32), or
//!                                   nullptr to ask its size
//! @param[in,out] temp_storage_bytes its size
//! @param[in]     d_q                q [batch, q_len, heads, head_dim], bf16
//! @param[in]     c                  the paged cache: K and V pools, page table, lengths (all on the device)
//! @param[out]    d_o                o, as q
//! @param[out]    d_lse              log(sum_j exp(scale q k_j)) of each row, fp32 [batch, q_len, heads]; -inf for a
//!                                   row that sees no key (its o is 0)
//! @param[in]     s                  batch, q_len, heads, kv_heads, head_dim
//! @param[in]     scale              multiplies the scores (1 / sqrt(head_dim) in the usual attention)
//! @param[in]     stream             stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; batch, q_len, heads, kv_heads, page_size, max_pages >= 1,
//!      num_pages >= 0; batch * q_len * heads < 2^31; max_pages * page_size < 2^31; q, o, the pools and the table not
//!      null (the pools may be null with no pages), q and o 2-byte aligned, the pools 16-byte aligned, the LSE, table
//!      and lengths 4-byte aligned, and `d_temp_storage` 4-byte aligned; compute capability 8.0 or higher with 100
//!      KiB of shared memory a block. A sequence whose length is negative, longer than its pages hold, or reaches a
//!      page outside the pool gets NaN rows (nothing outside the pool is read). A NaN in K, or an infinite score,
//!      makes its row NaN; a NaN in V the columns it is in, in the rows that see it, and, causal among new tokens,
//!      in the rows of its sequence's other new tokens whose keys share its tile of 16 (see the file's header).
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small (its size depends on the
//!         device's SMs: ask it on the device that runs the call), `cudaErrorNotSupported` on an older GPU (or code
//!         built only for one), else the first error of the device query or of a launch
inline cudaError_t decode_attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                    const Cache& c, bf16* d_o, float* d_lse, const Shape& s, float scale,
                                    cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (s.batch < 1 || s.q_len < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || c.page_size < 1 || c.max_pages < 1 || c.num_pages < 0 ||
        d_q == nullptr || d_o == nullptr || d_lse == nullptr || c.d_page_table == nullptr ||
        c.d_lengths == nullptr || (c.num_pages > 0 && (c.d_k == nullptr || c.d_v == nullptr)) ||
        !aligned(d_q, 2) || !aligned(d_o, 2) || !aligned(c.d_k, 16) || !aligned(c.d_v, 16) || !aligned(d_lse, 4) ||
        !aligned(c.d_page_table, 4) || !aligned(c.d_lengths, 4)) {
        return cudaErrorInvalidValue;
    }
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.q_len * s.heads;
    const std::int64_t max_keys = static_cast<std::int64_t>(c.max_pages) * c.page_size;
    if (rows > 0x7fffffff || max_keys > 0x7fffffff) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    const auto kernel = s.head_dim == 64 ? split_kernel<64> : split_kernel<128>;
    const int bytes = static_cast<int>(shared_bytes(s.head_dim));
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        e != cudaSuccess) {
        return e;  // a GPU with less shared memory a block
    }
    int device = 0, sms = 0, blocks_per_sm = 0, major = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e =
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, block_threads, bytes);
        e != cudaSuccess) {
        return e;
    }
    const std::int64_t group_total = static_cast<std::int64_t>(s.q_len) * (s.heads / s.kv_heads);
    const int passes = static_cast<int>((group_total + tile_rows - 1) / tile_rows);
    const std::int64_t group_blocks = static_cast<std::int64_t>(s.batch) * s.kv_heads * passes;
    // Splits beyond 2^31 blocks in all are not taken: a block has a row at least, and rows < 2^31.
    const int splits = static_cast<int>(std::min<std::int64_t>(
        splits_for(group_blocks, max_keys, static_cast<std::int64_t>(blocks_per_sm) * sms),
                                                               0x7fffffff / group_blocks));
    const std::int64_t partials = rows * splits;
    const std::size_t needed = static_cast<std::size_t>(partials) * (2 + s.head_dim) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed || !aligned(d_temp_storage, 4)) {
        return cudaErrorInvalidValue;
    }
    float* const d_partials = static_cast<float*>(d_temp_storage);
    // A split of whole tiles: a warp's tiles start on a multiple of tile_keys.
    const std::int64_t split_keys = ((max_keys + splits - 1) / splits + tile_keys - 1) / tile_keys * tile_keys;
    const Partials p{d_partials, d_partials + partials, d_partials + 2 * partials, splits,
                     static_cast<int>(std::min<std::int64_t>(split_keys, 0x7fffffff))};
    const unsigned grid = static_cast<unsigned>(group_blocks * splits);
    kernel<<<grid, block_threads, bytes, stream>>>(d_q, c, s, scale, p, passes);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    // The merge, launched while the split kernel runs where the GPU can (9.0 and newer): its blocks start once every
    // split block has allowed it, and wait for the split kernel's writes themselves.
    cudaLaunchAttribute early{};
    early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    early.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t merge{};
    merge.gridDim = dim3(static_cast<unsigned>(rows));
    merge.blockDim = dim3(merge_threads);
    merge.stream = stream;
    merge.attrs = &early;
    merge.numAttrs = major >= 9 ? 1 : 0;
    return cudaLaunchKernelEx(&merge, merge_kernel, c, s, p, d_o, d_lse);
}

}  // namespace stepwise::decode_attention::merge_launched_early
