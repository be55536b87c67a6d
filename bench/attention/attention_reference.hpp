// The attention chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace stepwise::attention {

//! @brief One attention problem: Q and O are [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq,
//!        head_dim], all contiguous; the heads of Q are split into kv_heads groups of heads / kv_heads that share one
//!        head of K and V (grouped-query attention; kv_heads == heads is plain multi-head attention).
struct Problem {
    int batch = 1, heads = 1, kv_heads = 1, seq = 1, head_dim = 64;
    bool causal = false;  //!< query i sees keys 0..i only
};

//! @brief Whether the problem is one the chapter takes: every size >= 1, kv_heads dividing heads.
bool valid(const Problem& p);
//! @brief Elements of Q (and O), and of K (and V).
std::size_t q_elements(const Problem& p);
std::size_t kv_elements(const Problem& p);
//! @brief The FLOPs the chapter counts: 4 * batch * heads * seq^2 * head_dim, halved when causal (as FlashAttention's
//!        benchmarks count it; the causal mask's diagonal is not counted apart).
double counted_flops(const Problem& p);
//! @brief 1 / sqrt(head_dim), the scale of the scores.
float default_scale(int head_dim);

//! @brief `count` values uniform in [-1, 1), rounded to bf16 (what the GPU reads of them).
std::vector<float> random_inputs(std::size_t count, std::uint64_t seed);

//! @brief The work of reference_row() for any layout of K and V: o[0..head_dim) = sum_j p_j v_j over keys 0 to
//!        `keys` - 1, p = softmax(scale * q k_j), and `lse` = log(sum_j exp(scale * q k_j)), in double.
//!        `key_row(j)` and `value_row(j)` give key j's head_dim floats of K and of V. No key: o = 0, lse = -inf. A NaN
//!        or infinite score makes o and lse NaN. `largest_score` (if not null) gets the largest |scale * q k_j|.
template <class KeyRow, class ValueRow>
void softmax_row(const float* q_row, int keys, int head_dim, float scale, KeyRow key_row, ValueRow value_row,
                 double* o, double* lse, double* largest_score)
{
    std::vector<double> score(static_cast<std::size_t>(keys));
    double max = -std::numeric_limits<double>::infinity(), largest = 0;
    bool nan = false;
    for (int j = 0; j < keys; ++j) {
        const float* k_row = key_row(j);
        double dot = 0;
        for (int d = 0; d < head_dim; ++d) {
            dot += static_cast<double>(q_row[d]) * k_row[d];
        }
        score[j] = dot * scale;
        nan = nan || std::isnan(score[j]) || std::isinf(score[j]);
        max = std::max(max, score[j]);
        largest = std::max(largest, std::abs(score[j]));
    }
    if (largest_score != nullptr) {
        *largest_score = largest;
    }
    std::fill(o, o + head_dim, 0.0);
    if (keys == 0) {  // nothing to weigh
        *lse = -std::numeric_limits<double>::infinity();
        return;
    }
    if (nan) {  // an infinite score (from an infinite input) is not a number the kernels can weigh either
        std::fill(o, o + head_dim, std::numeric_limits<double>::quiet_NaN());
        *lse = std::numeric_limits<double>::quiet_NaN();
        return;
    }
    double sum = 0;
    for (int j = 0; j < keys; ++j) {
        const double weight = std::exp(score[j] - max);
        sum += weight;
        const float* v_row = value_row(j);
        for (int d = 0; d < head_dim; ++d) {
            o[d] += weight * v_row[d];
        }
    }
    for (int d = 0; d < head_dim; ++d) {
        o[d] /= sum;
    }
    *lse = max + std::log(sum);
}

//! @brief One row of the reference in double: o[0..head_dim) = sum_j p_j v_j over the keys j that query `row` of
//!        (batch `b`, head `h`) sees, p = softmax(scale * q k_j), and `lse` = log(sum_j exp(scale * q k_j)) (natural
//!        log). Keys the row does not see take no part: a NaN in K or V reaches only the rows that see its key. A
//!        NaN or infinite score makes the row's o and lse NaN; a NaN in V makes NaN the columns it is in.
//!        `largest_score` (if not null) gets the largest |scale * q k_j| of the row (the scale of lse's error).
void reference_row(const Problem& p, float scale, const float* q, const float* k, const float* v, int b, int h, int row,
                   double* o, double* lse, double* largest_score = nullptr);

//! @brief The largest |v| of the head of K and V that (batch `b`, head `h`) reads: the unit of the output's error.
double largest_value(const Problem& p, const float* v, int b, int h);

//! @brief What a result may differ from the reference by: |o - ref| <= output * (largest |v| of the head), and
//!        |lse - ref| <= lse_per_score * (1 + largest |score| of the row) + lse_per_key * seq.
struct Tolerance {
    double output, lse_per_score, lse_per_key;
};

//! @brief The chapter's stated tolerance. Output: P rounded to bf16 before the second product (half an ulp, 2^-9, of
//!        each weight, and the sum of the rounded weights off by as much from the fp32 sum that divides them), the
//!        result rounded to bf16 (2^-9 of |o| <= largest |v|), and fp32 sums over up to seq keys (2^-24 each):
//!        3 * 2^-9 + seq * 2^-24 of the largest |v|. Log-sum-exp, in fp32: each score rounded (2^-24 of the largest,
//!        times head_dim products summed, bounded by 2^-16) and seq exponentials summed (2^-23 each).
Tolerance tolerance(const Problem& p);

//! @brief How far some rows of a result are from the reference.
struct Comparison {
    std::size_t rows = 0, values = 0;
    std::size_t out_of_tolerance = 0;  //!< values (and log-sum-exps) beyond the tolerance
    std::size_t nan_mismatches = 0;    //!< values NaN in one of result and reference only
    double max_error = 0;              //!< the largest |o - ref| / largest |v| over values both finite
    double max_lse_error = 0;
    std::int64_t first_row = -1, first_col = -1;  //!< where the first wrong value is (col -1: the log-sum-exp)
    double first_got = 0, first_expected = 0;

    bool passed() const { return out_of_tolerance == 0 && nan_mismatches == 0; }
    //! One line: values and rows compared, the largest errors, and the first wrong value where there is one.
    std::string describe() const;
};

//! @brief Compares one row of a result (`got_o`, head_dim values, and `got_lse`) with the reference row;
//!        `largest_v` and `largest_score` as above, `row_id` what to report.
void compare_row(const float* got_o, float got_lse, const double* expected_o, double expected_lse, int head_dim,
                 int seq, double largest_v, double largest_score, std::int64_t row_id, const Tolerance& t,
                 Comparison& c);

}  // namespace stepwise::attention
