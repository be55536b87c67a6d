//! @file 13_partials_summed_over_a_cluster.cuh
//! @brief Normalization backward step 13 (beyond the sources): the blocks of the row pass of rows that fit a block run
//!        in clusters, and add their column sums through distributed shared memory, so that a cluster, not each
//!        block, writes a row of partial sums for the last kernel to add.
//!
//! Up to step 12, every block of that row pass (as many as the GPU holds at once: 264 blocks of 512 threads at
//! 8192 x 4096 bf16 on an H200) wrote its own row of dgamma's and dbeta's partial sums, and the last kernel read them
//! all back: 8.6 MB written and read again there, beside the 201 MB of x, dy and dx, by a kernel of 32-column blocks
//! and 4-byte loads that Nsight Compute had at a third of DRAM's bandwidth.
//! Here the host launches that row pass in clusters of up to 8 blocks, where as many of its blocks stay resident as
//! without them; at the end each block leaves its sums in its shared memory (the thread's own, where they were in its
//! registers), and after a cluster barrier the block of rank r adds the sums of every chunk c with c % size = r over
//! the cluster's blocks, in the order of their ranks, and writes them to its cluster's row. The partial sums shrink by
//! the cluster's size, and keep the same bits on every run; on GPUs without clusters the row pass runs as in step 12. One parameter's sums of fp32 rows also take no
//! more shared memory than their chunks now (step 12 rounded them up to whole groups of 32 chunks, which only bf16's
//! layout needs).
#pragma once

#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <type_traits>

namespace stepwise::normalization_backward::partials_summed_over_a_cluster {

constexpr int warp_threads = 32;
constexpr int max_row_threads = 1024;        //!< the largest block of a row
constexpr int short_values_per_thread = 4;   //!< registers of a row's thread for rows of up to 1024 values
constexpr int middle_values_per_thread = 8;  //!< ... up to 4096, in blocks of up to 512 threads
constexpr int long_values_per_thread = 16;   //!< ... up to 16384
constexpr int register_row_values = max_row_threads * long_values_per_thread;  //!< longest row read once
constexpr int streamed_row_threads = 1024;   //!< threads of the block of a longer row, read twice
constexpr int tile_columns = 32;             //!< columns of a tile of the longer rows: a warp's
constexpr int tile_warps = 8;                //!< warps of a tile's block, each taking every 8th row of the tile
constexpr int partial_rows = 256;            //!< rows of a tile: one partial sum per column of each
constexpr int add_columns = 32;              //!< columns of a block that adds partial sums: a warp's
constexpr int add_warps = 32;                //!< warps of that block, each taking every 32nd partial sum
constexpr int chunk_bytes = 16;              //!< one access of x, dy or dx: 4 fp32 or 8 bf16 values
constexpr int float_chunk = chunk_bytes / static_cast<int>(sizeof(float));  //!< floats of gamma or of sums an access
constexpr int early_chunks = 2;              //!< the most chunks of x (and of dy) a thread holds for two rows
constexpr int cluster_blocks = 8;            //!< blocks of a cluster: the size every GPU with clusters takes
constexpr int cluster_row_values = cluster_blocks * register_row_values;  //!< longest row a cluster holds
constexpr int short_rows_threads = 256;      //!< threads of a block of short rows, a row to a group of lanes
constexpr int short_rows_min_blocks = 4;     //!< blocks of short rows an SM holds at least: 64 registers a thread
constexpr int max_sum_cluster_blocks = 8;    //!< blocks of the row pass's clusters that add their column sums

//! @brief Values of T in one chunk.
template <typename T>
constexpr int chunk_values = chunk_bytes / static_cast<int>(sizeof(T));

//! @brief float4 of one parameter's column sums a chunk of T has: 2 in bf16, 1 in fp32.
template <typename T>
constexpr int chunk_sum_vectors = chunk_values<T> / float_chunk;

//! @brief The entry (float4) of chunk `c`'s first column sums in shared memory: the chunks in groups of warp_threads,
//!        each group's first float4 side by side, then its second ones (bf16), so that a warp's accesses are
//!        contiguous; a chunk's next float4 is warp_threads entries further.
template <typename T>
__host__ __device__ constexpr int chunk_sums_entry(int c)
{
    return c + c / warp_threads * warp_threads * (chunk_sum_vectors<T> - 1);
}

//! @brief Entries (float4) of one parameter's column sums of `chunks` chunks: up to the last chunk's last float4.
template <typename T>
__host__ __device__ constexpr int chunk_sums_entries(int chunks)
{
    return chunks < 1 ? 0 : chunk_sums_entry<T>(chunks - 1) + (chunk_sum_vectors<T> - 1) * warp_threads + 1;
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

//! @brief (x - center) rstd, 0 where x is the center and rstd infinite (epsilon 0 and a row of equal values: the
//!        forward gave beta there, and its gradient has no xhat term).
__device__ __forceinline__ float normalized(float x, float center, float rstd)
{
    const float difference = x - center;
    return difference == 0.0f && isinf(rstd) ? 0.0f : difference * rstd;
}

//! @brief normalized() where the row's rstd may be infinite (`InfiniteRstd`); else (x - center) rstd, the same value
//!        with no test.
template <bool InfiniteRstd>
__device__ __forceinline__ float row_normalized(float x, float center, float rstd)
{
    if constexpr (InfiniteRstd) {
        return normalized(x, center, rstd);
    } else {
        return (x - center) * rstd;
    }
}

//! @brief `sum_g` and `sum_g_xhat` added over each group of `lanes` lanes of the warp (a power of two up to
//!        warp_threads, groups starting at multiples of it) by a tree of shuffles: an xor of an offset below `lanes`
//!        stays in the group, and its every lane ends with the same bits.
__device__ __forceinline__ void lane_group_sums(float& sum_g, float& sum_g_xhat, int lanes)
{
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        sum_g += __shfl_xor_sync(0xffffffffu, sum_g, offset);
        sum_g_xhat += __shfl_xor_sync(0xffffffffu, sum_g_xhat, offset);
    }
}

//! @brief The block's sums of `sum_g` and `sum_g_xhat`, in every thread: each warp's by shuffles, then every warp adds
//!        the warps' pairs with the same tree of shuffles (lane w holding warp w's pair), the same bits in every warp
//!        and on every run. Calls alternate between two slots (`slot`, a row's turn % 2), so one barrier a call.
__device__ __forceinline__ void block_sums(float& sum_g, float& sum_g_xhat, int slot)
{
    __shared__ float2 warp_sums[2][max_row_threads / warp_threads];
    lane_group_sums(sum_g, sum_g_xhat, warp_threads);
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, lane = static_cast<int>(threadIdx.x) % warp_threads;
    const int warps = static_cast<int>(blockDim.x) / warp_threads;
    if (lane == 0) {
        warp_sums[slot][warp] = make_float2(sum_g, sum_g_xhat);
    }
    __syncthreads();
    float2 pair = lane < warps ? warp_sums[slot][lane] : make_float2(0.0f, 0.0f);
    for (int offset = 1; offset < warps; offset *= 2) {  // lanes below `warps` end with the same sums
        pair.x += __shfl_xor_sync(0xffffffffu, pair.x, offset);
        pair.y += __shfl_xor_sync(0xffffffffu, pair.y, offset);
    }
    sum_g = __shfl_sync(0xffffffffu, pair.x, 0);
    sum_g_xhat = __shfl_sync(0xffffffffu, pair.y, 0);
}

//! @brief x and dy of row `row` at this thread's columns into `x` and `dy`; zeros past the row's end and past the last
//!        row (every value set, so that none has to live on from an earlier row).
template <typename T, int values_per_thread>
__device__ __forceinline__ void load_row(const T* d_x, const T* d_dy, std::int64_t row, int num_rows, int num_cols,
                                         T (&x)[values_per_thread], T (&dy)[values_per_thread])
{
    const std::size_t first = static_cast<std::size_t>(row) * num_cols;
#pragma unroll
    for (int k = 0; k < values_per_thread; ++k) {
        const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        const bool inside = row < num_rows && j < num_cols;
        x[k] = inside ? d_x[first + j] : T{};
        dy[k] = inside ? d_dy[first + j] : T{};
    }
}

//! @brief Rows `blockIdx.x`, `blockIdx.x + gridDim.x`, ...: as step 4 (dx from registers, the parameters' terms of the
//!        thread's columns added into the block's sums in shared memory, one row of `d_partials` per block), with the
//!        block's next row loaded before the current one is reduced where two rows fit the registers
//!        (`values_per_thread` up to middle_values_per_thread). `d_mean` nullptr: RMSNorm, no dbeta.
//!        At least one block of 1024 threads an SM: without it ptxas holds the kernel of 4 values a thread to 32
//!        registers, for two such blocks, and spills.
template <typename T, int values_per_thread>
__global__ void __launch_bounds__(max_row_threads, 1)
    row_pass_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
                    T* d_dx, float* d_partials, int num_rows, int num_cols)
{
    constexpr bool next_row_early = values_per_thread <= middle_values_per_thread;  // two rows fit the registers
    extern __shared__ float column_sums[];  // dgamma's terms of the block's rows, then dbeta's (LayerNorm)
    const bool with_beta = d_mean != nullptr;
    float* dgamma_sums = column_sums;
    float* dbeta_sums = column_sums + num_cols;
#pragma unroll
    for (int k = 0; k < values_per_thread; ++k) {
        const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        if (j < num_cols) {
            dgamma_sums[j] = 0.0f;
            if (with_beta) {
                dbeta_sums[j] = 0.0f;
            }
        }
    }
    T x[values_per_thread], dy[values_per_thread];            // the row being reduced
    T next_x[values_per_thread], next_dy[values_per_thread];  // the block's next row, on its way meanwhile
    // Rows of 16 values a thread keep g and xhat across the reduction, as step 4 does; the others compute them again.
    constexpr int kept_values = next_row_early ? 1 : values_per_thread;
    float kept_g[kept_values], kept_xhat[kept_values];
    if constexpr (next_row_early) {
        load_row(d_x, d_dy, blockIdx.x, num_rows, num_cols, x, dy);
    }
    // 64-bit: the last rows of a matrix of some 2^31 rows plus gridDim.x would pass INT_MAX
    int turn = 0;
    for (std::int64_t row = blockIdx.x; row < num_rows; row += gridDim.x, ++turn) {
        if constexpr (next_row_early) {  // the next row's loads before this row's barriers
            load_row(d_x, d_dy, row + gridDim.x, num_rows, num_cols, next_x, next_dy);
        }
        const std::size_t first = static_cast<std::size_t>(row) * num_cols;
        const float center = with_beta ? d_mean[row] : 0.0f, rstd = d_rstd[row];
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
        for (int k = 0; k < values_per_thread; ++k) {
            const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
            if (j < num_cols) {
                // Rows of 16 values a thread load here, value by value, as step 4 does.
                const float dy_value = to_float(next_row_early ? dy[k] : d_dy[first + j]), g = dy_value * d_gamma[j];
                const float xhat = normalized(to_float(next_row_early ? x[k] : d_x[first + j]), center, rstd);
                if constexpr (!next_row_early) {
                    kept_g[k] = g;
                    kept_xhat[k] = xhat;
                }
                sum_g += g;
                sum_g_xhat += g * xhat;
                dgamma_sums[j] += dy_value * xhat;  // this thread's column alone: no other thread adds to it
                if (with_beta) {
                    dbeta_sums[j] += dy_value;
                }
            }
        }
        block_sums(sum_g, sum_g_xhat, turn % 2);
        const float mean_g = with_beta ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
#pragma unroll
        for (int k = 0; k < values_per_thread; ++k) {
            const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
            if (j < num_cols) {
                float g = 0.0f, xhat = 0.0f;
                if constexpr (next_row_early) {  // as above (the same bits), not registers kept across the reduction
                    g = to_float(dy[k]) * d_gamma[j];
                    xhat = normalized(to_float(x[k]), center, rstd);
                } else {
                    g = kept_g[k];
                    xhat = kept_xhat[k];
                }
                d_dx[first + j] = from_float<T>(rstd * (g - mean_g - xhat * mean_g_xhat));
            }
        }
        if constexpr (next_row_early) {
#pragma unroll
            for (int k = 0; k < values_per_thread; ++k) {
                x[k] = next_x[k];
                dy[k] = next_dy[k];
            }
        }
    }
#pragma unroll
    for (int k = 0; k < values_per_thread; ++k) {
        const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        if (j < num_cols) {
            d_partials[static_cast<std::size_t>(blockIdx.x) * num_cols + j] = dgamma_sums[j];
            if (with_beta) {
                d_partials[static_cast<std::size_t>(gridDim.x + blockIdx.x) * num_cols + j] = dbeta_sums[j];
            }
        }
    }
}

