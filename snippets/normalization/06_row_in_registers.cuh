//! @file 06_row_in_registers.cuh
//! @brief Normalization step 6 (beyond the sources): the row is read once, into registers, with 16-byte loads; rows
//!        longer than a block are split over blocks whose statistics meet in global memory.
//!
//! Step 5 still reads each row twice: once for its statistics, once to write
//! it. Here each thread loads its part of the row into registers, 16 values
//! (four 16-byte loads), or 32 in rows longer than 4096 values with 16-byte
//! accesses, and the output is written from them: one read and one write
//! per element, the copy's traffic. With the values held, LayerNorm's two
//! statistics take two reductions of registers instead of two reads: the
//! sum of the differences from the row's first value (exact for equal
//! values), then the squares of the deviations from that mean, scaled by a
//! power of two of the largest so that rows of 1e30 do not overflow: plain
//! sums, cheaper to merge than step 5's triples. Short rows keep several
//! rows per block, with a power of two of lanes per row sized to the row; a
//! row of up to 16384 values is one block's. A longer row is split over
//! blocks of 256 threads, which write their statistics to global memory
//! (merged with Chan's formula); a second kernel merges each row's, and a
//! third reads every slice again and writes it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace stepwise::normalization::row_in_registers {

constexpr int vector_bytes = 16;             //!< one load or store
constexpr int short_rows_block = 256;        //!< threads of a block of rows that each fit a warp
constexpr int split_block_threads = 256;     //!< blocks of the split path (rows longer than a block)
constexpr int block_values = 16384;          //!< a block holds at most this many values: 1024 threads of 16, 512 of 32
constexpr int split_values = 32;             //!< values per thread of the split path

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

constexpr float smallest_scale = 0x1p-126f;  //!< the scale of no values: any other is at least as large

//! @brief A power of two at least |m| (2^-126 to 2^126; m beyond 2^126 at most 4 times it), from m's exponent bits:
//!        scaling by it, or by its inverse, is exact.
__device__ __forceinline__ float power_of_two_above(float m)
{
    const unsigned bits = (__float_as_uint(m) & 0x7f800000u) + 0x00800000u;  // 2^(floor(log2 |m|) + 1)
    return __uint_as_float(min(max(bits, 0x00800000u), 0x7e800000u));
}

//! @brief 1 / p, exactly, for a power of two p from power_of_two_above().
__device__ __forceinline__ float inverse_power_of_two(float p) { return __uint_as_float(0x7f000000u - __float_as_uint(p)); }

//! @brief A sum of squares kept as scale^2 * sum, `scale` a power of two at least the largest root: no square of an
//!        fp32 value overflows (rows of 1e30 work) or vanishes.
struct Squares {
    float scale, sum;
};

//! @brief The sum of two sums of squares, on the larger scale (ratios of powers of two: exact).
__device__ __forceinline__ Squares merge(Squares a, Squares b)
{
    const float scale = fmaxf(a.scale, b.scale);
    const float inverse = inverse_power_of_two(scale);
    const float ra = a.scale * inverse, rb = b.scale * inverse;
    return {scale, a.sum * ra * ra + b.sum * rb * rb};
}
__device__ __forceinline__ float merge(float a, float b) { return a + b; }

//! @brief LayerNorm's statistics of some values: how many, their mean, and their squared deviations from it.
struct Moments {
    float count, mean;
    Squares m2;
};

//! @brief The statistics of the union of two sets of values (Chan, Golub and LeVeque); either may be empty.
__device__ __forceinline__ Moments merge(Moments a, Moments b)
{
    const float count = a.count + b.count;
    if (count == 0.0f) {
        return a;
    }
    const float delta = b.mean - a.mean;
    const float b_share = b.count / count;
    const float scale = power_of_two_above(delta);
    const float scaled = delta * inverse_power_of_two(scale);
    const Squares between{scale, scaled * scaled * a.count * b_share};
    return {count, a.mean + delta * b_share, merge(merge(a.m2, b.m2), between)};
}

