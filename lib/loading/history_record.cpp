#include "monitor/loading/history_record.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string_view>

#include "monitor/loading/loading_report.hpp"

namespace monitor {

namespace {

// Format 1:
//   u8 version (1), u32 interval in microseconds, u8 sources;
//   each source: u8 index in kLoadSources, u8 flags (1: states kept), u16 machine load,
//     [the machine's 10 state shares], u16 CPUs;
//     each CPU: u16 number, u16 load, [its 10 state shares].
// A value is u16 hundredths of a percent (0 to 10,000); kGap is a gap (for the states: the
// first share).
constexpr std::uint8_t kVersion = 1;
constexpr std::uint8_t kHasStates = 1;
constexpr std::uint16_t kGap = 0xFFFF;
constexpr std::uint16_t kFull = 10'000;

std::uint16_t hundredths(std::optional<double> percent) {
    if (!percent || !std::isfinite(*percent)) return kGap;
    return static_cast<std::uint16_t>(std::lround(std::clamp(*percent, 0.0, 100.0) * 100));
}

class Writer {
  public:
    void u8(std::uint8_t v) { out_.push_back(v); }
    void u16(std::uint16_t v) {
        out_.push_back(static_cast<std::uint8_t>(v));
        out_.push_back(static_cast<std::uint8_t>(v >> 8));
    }
    void u32(std::uint32_t v) {
        u16(static_cast<std::uint16_t>(v));
        u16(static_cast<std::uint16_t>(v >> 16));
    }
    void states(const std::optional<StateShares>& s) {
        for (std::size_t i = 0; i < kTimeStateCount; ++i) {
            u16(s ? hundredths(s->percent[i]) : kGap);
        }
    }
    std::vector<std::uint8_t> take() { return std::move(out_); }

  private:
    std::vector<std::uint8_t> out_;
};

class Reader {
  public:
    explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
    bool u8(std::uint8_t& v) {
        if (in_.size() - at_ < 1) return false;
        v = in_[at_++];
        return true;
    }
    bool u16(std::uint16_t& v) {
        if (in_.size() - at_ < 2) return false;
        v = static_cast<std::uint16_t>(in_[at_] | (in_[at_ + 1] << 8));
        at_ += 2;
        return true;
    }
    bool u32(std::uint32_t& v) {
        std::uint16_t lo = 0;
        std::uint16_t hi = 0;
        if (!u16(lo) || !u16(hi)) return false;
        v = lo | (std::uint32_t{hi} << 16);
        return true;
    }
    std::size_t left() const { return in_.size() - at_; }

  private:
    std::span<const std::uint8_t> in_;
    std::size_t at_ = 0;
};

std::optional<double> percent(std::uint16_t v) {
    if (v == kGap) return std::nullopt;
    return static_cast<double>(v) / 100;
}

// false when a share is out of range; a gap in the first share is a gap.
bool read_states(Reader& r, std::optional<StateShares>& out) {
    std::array<std::uint16_t, kTimeStateCount> v{};
    for (auto& x : v) {
        if (!r.u16(x)) return false;
    }
    if (v[0] == kGap) {
        out.reset();
        return std::all_of(v.begin(), v.end(), [](std::uint16_t x) { return x == kGap; });
    }
    StateShares s;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        if (v[i] > kFull) return false;
        s.percent[i] = static_cast<double>(v[i]) / 100;
    }
    out = s;
    return true;
}

Error bad(std::string what) {
    return Error{Status::BadData, "a second of the history on disk is malformed: " + what};
}

}  // namespace

namespace {

struct FoldSeries {
    double weighted = 0;
    double weight = 0;
    double plain = 0;
    std::size_t samples = 0;
    double low = 0;
    double high = 0;
    std::array<double, kTimeStateCount> states_weighted{};
    std::array<double, kTimeStateCount> states_plain{};
    double states_weight = 0;
    std::size_t state_samples = 0;