//! @brief dx of row `blockIdx.x`, longer than registers hold: the row read for its sums, then again for dx.
template <typename T>
__global__ void __launch_bounds__(streamed_row_threads)
    dx_streamed_row_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean,
                           const float* d_rstd, T* d_dx, int num_cols)
{
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float center = d_mean != nullptr ? d_mean[blockIdx.x] : 0.0f, rstd = d_rstd[blockIdx.x];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += streamed_row_threads) {
        const float g = to_float(d_dy[first + j]) * d_gamma[j];
        sum_g += g;
        sum_g_xhat += g * normalized(to_float(d_x[first + j]), center, rstd);
    }
    block_sums(sum_g, sum_g_xhat, 0);
    const float mean_g = d_mean != nullptr ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
    for (int j = threadIdx.x; j < num_cols; j += streamed_row_threads) {
        const float g = to_float(d_dy[first + j]) * d_gamma[j];
        const float xhat = normalized(to_float(d_x[first + j]), center, rstd);
        d_dx[first + j] = from_float<T>(rstd * (g - mean_g - xhat * mean_g_xhat));
    }
}

//! @brief Value `i` of a chunk of T, as a float (a bf16 widened exactly: its 16 bits are a float's high half).
template <typename T>
__device__ __forceinline__ float chunk_value(const uint4& chunk, int i)
{
    const int w = std::is_same_v<T, float> ? i : i / 2;
    const unsigned word = w == 0 ? chunk.x : w == 1 ? chunk.y : w == 2 ? chunk.z : chunk.w;
    if constexpr (std::is_same_v<T, float>) {
        return __uint_as_float(word);
    } else {
        return __uint_as_float(i % 2 == 0 ? word << 16 : word & 0xffff0000u);
    }
}

//! @brief A chunk of T from its values, each rounded as from_float() rounds it.
template <typename T>
__device__ __forceinline__ uint4 to_chunk(const float (&values)[chunk_values<T>])
{
    unsigned words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        if constexpr (std::is_same_v<T, float>) {
            words[w] = __float_as_uint(values[w]);
        } else {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(values[2 * w], values[2 * w + 1]);
            words[w] = __bfloat16_as_ushort(pair.x) | static_cast<unsigned>(__bfloat16_as_ushort(pair.y)) << 16;
        }
    }
    return make_uint4(words[0], words[1], words[2], words[3]);
}

//! @brief The chunk of `d_values` that starts at element `at` (16-byte aligned).
template <typename T>
__device__ __forceinline__ uint4 load_chunk(const T* d_values, std::size_t at)
{
    return *reinterpret_cast<const uint4*>(d_values + at);
}

//! @brief `count` floats from `d_values + at` (16-byte aligned), four an access.
template <int count>
__device__ __forceinline__ void load_floats(const float* d_values, std::size_t at, float (&values)[count])
{
#pragma unroll
    for (int f = 0; f < count; f += float_chunk) {
        const float4 four = *reinterpret_cast<const float4*>(d_values + at + f);
        values[f] = four.x;
        values[f + 1] = four.y;
        values[f + 2] = four.z;
        values[f + 3] = four.w;
    }
}

//! @brief x and dy of row `row` at this thread's chunks (chunk k at columns (threadIdx.x + k blockDim.x) times the
//!        chunk's values); zeros past the row's end and past the last row.
template <typename T, int chunks>
__device__ __forceinline__ void load_row_chunks(const T* d_x, const T* d_dy, std::int64_t row, int num_rows,
                                                int num_cols, uint4 (&x)[chunks], uint4 (&dy)[chunks])
{
    const std::size_t first = static_cast<std::size_t>(row) * num_cols;
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
        const int j = (static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x)) * chunk_values<T>;
        const bool inside = row < num_rows && j < num_cols;
        x[k] = inside ? load_chunk(d_x, first + j) : make_uint4(0, 0, 0, 0);
        dy[k] = inside ? load_chunk(d_dy, first + j) : make_uint4(0, 0, 0, 0);
    }
}