__device__ __forceinline__ float shuffle_xor(float v, int offset, int width)
{
    return __shfl_xor_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ Squares shuffle_xor(Squares q, int offset, int width)
{
    return {shuffle_xor(q.scale, offset, width), shuffle_xor(q.sum, offset, width)};
}
__device__ __forceinline__ Moments shuffle_xor(Moments m, int offset, int width)
{
    return {shuffle_xor(m.count, offset, width), shuffle_xor(m.mean, offset, width), shuffle_xor(m.m2, offset, width)};
}

//! @brief The squares of the first `count` values' differences from `center`, scaled by a power of two of the
//!        largest.
template <int Values>
__device__ __forceinline__ Squares thread_squares(const float (&x)[Values], int count, float center)
{
    float largest = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        largest = fmaxf(largest, i < count ? fabsf(x[i] - center) : 0.0f);
    }
    const float scale = power_of_two_above(largest);
    const float inverse = inverse_power_of_two(scale);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        const float d = (x[i] - center) * inverse;
        sum += i < count ? d * d : 0.0f;
    }
    return {scale, sum};
}

//! @brief 1 / sqrt(scale^2 * sum / n + epsilon), without forming a square that would overflow.
__device__ __forceinline__ float inverse_root(Squares q, float n, float epsilon)
{
    if (q.scale > 1.0f || epsilon == 0.0f) {
        const float inverse = inverse_power_of_two(q.scale);
        return inverse * rsqrtf(q.sum / n + epsilon * inverse * inverse);
    }
    return rsqrtf(q.scale * q.scale * (q.sum / n) + epsilon);  // a square that vanishes is negligible beside epsilon
}

//! @brief What a row's output needs: y = (x - mean) * rstd * gamma (+ beta).
struct Row {
    float mean, rstd;
};
//! @brief The factor y takes of x - mean: rstd, or 0 where rstd is infinite (epsilon 0 and a row whose values are all
//!        its mean, as a LayerNorm row of equal values, each x - mean exactly 0: y is then exactly beta, where 0 times
//!        an infinite rstd would make it NaN). A NaN rstd stays NaN.
__device__ __forceinline__ float output_scale(Row r) { return isinf(r.rstd) ? 0.0f : r.rstd; }
__device__ __forceinline__ Row row_of(Squares q, int num_cols, float epsilon)
{
    return {0.0f, inverse_root(q, static_cast<float>(num_cols), epsilon)};
}
__device__ __forceinline__ Row row_of(Moments m, int, float epsilon) { return {m.mean, inverse_root(m.m2, m.count, epsilon)}; }

//! @brief Merges the statistics of the `width` lanes of each segment of the warp; every lane gets the result.
template <typename Stats>
__device__ __forceinline__ Stats merge_lanes(Stats s, int width)
{
    for (int offset = width / 2; offset > 0; offset /= 2) {
        s = merge(s, shuffle_xor(s, offset, width));
    }
    return s;
}

//! @brief Merges the statistics of every thread of the block; every thread gets the result.
template <typename Stats>
__device__ __forceinline__ Stats merge_block(Stats s, Stats* warp_stats, Stats none)
{
    const int lane = threadIdx.x % 32;
    s = merge_lanes(s, 32);
    if (lane == 0) {
        warp_stats[threadIdx.x / 32] = s;
    }
    __syncthreads();
    const int warps = blockDim.x / 32;
    return merge_lanes(lane < warps ? warp_stats[lane] : none, 32);
}

//! @brief `v` reduced over the thread's group: its `group_threads` lanes (<= 32), or its whole block (`none`: what
//!        missing warps add); every thread of the group gets it.
template <typename V>
__device__ __forceinline__ V reduce_group(V v, int group_threads, V* warp_scratch, V none)
{
    return group_threads <= 32 ? merge_lanes(v, group_threads) : merge_block(v, warp_scratch, none);
}

//! @brief Shared memory of the group reductions: one array per reduction, so that a second needs no barrier to
//!        wait for the first's readers.
struct GroupScratch {
    float sums[32];
    Squares squares[32];
};

//! @brief RMSNorm's statistics of the group's values (those past the row are 0): their sum of squares.
template <int Values>
__device__ __forceinline__ Squares group_statistics(const float (&x)[Values], int, int, float, int group_threads,
                                                    GroupScratch& scratch, Squares)
{
    return reduce_group(thread_squares(x, Values, 0.0f), group_threads, scratch.squares, Squares{smallest_scale, 0.0f});
}

