// The decode attention chapter of the timing program: registry entry, the copy ceiling, cuDNN's SDPA over the same
// paged cache and the step rows, at the sizes of a serving engine's decoding step with Llama 3 8B's attention (32
// query heads over 8 K/V heads of 128, bf16, pages of 16 tokens): one sequence of 128k cached tokens, 8 of 32k, 64 of
// 4096 and 256 of 1024 at one new token, 64 of 4096 at four (speculative decoding's drafts checked at once), a ragged
// batch, three small odd sizes, and other pages (64 and 256 tokens) and heads (Llama 3 70B's, head_dim 64) beside
// them. Every row is checked against the double reference at up to 256 rows of the result, spread over every
// sequence, new token and head.
#include "attention/attention_reference.hpp"
#include "core/bf16.hpp"
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"
#include "core/pick.hpp"
#include "core/step_loop.hpp"
#include "decode_attention/decode_attention_cudnn.hpp"
#include "decode_attention/decode_attention_reference.hpp"
#include "decode_attention/decode_attention_sizes.hpp"
#include "decode_attention/decode_attention_steps.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stepwise {
namespace {

namespace da = decode_attention;
namespace at = attention;
using da::problem_size;
using da::size_key;
using da::size_of;
using da::size_text;

//! The main sizes, where every step is measured: the four of one new token a sequence hold 128k, 256k, 256k and 256k
//! cached tokens (512 MiB to 1 GiB of keys and values); the last is 64 x 4096 at four new tokens a sequence.
constexpr da::Size main_sizes[] = {{1, 1, 131072, false},
                                   {8, 1, 32768, false},
                                   {64, 1, 4096, false},
                                   {256, 1, 1024, false},
                                   {64, 4, 4096, false}};
//! Sizes beside them: a ragged batch (64 sequences of 128 to 8191 tokens, about 256k in all), small odd ones (one
//! token; three sequences of 1001 at three new tokens; seven of 4097): lengths that fill no page; 8 x 32768 in pages
//! of 64 and of 256 tokens; and 64 x 4096 with Llama 3 70B's 64 query heads over 8, and with head_dim 64.
constexpr da::Size other_sizes[] = {{64, 1, 8191, true},         {1, 1, 1, false},         {3, 3, 1001, false},
                                    {7, 1, 4097, false},         {8, 1, 32768, false, 1}, {8, 1, 32768, false, 2},
                                    {64, 1, 4096, false, 0, 1}, {64, 1, 4096, false, 0, 2}};
//! The cache lengths of the sweep (one sequence, one new token), doubling from the first to the last.
constexpr int sweep_shortest = 1024;
constexpr int sweep_longest = 131072;
//! The size the front page shows.
constexpr da::Size headline_size{64, 1, 4096, false};
//! Rows of the result compared with the double reference at each size.
constexpr std::int64_t checked_row_count = 256;

const char* const baseline_id = "cudnn_sdpa_paged_bf16";

//! @brief The rows of a result of `total` rows that are checked: every row where there are at most `count`, else
//!        `count` rows spread over the result, each offset within its stretch so that the heads vary, and the last.
std::vector<std::int64_t> rows_to_check(std::int64_t total, std::int64_t count)
{
    std::vector<std::int64_t> rows;
    if (total <= count) {
        for (std::int64_t r = 0; r < total; ++r) {
            rows.push_back(r);
        }
        return rows;
    }
    const std::int64_t stretch = total / count;
    for (std::int64_t i = 0; i < count; ++i) {
        rows.push_back(i * total / count + (i * 7) % stretch);
    }
    if (rows.back() != total - 1) {
        rows.push_back(total - 1);
    }
    return rows;
}

//! The reference at the checked rows of one size.
struct Reference {
    std::vector<std::int64_t> rows;  //!< flat row ids: (b * q_len + i) * heads + h
    std::vector<int> keys;           //!< the keys each row sees
    std::vector<double> o, lse, largest_score;
    double largest_v = 0;            //!< the largest |v| of the pool's pages of this size: the unit of o's error
};

//! @brief The reference rows of `p`, computed by the host's threads (a row of 128k keys is a few tens of ms).
Reference make_reference(const da::Problem& p, float scale, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v)
{
    Reference r;
    r.rows = rows_to_check(std::int64_t{p.batch} * p.q_len * p.heads, checked_row_count);
    r.keys.resize(r.rows.size());
    r.o.resize(r.rows.size() * p.head_dim);
    r.lse.resize(r.rows.size());
    r.largest_score.resize(r.rows.size());
    for (std::size_t e = 0; e < da::pool_elements(p); ++e) {
        r.largest_v = std::max(r.largest_v, std::abs(static_cast<double>(v[e])));
    }
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (std::size_t n = static_cast<std::size_t>(t); n < r.rows.size(); n += threads) {
                const int h = static_cast<int>(r.rows[n] % p.heads);
                const int i = static_cast<int>(r.rows[n] / p.heads % p.q_len);
                const int b = static_cast<int>(r.rows[n] / p.heads / p.q_len);
                r.keys[n] = da::visible_keys(p, b, i);
                da::reference_row(p, scale, q.data(), k.data(), v.data(), b, i, h, r.o.data() + n * p.head_dim,
                                  &r.lse[n], &r.largest_score[n]);
            }
        });
    }
    for (std::thread& t : pool) {
        t.join();
    }
    return r;
}