//! @brief One chunk's terms of a row (x and dy at columns `col` to `col` + its values): g = dy gamma and g xhat added
//!        into the thread's two sums, dy xhat and dy into the chunk's column sums (`dgamma_sums` and `dbeta_sums`
//!        point at its first four, its next four are `stride` float4 further; no other thread adds to them).
template <typename T, bool InfiniteRstd, int stride>
__device__ __forceinline__ void add_chunk_terms_as(const uint4& x, const uint4& dy, const float* d_gamma, int col,
                                                   float center, float rstd, bool with_beta, float4* dgamma_sums,
                                                   float4* dbeta_sums, float& sum_g, float& sum_g_xhat)
{
    constexpr int width = chunk_values<T>;
    float gamma[width], dgamma_terms[width], dbeta_terms[width];
    load_floats(d_gamma, col, gamma);
#pragma unroll
    for (int i = 0; i < width; ++i) {
        const float dy_value = chunk_value<T>(dy, i), g = dy_value * gamma[i];
        const float xhat = row_normalized<InfiniteRstd>(chunk_value<T>(x, i), center, rstd);
        sum_g += g;
        sum_g_xhat += g * xhat;
        dgamma_terms[i] = dy_value * xhat;
        dbeta_terms[i] = dy_value;
    }
#pragma unroll
    for (int f = 0; f < width; f += float_chunk) {
        float4& dgamma_sum = dgamma_sums[f / float_chunk * stride];
        dgamma_sum = make_float4(dgamma_sum.x + dgamma_terms[f], dgamma_sum.y + dgamma_terms[f + 1],
                                 dgamma_sum.z + dgamma_terms[f + 2], dgamma_sum.w + dgamma_terms[f + 3]);
        if (with_beta) {
            float4& dbeta_sum = dbeta_sums[f / float_chunk * stride];
            dbeta_sum = make_float4(dbeta_sum.x + dbeta_terms[f], dbeta_sum.y + dbeta_terms[f + 1],
                                    dbeta_sum.z + dbeta_terms[f + 2], dbeta_sum.w + dbeta_terms[f + 3]);
        }
    }
}

//! @brief add_chunk_terms_as() of the version `infinite_rstd` (the row's isinf(rstd)) picks.
template <typename T, int stride>
__device__ __forceinline__ void add_chunk_terms(const uint4& x, const uint4& dy, const float* d_gamma, int col,
                                                float center, float rstd, bool infinite_rstd, bool with_beta,
                                                float4* dgamma_sums, float4* dbeta_sums, float& sum_g,
                                                float& sum_g_xhat)
{
    if (infinite_rstd) {
        add_chunk_terms_as<T, true, stride>(x, dy, d_gamma, col, center, rstd, with_beta, dgamma_sums, dbeta_sums, sum_g,
                                    sum_g_xhat);
    } else {
        add_chunk_terms_as<T, false, stride>(x, dy, d_gamma, col, center, rstd, with_beta, dgamma_sums, dbeta_sums, sum_g,
                                     sum_g_xhat);
    }
}

//! @brief One chunk of dx, from the chunk's x and dy (g and xhat as add_chunk_terms() computes them, the same bits) and
//!        the row's means, stored at `d_dx_chunk`.
template <typename T, bool InfiniteRstd>
__device__ __forceinline__ void store_dx_chunk_as(const uint4& x, const uint4& dy, const float* d_gamma, int col,
                                                  float center, float rstd, float mean_g, float mean_g_xhat,
                                                  T* d_dx_chunk)
{
    constexpr int width = chunk_values<T>;
    float gamma[width], dx[width];
    load_floats(d_gamma, col, gamma);
#pragma unroll
    for (int i = 0; i < width; ++i) {
        const float g = chunk_value<T>(dy, i) * gamma[i];
        const float xhat = row_normalized<InfiniteRstd>(chunk_value<T>(x, i), center, rstd);
        dx[i] = rstd * (g - mean_g - xhat * mean_g_xhat);
    }
    *reinterpret_cast<uint4*>(d_dx_chunk) = to_chunk<T>(dx);
}

//! @brief store_dx_chunk_as() of the version `infinite_rstd` picks.
template <typename T>
__device__ __forceinline__ void store_dx_chunk(const uint4& x, const uint4& dy, const float* d_gamma, int col,
                                               float center, float rstd, bool infinite_rstd, float mean_g,
                                               float mean_g_xhat, T* d_dx_chunk)
{
    if (infinite_rstd) {
        store_dx_chunk_as<T, true>(x, dy, d_gamma, col, center, rstd, mean_g, mean_g_xhat, d_dx_chunk);
    } else {
        store_dx_chunk_as<T, false>(x, dy, d_gamma, col, center, rstd, mean_g, mean_g_xhat, d_dx_chunk);
    }
}

//! @brief The sums of g = dy gamma and g xhat of one chunk of a row, added into the thread's two (no column sums).
template <typename T, bool InfiniteRstd>
__device__ __forceinline__ void add_chunk_sums_as(const uint4& x, const uint4& dy, const float* d_gamma, int col,
                                                  float center, float rstd, float& sum_g, float& sum_g_xhat)
{
    constexpr int width = chunk_values<T>;
    float gamma[width];
    load_floats(d_gamma, col, gamma);
#pragma unroll
    for (int i = 0; i < width; ++i) {
        const float g = chunk_value<T>(dy, i) * gamma[i];
        sum_g += g;
        sum_g_xhat += g * row_normalized<InfiniteRstd>(chunk_value<T>(x, i), center, rstd);
    }
}

//! @brief A chunk's column sums (its next four `stride` float4 after its first) into the partial sums at
//!        `d_dgamma_partial` (and `d_dbeta_partial`), value by value: the workspace is only 4-byte aligned.
template <typename T, int stride>
__device__ __forceinline__ void store_chunk_partials(const float4* dgamma_sums, const float4* dbeta_sums,
                                                     bool with_beta, float* d_dgamma_partial, float* d_dbeta_partial)
{
#pragma unroll
    for (int f = 0; f < chunk_values<T>; f += float_chunk) {
        const float4 dgamma = dgamma_sums[f / float_chunk * stride];
        d_dgamma_partial[f] = dgamma.x;
        d_dgamma_partial[f + 1] = dgamma.y;
        d_dgamma_partial[f + 2] = dgamma.z;
        d_dgamma_partial[f + 3] = dgamma.w;
        if (with_beta) {
            const float4 dbeta = dbeta_sums[f / float_chunk * stride];
            d_dbeta_partial[f] = dbeta.x;
            d_dbeta_partial[f + 1] = dbeta.y;
            d_dbeta_partial[f + 2] = dbeta.z;
            d_dbeta_partial[f + 3] = dbeta.w;
        }
    }
}

//! @brief Whether the row pass of `chunks` chunks a thread of T keeps its columns' sums in registers: with one chunk
//!        of bf16, whose 8 values cost two 16-byte reads and two writes of shared memory a parameter and row. fp32's
//!        kernel of one chunk (4 values) keeps them in shared memory: in registers it took 54 where it has 48, and a
//!        block of 256 threads fewer an SM (32768 x 1024 fp32 was 6 to 7 % slower on the H200).
template <typename T, int chunks>
constexpr bool sums_in_registers = chunks == 1 && sizeof(T) == 2;

