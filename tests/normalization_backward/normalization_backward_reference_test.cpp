// CPU tests of the normalization backward chapter's reference and comparison: a row worked by hand, and the
// reference against central differences of the forward pass in double (statistics recomputed there, so that the
// saved ones the reference takes are checked to be what the forward's gradient needs).
#include "normalization_backward/normalization_backward_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace stepwise::normalization_backward {
namespace {

//! The forward pass in double (LayerNorm with beta, or RMSNorm), and a row's mean and rstd.
std::vector<double> forward(const std::vector<double>& x, const std::vector<double>& gamma, const std::vector<double>& beta,
                            bool layer_norm, double epsilon, double* mean_out = nullptr, double* rstd_out = nullptr)
{
    const int n = static_cast<int>(x.size());
    double mean = 0;
    for (const double v : x) {
        mean += v;
    }
    mean = layer_norm ? mean / n : 0.0;
    double squares = 0;
    for (const double v : x) {
        squares += (v - mean) * (v - mean);
    }
    const double rstd = 1.0 / std::sqrt(squares / n + epsilon);
    std::vector<double> y(x.size());
    for (int j = 0; j < n; ++j) {
        y[j] = (x[j] - mean) * rstd * gamma[j] + (layer_norm ? beta[j] : 0.0);
    }
    if (mean_out != nullptr) {
        *mean_out = mean;
        *rstd_out = rstd;
    }
    return y;
}

//! L = sum dy y: its gradients are the backward pass of dy.
double loss(const std::vector<double>& x, const std::vector<double>& gamma, const std::vector<double>& beta,
            const std::vector<double>& dy, bool layer_norm, double epsilon)
{
    const std::vector<double> y = forward(x, gamma, beta, layer_norm, epsilon);
    double l = 0;
    for (std::size_t j = 0; j < y.size(); ++j) {
        l += dy[j] * y[j];
    }
    return l;
}

TEST(NormBackwardReference, LayerNormOfARowWorkedByHand)
{
    // x = 1, 2, 3, 4: mean 2.5, variance 1.25 (epsilon 0); xhat = (-1.5, -0.5, 0.5, 1.5) rstd.
    const std::vector<float> x = {1, 2, 3, 4}, dy = {1, 0, 0, 0}, gamma = {2, 1, 1, 1};
    const float mean = 2.5f, rstd = static_cast<float>(1.0 / std::sqrt(1.25));
    std::vector<double> dx(4), dgamma(4, 0.0), dbeta(4, 0.0);
    const RowTerms t = layer_norm_backward_row(x.data(), dy.data(), gamma.data(), mean, rstd, 4, dx.data(),
                                               dgamma.data(), dbeta.data());
    const double r = rstd, xhat0 = -1.5 * r;
    // g = (2, 0, 0, 0): mean(g) = 0.5, mean(g xhat) = 2 xhat0 / 4.
    EXPECT_DOUBLE_EQ(t.mean_g, 0.5);
    EXPECT_DOUBLE_EQ(t.mean_g_xhat, 2 * xhat0 / 4);
    EXPECT_DOUBLE_EQ(dx[0], r * (2 - 0.5 - xhat0 * t.mean_g_xhat));
    EXPECT_DOUBLE_EQ(dx[3], r * (0 - 0.5 - 1.5 * r * t.mean_g_xhat));
    EXPECT_EQ(dbeta, (std::vector<double>{1, 0, 0, 0}));
    EXPECT_DOUBLE_EQ(dgamma[0], xhat0);
    EXPECT_EQ(dgamma[1], 0.0);
    // A second row adds to the parameters' gradients.
    layer_norm_backward_row(x.data(), dy.data(), gamma.data(), mean, rstd, 4, dx.data(), dgamma.data(), dbeta.data());
    EXPECT_EQ(dbeta[0], 2.0);
    EXPECT_DOUBLE_EQ(dgamma[0], 2 * xhat0);
}

//! The reference's dx, dgamma (and dbeta) against central differences of L = sum dy y over a few random rows.
void expect_matches_central_differences(bool layer_norm)
{
    std::mt19937_64 gen(20261129);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    const int rows = 3, cols = 37;
    const double epsilon = 1e-5, h = 1e-5;
    std::vector<float> x(rows * cols), dy(rows * cols), gamma(cols), beta(cols);
    for (float& v : x) v = u(gen);
    for (float& v : dy) v = u(gen);
    for (float& v : gamma) v = u(gen);
    for (float& v : beta) v = u(gen);
    std::vector<double> dgamma(cols, 0.0), dbeta(cols, 0.0), numeric_dgamma(cols, 0.0), numeric_dbeta(cols, 0.0);
    for (int i = 0; i < rows; ++i) {
        const auto row = [&](const std::vector<float>& v) {
            return std::vector<double>(v.begin() + i * cols, v.begin() + (i + 1) * cols);
        };
        std::vector<double> xr = row(x), dyr = row(dy), g(gamma.begin(), gamma.end()), b(beta.begin(), beta.end());
        double mean = 0, rstd = 0;
        forward(xr, g, b, layer_norm, epsilon, &mean, &rstd);
        // The statistics as the forward saves them: fp32.
        std::vector<double> dx(cols);
        if (layer_norm) {
            layer_norm_backward_row(x.data() + i * cols, dy.data() + i * cols, gamma.data(), static_cast<float>(mean),
                                    static_cast<float>(rstd), cols, dx.data(), dgamma.data(), dbeta.data());
        } else {
            rms_norm_backward_row(x.data() + i * cols, dy.data() + i * cols, gamma.data(), static_cast<float>(rstd), cols,
                                  dx.data(), dgamma.data());
        }
        for (int j = 0; j < cols; ++j) {
            std::vector<double> up = xr, down = xr;
            up[j] += h;
            down[j] -= h;
            const double numeric = (loss(up, g, b, dyr, layer_norm, epsilon) - loss(down, g, b, dyr, layer_norm, epsilon)) /
                                   (2 * h);
            EXPECT_NEAR(dx[j], numeric, 1e-5 * (1 + std::abs(numeric))) << "row " << i << " col " << j;
            std::vector<double> gu = g, gd = g, bu = b, bd = b;
            gu[j] += h;
            gd[j] -= h;
            bu[j] += h;
            bd[j] -= h;
            numeric_dgamma[j] +=
                (loss(xr, gu, b, dyr, layer_norm, epsilon) - loss(xr, gd, b, dyr, layer_norm, epsilon)) / (2 * h);
            numeric_dbeta[j] +=
                (loss(xr, g, bu, dyr, layer_norm, epsilon) - loss(xr, g, bd, dyr, layer_norm, epsilon)) / (2 * h);
        }
    }
    for (int j = 0; j < cols; ++j) {
        EXPECT_NEAR(dgamma[j], numeric_dgamma[j], 1e-5 * (1 + std::abs(numeric_dgamma[j]))) << "dgamma col " << j;
        if (layer_norm) {
            EXPECT_NEAR(dbeta[j], numeric_dbeta[j], 1e-5 * (1 + std::abs(numeric_dbeta[j]))) << "dbeta col " << j;
        } else {
            EXPECT_EQ(dbeta[j], 0.0);
        }
    }
}

TEST(NormBackwardReference, LayerNormMatchesCentralDifferencesOfTheForward)
{
    expect_matches_central_differences(true);
}

TEST(NormBackwardReference, RmsNormMatchesCentralDifferencesOfTheForward)
{
    expect_matches_central_differences(false);
}

TEST(NormBackwardReference, EqualValuesWithInfiniteRstdAndNaN)
{
    // A row of equal values with epsilon 0: rstd infinite, xhat 0 (the forward gives beta), so dgamma gets 0.
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x(3, 5.0f), dy = {1, 2, 3}, gamma(3, 1.0f);
    std::vector<double> dx(3), dgamma(3, 0.0), dbeta(3, 0.0);
    layer_norm_backward_row(x.data(), dy.data(), gamma.data(), 5.0f, inf, 3, dx.data(), dgamma.data(), dbeta.data());
    EXPECT_EQ(dgamma, (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(dbeta, (std::vector<double>{1, 2, 3}));
    // A NaN in x: its row's dx NaN everywhere, its column's dgamma NaN, dbeta not.
    const std::vector<float> with_nan = {1.0f, nan, 3.0f};
    std::fill(dgamma.begin(), dgamma.end(), 0.0);
    layer_norm_backward_row(with_nan.data(), dy.data(), gamma.data(), 2.0f, 1.0f, 3, dx.data(), dgamma.data(),
                            dbeta.data());
    for (const double v : dx) {
        EXPECT_TRUE(std::isnan(v));
    }
    EXPECT_TRUE(std::isnan(dgamma[1]) && !std::isnan(dgamma[0]) && !std::isnan(dbeta[1]));
}

TEST(NormBackwardReference, ComparisonCountsWhatIsOutOfToleranceOrNaN)
{
    const std::vector<float> x = {1, 2, 3, 4}, dy = {1, -1, 0.5f, 2}, gamma = {1, 1, 1, 1};
    const float mean = 2.5f, rstd = 0.9f;
    std::vector<double> dx(4), dgamma(4, 0.0), dbeta(4, 0.0);
    layer_norm_backward_row(x.data(), dy.data(), gamma.data(), mean, rstd, 4, dx.data(), dgamma.data(), dbeta.data());
    std::vector<float> got(dx.begin(), dx.end());
    Comparison c;
    compare_dx_row(x.data(), dy.data(), gamma.data(), mean, rstd, true, got.data(), dx.data(), 4, 0, 1e-6, c);
    EXPECT_TRUE(c.passed()) << c.describe(1e-6);
    got[2] += 0.01f;
    got[3] = std::numeric_limits<float>::quiet_NaN();
    Comparison wrong;
    compare_dx_row(x.data(), dy.data(), gamma.data(), mean, rstd, true, got.data(), dx.data(), 4, 7, 1e-6, wrong);
    EXPECT_EQ(wrong.out_of_tolerance, 1u);
    EXPECT_EQ(wrong.nan_mismatches, 1u);
    EXPECT_NE(wrong.describe(1e-6).find("dx row 7 col 2"), std::string::npos) << wrong.describe(1e-6);
    // The parameters' gradients against the sums of their terms' magnitudes.
    std::vector<double> magnitude_g(4), magnitude_b(4);
    const float means[] = {mean}, rstds[] = {rstd};
    parameter_magnitudes(x.data(), dy.data(), means, rstds, 1, 4, magnitude_g.data(), magnitude_b.data());
    EXPECT_DOUBLE_EQ(magnitude_b[1], 1.0);
    EXPECT_DOUBLE_EQ(magnitude_g[0], 1.5 * 0.9f);
    std::vector<float> dgamma_got(dgamma.begin(), dgamma.end());
    Comparison p;
    compare_parameter_gradient("dgamma", dgamma_got.data(), dgamma.data(), magnitude_g.data(), 4,
                               parameter_tolerance(1), p);
    EXPECT_TRUE(p.passed()) << p.describe(parameter_tolerance(1));
    dgamma_got[0] = -dgamma_got[0];
    compare_parameter_gradient("dgamma", dgamma_got.data(), dgamma.data(), magnitude_g.data(), 4,
                               parameter_tolerance(1), p);
    EXPECT_FALSE(p.passed());
    EXPECT_NE(p.describe(0).find("dgamma col 0"), std::string::npos) << p.describe(0);
    EXPECT_EQ(p.describe(0).find("values of dx"), std::string::npos) << "names only what it compared: " << p.describe(0);
}

}  // namespace
}  // namespace stepwise::normalization_backward
