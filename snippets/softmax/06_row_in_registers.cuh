//! @file 06_row_in_registers.cuh
//! @brief Softmax step 6 (beyond the sources): the row is read once, into registers, with 16-byte loads; rows longer
//!        than a block are split over blocks whose partials meet in global memory.
//!
//! Step 5 still reads each row twice: once for its maximum and sum, once to
//! write it. Here each thread loads its part of the row into registers, 16
//! values (four 16-byte loads), or 32 in rows longer than 4096 values with
//! 16-byte accesses: fewer and fuller threads per row, more bytes in flight.
//! It replaces each value by exp(x - m), m its own maximum: one exponential
//! per value, as exp2 of a scaled difference (one MUFU.EX2). The row's
//! partials are merged, and each thread writes its values times one factor,
//! exp(m - row max) / row sum, from registers: one read and one write per
//! element, the copy's traffic. Short rows keep several rows per block, now
//! with a power of two of lanes per row sized to the row; a row of up to
//! 16384 values is one block's. A longer row cannot be: it is split over
//! blocks of 256 threads, which write their partials to global memory; a
//! second kernel merges each row's partials, and a third reads every slice
//! again and writes it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::softmax::row_in_registers {

constexpr int vector_bytes = 16;          //!< one load or store
constexpr int short_rows_block = 256;     //!< threads of a block of rows that each fit a warp
constexpr int split_block_threads = 256;  //!< blocks of the split path (rows longer than a block)
constexpr int block_values = 16384;      //!< a block holds at most this many values: 1024 threads of 16, 512 of 32
constexpr int split_values = 32;          //!< values per thread of the split path

//! @brief The most threads of a block whose threads hold `Values` values each.
template <int Values>
constexpr int max_block_threads = block_values / Values;

//! @brief Values each thread holds in rows read 16 bytes at a time: 16 up to rows of 4096 values, 32 beyond
//!        (fewer, fuller threads per row). Rows read 4 bytes at a time keep 16: more threads, more loads in flight.
inline int values_per_thread(int num_cols) { return num_cols <= 4096 ? 16 : 32; }


//! @brief `Width` consecutive values, loaded and stored as one access.
template <int Width>
struct alignas(sizeof(float) * Width) Chunk {
    float v[Width];
};

//! @brief The softmax of part of a row: its maximum and the sum of exp(x - max) over it.
struct Partial {
    float max;
    float sum;
};

constexpr float log2e = 1.44269504088896340736f;  //!< exp(x) = 2^(x log2(e)): one MUFU.EX2 and a multiply

//! @brief exp(x - max), with exp(-inf - max) = 0 even where max is -inf (a part of -inf values sums to 0).
__device__ __forceinline__ float exp_shifted(float x, float max)
{
    return x == -INFINITY ? 0.0f : exp2f((x - max) * log2e);
}

//! @brief Two parts' maximum and sum combined (Milakov and Gimelshein's rule); commutative, bit for bit.
__device__ __forceinline__ Partial merge(Partial a, Partial b)
{
    const float max = fmaxf(a.max, b.max);
    return {max, a.sum * exp_shifted(a.max, max) + b.sum * exp_shifted(b.max, max)};
}

//! @brief Merges the partials of the `width` lanes of each segment of the warp; every lane gets the result.
__device__ __forceinline__ Partial merge_lanes(Partial p, int width)
{
    for (int offset = width / 2; offset > 0; offset /= 2) {
        p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset, width),
                      __shfl_xor_sync(0xffffffffu, p.sum, offset, width)});
    }
    return p;
}

//! @brief Merges the partials of every thread of the block; every thread gets the result.
__device__ __forceinline__ Partial merge_block(Partial p, Partial* warp_partials)
{
    const int lane = threadIdx.x % 32;
    p = merge_lanes(p, 32);
    if (lane == 0) {
        warp_partials[threadIdx.x / 32] = p;
    }
    __syncthreads();
    const int warps = blockDim.x / 32;
    return merge_lanes(lane < warps ? warp_partials[lane] : Partial{-INFINITY, 0.0f}, 32);
}

//! @brief Where a thread's part of the data lies, and which threads share its row.
struct Place {
    std::int64_t row;
    std::int64_t first;  //!< the row's first element of this block's slice
    int lane;            //!< the thread's place among the threads of its slice
    int threads;         //!< threads of the slice
};