//! @brief Step 5's row pass with 16-byte accesses: `chunks` chunks of x and dy a thread, gamma read four floats at a
//!        time, the thread's column sums four floats an access in shared memory, or in its registers where
//!        sums_in_registers (no dynamic shared memory then). Every row starts on a 16-byte boundary (`num_cols` a
//!        multiple of the chunk's values; x, dy, dx and gamma 16-byte aligned). The next row is loaded before the current one is
//!        reduced where two rows fit the registers (`chunks` up to early_chunks); else the row is loaded at its turn.
//!        Launched in clusters (sm_90 on), the blocks of a cluster add their column sums in shared memory (with
//!        sums_in_registers, the dynamic shared memory holds them for that) and write one row of `d_partials` a
//!        cluster: row `blockIdx.x / cluster size` of dgamma's and of dbeta's, `gridDim.x / cluster size` rows each.
//!        `d_mean` nullptr: RMSNorm.
template <typename T, int chunks>
__global__ void __launch_bounds__(max_row_threads, 1)
    wide_row_pass_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
                         T* d_dx, float* d_partials, int num_rows, int num_cols)
{
    constexpr int width = chunk_values<T>;
    constexpr bool next_row_early = chunks <= early_chunks;
    extern __shared__ float4 chunk_sums[];  // the row's dgamma sums as chunk_sums_entry() lays them out, then dbeta's
    float4 own_sums[2][width / float_chunk] = {};  // the thread's columns' dgamma and dbeta, where sums_in_registers
    // float4 from a chunk's first four columns' sums to its next four.
    constexpr int stride = sums_in_registers<T, chunks> ? 1 : warp_threads;
    const bool with_beta = d_mean != nullptr;
    const auto first_column = [](int k) {
        return (static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x)) * width;
    };
    // The sums of the chunk at columns `j` on: the thread's own, or the block's in shared memory.
    const auto dgamma_sums_at = [&](int j) -> float4* {
        if constexpr (sums_in_registers<T, chunks>) {
            return own_sums[0];
        } else {
            return chunk_sums + chunk_sums_entry<T>(j / width);
        }
    };
    const auto dbeta_sums_at = [&](int j) -> float4* {
        if constexpr (sums_in_registers<T, chunks>) {
            return own_sums[1];
        } else {
            return chunk_sums + chunk_sums_entries<T>(num_cols / width) + chunk_sums_entry<T>(j / width);
        }
    };
    if constexpr (!sums_in_registers<T, chunks>) {
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = first_column(k);
            if (j < num_cols) {
#pragma unroll
                for (int f = 0; f < width; f += float_chunk) {
                    dgamma_sums_at(j)[f / float_chunk * stride] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    if (with_beta) {
                        dbeta_sums_at(j)[f / float_chunk * stride] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    }
                }
            }
        }
    }
    uint4 x[chunks], dy[chunks], next_x[chunks], next_dy[chunks];
    if constexpr (next_row_early) {
        load_row_chunks(d_x, d_dy, blockIdx.x, num_rows, num_cols, x, dy);
    }
    int turn = 0;
    for (std::int64_t row = blockIdx.x; row < num_rows; row += gridDim.x, ++turn) {
        if constexpr (next_row_early) {  // the next row's loads before this row's barriers
            load_row_chunks(d_x, d_dy, row + gridDim.x, num_rows, num_cols, next_x, next_dy);
        } else {
            load_row_chunks(d_x, d_dy, row, num_rows, num_cols, x, dy);
        }
        const std::size_t first = static_cast<std::size_t>(row) * num_cols;
        const float center = with_beta ? d_mean[row] : 0.0f, rstd = d_rstd[row];
        const bool infinite_rstd = isinf(rstd);  // once for the row: a row of equal values with epsilon 0
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = first_column(k);
            if (j < num_cols) {
                add_chunk_terms<T, stride>(x[k], dy[k], d_gamma, j, center, rstd, infinite_rstd, with_beta,
                                           dgamma_sums_at(j), dbeta_sums_at(j), sum_g, sum_g_xhat);
            }
        }
        block_sums(sum_g, sum_g_xhat, turn % 2);
        const float mean_g = with_beta ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = first_column(k);
            if (j < num_cols) {
                store_dx_chunk<T>(x[k], dy[k], d_gamma, j, center, rstd, infinite_rstd, mean_g, mean_g_xhat,
                                  d_dx + first + j);
            }
        }
        if constexpr (next_row_early) {
#pragma unroll
            for (int k = 0; k < chunks; ++k) {
                x[k] = next_x[k];
                dy[k] = next_dy[k];
            }
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int cluster_size = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
#else
    const int cluster_size = 1, rank = 0;
#endif
    // The cluster's partial sums: one row of dgamma's and one of dbeta's.
    const int parts = static_cast<int>(gridDim.x) / cluster_size, part = static_cast<int>(blockIdx.x) / cluster_size;
    float* d_dgamma_partials = d_partials + static_cast<std::size_t>(part) * num_cols;
    float* d_dbeta_partials = d_partials + static_cast<std::size_t>(parts + part) * num_cols;
    if (cluster_size == 1) {
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = first_column(k);
            if (j < num_cols) {
                store_chunk_partials<T, stride>(dgamma_sums_at(j), dbeta_sums_at(j), with_beta,
                                                d_dgamma_partials + j, d_dbeta_partials + j);
            }
        }
        return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Every block's sums in its shared memory, as chunk_sums_entry() lays them out in the shared path.
    constexpr int shared_stride = warp_threads;  // float4 from a chunk's first four columns' sums to its next four
    float4* dbeta_shared = chunk_sums + chunk_sums_entries<T>(num_cols / width);
    if constexpr (sums_in_registers<T, chunks>) {
        const int j = first_column(0);
        if (j < num_cols) {
#pragma unroll
            for (int v = 0; v < chunk_sum_vectors<T>; ++v) {
                chunk_sums[chunk_sums_entry<T>(j / width) + v * shared_stride] = own_sums[0][v];
                if (with_beta) {
                    dbeta_shared[chunk_sums_entry<T>(j / width) + v * shared_stride] = own_sums[1][v];
                }
            }
        }
    }
    cluster.sync();  // every block's sums are in its shared memory
    // Chunk c's sums are added by block c % cluster_size, over the blocks in the order of their ranks.
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
        const int j = first_column(k);
        if (j < num_cols && j / width % cluster_size == rank) {
            const int entry = chunk_sums_entry<T>(j / width);
            float4 dgamma[chunk_sum_vectors<T>] = {}, dbeta[chunk_sum_vectors<T>] = {};
#pragma unroll 1
            for (int b = 0; b < cluster_size; ++b) {
                const float4* sums_of_block = cluster.map_shared_rank(chunk_sums, b);
#pragma unroll
                for (int v = 0; v < chunk_sum_vectors<T>; ++v) {
                    const float4 g = sums_of_block[entry + v * shared_stride];
                    dgamma[v] = make_float4(dgamma[v].x + g.x, dgamma[v].y + g.y, dgamma[v].z + g.z, dgamma[v].w + g.w);
                    if (with_beta) {
                        const float4 d = sums_of_block[entry + chunk_sums_entries<T>(num_cols / width) + v * shared_stride];
                        dbeta[v] = make_float4(dbeta[v].x + d.x, dbeta[v].y + d.y, dbeta[v].z + d.z, dbeta[v].w + d.w);
                    }
                }
            }
            store_chunk_partials<T, 1>(dgamma, dbeta, with_beta, d_dgamma_partials + j, d_dbeta_partials + j);
        }
    }
    cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

//! @brief Lanes of the group that takes a row of `num_cols` values on 16-byte boundaries: its chunks rounded up to a
//!        power of two (a group of 32 lanes for 32 chunks, the most a short row has).
template <typename T>
__host__ __device__ constexpr int group_lanes(int num_cols)
{
    int lanes = 1;
    while (lanes * chunk_values<T> < num_cols) {
        lanes *= 2;
    }
    return lanes;
}

