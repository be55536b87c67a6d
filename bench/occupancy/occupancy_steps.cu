#include "occupancy/occupancy_steps.hpp"

#include "../../snippets/occupancy/01_sum_matrix_2d.cuh"

namespace stepwise::occupancy {
namespace {

template <int X, int Y>
Step shape(const char* id, const char* title, const char* launcher, bool beyond_article)
{
    return {id, title, launcher, beyond_article, X, Y, sum_matrix_2d::sum_matrix<X, Y>,
            {kernel_entry(std::string("sum_matrix_kernel<") + std::to_string(X) + ", " + std::to_string(Y) + ">",
                          sum_matrix_2d::sum_matrix_kernel<X, Y>, dim3(X, Y))}};
}

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        shape<32, 32>("01_block_32x32", "Blocks of 32 x 32 threads", "sum_matrix<32, 32>", false),
        shape<32, 16>("02_block_32x16", "Blocks of 32 x 16 threads", "sum_matrix<32, 16>", false),
        shape<16, 32>("03_block_16x32", "Blocks of 16 x 32 threads", "sum_matrix<16, 32>", false),
        shape<16, 16>("04_block_16x16", "Blocks of 16 x 16 threads", "sum_matrix<16, 16>", false),
        shape<64, 8>("05_block_64x8", "Blocks of 64 x 8 threads", "sum_matrix<64, 8>", true),
        shape<256, 1>("06_block_256x1", "Blocks of 256 x 1 threads", "sum_matrix<256, 1>", true),
        shape<8, 8>("07_block_8x8", "Blocks of 8 x 8 threads", "sum_matrix<8, 8>", true),
        shape<4, 4>("08_block_4x4", "Blocks of 4 x 4 threads", "sum_matrix<4, 4>", true),
    };
    return all;
}

}  // namespace stepwise::occupancy
