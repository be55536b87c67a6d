// The cross-entropy chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::cross_entropy {

//! @brief The label of tokens left out (PyTorch's default `ignore_index`).
constexpr int default_ignore_index = -100;

//! @brief `count` random logits, uniform in [-10, 10).
std::vector<float> random_logits(std::size_t count, std::uint64_t seed);

//! @brief `count` random labels in [0, num_cols), about one in `ignored_one_in` of them `ignore_index` instead
//!        (0: none).
std::vector<int> random_labels(std::size_t count, int num_cols, int ignore_index, int ignored_one_in,
                               std::uint64_t seed);

//! @brief Whether a token is left out: its label is `ignore_index` or outside [0, num_cols) (the steps' choice for
//!        a label their @pre excludes).
bool is_ignored(int label, int num_cols, int ignore_index);

//! @brief The tokens not ignored.
std::int64_t count_not_ignored(const int* labels, int num_rows, int num_cols, int ignore_index);

//! @brief One row's loss in double, logsumexp(x) - x[label] (`label` in [0, num_cols)). A row with a NaN or +inf, or
//!        of -inf values only, is NaN; a label at a -inf logit of another row gives +inf.
double row_loss(const float* x, int num_cols, int label);

//! @brief One row of the gradient in double: (softmax(x) - onehot(label)) * scale, all zero where `ignored`; NaN
//!        where row_loss() is NaN (and the row not ignored).
void row_gradient(const float* x, int num_cols, int label, bool ignored, double scale, double* d);

//! @brief The gradient's scale: dloss / (tokens not ignored); infinite for none (no row then uses it).
double gradient_scale(double dloss, std::int64_t not_ignored);

//! @brief The mean of row_loss() over the tokens not ignored: NaN where every token is ignored (0 / 0, as PyTorch's
//!        mean reduction gives).
double mean_loss(const float* x, const int* labels, int num_rows, int num_cols, int ignore_index);

//! @brief What a result may differ from the reference by: |got - ref| <= relative * (|ref| + offset) + absolute.
struct Tolerance {
    double relative;
    double absolute;
};

//! @brief The mean loss's tolerance, fp32 output whatever the logits' type (bf16 logits are widened exactly, and the
//!        reference is taken of the values as rounded): relative 2e-5 for expf and logf to a few ulp, plus
//!        (num_cols + num_rows) * 2^-24 for a row's sum and the mean's sum taken value by value in the worst case;
//!        relative to |ref| + 1, since a loss near 0 (one dominant logit) keeps the absolute error of its terms.
Tolerance loss_tolerance(int num_rows, int num_cols);

//! @brief The gradient's tolerance: relative 2e-5 + num_cols * 2^-24 (as the loss's row sum), plus one rounding to
//!        bf16 (2^-8) for bf16 gradients, of each value; at the label also that much of the scale (p - 1 cancels
//!        when p is near 1); 1e-37 * scale absolute (values below fp32's normal range).
Tolerance gradient_tolerance(int num_cols, bool bf16_output);

//! @brief Whether a loss is within `t` of the reference (both NaN counts as equal).
bool loss_matches(double got, double expected, const Tolerance& t);

//! @brief How far some rows of a gradient are from the reference.
struct Comparison {
    std::size_t rows = 0, values = 0;
    std::size_t out_of_tolerance = 0;  //!< values beyond the tolerance
    std::size_t nan_mismatches = 0;    //!< values NaN in one of result and reference only
    double max_error_over_scale = 0;   //!< the largest |got - ref| / scale over the values not NaN
    std::int64_t first_row = -1, first_col = -1;  //!< where the first wrong value is
    double first_got = 0, first_expected = 0;

    bool passed() const { return out_of_tolerance == 0 && nan_mismatches == 0; }
    //! One line: values and rows compared, the largest error, and the first wrong value where there is one.
    std::string describe(const Tolerance& t) const;
};

//! @brief Compares row `row` of a gradient (`got`, as floats) with the reference row, its `label` and `scale`.
void compare_gradient_row(const float* got, const double* expected, int num_cols, int label, double scale,
                          std::int64_t row, const Tolerance& t, Comparison& c);

}  // namespace stepwise::cross_entropy