//! @brief Loads the thread's values of the slice as floats (`-inf` past the row's end), `Width` values per access.
template <int Width, int Values>
__device__ __forceinline__ void load_slice(float (&x)[Values], const float* d_row, const Place& at,
                                           int num_cols, bool row_valid)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        Chunk<Width> chunk;
        if (row_valid && col < num_cols) {
            chunk = *reinterpret_cast<const Chunk<Width>*>(d_row + col);
        }
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = row_valid && col < num_cols ? chunk.v[i] : -INFINITY;
        }
    }
}

//! @brief Replaces each value x by exp(x - m), m the thread's maximum (0 where that is -inf: -inf values give 0, a
//!        NaN stays NaN); returns the thread's partial: m and the sum of the new values.
template <int Values>
__device__ __forceinline__ Partial exponentiate(float (&x)[Values])
{
    float max = -INFINITY;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        max = fmaxf(max, x[i]);
    }
    const float shift = max == -INFINITY ? 0.0f : max;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        x[i] = exp2f((x[i] - shift) * log2e);
        sum += x[i];
    }
    return {max, sum};
}

//! @brief Writes `scale` times each value the thread holds.
template <int Width, int Values>
__device__ __forceinline__ void store_slice(const float (&x)[Values], float* d_row, const Place& at,
                                            int num_cols, bool row_valid, float scale)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < num_cols) {
            Chunk<Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = x[a * Width + i] * scale;
            }
            *reinterpret_cast<Chunk<Width>*>(d_row + col) = y;
        }
    }
}

//! @brief What turns a thread's exp(x - m) into the row's softmax: exp(m - row max) / row sum (a row of -inf
//!        values: 0 * inf, NaN).
__device__ __forceinline__ float scale_to_row(Partial thread, Partial row)
{
    return exp_shifted(thread.max, row.max) * (1.0f / row.sum);
}

//! @brief The row of each group of `group_threads` threads is read once into registers, reduced and written.
//!        `group_threads` <= 32: several rows per block, a power of two of lanes per row. Otherwise a row per block
//!        (`group_threads == blockDim.x`).
template <int Width, int Values>
static __global__ void __launch_bounds__(max_block_threads<Values>)
    softmax_rows_kernel(const float* d_in, float* d_out, int num_rows, int num_cols, int group_threads)
{
    __shared__ Partial warp_partials[32];
    Place at;
    if (group_threads <= 32) {
        at = {static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / group_threads) + threadIdx.x / group_threads, 0,
              static_cast<int>(threadIdx.x) % group_threads, group_threads};
    } else {
        at = {blockIdx.x, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    }
    const bool row_valid = at.row < num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t row_offset = static_cast<std::size_t>(row_valid ? at.row : 0) * num_cols;
    float x[Values];
    load_slice<Width, Values>(x, d_in + row_offset, at, num_cols, row_valid);
    const Partial thread = exponentiate(x);
    Partial row = thread;
    if (group_threads <= 32) {
        row = merge_lanes(row, group_threads);
    } else {
        row = merge_block(row, warp_partials);
    }
    store_slice<Width, Values>(x, d_out + row_offset, at, num_cols, row_valid, scale_to_row(thread, row));
}

//! @brief Rows longer than a block, first pass: each block's partial of its slice, into `d_partials`.
template <int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_partials_kernel(const float* d_in, Partial* d_partials, int num_cols, int blocks_per_row)
{
    __shared__ Partial warp_partials[32];
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    float x[split_values];
    load_slice<Width, split_values>(x, d_in + static_cast<std::size_t>(at.row) * num_cols, at, num_cols, true);
    const Partial block = merge_block(exponentiate(x), warp_partials);
    if (threadIdx.x == 0) {
        d_partials[blockIdx.x] = block;
    }
}

//! @brief Rows longer than a block, second pass: one block per row merges its blocks' partials in `d_rows`.
static __global__ void __launch_bounds__(split_block_threads)
    split_merge_kernel(const Partial* d_partials, Partial* d_rows, int blocks_per_row)
{
    __shared__ Partial warp_partials[32];
    Partial p{-INFINITY, 0.0f};
    for (int b = threadIdx.x; b < blocks_per_row; b += blockDim.x) {
        p = merge(p, d_partials[static_cast<std::size_t>(blockIdx.x) * blocks_per_row + b]);
    }
    p = merge_block(p, warp_partials);
    if (threadIdx.x == 0) {
        d_rows[blockIdx.x] = p;
    }
}

//! @brief Rows longer than a block, third pass: each block reads its slice again and writes it.
template <int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_store_kernel(const float* d_in, float* d_out, const Partial* d_rows, int num_cols, int blocks_per_row)
{
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * num_cols;
    float x[split_values];
    load_slice<Width, split_values>(x, d_in + row_offset, at, num_cols, true);
    const Partial thread = exponentiate(x);
    store_slice<Width, split_values>(x, d_out + row_offset, at, num_cols, true, scale_to_row(thread, d_rows[at.row]));
}

