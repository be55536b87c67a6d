//! @file 04_adaptive_host_driven.cuh
//! @brief Dynamic parallelism, step 4 (beyond the source): adaptive Simpson integration, one level of refinement
//!        per kernel, the host deciding each next launch.
//!
//! Each thread takes one interval: where Simpson's rule on its halves agrees
//! with Simpson's rule on the whole within the interval's share of the
//! tolerance, it adds the (Richardson-corrected) halves to the integral;
//! where not, it appends both halves to the next level's list. How many
//! intervals the next level has is known only when this level is done, so
//! the host copies the count back and waits for it before every launch.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::dynamic_parallelism::adaptive_host_driven {

constexpr int block_threads = 128;  //!< threads per block, one interval each
constexpr int max_levels = 16;      //!< levels of refinement at most (device-side launches nest up to 24 deep)

//! @brief What went wrong, as bits of `*d_status` (0: nothing).
enum Status : unsigned int {
    list_overflow = 1u,     //!< a level had more intervals than `capacity`: the integral is incomplete
    too_deep = 2u,          //!< intervals still above tolerance at `max_levels`: accepted as they were
    launch_failed = 4u,     //!< a device-side launch failed: the integral is incomplete
};

//! @brief An interval [a, b] still to integrate.
struct Interval {
    double a, b;
};

//! @brief The counters of a run, at the start of the workspace.
struct Counters {
    int counts[max_levels + 1];             //!< intervals of each level
    unsigned int blocks_done[max_levels];   //!< blocks of each level that have finished
};

//! @brief The workspace's size in bytes for lists of `capacity` intervals.
constexpr std::size_t workspace_bytes(int capacity)
{
    return (sizeof(Counters) + alignof(Interval) - 1) / alignof(Interval) * alignof(Interval) +
           2 * static_cast<std::size_t>(capacity) * sizeof(Interval);
}

//! @brief Where the two interval lists and the counters of a run live.
struct Lists {
    Counters* counters;
    Interval* intervals[2];  //!< level `l` reads list `l % 2` and appends to list `(l + 1) % 2`
    int capacity;
    double* sum;
    unsigned int* status;
};

//! @brief Splits [a, b] into `count` equal intervals, level 0's list.
static __global__ void __launch_bounds__(block_threads) init_kernel(Lists lists, double a, double b, int count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        const double width = (b - a) / count;
        lists.intervals[0][i] = {a + i * width, i + 1 == count ? b : a + (i + 1) * width};
    }
    if (i == 0) {
        lists.counters->counts[0] = count;
    }
}

//! @brief Thread `i` refines interval `i` of level `level`: accepts it, or appends its halves to the next level.
template <typename Integrand>
static __global__ void __launch_bounds__(block_threads)
    level_kernel(Integrand f, Lists lists, int level, double tolerance_per_unit)
{
    const int count = min(lists.counters->counts[level], lists.capacity);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        const Interval iv = lists.intervals[level % 2][i];
        const double m = 0.5 * (iv.a + iv.b);
        const double fa = f(iv.a), fm = f(m), fb = f(iv.b);
        const double fl = f(0.5 * (iv.a + m)), fr = f(0.5 * (m + iv.b));
        const double whole = (iv.b - iv.a) / 6.0 * (fa + 4.0 * fm + fb);
        const double halves = (m - iv.a) / 6.0 * (fa + 4.0 * fl + fm) + (iv.b - m) / 6.0 * (fm + 4.0 * fr + fb);
        const double error = halves - whole;
        const bool accurate = fabs(error) <= 15.0 * tolerance_per_unit * (iv.b - iv.a);
        if (accurate || level + 1 == max_levels) {
            atomicAdd(lists.sum, halves + error / 15.0);
            if (!accurate) {
                atomicOr(lists.status, too_deep);
            }
        } else {
            const int slot = atomicAdd(&lists.counters->counts[level + 1], 2);
            if (slot + 2 <= lists.capacity) {
                Interval* next = lists.intervals[(level + 1) % 2];
                next[slot] = {iv.a, m};
                next[slot + 1] = {m, iv.b};
            } else {
                atomicOr(lists.status, list_overflow);
            }
        }
    }
}

//! @brief Integrates `f` over [a, b] to within about `tolerance`, refining where Simpson's rule disagrees.
//! @tparam Integrand a copyable type with `__device__ double operator()(double) const`
//! @param[in]  f                  the integrand
//! @param[in]  a, b               the interval, `a < b`
//! @param[in]  initial_intervals  equal intervals of level 0, 1 to `capacity`
//! @param[in]  tolerance          absolute tolerance on the integral, > 0
//! @param[out] d_result           the integral (one double)
//! @param[out] d_status           0, or the `Status` bits of what went wrong (one unsigned int)
//! @param[in]  d_workspace        `workspace_bytes(capacity)` bytes, 16-byte aligned
//! @param[in]  capacity           intervals each level may hold
//! @param[in]  stream             stream to launch on
//! @pre pointers not null, arguments as above
//! @return `cudaErrorInvalidValue` if a precondition fails, else the first error of a launch or copy. Returns
//!         when the last level has finished (it waits for each level's count).
template <typename Integrand>
cudaError_t integrate(Integrand f, double a, double b, int initial_intervals, double tolerance, double* d_result,
                      unsigned int* d_status, void* d_workspace, int capacity, cudaStream_t stream = 0)
{
    if (d_result == nullptr || d_status == nullptr || d_workspace == nullptr || !(a < b) || !(tolerance > 0.0) ||
        capacity < 1 || initial_intervals < 1 || initial_intervals > capacity ||
        reinterpret_cast<std::size_t>(d_workspace) % alignof(Interval) != 0) {
        return cudaErrorInvalidValue;
    }
    auto* counters = static_cast<Counters*>(d_workspace);
    auto* intervals = reinterpret_cast<Interval*>(static_cast<char*>(d_workspace) + workspace_bytes(0));
    const Lists lists{counters, {intervals, intervals + capacity}, capacity, d_result, d_status};
    cudaError_t status = cudaMemsetAsync(counters, 0, sizeof(Counters), stream);
    if (status == cudaSuccess) status = cudaMemsetAsync(d_result, 0, sizeof(double), stream);
    if (status == cudaSuccess) status = cudaMemsetAsync(d_status, 0, sizeof(unsigned int), stream);
    if (status != cudaSuccess) {
        return status;
    }
    init_kernel<<<(initial_intervals + block_threads - 1) / block_threads, block_threads, 0, stream>>>(
        lists, a, b, initial_intervals);
    if ((status = cudaGetLastError()) != cudaSuccess) {
        return status;
    }
    int count = initial_intervals;
    for (int level = 0; level < max_levels && count > 0; ++level) {
        level_kernel<<<(count + block_threads - 1) / block_threads, block_threads, 0, stream>>>(
            f, lists, level, tolerance / (b - a));
        if ((status = cudaGetLastError()) != cudaSuccess) {
            return status;
        }
        if (level + 1 < max_levels) {
            status = cudaMemcpyAsync(&count, &counters->counts[level + 1], sizeof(int), cudaMemcpyDeviceToHost, stream);
            if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
            if (status != cudaSuccess) {
                return status;
            }
            count = count < capacity ? count : capacity;
        }
    }
    return cudaSuccess;
}

}  // namespace stepwise::dynamic_parallelism::adaptive_host_driven
