#include "attention/attention_reference.hpp"

#include "core/bf16.hpp"
#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace stepwise::attention {

bool valid(const Problem& p)
{
    return p.batch >= 1 && p.heads >= 1 && p.kv_heads >= 1 && p.seq >= 1 && p.head_dim >= 1 &&
           p.heads % p.kv_heads == 0;
}

std::size_t q_elements(const Problem& p)
{
    return static_cast<std::size_t>(p.batch) * p.heads * p.seq * p.head_dim;
}

std::size_t kv_elements(const Problem& p)
{
    return static_cast<std::size_t>(p.batch) * p.kv_heads * p.seq * p.head_dim;
}

double counted_flops(const Problem& p)
{
    const double full = 4.0 * p.batch * p.heads * static_cast<double>(p.seq) * p.seq * p.head_dim;
    return p.causal ? full / 2 : full;
}

float default_scale(int head_dim) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))); }

std::vector<float> random_inputs(std::size_t count, std::uint64_t seed)
{
    return round_to_bf16(uniform_values(count, -1.0f, 1.0f, seed));
}

namespace {

//! The offset of row `row` of head `head` of batch `b` in a [batch, head_count, seq, head_dim] tensor.
std::size_t offset(const Problem& p, int b, int head, int head_count, int row)
{
    return ((static_cast<std::size_t>(b) * head_count + head) * p.seq + row) * p.head_dim;
}

int kv_head_of(const Problem& p, int h) { return h / (p.heads / p.kv_heads); }

}  // namespace

void reference_row(const Problem& p, float scale, const float* q, const float* k, const float* v, int b, int h, int row,
                   double* o, double* lse, double* largest_score)
{
    const int kv = kv_head_of(p, h);
    const float* q_row = q + offset(p, b, h, p.heads, row);
    const int keys = p.causal ? row + 1 : p.seq;
    softmax_row(
        q_row, keys, p.head_dim, scale, [&](int j) { return k + offset(p, b, kv, p.kv_heads, j); },
        [&](int j) { return v + offset(p, b, kv, p.kv_heads, j); }, o, lse, largest_score);
}

double largest_value(const Problem& p, const float* v, int b, int h)
{
    const float* head = v + offset(p, b, kv_head_of(p, h), p.kv_heads, 0);
    double largest = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.seq) * p.head_dim; ++i) {
        largest = std::max(largest, static_cast<double>(std::abs(head[i])));  // NaN: left out
    }
    return largest;
}

Tolerance tolerance(const Problem& p)
{
    return {3 * std::ldexp(1.0, -9) + p.seq * std::ldexp(1.0, -24), std::ldexp(1.0, -16), std::ldexp(1.0, -23)};
}

void compare_row(const float* got_o, float got_lse, const double* expected_o, double expected_lse, int head_dim,
                 int seq, double largest_v, double largest_score, std::int64_t row_id, const Tolerance& t,
                 Comparison& c)
{
    ++c.rows;
    const auto check = [&](double got, double expected, double bound, double unit, std::int64_t col, double& max) {
        ++c.values;
        bool wrong = false;
        if (std::isnan(got) || std::isnan(expected)) {
            wrong = std::isnan(got) != std::isnan(expected);
            c.nan_mismatches += wrong ? 1 : 0;
        } else {
            const double error = std::abs(got - expected);
            max = std::max(max, error / unit);
            wrong = !(error <= bound);
            c.out_of_tolerance += wrong ? 1 : 0;
        }
        if (wrong && c.first_row < 0) {
            c.first_row = row_id;
            c.first_col = col;
            c.first_got = got;
            c.first_expected = expected;
        }
    };
    const double unit = largest_v > 0 ? largest_v : 1.0;
    for (int d = 0; d < head_dim; ++d) {
        check(got_o[d], expected_o[d], t.output * unit, unit, d, c.max_error);
    }
    check(got_lse, expected_lse, t.lse_per_score * (1 + largest_score) + t.lse_per_key * seq, 1.0, -1,
          c.max_lse_error);
}

std::string Comparison::describe() const
{
    std::ostringstream s;
    s << values << " values of " << rows << " rows; max error " << max_error << " of the largest |v|, log-sum-exp "
      << max_lse_error;
    if (first_row >= 0) {
        s << "; first wrong: row " << first_row << (first_col < 0 ? " log-sum-exp" : " col " + std::to_string(first_col))
          << " got " << first_got << " expected " << first_expected << " (" << out_of_tolerance
          << " beyond the tolerance, " << nan_mismatches << " NaN mismatches)";
    }
    return s.str();
}

}  // namespace stepwise::attention