    void add(std::optional<double> load, const std::optional<StateShares>& states, double w) {
        if (load) {
            low = samples == 0 ? *load : std::min(low, *load);
            high = samples == 0 ? *load : std::max(high, *load);
            weighted += *load * w;
            weight += w;
            plain += *load;
            ++samples;
        }
        if (states) {
            for (std::size_t k = 0; k < kTimeStateCount; ++k) {
                states_weighted[k] += states->percent[k] * w;
                states_plain[k] += states->percent[k];
            }
            states_weight += w;
            ++state_samples;
        }
    }
    std::optional<double> mean() const {
        if (samples == 0) return std::nullopt;
        return weight > 0 ? weighted / weight : plain / static_cast<double>(samples);
    }
    std::optional<StateShares> mean_states() const {
        if (state_samples == 0) return std::nullopt;
        StateShares s;
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            s.percent[k] = states_weight > 0 ? states_weighted[k] / states_weight
                                             : states_plain[k] / static_cast<double>(state_samples);
        }
        return s;
    }
    std::optional<double> lowest() const { return samples > 0 ? std::optional{low} : std::nullopt; }
    std::optional<double> highest() const {
        return samples > 0 ? std::optional{high} : std::nullopt;
    }
};

struct FoldSource {
    bool has_states = false;
    FoldSeries machine;
    std::map<int, FoldSeries> cpus;
};

}  // namespace

HistoryFold fold_history_seconds(std::span<const HistorySecond> seconds) {
    std::map<std::string, FoldSource> sources;
    double total = 0;
    for (const auto& second : seconds) {
        const double w = std::isfinite(second.seconds) && second.seconds > 0 ? second.seconds : 0;
        total += w;
        for (const auto& src : second.sources) {
            auto& f = sources[src.name];
            f.has_states = f.has_states || src.has_states;
            f.machine.add(src.machine, src.machine_states, w);
            for (const auto& c : src.cpus) f.cpus[c.cpu].add(c.load, c.states, w);
        }
    }
    HistoryFold out;
    out.mean.seconds = out.low.seconds = out.high.seconds = total;
    for (std::string_view name : kLoadSources) {
        auto it = sources.find(std::string{name});
        if (it == sources.end()) continue;
        const FoldSource& f = it->second;
        HistorySource mean{.name = it->first,
                           .machine = f.machine.mean(),
                           .has_states = f.has_states,
                           .machine_states = f.machine.mean_states(),
                           .cpus = {}};
        HistorySource low{.name = it->first,
                          .machine = f.machine.lowest(),
                          .has_states = false,
                          .machine_states = std::nullopt,
                          .cpus = {}};
        HistorySource high{.name = it->first,
                           .machine = f.machine.highest(),
                           .has_states = false,
                           .machine_states = std::nullopt,
                           .cpus = {}};
        for (const auto& [cpu, series] : f.cpus) {
            mean.cpus.push_back({cpu, series.mean(), series.mean_states()});
            low.cpus.push_back({cpu, series.lowest(), std::nullopt});
            high.cpus.push_back({cpu, series.highest(), std::nullopt});
        }
        out.mean.sources.push_back(std::move(mean));
        out.low.sources.push_back(std::move(low));
        out.high.sources.push_back(std::move(high));
    }
    return out;
}

