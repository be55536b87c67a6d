// An owning device allocation, for the harness (tests and timing program).
#pragma once

#include "core/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace stepwise {

//! @brief `count` elements of `T` in device memory, freed on destruction.
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count)
    {
        if (count_ > 0) {
            STEPWISE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
        }
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept
    {
        DeviceBuffer(std::move(other)).swap(*this);
        return *this;
    }
    ~DeviceBuffer() { cudaFree(data_); }

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }
    std::size_t bytes() const noexcept { return count_ * sizeof(T); }

    //! Copies `host` to the device and waits until it has landed: cudaMemcpy from pageable memory may return
    //! before its DMA completes, and a non-blocking stream would not wait for it.
    void upload(const std::vector<T>& host)
    {
        check_size(host.size());
        STEPWISE_CUDA_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaStreamSynchronize(0));
    }
    //! Copies the device data to the host. Synchronize the stream that wrote them first.
    std::vector<T> download() const
    {
        std::vector<T> host(count_);
        STEPWISE_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
        return host;
    }
    //! Fills every byte with `byte` (poisoning: 0xFF makes every float a NaN), in order with the other work of
    //! `stream`. The stream matters: a stream created with cudaStreamNonBlocking does not wait for work of the
    //! legacy default stream (0), so poisoning there could land after a kernel on such a stream wrote its output.
    void fill_bytes(int byte, cudaStream_t stream)
    {
        STEPWISE_CUDA_CHECK(cudaMemsetAsync(data_, byte, bytes(), stream));
    }

private:
    void check_size(std::size_t n) const
    {
        if (n != count_) {
            throw std::invalid_argument("DeviceBuffer: host vector of " + std::to_string(n) +
                                        " elements for a buffer of " + std::to_string(count_));
        }
    }
    void swap(DeviceBuffer& other) noexcept
    {
        std::swap(data_, other.data_);
        std::swap(count_, other.count_);
    }

    T* data_ = nullptr;
    std::size_t count_ = 0;
};

}  // namespace stepwise
