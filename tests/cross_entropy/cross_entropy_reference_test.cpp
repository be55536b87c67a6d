// CPU tests of the cross-entropy chapter's reference, labels and comparison.
#include "cross_entropy/cross_entropy_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace stepwise::cross_entropy {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();
constexpr int ignore = default_ignore_index;

std::vector<double> gradient_of(const std::vector<float>& row, int label, double scale)
{
    std::vector<double> d(row.size());
    row_gradient(row.data(), static_cast<int>(row.size()), label, false, scale, d.data());
    return d;
}

TEST(CrossEntropyReference, TwoByThreeByHand)
{
    // Row 0: logits 0, log 2, log 5: the exponentials 1, 2, 5 sum to 8, so softmax is 1/8, 2/8, 5/8 and
    // logsumexp = log 8. Row 1: all equal, softmax 1/3 each, logsumexp = 7 + log 3.
    const std::vector<float> x = {0.0f, std::log(2.0f), std::log(5.0f), 7.0f, 7.0f, 7.0f};
    const std::vector<int> labels = {2, 0};
    const double loss0 = std::log(8.0) - std::log(5.0f);  // the label's logit as the float holds it
    const double loss1 = std::log(3.0);
    EXPECT_NEAR(row_loss(x.data(), 3, 2), loss0, 1e-7);
    EXPECT_NEAR(row_loss(x.data() + 3, 3, 0), loss1, 1e-12);
    EXPECT_NEAR(mean_loss(x.data(), labels.data(), 2, 3, ignore), (loss0 + loss1) / 2, 1e-7);
    EXPECT_EQ(count_not_ignored(labels.data(), 2, 3, ignore), 2);

    const double scale = gradient_scale(1.0, 2);  // dloss 1 over 2 tokens
    EXPECT_DOUBLE_EQ(scale, 0.5);
    const std::vector<double> d0 = gradient_of({x[0], x[1], x[2]}, 2, scale);
    EXPECT_NEAR(d0[0], 0.5 / 8, 1e-7);
    EXPECT_NEAR(d0[1], 0.5 * 2 / 8, 1e-7);
    EXPECT_NEAR(d0[2], 0.5 * (5.0 / 8 - 1), 1e-7);
    const std::vector<double> d1 = gradient_of({7.0f, 7.0f, 7.0f}, 0, scale);
    EXPECT_NEAR(d1[0], 0.5 * (1.0 / 3 - 1), 1e-15);
    EXPECT_NEAR(d1[1], 0.5 / 3, 1e-15);
    EXPECT_NEAR(d1[2], 0.5 / 3, 1e-15);
    // Each gradient row sums to 0: softmax sums to 1, the one-hot to 1.
    EXPECT_NEAR(std::accumulate(d0.begin(), d0.end(), 0.0), 0.0, 1e-15);
}

TEST(CrossEntropyReference, ConstantRowsAndTheLastColumn)
{
    const int cols = 1000;
    const std::vector<float> row(cols, 123.0f);
    EXPECT_NEAR(row_loss(row.data(), cols, cols - 1), std::log(static_cast<double>(cols)), 1e-12);
    const std::vector<double> d = gradient_of(row, cols - 1, 2.0);
    EXPECT_NEAR(d[0], 2.0 / cols, 1e-15);
    EXPECT_NEAR(d[cols - 1], 2.0 * (1.0 / cols - 1), 1e-15);
    // One value: softmax 1, loss 0, gradient 0.
    const float one = 5.0f;
    EXPECT_EQ(row_loss(&one, 1, 0), 0.0);
    EXPECT_EQ(gradient_of({one}, 0, 1.0), std::vector<double>{0.0});
}

TEST(CrossEntropyReference, HugeLogits)
{
    // fp32 holds 1e30 (and bf16 about it): exp(1e30) would overflow, exp(x - max) does not.
    const std::vector<float> row = {1e30f, 0.0f, -1e30f};
    EXPECT_EQ(row_loss(row.data(), 3, 0), 0.0);  // softmax 1 at the huge logit
    EXPECT_EQ(row_loss(row.data(), 3, 1), 1e30f);
    const std::vector<double> d = gradient_of(row, 1, 1.0);
    EXPECT_EQ(d, (std::vector<double>{1.0, -1.0, 0.0}));
    // The largest float as well.
    const float big = std::numeric_limits<float>::max();
    const std::vector<float> edge = {big, big};
    EXPECT_NEAR(row_loss(edge.data(), 2, 1), std::log(2.0), 1e-12);
}

TEST(CrossEntropyReference, IgnoredTokensAndLabelsOutOfRange)
{
    const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    EXPECT_TRUE(is_ignored(ignore, 3, ignore));
    EXPECT_TRUE(is_ignored(3, 3, ignore));   // out of range: treated as ignored
    EXPECT_TRUE(is_ignored(-1, 3, ignore));
    EXPECT_FALSE(is_ignored(0, 3, ignore));
    EXPECT_FALSE(is_ignored(2, 3, ignore));
    const std::vector<int> one_kept = {ignore, 1};
    EXPECT_EQ(count_not_ignored(one_kept.data(), 2, 3, ignore), 1);
    EXPECT_DOUBLE_EQ(mean_loss(x.data(), one_kept.data(), 2, 3, ignore), row_loss(x.data() + 3, 3, 1));
    std::vector<double> d(3, 42.0);
    row_gradient(x.data(), 3, ignore, true, 0.5, d.data());
    EXPECT_EQ(d, (std::vector<double>{0.0, 0.0, 0.0}));
}