Result<std::vector<std::uint8_t>> encode_history_second(const HistorySecond& second) {
    Writer w;
    w.u8(kVersion);
    const double us = std::isfinite(second.seconds) ? second.seconds * 1e6 : 0;
    // Rounded: a truncated product drifts a microsecond down at every decode and encode.
    w.u32(static_cast<std::uint32_t>(std::llround(std::clamp(us, 0.0, 4e9))));
    if (second.sources.size() > 255) return fail(Status::BadArg, "more than 255 sources");
    w.u8(static_cast<std::uint8_t>(second.sources.size()));
    for (const auto& s : second.sources) {
        const auto* name = std::find(std::begin(kLoadSources), std::end(kLoadSources), s.name);
        if (name == std::end(kLoadSources)) {
            return fail(Status::BadArg, "no loading source is named \"" + s.name + "\"");
        }
        w.u8(static_cast<std::uint8_t>(name - std::begin(kLoadSources)));
        w.u8(s.has_states ? kHasStates : 0);
        w.u16(hundredths(s.machine));
        if (s.has_states) w.states(s.machine_states);
        if (s.cpus.size() > 0xFFFF) return fail(Status::BadArg, "more than 65,535 CPUs");
        w.u16(static_cast<std::uint16_t>(s.cpus.size()));
        for (const auto& c : s.cpus) {
            if (c.cpu < 0 || c.cpu > 0xFFFF) {
                return fail(Status::BadArg, "CPU number " + std::to_string(c.cpu) +
                                                " is beyond the history's 0 to 65,535");
            }
            w.u16(static_cast<std::uint16_t>(c.cpu));
            w.u16(hundredths(c.load));
            if (s.has_states) w.states(c.states);
        }
    }
    return w.take();
}

Result<HistorySecond> decode_history_second(std::span<const std::uint8_t> bytes) {
    Reader r(bytes);
    std::uint8_t version = 0;
    if (!r.u8(version)) return std::unexpected(bad("empty"));
    if (version != kVersion) {
        return std::unexpected(bad("format " + std::to_string(version) + ", not " +
                                   std::to_string(kVersion) + " (written by another version)"));
    }
    HistorySecond out;
    std::uint32_t us = 0;
    std::uint8_t sources = 0;
    if (!r.u32(us) || !r.u8(sources)) return std::unexpected(bad("cut short in its header"));
    out.seconds = static_cast<double>(us) / 1e6;
    for (std::uint8_t i = 0; i < sources; ++i) {
        HistorySource s;
        std::uint8_t index = 0;
        std::uint8_t flags = 0;
        std::uint16_t machine = 0;
        if (!r.u8(index) || !r.u8(flags) || !r.u16(machine)) {
            return std::unexpected(bad("cut short in source " + std::to_string(i)));
        }
        if (index >= std::size(kLoadSources)) {
            return std::unexpected(bad("source " + std::to_string(index) + " is unknown"));
        }
        if ((flags & ~kHasStates) != 0) return std::unexpected(bad("unknown source flags"));
        if (machine != kGap && machine > kFull) return std::unexpected(bad("a load over 100 %"));
        s.name = std::string{kLoadSources[index]};
        s.machine = percent(machine);
        s.has_states = (flags & kHasStates) != 0;
        if (s.has_states && !read_states(r, s.machine_states)) {
            return std::unexpected(bad("the machine's states of " + s.name));
        }
        std::uint16_t cpus = 0;
        if (!r.u16(cpus)) return std::unexpected(bad("cut short in " + s.name));
        const std::size_t each = 4 + (s.has_states ? 2 * kTimeStateCount : 0);
        if (r.left() < cpus * each) {
            return std::unexpected(
                bad(s.name + " lists " + std::to_string(cpus) + " CPUs and has room for fewer"));
        }
        s.cpus.reserve(cpus);
        for (std::uint16_t k = 0; k < cpus; ++k) {
            std::uint16_t cpu = 0;
            std::uint16_t load = 0;
            r.u16(cpu);
            r.u16(load);
            if (load != kGap && load > kFull) return std::unexpected(bad("a load over 100 %"));
            if (!s.cpus.empty() && cpu <= s.cpus.back().cpu) {
                return std::unexpected(bad("the CPUs of " + s.name + " are not in order"));
            }
            HistoryCpu c{.cpu = cpu, .load = percent(load), .states = std::nullopt};
            if (s.has_states && !read_states(r, c.states)) {
                return std::unexpected(bad("the states of cpu" + std::to_string(cpu)));
            }
            s.cpus.push_back(c);
        }
        out.sources.push_back(std::move(s));
    }
    if (r.left() != 0) return std::unexpected(bad("bytes left over"));
    return out;
}

}  // namespace monitor