//! @brief LayerNorm's statistics of the group's `group_count` values (0 or more), the thread's first `count`, in two
//!        reductions: the mean (of the differences from `shift`, the row's first value: exact for equal values),
//!        then the squares of the deviations from it, in the thread's registers.
template <int Values>
__device__ __forceinline__ Moments group_statistics(const float (&x)[Values], int count, int group_count, float shift,
                                                    int group_threads, GroupScratch& scratch, Moments)
{
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        sum += i < count ? x[i] - shift : 0.0f;
    }
    sum = reduce_group(sum, group_threads, scratch.sums, 0.0f);
    const float mean = shift + sum / max(group_count, 1);  // a cluster's last block may have no values
    const Squares m2 = reduce_group(thread_squares(x, count, mean), group_threads, scratch.squares,
                                    Squares{smallest_scale, 0.0f});
    return {static_cast<float>(group_count), mean, m2};
}

//! @brief What the kernels read and write. RMSNorm has no `d_beta`, `d_mean` or `d_rstd` (nullptr).
struct Args {
    const float* d_in;
    const float* d_gamma;
    const float* d_beta;
    float* d_out;
    float* d_mean;
    float* d_rstd;
    int num_rows, num_cols;
    float epsilon;
};

//! @brief The statistics of nothing: what lanes and blocks without values contribute.
template <typename Stats>
__device__ __forceinline__ Stats no_values()
{
    if constexpr (std::is_same_v<Stats, Moments>) {
        return {0.0f, 0.0f, {smallest_scale, 0.0f}};
    } else {
        return {smallest_scale, 0.0f};
    }
}

//! @brief Where a thread's part of the data lies, and which threads share its row.
struct Place {
    std::int64_t row;
    std::int64_t first;  //!< the row's first element of this block's slice
    int lane;            //!< the thread's place among the threads of its slice
    int threads;         //!< threads of the slice
};

//! @brief Loads the thread's values of the slice (0 past the row's end), `Width` values per access; returns how many
//!        it loaded: they come first, since its accesses lie in increasing columns.
template <int Width, int Values>
__device__ __forceinline__ int load_slice(float (&x)[Values], const float* d_row, const Place& at, int num_cols,
                                          bool row_valid)
{
    int count = 0;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        Chunk<Width> chunk{};
        if (row_valid && col < num_cols) {
            chunk = *reinterpret_cast<const Chunk<Width>*>(d_row + col);
            count += Width;
        }
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = chunk.v[i];
        }
    }
    return count;
}

//! @brief Writes (x - mean) * rstd * gamma (+ beta) for each value the thread holds.
template <bool WithBeta, int Width, int Values>
__device__ __forceinline__ void store_slice(const float (&x)[Values], const Args& args, std::size_t row_offset,
                                            const Place& at, bool row_valid, Row r)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < args.num_cols) {
            const Chunk<Width> gamma = *reinterpret_cast<const Chunk<Width>*>(args.d_gamma + col);
            Chunk<Width> beta{};
            if constexpr (WithBeta) {
                beta = *reinterpret_cast<const Chunk<Width>*>(args.d_beta + col);
            }
            Chunk<Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = (x[a * Width + i] - r.mean) * output_scale(r) * gamma.v[i] + beta.v[i];
            }
            *reinterpret_cast<Chunk<Width>*>(args.d_out + row_offset + col) = y;
        }
    }
}

//! @brief LayerNorm keeps each row's mean and rstd.
__device__ __forceinline__ void write_row(const Args& args, std::int64_t row, Row r)
{
    if (args.d_mean != nullptr) {
        args.d_mean[row] = r.mean;
        args.d_rstd[row] = r.rstd;
    }
}

//! @brief The row of each group of `group_threads` threads is read once into registers, reduced and written.
//!        `group_threads` <= 32: several rows per block, a power of two of lanes per row. Otherwise a row per block
//!        (`group_threads == blockDim.x`).
//!        `Stats`: Moments (LayerNorm) or Squares (RMSNorm).
template <typename Stats, int Width, int Values>
static __global__ void __launch_bounds__(max_block_threads<Values>)
    norm_rows_kernel(Args args, int group_threads)
{
    __shared__ GroupScratch scratch;
    Place at;
    if (group_threads <= 32) {
        at = {static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / group_threads) + threadIdx.x / group_threads, 0,
              static_cast<int>(threadIdx.x) % group_threads, group_threads};
    } else {
        at = {blockIdx.x, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    }
    const bool row_valid = at.row < args.num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t row_offset = static_cast<std::size_t>(row_valid ? at.row : 0) * args.num_cols;
    float x[Values];
    const int count = load_slice<Width, Values>(x, args.d_in + row_offset, at, args.num_cols, row_valid);
    const int group_count =
        static_cast<int>(max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * Values)));
    const float shift = row_valid ? args.d_in[row_offset] : 0.0f;
    Stats s = group_statistics(x, count, group_count, shift, group_threads, scratch, Stats{});
    const Row r = row_of(s, args.num_cols, args.epsilon);
    store_slice<std::is_same_v<Stats, Moments>, Width, Values>(x, args, row_offset, at, row_valid, r);
    if (row_valid && at.lane == 0) {
        write_row(args, at.row, r);
    }
}