class DecodeAttentionChapter final : public ChapterBase {
public:
    DecodeAttentionChapter()
        : ChapterBase("decode_attention", "Decode attention: new tokens against a paged K/V cache", "device_read",
                      "DecodeAttention")
    {
        entry_.profile = {"DecodeAttentionProfile.*",
                          "regex:scores_kernel|softmax_kernel|output_kernel|row_kernel|group_kernel|split_kernel|"
                          "merge_kernel",
                          ""};
        entry_.timings = {single_cold_timing()};
        entry_.ceilings = {{"device_read",
                            "a kernel that reads as many bytes as a step must move, 16 bytes a load, contiguous, "
                            "and writes nothing (read_floor: what a kernel that only reads memory achieves; a step "
                            "reads the cache page by page)"},
                           {"device_copy",
                            "cudaMemcpyAsync device to device of half the bytes a step must move (reads and writes "
                            "them: every cached key and value a sequence holds read once, q read, o and the "
                            "log-sum-exps written)"}};
        entry_.baselines = {{baseline_id,
                             "cuDNN's SDPA forward through the cudnn-frontend graph API over the same paged cache "
                             "(page tables for K and V, each sequence's length as a padding mask, the new tokens "
                             "causal at the cache's end), its fastest engine configuration at each size: bf16 q, K, "
                             "V, O, fp32 log-sum-exp, the same layouts, scale and grouping"}};
        for (const da::Step& s : da::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "decode_attention", true, true, {}, s.kernels};
            step.needs = s.needs;
            for (const da::Size& size : main_sizes) {
                step.sizes.push_back(problem_size(size));
            }
            for (const da::Size& size : other_sizes) {
                step.sizes.push_back(problem_size(size));
            }
            entry_.steps.push_back(step);
        }
        entry_.headline = Headline{size_key(headline_size), "single_cold", entry_.steps.front().id,
                                   entry_.steps.back().id};
        // The final step, cuDNN and the read ceiling over the cache's length: one sequence of 1024 to 131072 tokens.
        Sweep sweep{{}, {entry_.steps.back().id, baseline_id, "device_read"}, 0, 1, 2,
                    "cached tokens (one sequence, one new token)"};
        for (int length = sweep_shortest; length <= sweep_longest; length *= 2) {
            sweep.sizes.push_back(problem_size({1, 1, length, false}));
        }
        add_sweep(entry_, std::move(sweep));
        // PyTorch's SDPA over the same caches gathered into contiguous K and V, at the main sizes (every sequence of a
        // size as long: PyTorch's usual call takes no lengths).
        PytorchRow pytorch{"pytorch_sdpa_decode_bf16", {}};
        for (const da::Size& size : main_sizes) {
            pytorch.sizes.push_back(pytorch_size(problem_size(size), "bf16",
                                                 {{"heads", da::model_heads},
                                                  {"kv_heads", da::model_kv_heads},
                                                  {"head_dim", da::model_head_dim}}));
        }
        entry_.pytorch = {pytorch};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        const std::vector<std::string> runnable =
            runnable_steps(da::steps(), step_ids, da::unsupported_reason, chapter["unsupported"]);
        da::CudnnPagedSdpa cudnn;
        if (!cudnn.available()) {
            chapter["unsupported"].push_back({{"id", baseline_id}, {"reason", cudnn.reason()}});
        }
        // One set of inputs for every size: each size's pages are the first of one pool (its table shuffles them),
        // its q a prefix of one q.
        const std::vector<std::int64_t> keys = all_sizes(entry_);
        std::size_t most_q = 0, most_pool = 0, most_rows = 0;
        for (const std::int64_t key : keys) {
            const da::Problem p = da::problem_of(size_of(key), context.seed + static_cast<std::uint64_t>(key));
            most_q = std::max(most_q, da::q_elements(p));
            most_pool = std::max(most_pool, da::pool_elements(p));
            most_rows = std::max(most_rows, da::q_elements(p) / p.head_dim);
        }
        const std::vector<float> q = at::random_inputs(most_q, context.seed);
        const std::vector<float> k = at::random_inputs(most_pool, context.seed + 1);
        const std::vector<float> v = at::random_inputs(most_pool, context.seed + 2);
        // K and V in one allocation, V after K: the ceilings read from it.
        DeviceBuffer<std::uint16_t> d_q(most_q), d_kv(2 * most_pool);
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_q.data(), to_bf16(q).data(), most_q * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_kv.data(), to_bf16(k).data(), most_pool * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(
            cudaMemcpy(d_kv.data() + most_pool, to_bf16(v).data(), most_pool * 2, cudaMemcpyHostToDevice));
        DeviceBuffer<unsigned char> d_o(most_q * 2 + guard_bytes), d_lse(most_rows * sizeof(float) + guard_bytes);
        for (const std::int64_t key : keys) {
            measure_size(context, runnable, cudnn, q, k, v, d_q, d_kv, most_pool, d_o, d_lse, key, chapter);
        }
    }