//! @brief Rows of up to warp_threads chunks on 16-byte boundaries, a row to a group of group_lanes() lanes, a chunk a
//!        lane: group g of block b takes rows b * groups + g, then every gridDim.x * groups rows after, the next
//!        row loaded before the current one is reduced; a row's two sums by shuffles within its group; each lane's
//!        column sums in registers until the block's rows are done, then added over its groups in shared memory into
//!        the block's row of `d_partials`. The same parameters as wide_row_pass_kernel(); `d_mean` nullptr: RMSNorm.
template <typename T>
__global__ void __launch_bounds__(short_rows_threads, short_rows_min_blocks)
    short_rows_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
                      T* d_dx, float* d_partials, int num_rows, int num_cols)
{
    constexpr int width = chunk_values<T>;
    extern __shared__ float4 group_sums[];  // each group's column sums, four columns an entry: dgamma's, then dbeta's
    const bool with_beta = d_mean != nullptr;
    const int lanes = group_lanes<T>(num_cols), groups = short_rows_threads / lanes;
    const int group = static_cast<int>(threadIdx.x) / lanes, lane = static_cast<int>(threadIdx.x) % lanes;
    const int j = lane * width;  // the lane's columns, the same in every row
    const bool inside = j < num_cols;
    const std::int64_t row_step = std::int64_t{gridDim.x} * groups;
    // The warp's rows of a turn: its first group's and those after it; the warp loops while that one is a row, all its
    // lanes together, so that the shuffles have every lane.
    const std::int64_t first_row = std::int64_t{blockIdx.x} * groups + group;
    const std::int64_t warp_first_row =
        std::int64_t{blockIdx.x} * groups + static_cast<int>(threadIdx.x) / warp_threads * (warp_threads / lanes);
    float4 dgamma_sums[width / float_chunk], dbeta_sums[width / float_chunk];
#pragma unroll
    for (int f = 0; f < width / float_chunk; ++f) {
        dgamma_sums[f] = dbeta_sums[f] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    const auto load = [&](std::int64_t row, uint4& x, uint4& dy) {
        const bool present = inside && row < num_rows;
        const std::size_t at = static_cast<std::size_t>(row) * num_cols + j;
        x = present ? load_chunk(d_x, at) : make_uint4(0, 0, 0, 0);
        dy = present ? load_chunk(d_dy, at) : make_uint4(0, 0, 0, 0);
    };
    uint4 x, dy, next_x, next_dy;
    load(first_row, x, dy);
    for (std::int64_t turn = 0; warp_first_row + turn * row_step < num_rows; ++turn) {
        const std::int64_t row = first_row + turn * row_step;
        load(row + row_step, next_x, next_dy);  // the next row's loads before this row's shuffles
        const bool present = inside && row < num_rows;
        const float center = with_beta && row < num_rows ? d_mean[row] : 0.0f;
        const float rstd = row < num_rows ? d_rstd[row] : 0.0f;
        const bool infinite_rstd = isinf(rstd);
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
        if (present) {
            add_chunk_terms<T, 1>(x, dy, d_gamma, j, center, rstd, infinite_rstd, with_beta, dgamma_sums, dbeta_sums,
                               sum_g, sum_g_xhat);
        }
        lane_group_sums(sum_g, sum_g_xhat, lanes);
        if (present) {
            const float mean_g = with_beta ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
            store_dx_chunk<T>(x, dy, d_gamma, j, center, rstd, infinite_rstd, mean_g, mean_g_xhat,
                              d_dx + static_cast<std::size_t>(row) * num_cols + j);
        }
        x = next_x;
        dy = next_dy;
    }
    // The block's partial sums: the groups' column sums added in the order of the groups.
    const int entries = num_cols / float_chunk;  // float4 entries of one group's sums of one parameter
    if (inside) {
#pragma unroll
        for (int f = 0; f < width / float_chunk; ++f) {
            group_sums[group * entries + j / float_chunk + f] = dgamma_sums[f];
            if (with_beta) {
                group_sums[(groups + group) * entries + j / float_chunk + f] = dbeta_sums[f];
            }
        }
    }
    __syncthreads();
    const float* column_sums = reinterpret_cast<const float*>(group_sums);
    for (int col = static_cast<int>(threadIdx.x); col < num_cols; col += short_rows_threads) {
        float dgamma = 0.0f, dbeta = 0.0f;
        for (int g = 0; g < groups; ++g) {
            dgamma += column_sums[static_cast<std::size_t>(g) * num_cols + col];
            if (with_beta) {
                dbeta += column_sums[static_cast<std::size_t>(groups + g) * num_cols + col];
            }
        }
        d_partials[static_cast<std::size_t>(blockIdx.x) * num_cols + col] = dgamma;
        if (with_beta) {
            d_partials[static_cast<std::size_t>(gridDim.x + blockIdx.x) * num_cols + col] = dbeta;
        }
    }
}

//! @brief dx of row `blockIdx.x`, longer than registers hold, read twice as by dx_streamed_row_kernel(), a chunk of x
//!        and of dy an access. Every row starts on a 16-byte boundary, as for wide_row_pass_kernel().
template <typename T>
__global__ void __launch_bounds__(streamed_row_threads)
    wide_dx_streamed_row_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean,
                                const float* d_rstd, T* d_dx, int num_cols)
{
    constexpr int width = chunk_values<T>;
    const int num_chunks = num_cols / width;  // counted in chunks: a column index near INT_MAX plus a stride would wrap
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float center = d_mean != nullptr ? d_mean[blockIdx.x] : 0.0f, rstd = d_rstd[blockIdx.x];
    const bool infinite_rstd = isinf(rstd);  // once for the row
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int q = threadIdx.x; q < num_chunks; q += streamed_row_threads) {
        const int j = q * width;
        const uint4 x = load_chunk(d_x, first + j), dy = load_chunk(d_dy, first + j);
        if (infinite_rstd) {
            add_chunk_sums_as<T, true>(x, dy, d_gamma, j, center, rstd, sum_g, sum_g_xhat);
        } else {
            add_chunk_sums_as<T, false>(x, dy, d_gamma, j, center, rstd, sum_g, sum_g_xhat);
        }
    }
    block_sums(sum_g, sum_g_xhat, 0);
    const float mean_g = d_mean != nullptr ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
    for (int q = threadIdx.x; q < num_chunks; q += streamed_row_threads) {
        const int j = q * width;
        const uint4 x = load_chunk(d_x, first + j), dy = load_chunk(d_dy, first + j);
        store_dx_chunk<T>(x, dy, d_gamma, j, center, rstd, infinite_rstd, mean_g, mean_g_xhat, d_dx + first + j);
    }
}

//! @brief Rows split over the blocks of a cluster, each block a slice of `blockDim.x * chunks` chunks of every row;
//!        the grid's clusters take rows in turn (persistent). A block works on its slice as wide_row_pass_kernel() on
//!        a row, and the row's sums are the cluster's: each block's pair in its shared memory (one slot for even
//!        turns, one for odd ones), one cluster barrier, then every warp adds the pairs of the cluster's blocks in their
//!        order. The block's partial column sums of its slice go to row `blockIdx.x / cluster_blocks` (its cluster) of
//!        `d_partials`. Every row starts on a 16-byte boundary; the grid is a whole number of clusters of
//!        cluster_blocks. `d_mean` nullptr: RMSNorm.
template <typename T, int chunks>
__global__ void __launch_bounds__(max_row_threads, 1)
    cluster_row_pass_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean,
                            const float* d_rstd, T* d_dx, float* d_partials, int num_rows, int num_cols)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int width = chunk_values<T>;
    constexpr bool next_row_early = chunks <= early_chunks;
    extern __shared__ float4 chunk_sums[];  // the slice's dgamma sums as chunk_sums_entry() lays them out, then dbeta's
    __shared__ float2 slice_sums[2];        // the block's (sum of g, sum of g xhat) of its slice, even and odd turns
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int rank = static_cast<int>(cluster.block_rank());
    const int slice = static_cast<int>(blockDim.x) * chunks * width;
    const int slice_first = rank * slice;  // the slice's first column (below num_cols + slice: an int)
    const int slice_cols = max(0, min(slice, num_cols - slice_first));
    const bool with_beta = d_mean != nullptr;
    constexpr int stride = warp_threads;  // float4 from a chunk's first four columns' sums to its next four
    float4* dgamma_sums = chunk_sums;
    float4* dbeta_sums = chunk_sums + chunk_sums_entries<T>(slice / width);  // a whole number of groups: `slice`'s
    const auto local_column = [](int k) {
        return (static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x)) * width;
    };
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
        const int entry = chunk_sums_entry<T>(local_column(k) / width);