//! @brief Rows longer than a block, first pass: each block's statistics of its slice, into `d_partials`.
template <typename Stats, int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_partials_kernel(Args args, Stats* d_partials, int blocks_per_row)
{
    __shared__ GroupScratch scratch;
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    float x[split_values];
    const int count = load_slice<Width, split_values>(x, args.d_in + row_offset, at, args.num_cols, true);
    const int slice_count = static_cast<int>(
        max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * split_values)));
    const Stats block = group_statistics(x, count, slice_count, args.d_in[row_offset], at.threads, scratch, Stats{});
    if (threadIdx.x == 0) {
        d_partials[blockIdx.x] = block;
    }
}

//! @brief Rows longer than a block, second pass: one block per row merges its blocks' statistics into `d_rows`.
template <typename Stats>
static __global__ void __launch_bounds__(split_block_threads)
    split_merge_kernel(Args args, const Stats* d_partials, Row* d_rows, int blocks_per_row)
{
    __shared__ Stats warp_stats[32];
    Stats s = no_values<Stats>();
    for (int b = threadIdx.x; b < blocks_per_row; b += blockDim.x) {
        s = merge(s, d_partials[static_cast<std::size_t>(blockIdx.x) * blocks_per_row + b]);
    }
    s = merge_block(s, warp_stats, no_values<Stats>());
    if (threadIdx.x == 0) {
        d_rows[blockIdx.x] = row_of(s, args.num_cols, args.epsilon);
        write_row(args, blockIdx.x, d_rows[blockIdx.x]);
    }
}

//! @brief Rows longer than a block, third pass: each block reads its slice again and writes it.
template <bool WithBeta, int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_store_kernel(Args args, const Row* d_rows, int blocks_per_row)
{
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    float x[split_values];
    load_slice<Width, split_values>(x, args.d_in + row_offset, at, args.num_cols, true);
    store_slice<WithBeta, Width, split_values>(x, args, row_offset, at, true, d_rows[at.row]);
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
        l.blocks = (std::int64_t{num_rows} + rows_per_block - 1) / rows_per_block;  // no int overflow at INT_MAX
    } else if (threads <= max_threads) {  // a block per row
        l.group_threads = l.block_threads = static_cast<int>((threads + 31) / 32 * 32);
        l.blocks = num_rows;
    } else {  // blocks of a row that merge their statistics through global memory
        const std::int64_t split_threads = (static_cast<std::int64_t>(num_cols) + split_values - 1) / split_values;
        l.values = split_values;
        l.block_threads = split_block_threads;
        l.split_blocks = static_cast<int>((split_threads + split_block_threads - 1) / split_block_threads);
        l.blocks = std::int64_t{num_rows} * l.split_blocks;
    }
    return l;
}