//! @brief How the launcher lays rows over threads, from the row's length.
struct Layout {
    int values = 16;            //!< values per thread
    int group_threads = 0;      //!< threads per row (<= 32) or per block of a row's slice
    int block_threads = 0;
    int split_blocks = 0;       //!< blocks per row of the split path, 0 without
    std::int64_t blocks = 0;    //!< the grid
};

//! @brief The layout of rows of `num_cols` values, `values` per thread.
inline Layout choose_layout(int num_rows, int num_cols, int values)
{
    const std::int64_t threads = (static_cast<std::int64_t>(num_cols) + values - 1) / values;
    const int max_threads = block_values / values;
    Layout l;
    l.values = values;
    if (threads <= 32) {  // a power of two of lanes per row, several rows per block
        l.group_threads = 1;
        while (l.group_threads < threads) {
            l.group_threads *= 2;
        }
        l.block_threads = short_rows_block;
        const int rows_per_block = short_rows_block / l.group_threads;
        l.blocks = (std::int64_t{num_rows} + rows_per_block - 1) / rows_per_block;
    } else if (threads <= max_threads) {  // a block per row
        l.group_threads = l.block_threads = static_cast<int>((threads + 31) / 32 * 32);
        l.blocks = num_rows;
    } else {  // blocks of a row that merge their partials through global memory
        const std::int64_t split_threads = (static_cast<std::int64_t>(num_cols) + split_values - 1) / split_values;
        l.values = split_values;
        l.block_threads = split_block_threads;
        l.split_blocks = static_cast<int>((split_threads + split_block_threads - 1) / split_block_threads);
        l.blocks = std::int64_t{num_rows} * l.split_blocks;
    }
    return l;
}

template <int Width, int Values>
inline cudaError_t launch(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in, float* d_out,
                          int num_rows, int num_cols, cudaStream_t stream)
{
    static_assert(Values % Width == 0 && split_values % Width == 0, "a thread's values are whole accesses");
    const Layout l = choose_layout(num_rows, num_cols, Values);
    if (l.blocks > INT32_MAX) {
        return cudaErrorInvalidValue;
    }
    const std::size_t partial_bytes = static_cast<std::size_t>(l.blocks) * sizeof(Partial);
    const std::size_t needed = l.split_blocks > 0 ? partial_bytes + num_rows * sizeof(Partial) : 1;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    const unsigned grid = static_cast<unsigned>(l.blocks);
    if (l.split_blocks > 0) {
        Partial* d_partials = static_cast<Partial*>(d_temp_storage);
        Partial* d_rows = d_partials + l.blocks;
        split_partials_kernel<Width><<<grid, l.block_threads, 0, stream>>>(d_in, d_partials, num_cols,
                                                                              l.split_blocks);
        split_merge_kernel<<<num_rows, split_block_threads, 0, stream>>>(d_partials, d_rows, l.split_blocks);
        split_store_kernel<Width><<<grid, l.block_threads, 0, stream>>>(d_in, d_out, d_rows, num_cols,
                                                                           l.split_blocks);
        return cudaGetLastError();
    }
    softmax_rows_kernel<Width, Values><<<grid, l.block_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols,
                                                                            l.group_threads);
    return cudaGetLastError();
}

//! @brief y = softmax(x) along each row of a row-major `num_rows` x `num_cols` matrix. Two phases, as CUB: with
//!        `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a block keep their
//!            blocks' partials there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[out] d_out the softmax of each row; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`; `d_in`, `d_out` and `d_temp_storage` 4-byte aligned. A row with a NaN or
//!      +inf is NaN, a row of -inf values is NaN (0 / 0); -inf elements of other rows give 0.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
inline cudaError_t softmax(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in, float* d_out,
                           int num_rows, int num_cols, cudaStream_t stream = 0)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(float));
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (d_in == nullptr || d_out == nullptr || num_rows < 1 || num_cols < 1 || !aligned(d_in, sizeof(float)) ||
        !aligned(d_out, sizeof(float)) || (d_temp_storage != nullptr && !aligned(d_temp_storage, alignof(Partial)))) {
        return cudaErrorInvalidValue;
    }
    if (num_cols % width == 0 && aligned(d_in, vector_bytes) && aligned(d_out, vector_bytes)) {
        return values_per_thread(num_cols) == 16
                   ? launch<width, 16>(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream)
                   : launch<width, 32>(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream);
    }
    return launch<1, 16>(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream);
}

}  // namespace stepwise::softmax::row_in_registers
