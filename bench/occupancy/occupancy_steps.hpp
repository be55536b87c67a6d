// The occupancy chapter's step registry: one step per block shape of the same kernel.
#pragma once

#include "core/resources.hpp"

#include <cuda_runtime.h>

#include <vector>

namespace stepwise::occupancy {

//! @brief A step's launcher: `d_c = d_a + d_b`, row-major `num_rows` x `num_cols`.
using SumFunction = cudaError_t (*)(const float* d_a, const float* d_b, float* d_c, int num_cols, int num_rows,
                                    cudaStream_t stream);

//! @brief One block shape of the chapter.
struct Step {
    const char* id;        //!< "NN_block_XxY"
    const char* title;     //!< shown on the page
    const char* launcher;  //!< "sum_matrix<X, Y>"
    bool beyond_article;   //!< not one of the source's four shapes
    int block_x, block_y;
    SumFunction sum;
    std::vector<KernelEntry> kernels;  //!< the kernel, with this step's block shape
};

//! @brief The snippet every step launches, and its namespace.
constexpr const char* step_file = "snippets/occupancy/01_sum_matrix_2d.cuh";
constexpr const char* step_namespace = "stepwise::occupancy::sum_matrix_2d";

//! @brief Every block shape, the source's four first.
const std::vector<Step>& steps();

}  // namespace stepwise::occupancy