template <typename Stats, int Width, int Values>
inline cudaError_t launch(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args& args,
                          cudaStream_t stream)
{
    static_assert(Values % Width == 0 && split_values % Width == 0, "a thread's values are whole accesses");
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    const Layout l = choose_layout(args.num_rows, args.num_cols, Values);
    if (l.blocks > INT32_MAX) {
        return cudaErrorInvalidValue;
    }
    const std::size_t partial_bytes = static_cast<std::size_t>(l.blocks) * sizeof(Stats);
    const std::size_t rows_offset = (partial_bytes + alignof(Row) - 1) / alignof(Row) * alignof(Row);
    const std::size_t needed = l.split_blocks > 0 ? rows_offset + args.num_rows * sizeof(Row) : 1;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    const unsigned grid = static_cast<unsigned>(l.blocks);
    if (l.split_blocks > 0) {
        Stats* d_partials = static_cast<Stats*>(d_temp_storage);
        Row* d_rows = reinterpret_cast<Row*>(static_cast<char*>(d_temp_storage) + rows_offset);
        split_partials_kernel<Stats, Width><<<grid, l.block_threads, 0, stream>>>(args, d_partials, l.split_blocks);
        split_merge_kernel<Stats><<<args.num_rows, split_block_threads, 0, stream>>>(args, d_partials, d_rows,
                                                                                     l.split_blocks);
        split_store_kernel<with_beta, Width><<<grid, l.block_threads, 0, stream>>>(args, d_rows, l.split_blocks);
        return cudaGetLastError();
    }
    norm_rows_kernel<Stats, Width, Values><<<grid, l.block_threads, 0, stream>>>(args, l.group_threads);
    return cudaGetLastError();
}

//! @brief Checks the arguments and picks the access width: 16 bytes where every row and pointer allows it.
template <typename Stats>
inline cudaError_t normalize(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args& args,
                             cudaStream_t stream)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(float));
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    const void* pointers[] = {args.d_in, args.d_gamma, args.d_beta, args.d_out};
    const bool rms = std::is_same_v<Stats, Squares>;
    bool all_aligned = true, vector_aligned = true;
    for (const void* const& p : pointers) {
        if (p == nullptr && !(rms && &p == &pointers[2])) {  // RMSNorm has no beta
            return cudaErrorInvalidValue;
        }
        all_aligned = all_aligned && aligned(p, sizeof(float));
        vector_aligned = vector_aligned && aligned(p, vector_bytes);
    }
    if (!all_aligned || args.num_rows < 1 || args.num_cols < 1 || !(args.epsilon >= 0.0f) ||
        (!rms && (args.d_mean == nullptr || args.d_rstd == nullptr || !aligned(args.d_mean, alignof(float)) ||
                  !aligned(args.d_rstd, alignof(float)))) ||
        (d_temp_storage != nullptr && !aligned(d_temp_storage, alignof(Moments)))) {
        return cudaErrorInvalidValue;
    }
    if (args.num_cols % width == 0 && vector_aligned) {
        return values_per_thread(args.num_cols) == 16
                   ? launch<Stats, width, 16>(d_temp_storage, temp_storage_bytes, args, stream)
                   : launch<Stats, width, 32>(d_temp_storage, temp_storage_bytes, args, stream);
    }
    return launch<Stats, 1, 16>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief LayerNorm of each row of a row-major `num_rows` x `num_cols` matrix:
//!        y = (x - mean) / sqrt(var + epsilon) * gamma + beta. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a block keep their
//!            blocks' statistics there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma, d_beta `num_cols` values each: the scale and shift of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[out] d_mean, d_rstd `num_rows` values each: each row's mean and 1 / sqrt(var + epsilon)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the variance
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; every pointer 4-byte aligned; the absolute differences of a
//!      row's values from its first one summing to less than fp32's largest (about 3.4e38). A NaN in a row makes the
//!      row's outputs NaN; a row of equal values gives exactly `beta`, with epsilon 0 too (its rstd is then infinite).
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
inline cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                              const float* d_gamma, const float* d_beta, float* d_out, float* d_mean, float* d_rstd,
                              int num_rows, int num_cols, float epsilon, cudaStream_t stream = 0)
{
    const Args args{d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows, num_cols, epsilon};
    return d_beta == nullptr ? cudaErrorInvalidValue
                             : normalize<Moments>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief RMSNorm of each row of a row-major `num_rows` x `num_cols` matrix: y = x / sqrt(mean(x^2) + epsilon) *
//!        gamma. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a block keep their
//!            blocks' statistics there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma `num_cols` values: the scale of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the mean square
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; every pointer 4-byte aligned; values finite or NaN. A NaN in
//!      a row makes the row NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
inline cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                            const float* d_gamma, float* d_out, int num_rows, int num_cols, float epsilon,
                            cudaStream_t stream = 0)
{
    const Args args{d_in, d_gamma, nullptr, d_out, nullptr, nullptr, num_rows, num_cols, epsilon};
    return normalize<Squares>(d_temp_storage, temp_storage_bytes, args, stream);
}

}  // namespace stepwise::normalization::row_in_registers