#pragma unroll
        for (int f = 0; f < width; f += float_chunk) {
            dgamma_sums[entry + f / float_chunk * stride] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (with_beta) {
                dbeta_sums[entry + f / float_chunk * stride] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
    }
    // x and dy of the slice of `row` at this thread's chunks; zeros past the slice and past the last row.
    const auto load_slice = [&](std::int64_t row, uint4(&x)[chunks], uint4(&dy)[chunks]) {
        const std::size_t first = static_cast<std::size_t>(row) * num_cols + slice_first;
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = local_column(k);
            const bool inside = row < num_rows && j < slice_cols;
            x[k] = inside ? load_chunk(d_x, first + j) : make_uint4(0, 0, 0, 0);
            dy[k] = inside ? load_chunk(d_dy, first + j) : make_uint4(0, 0, 0, 0);
        }
    };
    const std::int64_t clusters = gridDim.x / cluster_blocks, first_row = blockIdx.x / cluster_blocks;
    uint4 x[chunks], dy[chunks], next_x[chunks], next_dy[chunks];
    if constexpr (next_row_early) {
        load_slice(first_row, x, dy);
    }
    const int lane = static_cast<int>(threadIdx.x) % warp_threads;
    int turn = 0;
    for (std::int64_t row = first_row; row < num_rows; row += clusters, ++turn) {
        if constexpr (next_row_early) {  // the next row's loads before this row's barriers
            load_slice(row + clusters, next_x, next_dy);
        } else {
            load_slice(row, x, dy);
        }
        const std::size_t first = static_cast<std::size_t>(row) * num_cols + slice_first;
        const float center = with_beta ? d_mean[row] : 0.0f, rstd = d_rstd[row];
        const bool infinite_rstd = isinf(rstd);  // once for the row: a row of equal values with epsilon 0
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = local_column(k);
            if (j < slice_cols) {
                const int entry = chunk_sums_entry<T>(j / width);
                add_chunk_terms<T, stride>(x[k], dy[k], d_gamma, slice_first + j, center, rstd, infinite_rstd,
                                           with_beta, dgamma_sums + entry, dbeta_sums + entry, sum_g, sum_g_xhat);
            }
        }
        block_sums(sum_g, sum_g_xhat, turn % 2);
        const int slot = turn % 2;  // a slot is written again two turns later, after the barrier that follows its reads
        if (threadIdx.x == 0) {
            slice_sums[slot] = make_float2(sum_g, sum_g_xhat);
        }
        cluster.sync();  // every block's pair of this turn is in its shared memory
        // Lane b reads block b's pair; every lane adds them in the order of the blocks: the same bits in every block.
        const float2 pair = lane < cluster_blocks ? *cluster.map_shared_rank(&slice_sums[slot], lane)
                                                  : make_float2(0.0f, 0.0f);
        float row_g = 0.0f, row_g_xhat = 0.0f;
#pragma unroll
        for (int b = 0; b < cluster_blocks; ++b) {
            row_g += __shfl_sync(0xffffffffu, pair.x, b);
            row_g_xhat += __shfl_sync(0xffffffffu, pair.y, b);
        }
        const float mean_g = with_beta ? row_g / num_cols : 0.0f, mean_g_xhat = row_g_xhat / num_cols;
#pragma unroll
        for (int k = 0; k < chunks; ++k) {
            const int j = local_column(k);
            if (j < slice_cols) {
                store_dx_chunk<T>(x[k], dy[k], d_gamma, slice_first + j, center, rstd, infinite_rstd, mean_g,
                                  mean_g_xhat, d_dx + first + j);
            }
        }
        if constexpr (next_row_early) {
#pragma unroll
            for (int k = 0; k < chunks; ++k) {
                x[k] = next_x[k];
                dy[k] = next_dy[k];
            }
        }
    }
    // The cluster's partial sums of the block's slice: in its cluster's row of dgamma's and of dbeta's.
    float* d_dgamma_partials = d_partials + static_cast<std::size_t>(first_row) * num_cols + slice_first;
    float* d_dbeta_partials = d_partials + static_cast<std::size_t>(clusters + first_row) * num_cols + slice_first;
#pragma unroll
    for (int k = 0; k < chunks; ++k) {
        const int j = local_column(k);
        if (j < slice_cols) {
            const int entry = chunk_sums_entry<T>(j / width);
            store_chunk_partials<T, stride>(dgamma_sums + entry, dbeta_sums + entry, with_beta,
                                            d_dgamma_partials + j, d_dbeta_partials + j);
        }
    }
    cluster.sync();  // no block leaves while another may still read its slots
#endif
}

//! @brief The partial sums of dgamma (and, `with_beta`, dbeta) over tile `blockIdx.x` (the tiles row by row, each row
//!        of tiles `column_tiles` long): into `d_partials`, a `tiles` x `num_cols` matrix of dgamma's partial sums,
//!        one row per row of tiles, followed by one of dbeta's.
template <typename T>
__global__ void __launch_bounds__(tile_columns * tile_warps)
    partials_kernel(const T* d_x, const T* d_dy, const float* d_mean, const float* d_rstd, float* d_partials,
                    bool with_beta, int num_rows, int num_cols, int tiles, int column_tiles)
{
    __shared__ float sums[2][tile_warps][tile_columns];
    const int tile_row = static_cast<int>(blockIdx.x / column_tiles);
    const int tile_col = static_cast<int>(blockIdx.x % column_tiles);
    const int col = tile_col * tile_columns + static_cast<int>(threadIdx.x);
    const int first_row = tile_row * partial_rows;
    const int last_row = min(first_row + partial_rows, num_rows);
    float dgamma = 0.0f, dbeta = 0.0f;
    if (col < num_cols) {
        for (int row = first_row + static_cast<int>(threadIdx.y); row < last_row; row += tile_warps) {
            const std::size_t at = static_cast<std::size_t>(row) * num_cols + col;
            const float dy = to_float(d_dy[at]);
            dgamma += dy * normalized(to_float(d_x[at]), d_mean != nullptr ? d_mean[row] : 0.0f, d_rstd[row]);
            dbeta += dy;
        }
    }
    sums[0][threadIdx.y][threadIdx.x] = dgamma;
    sums[1][threadIdx.y][threadIdx.x] = dbeta;
    __syncthreads();
    if (threadIdx.y == 0 && col < num_cols) {
        for (int w = 1; w < tile_warps; ++w) {  // the warps in order: the same bits on every run
            dgamma += sums[0][w][threadIdx.x];
            dbeta += sums[1][w][threadIdx.x];
        }
        d_partials[static_cast<std::size_t>(tile_row) * num_cols + col] = dgamma;
        if (with_beta) {
            d_partials[static_cast<std::size_t>(tiles + tile_row) * num_cols + col] = dbeta;
        }
    }
}

//! @brief dgamma (and, `d_dbeta` not nullptr, dbeta) of the block's 32 columns: `parts` partial sums a column (rows
//!        of `d_partials`, dbeta's after dgamma's), warp w adding parts w, w + 32, ..., then the warps' sums added in
//!        their order: the same bits on every run.
__global__ void __launch_bounds__(add_columns * add_warps)
    add_partials_kernel(const float* d_partials, float* d_dgamma, float* d_dbeta, int parts, int num_cols)
{
    __shared__ float sums[2][add_warps][add_columns];
    const int col = static_cast<int>(blockIdx.x) * add_columns + static_cast<int>(threadIdx.x);
    float dgamma = 0.0f, dbeta = 0.0f;
    if (col < num_cols) {
        for (int p = static_cast<int>(threadIdx.y); p < parts; p += add_warps) {
            dgamma += d_partials[static_cast<std::size_t>(p) * num_cols + col];
            if (d_dbeta != nullptr) {
                dbeta += d_partials[static_cast<std::size_t>(parts + p) * num_cols + col];
            }
        }
    }
    sums[0][threadIdx.y][threadIdx.x] = dgamma;
    sums[1][threadIdx.y][threadIdx.x] = dbeta;
    __syncthreads();
    if (threadIdx.y == 0 && col < num_cols) {
        for (int w = 1; w < add_warps; ++w) {
            dgamma += sums[0][w][threadIdx.x];
            dbeta += sums[1][w][threadIdx.x];
        }
        d_dgamma[col] = dgamma;
        if (d_dbeta != nullptr) {
            d_dbeta[col] = dbeta;
        }
    }
}

