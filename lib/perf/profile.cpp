#include "monitor/perf/profile.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace monitor::perf {
namespace {

std::vector<ProfileLine> top_lines(const std::map<std::string, std::uint64_t>& counts,
                                   std::uint64_t total, std::size_t top) {
    std::vector<ProfileLine> lines;
    lines.reserve(counts.size());
    for (const auto& [name, n] : counts) {
        lines.push_back(
            {name, n,
             total == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(total)});
    }
    std::ranges::stable_sort(lines, std::ranges::greater{}, &ProfileLine::samples);
    if (top != 0 && lines.size() > top) lines.resize(top);
    return lines;
}

}  // namespace

SampleLabel Profile::label(const Sample& s, AddressNames& names) {
    if (s.pid == 0) return {"[idle]", "[idle]"};
    if (s.mode == SampleMode::Kernel) {
        auto n = names.kernel(s.ip);
        if (n.function.empty()) return {n.object, n.object};
        return {fmt::format("{} ({})", n.function, n.object), n.object};
    }
    if (s.mode == SampleMode::User) {
        auto n = names.name(s.pid, s.ip);
        // Code without a symbol is one line per object; --range shows its addresses.
        if (n.function.empty()) return {fmt::format("[no symbol] ({})", n.object), n.object};
        return {fmt::format("{} ({})", n.function, n.object), n.object};
    }
    return {"[other mode]", "[other mode]"};
}

void Profile::add(const Sample& s, const SampleLabel& label) {
    count(s);
    addresses_[s.ip] += 1;
    functions_[label.function] += 1;
    objects_[label.object] += 1;
}

void Profile::count(const Sample& s) {
    ++samples_;
    if (s.pid == 0) {
        ++modes_.idle;
    } else if (s.mode == SampleMode::Kernel) {
        ++modes_.kernel;
    } else if (s.mode == SampleMode::User) {
        ++modes_.user;
    } else {
        ++modes_.other;
    }
}

void Profile::add(const DrainStats& drain) {
    lost_ += drain.lost;
    throttled_ += drain.throttled;
}

ProfileReport Profile::report(std::size_t top) const {
    return {.samples = samples_,
            .lost = lost_,
            .throttled = throttled_,
            .modes = modes_,
            .functions = top_lines(functions_, samples_, top),
            .objects = top_lines(objects_, samples_, top)};
}

Result<std::size_t> histogram_buckets(std::uint64_t start, std::uint64_t end,
                                      std::uint64_t bucket_size, std::size_t max_buckets) {
    if (end <= start) {
        return fail(Status::BadArg,
                    fmt::format("address range {:#x}-{:#x} is empty: give its start and an end "
                                "above it",
                                start, end));
    }
    if (bucket_size == 0) return fail(Status::BadArg, "a bucket of 0 bytes: give 1 or more");
    const std::uint64_t span = end - start;
    const std::uint64_t n = span / bucket_size + (span % bucket_size != 0 ? 1 : 0);
    if (n > max_buckets) {
        return fail(Status::BadArg,
                    fmt::format("address range {:#x}-{:#x} in {}-byte buckets is {} buckets, more "
                                "than {}: give a narrower range or buckets of {} bytes or more",
                                start, end, bucket_size, n, max_buckets,
                                span / max_buckets + (span % max_buckets != 0 ? 1 : 0)));
    }
    return static_cast<std::size_t>(n);
}

Result<AddressHistogram> Profile::histogram(std::uint64_t start, std::uint64_t end,
                                            std::uint64_t bucket_size,
                                            std::size_t max_buckets) const {
    auto n = histogram_buckets(start, end, bucket_size, max_buckets);
    if (!n) return std::unexpected(n.error());
    AddressHistogram h{.start = start, .bucket_size = bucket_size};
    h.buckets.assign(*n, 0);
    for (auto it = addresses_.lower_bound(start); it != addresses_.end() && it->first < end; ++it) {
        h.buckets[static_cast<std::size_t>((it->first - start) / bucket_size)] += it->second;
        h.samples += it->second;
    }
    return h;
}

}  // namespace monitor::perf
