// The attention backward chapter's CPU reference and comparison (shared by tests and timing program).
#pragma once

#include "attention/attention_reference.hpp"  // Problem, valid(), q_elements(), kv_elements(), default_scale()

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::attention_backward {

using attention::Problem;

//! @brief What each row of one head contributes to every gradient, from the forward: the log-sum-exp of its scores
//!        (natural log) and D = sum_d dO[d] O[d], both in double from the exact forward (not the GPU's rounded O),
//!        and sum_d |dO[d] O[d]|, the scale of D's error where the GPU takes D from its rounded O.
struct RowStatistics {
    std::vector<double> lse, d, d_magnitude;  //!< seq values each
};

//! @brief The row statistics of (batch `b`, head `h`): O(seq^2 head_dim) work.
RowStatistics row_statistics(const Problem& p, float scale, const float* q, const float* k, const float* v,
                             const float* d_o, int b, int h);

//! @brief The row statistics of (batch `b`, head `h`) from a forward's outputs as a backward step reads them: its O
//!        (bf16 values, as floats) for D, and its log-sum-exp (fp32) as it is: O(seq head_dim) work, where
//!        row_statistics() recomputes the forward. The gradients from these measure the backward pass alone.
RowStatistics row_statistics_from_forward(const Problem& p, const float* o, const float* lse, const float* d_o, int b,
                                          int h);

//! @brief One gradient value and the sum of the magnitudes of the terms it adds up (the unit of its error).
struct Gradient {
    std::vector<double> value, magnitude;  //!< head_dim values each
};

//! @brief dQ of query `row` of (batch `b`, head `h`): scale sum_j dS_j k_j over the keys j it sees, with
//!        dS_j = P_j (dP_j - D), P_j = exp(scale q k_j - lse), dP_j = dO v_j. `stats` are the head's.
//!        The magnitude of column d: scale sum_j P_j (sum_e |dO[e] v_j[e]| + sum_e |dO[e] O[e]|) |k_j[d]|.
Gradient reference_dq(const Problem& p, float scale, const float* q, const float* k, const float* v, const float* d_o,
                      const RowStatistics& stats, int b, int h, int row);

//! @brief dK and dV of key `key` of (batch `b`, K/V head `kv_head`): sums over the query rows that see it, in every
//!        query head of the group that shares the K/V head. dV = sum_i P_i dO_i, dK = scale sum_i dS_i q_i.
//!        `group_stats[g]` are the statistics of the group's g-th query head. Magnitudes: dV's sum_i P_i |dO_i[d]|,
//!        dK's as dQ's, with q_i[d] for k_j[d].
void reference_dk_dv(const Problem& p, float scale, const float* q, const float* k, const float* v, const float* d_o,
                     const std::vector<RowStatistics>& group_stats, int b, int kv_head, int key, Gradient& dk,
                     Gradient& dv);

//! @brief What a gradient may differ from the reference by: |got - ref| <= relative * magnitude + rounding * |ref|.
struct Tolerance {
    double relative, rounding;
};

//! @brief The chapter's stated tolerance (see the page): products of bf16 operands in fp32; P and dS rounded to
//!        bf16 before their products (2^-9 each), O rounded to bf16 in D (2^-9), the scores and the saved
//!        log-sum-exp in fp32 (2^-16 of P), and fp32 sums of up to `seq` terms (2^-24 each): 4 * 2^-9 + 2^-16 +
//!        seq * 2^-24 of the magnitude; and the gradient rounded to bf16 (2^-9 of its value).
Tolerance tolerance(const Problem& p);

//! @brief How far some rows of a gradient are from the reference.
struct Comparison {
    std::size_t rows = 0, values = 0;
    std::size_t out_of_tolerance = 0;  //!< values beyond the tolerance
    std::size_t nan_mismatches = 0;    //!< values NaN in one of result and reference only
    double max_error = 0;              //!< the largest |got - ref| / magnitude over values both finite
    std::int64_t first_row = -1, first_col = -1;
    double first_got = 0, first_expected = 0;

    bool passed() const { return out_of_tolerance == 0 && nan_mismatches == 0; }
    //! One line: `what` (dQ, dK or dV), values and rows compared, the largest error, the first wrong value.
    std::string describe(const std::string& what) const;
};

//! @brief Compares one row of a gradient (`got`, head_dim values) with the reference's; `row_id` what to report.
void compare_row(const float* got, const Gradient& expected, std::int64_t row_id, const Tolerance& t, Comparison& c);

}  // namespace stepwise::attention_backward