//! @brief How many blocks of `kernel` (`threads` threads, `shared_bytes` of dynamic shared memory) the current device
//!        holds at once, and whether it takes that much shared memory at all (0 where not); asked once per device and
//!        configuration, so that a call costs no queries of the device.
template <typename Kernel>
cudaError_t resident_blocks(Kernel kernel, int threads, std::size_t shared_bytes, int& blocks)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
    int device = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status != cudaSuccess) {
        return status;
    }
    const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), threads, shared_bytes);
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find(key); found != known.end()) {
        blocks = found->second;
        return cudaSuccess;
    }
    int optin = 0, sms = 0, per_sm = 0;
    cudaFuncAttributes attributes{};
    if ((status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) != cudaSuccess ||
        (status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
        (status = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess) {
        return status;
    }
    // The most dynamic shared memory a block of the kernel may take beside its static arrays. The limit is set to that,
    // not to this launch's bytes: a later, smaller configuration must not lower it under the ones already counted here.
    const int most_dynamic = optin - static_cast<int>(attributes.sharedSizeBytes);
    if (shared_bytes <= static_cast<std::size_t>(most_dynamic)) {
        if ((status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most_dynamic)) !=
                cudaSuccess ||
            (status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes)) !=
                cudaSuccess) {
            return status;
        }
    }
    blocks = per_sm * sms;
    known.emplace(key, blocks);
    return cudaSuccess;
}

//! @brief The blocks of a cluster (max_sum_cluster_blocks, or half, or a quarter of it) in which the current device
//!        holds as many blocks of `kernel` at once as without clusters (`resident`, a multiple of it); 1 where no size
//!        does, or the device launches no clusters, or the kernel was not built for sm_90 or newer. Asked once per
//!        device and configuration.
template <typename Kernel>
cudaError_t sum_cluster_blocks(Kernel kernel, int threads, std::size_t shared_bytes, int resident, int& blocks)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
    int device = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status != cudaSuccess) {
        return status;
    }
    const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), threads, shared_bytes);
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find(key); found != known.end()) {
        blocks = found->second;
        return cudaSuccess;
    }
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    if ((status = cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device)) != cudaSuccess ||
        (status = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess) {
        return status;
    }
    blocks = 1;
    for (int size = max_sum_cluster_blocks; size > 1 && cluster_launch != 0 && attributes.binaryVersion >= 90;
         size /= 2) {
        if (resident % size != 0) {
            continue;
        }
        cudaLaunchConfig_t config = {};
        cudaLaunchAttribute attribute = {};
        config.gridDim = dim3(static_cast<unsigned>(resident));
        config.blockDim = dim3(static_cast<unsigned>(threads));
        config.dynamicSmemBytes = shared_bytes;
        attribute.id = cudaLaunchAttributeClusterDimension;
        attribute.val.clusterDim = {static_cast<unsigned>(size), 1, 1};
        config.attrs = &attribute;
        config.numAttrs = 1;
        int clusters = 0;
        if ((status = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config)) != cudaSuccess) {
            return status;
        }
        if (clusters * size >= resident) {
            blocks = size;
            break;
        }
    }
    known.emplace(key, blocks);
    return cudaSuccess;
}

//! @brief The launch of cluster_row_pass_kernel<T, chunks> in clusters of cluster_blocks blocks of `threads` threads,
//!        `clusters` clusters of them.
template <typename T, int chunks>
void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& attribute, int threads, int clusters,
                    cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(static_cast<unsigned>(clusters * cluster_blocks));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = static_cast<std::size_t>(threads) * chunks * chunk_values<T> * 2 * sizeof(float);
    config.stream = stream;
    attribute = {};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {static_cast<unsigned>(cluster_blocks), 1, 1};
    config.attrs = &attribute;
    config.numAttrs = 1;
}

//! @brief How many clusters of cluster_row_pass_kernel<T, chunks> (`threads` threads a block, shared memory for
//!        LayerNorm's two column sums) the current device holds at once: 0 where it launches no clusters or the kernel
//!        was not built for sm_90 or newer. Asked once per device and block size.
template <typename T, int chunks>
cudaError_t resident_clusters(int threads, int& clusters)
{
    static std::mutex mutex;
    static std::map<std::pair<int, int>, int> known;
    int device = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status != cudaSuccess) {
        return status;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find({device, threads}); found != known.end()) {
        clusters = found->second;
        return cudaSuccess;
    }
    const auto kernel = cluster_row_pass_kernel<T, chunks>;
    int cluster_launch = 0, optin = 0;
    cudaFuncAttributes attributes{};
    if ((status = cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device)) != cudaSuccess ||
        (status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) != cudaSuccess ||
        (status = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess) {
        return status;
    }
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attribute;
    cluster_config<T, chunks>(config, attribute, threads, 1, 0);
    // As in resident_blocks(): the limit is raised to the most the kernel may take, never lowered by a smaller block.
    const int most_dynamic = optin - static_cast<int>(attributes.sharedSizeBytes);
    clusters = 0;
    if (cluster_launch != 0 && attributes.binaryVersion >= 90 &&
        config.dynamicSmemBytes <= static_cast<std::size_t>(most_dynamic)) {
        if ((status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most_dynamic)) !=
                cudaSuccess ||
            (status = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config)) != cudaSuccess) {
            return status;
        }
    }
    known.emplace(std::make_pair(device, threads), clusters);
    return cudaSuccess;
}

