// A second of the history as its bytes come back from the disk, which a damaged file or
// another program may have made anything: decoded, it encodes again to the same second (to
// the resolution kept), and a range and a minute of it are summed up without a value outside
// 0 to 100.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "monitor/loading/history_range.hpp"
#include "monitor/loading/history_record.hpp"

namespace {

bool in_range(const std::optional<double>& v) {
    return !v || (std::isfinite(*v) && *v >= 0 && *v <= 100);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto second = monitor::decode_history_second(std::span(data, size));
    if (!second) return 0;
    auto again = monitor::encode_history_second(*second);
    if (!again) std::abort();
    auto back = monitor::decode_history_second(*again);
    if (!back || back->sources.size() != second->sources.size()) std::abort();
    // What was read is what encoding it again keeps: byte for byte.
    if (*monitor::encode_history_second(*back) != *again) std::abort();
    const auto fold = monitor::fold_history_seconds(std::span(&*second, 1));
    if (!monitor::encode_history_second(fold.mean)) std::abort();
    monitor::HistoryRange range(
        monitor::LoadingQuery{.per_cpu = true, .history = true, .states = true});
    const auto t = std::chrono::system_clock::time_point{} + std::chrono::hours{500'000};
    range.add(t, *second);
    range.add(t + std::chrono::seconds{60}, fold.mean, &fold.low, &fold.high);
    const auto report = range.report();
    for (const auto& l : report.machine) {
        if (l.stats && (!in_range(l.stats->avg_prev_min) || !in_range(l.stats->min_prev_min) ||
                        !in_range(l.stats->max_prev_min))) {
            std::abort();
        }
    }
    return 0;
}