TEST(CrossEntropyReference, EveryTokenIgnoredIsNaN)
{
    // PyTorch's F.cross_entropy(reduction='mean') divides by the tokens not ignored: 0 / 0 = NaN.
    const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
    const std::vector<int> labels = {ignore, ignore};
    EXPECT_EQ(count_not_ignored(labels.data(), 2, 2, ignore), 0);
    EXPECT_TRUE(std::isnan(mean_loss(x.data(), labels.data(), 2, 2, ignore)));
    EXPECT_TRUE(std::isinf(gradient_scale(1.0, 0)));
}

TEST(CrossEntropyReference, NaNAndInfinitiesStayInTheirRow)
{
    const std::vector<float> x = {1.0f, nan, 3.0f,    // NaN: this row's loss and gradient are NaN
                                  1.0f, 2.0f, 3.0f,   // a finite row
                                  -inf, 0.0f, -inf,   // -inf elements give 0
                                  1.0f, inf, 0.0f,    // +inf: NaN
                                  -inf, -inf, -inf};  // -inf only: NaN
    const std::vector<int> labels = {0, 2, 1, 0, 0};
    EXPECT_TRUE(std::isnan(row_loss(x.data(), 3, 0)));
    EXPECT_TRUE(std::isfinite(row_loss(x.data() + 3, 3, 2)));
    EXPECT_EQ(row_loss(x.data() + 6, 3, 1), 0.0);
    EXPECT_EQ(row_loss(x.data() + 6, 3, 0), std::numeric_limits<double>::infinity());  // the label at -inf
    EXPECT_TRUE(std::isnan(row_loss(x.data() + 9, 3, 0)));
    EXPECT_TRUE(std::isnan(row_loss(x.data() + 12, 3, 0)));
    EXPECT_TRUE(std::isnan(mean_loss(x.data(), labels.data(), 5, 3, ignore)));
    for (const double v : gradient_of({x[0], x[1], x[2]}, 0, 1.0)) {
        EXPECT_TRUE(std::isnan(v));
    }
    const std::vector<double> finite = gradient_of({x[3], x[4], x[5]}, 2, 1.0);
    for (const double v : finite) {
        EXPECT_TRUE(std::isfinite(v));
    }
    EXPECT_EQ(gradient_of({-inf, 0.0f, -inf}, 1, 1.0), (std::vector<double>{0.0, 0.0, 0.0}));
    // Ignoring the NaN row leaves a finite mean.
    const std::vector<int> skip_nan = {ignore, 2, 1, ignore, ignore};
    EXPECT_TRUE(std::isfinite(mean_loss(x.data(), skip_nan.data(), 5, 3, ignore)));
}

TEST(CrossEntropyReference, RandomLabelsAreInRangeOrIgnored)
{
    const std::vector<int> labels = random_labels(10000, 37, ignore, 10, 3);
    std::size_t ignored = 0;
    for (const int label : labels) {
        if (label == ignore) {
            ++ignored;
        } else {
            EXPECT_GE(label, 0);
            EXPECT_LT(label, 37);
        }
    }
    EXPECT_GT(ignored, 500u);  // about 1000
    EXPECT_LT(ignored, 1500u);
    EXPECT_EQ(random_labels(100, 5, ignore, 0, 1).size(), 100u);
    for (const int label : random_labels(100, 5, ignore, 0, 1)) {
        EXPECT_NE(label, ignore);
    }
}

TEST(CrossEntropyReference, ComparisonFindsWrongValuesAndNaN)
{
    const int cols = 100;
    const std::vector<float> row = random_logits(cols, 11);
    const double scale = 1.0 / 64;
    const std::vector<double> expected = gradient_of(row, 17, scale);
    const Tolerance t = gradient_tolerance(cols, false);
    std::vector<float> got(expected.begin(), expected.end());
    Comparison exact;
    compare_gradient_row(got.data(), expected.data(), cols, 17, scale, 0, t, exact);
    EXPECT_TRUE(exact.passed()) << exact.describe(t);

    got[3] *= 1.001f;
    Comparison off;
    compare_gradient_row(got.data(), expected.data(), cols, 17, scale, 5, t, off);
    EXPECT_FALSE(off.passed());
    EXPECT_EQ(off.first_row, 5);
    EXPECT_EQ(off.first_col, 3);

    got[3] = nan;
    Comparison with_nan;
    compare_gradient_row(got.data(), expected.data(), cols, 17, scale, 0, t, with_nan);
    EXPECT_EQ(with_nan.nan_mismatches, 1u);

    const Tolerance lt = loss_tolerance(1000, 1000);  // 2e-5 + 2000 * 2^-24: about 1.4e-4
    EXPECT_TRUE(loss_matches(5.0 * (1 + 1e-5), 5.0, lt));
    EXPECT_FALSE(loss_matches(5.01, 5.0, lt));
    EXPECT_TRUE(loss_matches(std::nan(""), std::nan(""), lt));
    EXPECT_FALSE(loss_matches(5.0, std::nan(""), lt));
    EXPECT_FALSE(loss_matches(std::nan(""), 5.0, lt));
    EXPECT_LT(gradient_tolerance(1000, false).relative, gradient_tolerance(1000, true).relative);
}

}  // namespace
}  // namespace stepwise::cross_entropy