//! @brief The launches; `d_mean` and `d_dbeta` nullptr: RMSNorm.
template <typename T>
cudaError_t backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                     const float* d_gamma, const float* d_mean, const float* d_rstd, T* d_dx, float* d_dgamma,
                     float* d_dbeta, int num_rows, int num_cols, cudaStream_t stream)
{
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (d_x == nullptr || d_dy == nullptr || d_gamma == nullptr || d_rstd == nullptr || d_dx == nullptr ||
        d_dgamma == nullptr || num_rows < 1 || num_cols < 1 || !aligned(d_x, sizeof(T)) || !aligned(d_dy, sizeof(T)) ||
        !aligned(d_dx, sizeof(T)) || !aligned(d_gamma, sizeof(float)) || !aligned(d_rstd, sizeof(float)) ||
        !aligned(d_dgamma, sizeof(float)) || (d_mean != nullptr && !aligned(d_mean, sizeof(float))) ||
        (d_dbeta != nullptr && !aligned(d_dbeta, sizeof(float))) ||
        (d_temp_storage != nullptr && !aligned(d_temp_storage, sizeof(float)))) {
        return cudaErrorInvalidValue;
    }
    const int sums = d_dbeta != nullptr ? 2 : 1;  // dgamma's partial sums, and dbeta's
    // Rows on 16-byte boundaries take the kernels of 16-byte accesses, at least one chunk a thread.
    constexpr int width = chunk_values<T>;
    const bool wide = num_cols % width == 0 && aligned(d_x, chunk_bytes) && aligned(d_dy, chunk_bytes) &&
                      aligned(d_dx, chunk_bytes) && aligned(d_gamma, chunk_bytes);
    // A row's block: whole warps, enough for the row at the fewest registers that hold it, and the kernel for them.
    const int values_per_thread = std::max(wide ? width : 1, num_cols <= 1024   ? short_values_per_thread
                                                             : num_cols <= 4096 ? middle_values_per_thread
                                                                                : long_values_per_thread);
    // Rows of up to a warp's chunks: a row to a group of lanes, several rows a warp.
    const bool short_rows = wide && num_cols <= warp_threads * width;
    const auto row_pass = short_rows ? short_rows_kernel<T>
                          : wide     ? (values_per_thread == width       ? wide_row_pass_kernel<T, 1>
                                    : values_per_thread == 2 * width ? wide_row_pass_kernel<T, 2>
                                                                     : wide_row_pass_kernel<T, long_values_per_thread / width>)
                          : values_per_thread == short_values_per_thread  ? row_pass_kernel<T, short_values_per_thread>
                          : values_per_thread == middle_values_per_thread ? row_pass_kernel<T, middle_values_per_thread>
                                                                          : row_pass_kernel<T, long_values_per_thread>;
    const int threads = short_rows ? short_rows_threads
                                   : ((num_cols + values_per_thread - 1) / values_per_thread + warp_threads - 1) /
                                         warp_threads * warp_threads;
    // The column sums in shared memory: the row's, or those of each group of lanes (the rows a block takes at once);
    // none where a thread has one chunk a row and keeps its columns' sums in registers, unless the blocks add them
    // over a cluster at the end.
    const int column_sum_rows = short_rows ? short_rows_threads / group_lanes<T>(num_cols) : 1;
    const bool wide_row_pass = wide && !short_rows;
    const bool sums_in_the_threads = wide_row_pass && values_per_thread == width && sums_in_registers<T, 1>;
    const std::size_t wide_sums_bytes =
        static_cast<std::size_t>(chunk_sums_entries<T>(num_cols / width)) * sums * sizeof(float4);
    std::size_t shared_bytes = sums_in_the_threads ? 0
                               : wide_row_pass     ? wide_sums_bytes
                                                   : static_cast<std::size_t>(column_sum_rows) * num_cols * sums * sizeof(float);
    int resident = 0, sum_cluster = 1;  // blocks of the row pass, and of a cluster of it that adds its sums
    if (num_cols <= register_row_values) {
        cudaError_t status = resident_blocks(row_pass, threads, shared_bytes, resident);
        if (status != cudaSuccess) {
            return status;
        }
        // Clusters where they cost the wide row pass no resident blocks, shared memory for the sums included.
        int resident_with_sums = resident;
        if (wide_row_pass && resident > 0 && sums_in_the_threads &&
            (status = resident_blocks(row_pass, threads, wide_sums_bytes, resident_with_sums)) != cudaSuccess) {
            return status;
        }
        if (wide_row_pass && resident > 0 && resident_with_sums == resident) {
            if ((status = sum_cluster_blocks(row_pass, threads, wide_sums_bytes, resident, sum_cluster)) !=
                cudaSuccess) {
                return status;
            }
            shared_bytes = sum_cluster > 1 ? wide_sums_bytes : shared_bytes;
        }
    }
    // Longer rows on 16-byte boundaries, up to what a cluster holds: a slice a block, 16 values a thread.
    constexpr int cluster_chunks = long_values_per_thread / width;
    const int cluster_threads = ((num_cols + cluster_blocks * long_values_per_thread - 1) /
                                     (cluster_blocks * long_values_per_thread) +
                                 warp_threads - 1) /
                                warp_threads * warp_threads;
    int clusters = 0;
    if (wide && num_cols > register_row_values && num_cols <= cluster_row_values) {
        const cudaError_t status = resident_clusters<T, cluster_chunks>(cluster_threads, clusters);
        if (status != cudaSuccess) {
            return status;
        }
    }
    const bool one_read = resident > 0;  // else the sums do not fit the GPU's shared memory, or the row its registers
    const bool clustered = clusters > 0;
    // The row pass's blocks: at most one a group of rows, a whole number of clusters (`resident` is one).
    const int row_blocks =
        one_read ? (std::min((num_rows + column_sum_rows - 1) / column_sum_rows, resident) + sum_cluster - 1) /
                       sum_cluster * sum_cluster
                 : 0;
    // The workspace: a row of partial sums for each block or cluster of the row pass, each cluster of the longer rows,
    // or each tile of the rows read twice.
    const int parts = one_read    ? row_blocks / sum_cluster
                      : clustered ? std::min(num_rows, clusters)
                                  : (num_rows + partial_rows - 1) / partial_rows;
    const int column_tiles = (num_cols + tile_columns - 1) / tile_columns;
    const std::int64_t tile_blocks = std::int64_t{parts} * column_tiles;
    if (!one_read && !clustered && tile_blocks > std::numeric_limits<int>::max()) {
        return cudaErrorInvalidValue;  // more tiles than a grid takes (a matrix of some 2^44 values)
    }
    const std::size_t needed = static_cast<std::size_t>(parts) * num_cols * sums * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    float* d_partials = static_cast<float*>(d_temp_storage);
    if (one_read && sum_cluster > 1) {
        cudaLaunchConfig_t config = {};
        cudaLaunchAttribute attribute = {};
        config.gridDim = dim3(static_cast<unsigned>(row_blocks));
        config.blockDim = dim3(static_cast<unsigned>(threads));
        config.dynamicSmemBytes = shared_bytes;
        config.stream = stream;
        attribute.id = cudaLaunchAttributeClusterDimension;
        attribute.val.clusterDim = {static_cast<unsigned>(sum_cluster), 1, 1};
        config.attrs = &attribute;
        config.numAttrs = 1;
        const cudaError_t status = cudaLaunchKernelEx(&config, row_pass, d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx,
                                                      d_partials, num_rows, num_cols);
        if (status != cudaSuccess) {
            return status;
        }
    } else if (one_read) {
        row_pass<<<row_blocks, threads, shared_bytes, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx, d_partials,
                                                                num_rows, num_cols);
    } else if (clustered) {
        cudaLaunchConfig_t config;
        cudaLaunchAttribute attribute;
        cluster_config<T, cluster_chunks>(config, attribute, cluster_threads, parts, stream);
        const cudaError_t status = cudaLaunchKernelEx(&config, cluster_row_pass_kernel<T, cluster_chunks>, d_x, d_dy,
                                                      d_gamma, d_mean, d_rstd, d_dx, d_partials, num_rows, num_cols);
        if (status != cudaSuccess) {
            return status;
        }
    } else {
        const auto dx_pass = wide ? wide_dx_streamed_row_kernel<T> : dx_streamed_row_kernel<T>;
        dx_pass<<<num_rows, streamed_row_threads, 0, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx, num_cols);
        partials_kernel<T><<<static_cast<unsigned>(tile_blocks), dim3(tile_columns, tile_warps), 0, stream>>>(
            d_x, d_dy, d_mean, d_rstd, d_partials, d_dbeta != nullptr, num_rows, num_cols, parts, column_tiles);
    }
    const unsigned add_blocks = static_cast<unsigned>((num_cols + add_columns - 1) / add_columns);
    add_partials_kernel<<<add_blocks, dim3(add_columns, add_warps), 0, stream>>>(d_partials, d_dgamma, d_dbeta, parts,
                                                                                num_cols);
    return cudaGetLastError();
}

//! @brief LayerNorm's backward pass over a row-major `num_rows` x `num_cols` matrix (CUB's two phases).
//! @param d_temp_storage workspace, or nullptr to ask for its size in `temp_storage_bytes`
//! @param temp_storage_bytes the workspace's size in bytes (set on the first phase, checked on the second)
//! @param d_x the forward's input, `num_rows` x `num_cols`, row-major
//! @param d_dy the gradient of the forward's output, as `d_x`
//! @param d_gamma the `num_cols` scales, fp32
//! @param d_mean each row's mean, as the forward saved it (fp32)
//! @param d_rstd each row's 1 / sqrt(var + epsilon), as the forward saved it (fp32)
//! @param d_dx the gradient of x, as `d_x`, apart from every input
//! @param d_dgamma the gradient of gamma (`num_cols`, fp32), overwritten (not added to)
//! @param d_dbeta the gradient of beta (`num_cols`, fp32), overwritten
//! @param num_rows rows (tokens)
//! @param num_cols values a row
//! @param stream the stream of every launch
//! @pre `num_rows >= 1`, `num_cols >= 1`; pointers non-null and aligned to their element type, the workspace to 4
//!      bytes; outputs do not overlap inputs or each other. A NaN or infinity in a row makes its dx NaN and reaches
//!      the parameters' gradients of its columns; a row of equal values saved with an infinite rstd (epsilon 0) has
//!      no xhat term.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
cudaError_t layer_norm_backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                                const float* d_gamma, const float* d_mean, const float* d_rstd, T* d_dx,
                                float* d_dgamma, float* d_dbeta, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (d_mean == nullptr || d_dbeta == nullptr) {
        return cudaErrorInvalidValue;
    }
    return backward(d_temp_storage, temp_storage_bytes, d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx, d_dgamma, d_dbeta,
                    num_rows, num_cols, stream);
}

//! @brief RMSNorm's backward pass: as layer_norm_backward() without the mean and beta.
template <typename T>
cudaError_t rms_norm_backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                              const float* d_gamma, const float* d_rstd, T* d_dx, float* d_dgamma, int num_rows,
                              int num_cols, cudaStream_t stream = 0)
{
    return backward(d_temp_storage, temp_storage_bytes, d_x, d_dy, d_gamma, static_cast<const float*>(nullptr),
                    d_rstd, d_dx, d_dgamma, static_cast<float*>(nullptr), num_rows, num_cols, stream);
}

}  // namespace stepwise::normalization_backward::partials_summed_over_a_cluster
