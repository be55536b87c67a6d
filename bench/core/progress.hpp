// What the timing program says while it runs: a line per timed row as it finishes, and the chapter's time left as
// an earlier measurement of the same GPU suggests (CPU code, unit-tested).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

namespace stepwise {

//! @brief The time a chapter has left, from an earlier run of it on the same GPU: its seconds and its rows.
struct ChapterEstimate {
    double previous_seconds = 0;
    std::size_t previous_rows = 0;

    //! @brief The earlier run of chapter `id` in `previous` (a schema-2 measurement file, or null); nothing where
    //!        the file has no such chapter, or no time for it.
    static std::optional<ChapterEstimate> of(const nlohmann::json& previous, const std::string& id);

    //! @brief Seconds left after `rows_done` rows in `elapsed` seconds: the earlier run's time for the rows left,
    //!        at this run's pace (elapsed over the earlier time for as many rows, within 1/4 to 4) once a tenth of
    //!        the rows is done.
    double seconds_left(std::size_t rows_done, double elapsed) const;
};

//! @brief Prints, to `out`, one line per row of the chapter being measured (`begin_chapter`), as the row finishes.
class Progress {
public:
    //! @param previous an earlier measurement file of this GPU (schema 2) for the estimates, or null
    Progress(std::FILE* out, nlohmann::json previous);

    void begin_chapter(const std::string& id);
    //! @brief One row timed: `what` names it (step or reference, at its size), `timing` its timing mode.
    void row_done(const std::string& what, const std::string& timing, double median_ms, std::size_t samples);
    //! @brief The seconds since begin_chapter().
    double chapter_seconds() const;

private:
    std::FILE* out_;
    nlohmann::json previous_;
    std::string chapter_;
    std::optional<ChapterEstimate> estimate_;
    std::size_t rows_ = 0;
    std::chrono::steady_clock::time_point begin_ = std::chrono::steady_clock::now();
};

}  // namespace stepwise