private:
    void measure_size(MeasureContext& context, const std::vector<std::string>& step_ids, da::CudnnPagedSdpa& cudnn,
                      const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                      const DeviceBuffer<std::uint16_t>& d_q, const DeviceBuffer<std::uint16_t>& d_kv,
                      std::size_t most_pool, DeviceBuffer<unsigned char>& d_o, DeviceBuffer<unsigned char>& d_lse,
                      std::int64_t key, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const da::Size size = size_of(key);
        const da::Problem p = da::problem_of(size, context.seed + static_cast<std::uint64_t>(key));
        const float scale = at::default_scale(p.head_dim);
        const std::size_t q_count = da::q_elements(p), rows = q_count / p.head_dim;
        const std::int64_t moved = static_cast<std::int64_t>(da::bytes_moved(p));
        DeviceBuffer<int> d_table(std::max<std::size_t>(p.page_table.size(), 1)), d_lengths(p.lengths.size());
        DeviceBuffer<int> d_q_lens(p.lengths.size());
        d_table.upload(p.page_table);
        d_lengths.upload(p.lengths);
        d_q_lens.upload(std::vector<int>(p.lengths.size(), p.q_len));
        const auto* bq = reinterpret_cast<const da::bf16*>(d_q.data());
        const da::DevicePages pages{reinterpret_cast<const da::bf16*>(d_kv.data()),
                                    reinterpret_cast<const da::bf16*>(d_kv.data() + most_pool), d_table.data(),
                                    d_lengths.data()};
        auto* o = reinterpret_cast<da::bf16*>(d_o.data());
        auto* lse = reinterpret_cast<float*>(d_lse.data());

        // The ceilings read K and V's buffer from its start: every size's pool is a prefix of it.
        const std::size_t kv_bytes = 2 * most_pool * sizeof(std::uint16_t);
        if (measured_at(entry_, "device_read", key)) {
            const std::size_t read = std::min(static_cast<std::size_t>(moved), kv_bytes) / 16 * 16;
            DeviceBuffer<unsigned> d_sink(1);
            const auto read_all = [&] { return read_floor(d_kv.data(), read, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.at(0),
                               {read_all, key, static_cast<std::int64_t>(read)});
        }
        if (measured_at(entry_, "device_copy", key)) {
            const std::size_t copied = static_cast<std::size_t>(moved / 2 / 16 * 16);  // within K and V's buffer
            DeviceBuffer<unsigned char> d_copy(copied);
            const auto copy = [&] {
                return cudaMemcpyAsync(d_copy.data(), d_kv.data(), copied, cudaMemcpyDeviceToDevice, stream);
            };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.at(1),
                               {copy, key, 2 * static_cast<std::int64_t>(copied)});
        }

        // A row: timed, then a fresh call on poisoned outputs compared with the reference at the checked rows (the
        // reference computed at the first check, from the prefix of each input this size reads).
        std::optional<Reference> reference;
        const at::Tolerance tolerance = at::tolerance(at::Problem{1, 1, 1, *std::max_element(p.lengths.begin(),
                                                                                               p.lengths.end()),
                                                                  p.head_dim, false});
        const auto checked = [&](const std::function<cudaError_t()>& launch) {
            TimedRow row{launch, key, moved};
            row.prepare_check = [&] {
                d_o.fill_bytes(poison_byte, stream);
                d_lse.fill_bytes(poison_byte, stream);
            };
            row.check = [&] {
                if (!reference) {
                    reference = make_reference(p, scale, q, k, v);
                }
                const std::vector<unsigned char> o_bytes = d_o.download(), lse_bytes = d_lse.download();
                const bool guards_kept = guard_kept(o_bytes, q_count * 2) && guard_kept(lse_bytes, rows * 4);
                at::Comparison c;
                std::vector<std::uint16_t> row_bits(static_cast<std::size_t>(p.head_dim));
                for (std::size_t n = 0; n < reference->rows.size(); ++n) {
                    const std::size_t r = static_cast<std::size_t>(reference->rows[n]);
                    std::memcpy(row_bits.data(), o_bytes.data() + r * p.head_dim * 2, row_bits.size() * 2);
                    const std::vector<float> got = from_bf16(row_bits);
                    float got_lse = 0;
                    std::memcpy(&got_lse, lse_bytes.data() + r * sizeof(float), sizeof(float));
                    at::compare_row(got.data(), got_lse, reference->o.data() + n * p.head_dim, reference->lse[n],
                                    p.head_dim, reference->keys[n], reference->largest_v,
                                    reference->largest_score[n], reference->rows[n], tolerance, c);
                }
                return Validation{c.passed() && guards_kept,
                                  c.describe() + " (the double reference at " +
                                      std::to_string(reference->rows.size()) + " rows)" +
                                      (guards_kept ? "" : "; wrote past o or the log-sum-exps"),
                                  // max_rel: of the pool's largest |v|
                                  {{"max_rel", c.max_error}, {"max_lse_error", c.max_lse_error}}};
            };
            return row;
        };

        // cuDNN's plan is picked first, with L2 flushed before every sample as the rows are timed (no candidate:
        // cuDNN refused the problem, and last_status() says why).
        if (cudnn.available() && measured_at(entry_, baseline_id, key)) {
            const da::PagedBuffers buffers{bq, pages.d_k, pages.d_v, d_table.data(), d_lengths.data(),
                                           d_q_lens.data(), o, lse};
            DeviceBuffer<unsigned char>& flush = context.sampler.l2_flush();
            auto [candidates, picked] =
                cudnn.pick(buffers, p, scale, library_pick_rule, flush.data(), flush.size(), stream);
            if (candidates.empty()) {
                chapter["unsupported"].push_back(
                    {{"id", baseline_id}, {"reason", "at " + size_text(size) + ": " + cudnn.last_status()}});
            } else {
                TimedRow row = checked([&] { return cudnn.run(buffers, p, scale, stream); });
                row.fields["library"] = cudnn.version();  // which cuDNN, from where
                add_pick(row.fields, candidates, picked, library_pick_rule);
                add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines.front(), row);
            }
        }

        for (const da::Step& step : da::steps()) {
            if (!measures_step(entry_, step_ids, step.id, key)) {
                continue;
            }
            const auto run = [&](void* d_temp, std::size_t& temp_bytes) {
                return step.decode(d_temp, temp_bytes, bq, pages, o, lse, p, scale, stream);
            };
            add_step_rows_with_workspace(chapter, context, entry_, step.id, run, checked);
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_decode_attention_chapter() { return std::make_unique<DecodeAttentionChapter>(); }

}  // namespace stepwise
