#include "attention_backward/attention_backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace stepwise::attention_backward {

namespace {

//! The offset of row `row` of head `head` of batch `b` in a [batch, head_count, seq, head_dim] tensor.
std::size_t offset(const Problem& p, int b, int head, int head_count, int row)
{
    return ((static_cast<std::size_t>(b) * head_count + head) * p.seq + row) * p.head_dim;
}

int group_size(const Problem& p) { return p.heads / p.kv_heads; }

double dot(const float* a, const float* b, int n)
{
    double sum = 0;
    for (int d = 0; d < n; ++d) {
        sum += static_cast<double>(a[d]) * b[d];
    }
    return sum;
}

double dot_magnitude(const float* a, const float* b, int n)
{
    double sum = 0;
    for (int d = 0; d < n; ++d) {
        sum += std::abs(static_cast<double>(a[d]) * b[d]);
    }
    return sum;
}

//! What query row `i` (of head `h`, statistics `stats`) and key row `j` (of K/V head `kv`) give each other: P, dS
//! and the magnitude that dS's error scales with.
struct Pair {
    double p, ds, ds_magnitude;
};

Pair pair(const Problem& p, float scale, const float* q_row, const float* k_row, const float* v_row,
          const float* d_o_row, const RowStatistics& stats, int i)
{
    const double probability = std::exp(dot(q_row, k_row, p.head_dim) * scale - stats.lse[i]);
    const double d_p = dot(d_o_row, v_row, p.head_dim);
    return {probability, probability * (d_p - stats.d[i]),
            probability * (dot_magnitude(d_o_row, v_row, p.head_dim) + stats.d_magnitude[i])};
}

}  // namespace

RowStatistics row_statistics(const Problem& p, float scale, const float* q, const float* k, const float* v,
                             const float* d_o, int b, int h)
{
    RowStatistics stats{std::vector<double>(p.seq), std::vector<double>(p.seq), std::vector<double>(p.seq)};
    std::vector<double> o(p.head_dim);
    for (int i = 0; i < p.seq; ++i) {
        attention::reference_row(p, scale, q, k, v, b, h, i, o.data(), &stats.lse[i]);
        const float* d_o_row = d_o + offset(p, b, h, p.heads, i);
        double d = 0, magnitude = 0;
        for (int e = 0; e < p.head_dim; ++e) {
            d += d_o_row[e] * o[e];
            magnitude += std::abs(d_o_row[e] * o[e]);
        }
        stats.d[i] = d;
        stats.d_magnitude[i] = magnitude;
    }
    return stats;
}

RowStatistics row_statistics_from_forward(const Problem& p, const float* o, const float* lse, const float* d_o, int b,
                                          int h)
{
    RowStatistics stats{std::vector<double>(p.seq), std::vector<double>(p.seq), std::vector<double>(p.seq)};
    for (int i = 0; i < p.seq; ++i) {
        const std::size_t at = offset(p, b, h, p.heads, i);
        double d = 0, magnitude = 0;
        for (int e = 0; e < p.head_dim; ++e) {
            d += static_cast<double>(d_o[at + e]) * o[at + e];
            magnitude += std::abs(static_cast<double>(d_o[at + e]) * o[at + e]);
        }
        stats.lse[i] = lse[(static_cast<std::size_t>(b) * p.heads + h) * p.seq + i];
        stats.d[i] = d;
        stats.d_magnitude[i] = magnitude;
    }
    return stats;
}

Gradient reference_dq(const Problem& p, float scale, const float* q, const float* k, const float* v, const float* d_o,
                      const RowStatistics& stats, int b, int h, int row)
{
    Gradient dq{std::vector<double>(p.head_dim, 0.0), std::vector<double>(p.head_dim, 0.0)};
    const int kv = h / group_size(p);
    const float* q_row = q + offset(p, b, h, p.heads, row);
    const float* d_o_row = d_o + offset(p, b, h, p.heads, row);
    const int keys = p.causal ? row + 1 : p.seq;
    for (int j = 0; j < keys; ++j) {
        const float* k_row = k + offset(p, b, kv, p.kv_heads, j);
        const Pair x = pair(p, scale, q_row, k_row, v + offset(p, b, kv, p.kv_heads, j), d_o_row, stats, row);
        for (int d = 0; d < p.head_dim; ++d) {
            dq.value[d] += scale * x.ds * k_row[d];
            dq.magnitude[d] += scale * x.ds_magnitude * std::abs(k_row[d]);
        }
    }
    return dq;
}

void reference_dk_dv(const Problem& p, float scale, const float* q, const float* k, const float* v, const float* d_o,
                     const std::vector<RowStatistics>& group_stats, int b, int kv_head, int key, Gradient& dk,
                     Gradient& dv)
{
    dk = {std::vector<double>(p.head_dim, 0.0), std::vector<double>(p.head_dim, 0.0)};
    dv = dk;
    const float* k_row = k + offset(p, b, kv_head, p.kv_heads, key);
    const float* v_row = v + offset(p, b, kv_head, p.kv_heads, key);
    for (int g = 0; g < group_size(p); ++g) {
        const int h = kv_head * group_size(p) + g;
        for (int i = p.causal ? key : 0; i < p.seq; ++i) {
            const float* q_row = q + offset(p, b, h, p.heads, i);
            const float* d_o_row = d_o + offset(p, b, h, p.heads, i);
            const Pair x = pair(p, scale, q_row, k_row, v_row, d_o_row, group_stats[g], i);
            for (int d = 0; d < p.head_dim; ++d) {
                dv.value[d] += x.p * d_o_row[d];
                dv.magnitude[d] += x.p * std::abs(d_o_row[d]);
                dk.value[d] += scale * x.ds * q_row[d];
                dk.magnitude[d] += scale * x.ds_magnitude * std::abs(q_row[d]);
            }
        }
    }
}

Tolerance tolerance(const Problem& p)
{
    return {4 * std::ldexp(1.0, -9) + std::ldexp(1.0, -16) + p.seq * std::ldexp(1.0, -24), std::ldexp(1.0, -9)};
}

void compare_row(const float* got, const Gradient& expected, std::int64_t row_id, const Tolerance& t, Comparison& c)
{
    ++c.rows;
    for (std::size_t d = 0; d < expected.value.size(); ++d) {
        ++c.values;
        const double value = got[d], reference = expected.value[d];
        bool wrong = false;
        if (std::isnan(value) || std::isnan(reference)) {
            wrong = std::isnan(value) != std::isnan(reference);
            c.nan_mismatches += wrong ? 1 : 0;
        } else {
            const double error = std::abs(value - reference);
            const double bound = t.relative * expected.magnitude[d] + t.rounding * std::abs(reference);
            if (expected.magnitude[d] > 0) {
                c.max_error = std::max(c.max_error, error / expected.magnitude[d]);
            }
            wrong = !(error <= bound);
            c.out_of_tolerance += wrong ? 1 : 0;
        }
        if (wrong && c.first_row < 0) {
            c.first_row = row_id;
            c.first_col = static_cast<std::int64_t>(d);
            c.first_got = value;
            c.first_expected = reference;
        }
    }
}

std::string Comparison::describe(const std::string& what) const
{
    std::ostringstream s;
    s << what << ": " << values << " values of " << rows << " rows; max error " << max_error
      << " of the terms' magnitude";
    if (first_row >= 0) {
        s << "; first wrong: row " << first_row << " col " << first_col << " got " << first_got << " expected "
          << first_expected << " (" << out_of_tolerance << " beyond the tolerance, " << nan_mismatches
          << " NaN mismatches)";
    }
    return s.str();
}

}  // namespace stepwise::attention_backward
