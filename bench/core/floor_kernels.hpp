// Kernels that measure floors, not steps: shared by the chapters' ceilings.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace stepwise {

//! @brief The in-place floor: reads and writes every float4 of `d_data` once (multiplies by `scale`).
//! @return `cudaErrorInvalidValue` for a null pointer, no items or a count that is not a multiple of 4, else the
//!         launch's error
cudaError_t inplace_read_write(float* d_data, std::size_t num_items, float scale, cudaStream_t stream);

//! The word read_floor() writes its sink with, and only when a thread's fold of its 16-byte words equals it.
inline constexpr unsigned read_floor_marker = 0x9E3779B9u;

//! @brief The read floor: reads each 16-byte word of `d_data` once and folds them into one word a thread (kept
//!        only if it equals a value no input produces in practice, so that no load can be dropped), with as many
//!        blocks as the SMs hold at once, each thread keeping four loads in flight. What a kernel that only reads
//!        memory achieves: the ceiling of a chapter whose traffic is reads.
//! @param d_data 16-byte aligned; `num_bytes` a multiple of 16
//! @param d_sink one unsigned int, written (with read_floor_marker) only in the unlikely case above
//! @return `cudaErrorInvalidValue` for a null or misaligned pointer, no bytes or a count that is not a multiple
//!         of 16, else the launch's error
cudaError_t read_floor(const void* d_data, std::size_t num_bytes, unsigned* d_sink, cudaStream_t stream);

//! @brief The fp32 FMA floor: `num_fmas` fused multiply-adds (rounded up to a multiple of 128), in registers,
//!        spread over every SM at full occupancy (eight independent chains per thread), touching memory only to
//!        store one float per thread in `d_sink`. What the FMA units alone achieve: the SGEMM chapter's measured
//!        compute ceiling.
//! @param d_sink `fma_floor_threads()` floats
//! @return `cudaErrorInvalidValue` for a null sink or no FMAs, else the launch's error
cudaError_t fma_floor(double num_fmas, float* d_sink, cudaStream_t stream);

//! @brief The threads fma_floor launches on the current device (its sink's size).
//! @throws CudaError when the device cannot be queried
std::size_t fma_floor_threads();

//! @brief An empty kernel: one block of one thread that does nothing (the launch floor).
cudaError_t empty_launch(cudaStream_t stream);

}  // namespace stepwise
