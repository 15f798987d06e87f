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
    if (s.pid == 0) return {"[idle]", "[idle]", "[idle]"};
    return label(s.pid, s.mode, s.ip, names);
}

SampleLabel Profile::label(pid_t pid, SampleMode mode, std::uint64_t ip, AddressNames& names) {
    if (mode == SampleMode::Kernel) {
        auto n = names.kernel(ip);
        if (n.function.empty()) return {n.object, n.object, n.object + "_[k]"};
        return {fmt::format("{} ({})", n.function, n.object), n.object, n.function + "_[k]"};
    }
    if (mode == SampleMode::User) {
        auto n = names.name(pid, ip);
        // Code without a symbol is one line per object; --range shows its addresses.
        if (n.function.empty()) {
            // A frame names the file alone, as flame graphs do: "[libc.so.6]".
            std::string frame = n.object;
            if (frame.starts_with('/')) {
                frame = "[" + frame.substr(frame.rfind('/') + 1) + "]";
            }
            return {fmt::format("[no symbol] ({})", n.object), n.object, std::move(frame)};
        }
        return {fmt::format("{} ({})", n.function, n.object), n.object, n.function};
    }
    return {"[other mode]", "[other mode]", "[other mode]"};
}

void Profile::Tally::count(const Sample& s) {
    ++samples;
    if (s.pid == 0) {
        ++modes.idle;
    } else if (s.mode == SampleMode::Kernel) {
        ++modes.kernel;
    } else if (s.mode == SampleMode::User) {
        ++modes.user;
    } else {
        ++modes.other;
    }
}

void Profile::Tally::add(const Sample& s, const SampleLabel& label) {
    count(s);
    functions[label.function] += 1;
    objects[label.object] += 1;
}

ProfileReport Profile::Tally::report(std::size_t top) const {
    return {.samples = samples,
            .lost = lost,
            .throttled = throttled,
            .unnamed = unnamed,
            .modes = modes,
            .functions = top_lines(functions, samples, top),
            .objects = top_lines(objects, samples, top)};
}

void Profile::add(const Sample& s, const SampleLabel& label, const std::string& stack) {
    all_.add(s, label);
    if (by_cpu_) cpus_[s.cpu].add(s, label);
    if (s.ip >= kept_.start && s.ip < kept_.end) addresses_[s.ip] += 1;
    if (!stack.empty()) {
        if (auto it = stacks_.find(stack); it != stacks_.end()) {
            ++it->second;
        } else if (stacks_.size() < kMaxStacks) {
            stacks_.emplace(stack, 1);
        } else {
            ++stacks_[kMoreStacks];
        }
    }
}

void Profile::count(const Sample& s) {
    all_.count(s);
    if (by_cpu_) cpus_[s.cpu].count(s);
}

void Profile::add(const DrainStats& drain, int cpu) {
    all_.lost += drain.lost;
    all_.throttled += drain.throttled;
    all_.unnamed += drain.unnamed;
    if (by_cpu_ && cpu >= 0) {
        auto& c = cpus_[cpu];
        c.lost += drain.lost;
        c.throttled += drain.throttled;
        c.unnamed += drain.unnamed;
    }
}

ProfileReport Profile::report(std::size_t top) const {
    ProfileReport r = all_.report(top);
    r.stacks = top_lines(stacks_, all_.samples, 0);
    for (const auto& [cpu, tally] : cpus_) r.cpus.push_back({cpu, tally.report(top)});
    return r;
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
