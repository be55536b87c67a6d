#include "core/progress.hpp"

#include <algorithm>
#include <utility>

namespace stepwise {

std::optional<ChapterEstimate> ChapterEstimate::of(const nlohmann::json& previous, const std::string& id)
{
    if (!previous.is_object() || !previous.contains("chapters")) {
        return std::nullopt;
    }
    for (const nlohmann::json& chapter : previous.at("chapters")) {
        if (chapter.value("id", "") != id || !chapter.contains("run") ||
            !chapter.at("run").value("seconds", nlohmann::json()).is_number()) {
            continue;
        }
        ChapterEstimate estimate;
        estimate.previous_seconds = chapter.at("run").at("seconds").get<double>();
        for (const char* list : {"steps", "ceilings", "baselines", "autotune"}) {
            estimate.previous_rows += chapter.value(list, nlohmann::json::array()).size();
        }
        if (estimate.previous_rows == 0 || estimate.previous_seconds <= 0) {
            return std::nullopt;
        }
        return estimate;
    }
    return std::nullopt;
}

double ChapterEstimate::seconds_left(std::size_t rows_done, double elapsed) const
{
    const double done = std::min(1.0, static_cast<double>(rows_done) / static_cast<double>(previous_rows));
    double pace = 1.0;
    if (done >= 0.1) {
        pace = std::clamp(elapsed / (done * previous_seconds), 0.25, 4.0);
    }
    return (1.0 - done) * previous_seconds * pace;
}

Progress::Progress(std::FILE* out, nlohmann::json previous) : out_(out), previous_(std::move(previous)) {}

void Progress::begin_chapter(const std::string& id)
{
    chapter_ = id;
    estimate_ = ChapterEstimate::of(previous_, id);
    rows_ = 0;
    begin_ = std::chrono::steady_clock::now();
    if (estimate_) {
        std::fprintf(out_, "stepwise_bench: %s: %zu rows and %.0f s in the earlier measurement of this GPU\n",
                     id.c_str(), estimate_->previous_rows, estimate_->previous_seconds);
    }
}

void Progress::row_done(const std::string& what, const std::string& timing, double median_ms, std::size_t samples)
{
    ++rows_;
    const double elapsed = chapter_seconds();
    std::string rows = std::to_string(rows_);
    std::string left;
    if (estimate_) {
        rows += "/" + std::to_string(std::max(rows_, estimate_->previous_rows));
        char text[48];
        std::snprintf(text, sizeof text, ", about %.0f s left", estimate_->seconds_left(rows_, elapsed));
        left = text;
    }
    std::fprintf(out_, "stepwise_bench: %s [%s, %.0f s%s] %s, %s: median %.4g ms of %zu samples\n", chapter_.c_str(),
                 rows.c_str(), elapsed, left.c_str(), what.c_str(), timing.c_str(), median_ms, samples);
    std::fflush(out_);
}

double Progress::chapter_seconds() const
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
}

}  // namespace stepwise
