// A device buffer followed by a poisoned guard that a kernel must leave alone: the GPU tests' inputs and outputs.
#pragma once

#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace stepwise::testing {

constexpr std::size_t guard_bytes = 256;  //!< poisoned bytes after each buffer

//! Device bytes followed by `guard_bytes` of poison (0xFF: NaN in bf16 and fp32) that a step must leave alone.
class Guarded {
public:
    //! `bytes` bytes, poisoned as well (an output).
    explicit Guarded(std::size_t bytes) : buffer_(bytes + guard_bytes), bytes_(bytes) { buffer_.fill_bytes(0xFF, 0); }
    //! A copy of `content` (an input).
    explicit Guarded(const std::vector<unsigned char>& content) : Guarded(content.size())
    {
        STEPWISE_CUDA_CHECK(cudaMemcpy(buffer_.data(), content.data(), bytes_, cudaMemcpyHostToDevice));
    }
    template <class T>
    T* as() const
    {
        return reinterpret_cast<T*>(buffer_.data());
    }
    //! The bytes it holds, after checking that the guard after them is still poisoned.
    std::vector<unsigned char> read(const char* what) const
    {
        std::vector<unsigned char> held(bytes_ + guard_bytes);
        STEPWISE_CUDA_CHECK(cudaMemcpy(held.data(), buffer_.data(), held.size(), cudaMemcpyDeviceToHost));
        for (std::size_t i = bytes_; i < held.size(); ++i) {
            if (held[i] != 0xFF) {
                ADD_FAILURE() << "wrote past " << what << ", at byte " << i - bytes_ << " after it";
                break;
            }
        }
        held.resize(bytes_);
        return held;
    }

private:
    DeviceBuffer<unsigned char> buffer_;
    std::size_t bytes_;
};

}  // namespace stepwise::testing
