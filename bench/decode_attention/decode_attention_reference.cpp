#include "decode_attention/decode_attention_reference.hpp"

#include "attention/attention_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace stepwise::decode_attention {

bool valid(const Problem& p)
{
    if (p.batch < 1 || p.q_len < 1 || p.heads < 1 || p.kv_heads < 1 || p.head_dim < 1 || p.page_size < 1 ||
        p.heads % p.kv_heads != 0 || p.num_pages < 0 || p.max_pages < 0 ||
        p.lengths.size() != static_cast<std::size_t>(p.batch) ||
        p.page_table.size() != static_cast<std::size_t>(p.batch) * p.max_pages) {
        return false;
    }
    for (int b = 0; b < p.batch; ++b) {
        const int length = p.lengths[b];
        if (length < 0 || static_cast<std::int64_t>(length) > static_cast<std::int64_t>(p.max_pages) * p.page_size) {
            return false;
        }
        const int pages = (length + p.page_size - 1) / p.page_size;
        for (int page = 0; page < pages; ++page) {
            const int pool_page = p.page_table[static_cast<std::size_t>(b) * p.max_pages + page];
            if (pool_page < 0 || pool_page >= p.num_pages) {
                return false;
            }
        }
    }
    return true;
}

std::size_t q_elements(const Problem& p)
{
    return static_cast<std::size_t>(p.batch) * p.q_len * p.heads * p.head_dim;
}

std::size_t page_elements(const Problem& p)
{
    return static_cast<std::size_t>(p.page_size) * p.kv_heads * p.head_dim;
}

std::size_t pool_elements(const Problem& p) { return static_cast<std::size_t>(p.num_pages) * page_elements(p); }

int visible_keys(const Problem& p, int b, int i)
{
    const int length = p.lengths[b];
    return std::clamp(length - p.q_len + i + 1, 0, length);
}

std::size_t cache_offset(const Problem& p, int b, int j, int kv_head)
{
    const int pool_page = p.page_table[static_cast<std::size_t>(b) * p.max_pages + j / p.page_size];
    return ((static_cast<std::size_t>(pool_page) * p.page_size + j % p.page_size) * p.kv_heads + kv_head) *
           p.head_dim;
}

double bytes_moved(const Problem& p)
{
    double cached = 0;
    for (const int length : p.lengths) {
        cached += static_cast<double>(length);
    }
    const double kv = 2.0 * cached * p.kv_heads * p.head_dim * 2;                   // K and V, bf16
    const double q_and_o = 2.0 * static_cast<double>(q_elements(p)) * 2;           // bf16 each
    const double lse = 4.0 * static_cast<double>(p.batch) * p.q_len * p.heads;     // fp32
    return kv + q_and_o + lse;
}

void assign_pages(Problem& p, std::uint64_t seed, int shared_prefix_pages)
{
    p.max_pages = 0;
    std::vector<int> pages_of(p.batch);
    for (int b = 0; b < p.batch; ++b) {
        pages_of[b] = (p.lengths[b] + p.page_size - 1) / p.page_size;
        p.max_pages = std::max(p.max_pages, pages_of[b]);
    }
    const int shared = p.batch >= 2 ? std::min({shared_prefix_pages, pages_of[0], pages_of[1]}) : 0;
    p.num_pages = std::accumulate(pages_of.begin(), pages_of.end(), 0) - shared;
    std::vector<int> order(p.num_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
    p.page_table.assign(static_cast<std::size_t>(p.batch) * p.max_pages, -1);
    int next = 0;
    for (int b = 0; b < p.batch; ++b) {
        for (int page = 0; page < pages_of[b]; ++page) {
            const bool borrowed = b == 1 && page < shared;
            p.page_table[static_cast<std::size_t>(b) * p.max_pages + page] =
                borrowed ? p.page_table[page] : order[next++];
        }
    }
}

void reference_row(const Problem& p, float scale, const float* q, const float* k_pool, const float* v_pool, int b,
                   int i, int h, double* o, double* lse, double* largest_score)
{
    const int kv_head = h / (p.heads / p.kv_heads);
    const float* q_row = q + ((static_cast<std::size_t>(b) * p.q_len + i) * p.heads + h) * p.head_dim;
    const int keys = visible_keys(p, b, i);
    attention::softmax_row(
        q_row, keys, p.head_dim, scale, [&](int j) { return k_pool + cache_offset(p, b, j, kv_head); },
        [&](int j) { return v_pool + cache_offset(p, b, j, kv_head); }, o, lse, largest_score);
}

}  // namespace stepwise::decode_attention
