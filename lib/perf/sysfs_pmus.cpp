#include "monitor/perf/sysfs_pmus.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "monitor/perf/event_name.hpp"
#include "monitor/perf/perf_event_syntax.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

constexpr std::string_view kDevices = "bus/event_source/devices";
// A sysfs attribute is one page at most; anything longer is no PMU's file.
constexpr std::size_t kLongestFile = 4096;
// The core PMU's counters when no module knows how many it has (libpfm4's module assumes the
// same for a processor it does not know).
constexpr int kUnknownCoreCounters = 4;
constexpr unsigned kMostPrecise = 3;
// How many of a PMU's events/ names an error lists.
constexpr std::size_t kListedEvents = 12;
// perf's generic terms that set a whole field.
constexpr std::array<std::string_view, 3> kFieldTerms = {"config", "config1", "config2"};
// perf's generic terms for sampling, which a count does not take.
constexpr std::array<std::string_view, 2> kSamplingTerms = {"period", "freq"};

std::optional<std::uint64_t> read_number(const std::filesystem::path& path) {
    auto text = read_text_file(path, kLongestFile);
    if (!text) return std::nullopt;
    const std::string_view v = trim_space(*text);
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc{} || end != v.data() + v.size()) return std::nullopt;
    return n;
}

// The names in directory `dir`, sorted; those starting with '.' and the alias helper files
// (NAME.scale, NAME.unit, ...) left out.
std::vector<std::string> names_in(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string n = it->path().filename().string();
        if (n.empty() || n.find('.') != std::string::npos) continue;
        out.push_back(std::move(n));
    }
    std::ranges::sort(out);
    return out;
}

class SysfsPmus final : public PmuModule {
  public:
    SysfsPmus(std::filesystem::path sys_root, CoreCounters core)
        : devices_(sys_root / kDevices), core_(std::move(core)) {}

    std::vector<PmuInfo> pmus() const override { return {}; }
    bool owns_name(std::string_view name) const override { return is_perf_syntax_name(name); }
    Result<EventSpec> resolve(const EventName& name) const override;
    void list(std::string_view, std::vector<EventInfo>&) const override {}

  private:
    // One PMU's directory as an event of it is being encoded.
    struct Encoding {
        std::string_view text;  // the event as written, for messages
        std::string_view pmu;
        std::filesystem::path dir;
        std::array<std::uint64_t, 3> fields{};
        std::optional<std::string_view> name;  // name=
        std::string alias;                     // the events/ alias used, if any
    };

    Result<EventSpec> resolve_pmu_event(std::string_view text) const;
    Result<EventSpec> resolve_raw(std::string_view text, std::uint64_t code,
                                  std::string_view modifiers) const;
    // The term into e.fields; `in_alias` for the terms of an events/ file (no alias of an alias).
    Result<void> apply_term(Encoding& e, const PerfTerm& term, bool in_alias) const;
    Error unknown_term(const Encoding& e, const PerfTerm& term) const;
    // The events/ file of `name` in `dir`, compared without case as perf does; nullopt for none.
    std::optional<std::filesystem::path> alias_file(const std::filesystem::path& dir,
                                                    std::string_view name) const;
    bool is_core(std::string_view pmu, const std::filesystem::path& dir) const;
    PreciseLimit precise_limit(std::string_view pmu, const std::filesystem::path& dir) const;
    // The counters, the counter PMU and the rest that depend on what kind of PMU it is.
    void place_on_counters(EventSpec& spec, bool core) const;

    std::filesystem::path devices_;
    CoreCounters core_;
};

bool SysfsPmus::is_core(std::string_view pmu, const std::filesystem::path& dir) const {
    // perf's is_pmu_core: the x86 and s390 names, or a PMU that lists its CPUs (the cores of a
    // hybrid or ARM processor).
    std::error_code ec;
    return pmu == "cpu" || pmu == "cpum_cf" || std::filesystem::exists(dir / "cpus", ec);
}

PreciseLimit SysfsPmus::precise_limit(std::string_view pmu,
                                      const std::filesystem::path& dir) const {
    if (auto max = read_number(dir / "caps/max_precise")) {
        const auto n = static_cast<unsigned>(std::min<std::uint64_t>(*max, kMostPrecise));
        if (n == 0) {
            return {0, fmt::format("PMU '{}' takes no precise events (its caps/max_precise is 0)",
                                   pmu)};
        }
        return {n, fmt::format("PMU '{}' takes precise levels up to {} (its caps/max_precise)", pmu,
                               n)};
    }
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
        return {0, fmt::format("this machine has no PMU '{}' ({} has no {})", pmu,
                               devices_.string(), pmu)};
    }
    if (is_core(pmu, dir)) return {kMostPrecise, {}};
    return {0, fmt::format("PMU '{}' takes no precise events (it is no processor core PMU, "
                           "and gives no caps/max_precise)",
                           pmu)};
}

void SysfsPmus::place_on_counters(EventSpec& spec, bool core) const {
    if (core) {
        spec.counter_pmu = core_.pmu.empty() ? std::string("cpu") : core_.pmu;
        spec.counters = first_counters(core_.counters > 0 ? core_.counters : kUnknownCoreCounters);
        return;
    }
    // The kernel's software, tracepoint and breakpoint PMUs and those of no counter this
    // module knows of (uncore, msr): no counter of the processor's; the kernel multiplexes
    // them itself when it must, and the running ratio says so.
    spec.counter_pmu = spec.pmu;
    spec.counters = 0;
}

std::optional<std::filesystem::path> SysfsPmus::alias_file(const std::filesystem::path& dir,
                                                           std::string_view name) const {
    const auto events = dir / "events";
    std::error_code ec;
    if (auto exact = events / name; std::filesystem::is_regular_file(exact, ec)) return exact;
    for (const auto& n : names_in(events)) {
        if (iequals(n, name)) return events / n;
    }
    return std::nullopt;
}

Error SysfsPmus::unknown_term(const Encoding& e, const PerfTerm& term) const {
    const auto formats = names_in(e.dir / "format");
    auto events = names_in(e.dir / "events");
    const std::size_t more = events.size() > kListedEvents ? events.size() - kListedEvents : 0;
    events.resize(events.size() - more);
    std::string has = formats.empty()
                          ? fmt::format("PMU '{}' has no format/ terms", e.pmu)
                          : fmt::format("PMU '{}' takes {}", e.pmu, fmt::join(formats, ", "));
    if (!events.empty()) {
        has += fmt::format("; its events/ has {}{}", fmt::join(events, ", "),
                           more > 0 ? fmt::format(" and {} more", more) : "");
    }
    return Error{Status::BadArg,
                 fmt::format("{}: unknown term '{}': {}; perf's config=, config1=, config2= and "
                             "name= are taken too",
                             e.text, term.name, has)};
}

// NOLINTNEXTLINE(misc-no-recursion): an alias's terms are applied with in_alias: one level deep
Result<void> SysfsPmus::apply_term(Encoding& e, const PerfTerm& term, bool in_alias) const {
    auto number = [&](std::string_view what) -> Result<std::uint64_t> {
        auto v = parse_number(*term.value);
        if (!v) {
            return fail(Status::BadArg,
                        fmt::format("{}: {}={}: not a number of 64 bits at most (decimal, or "
                                    "hexadecimal after 0x){}",
                                    e.text, term.name, *term.value, what));
        }
        return *v;
    };
    for (std::size_t i = 0; i < kFieldTerms.size(); ++i) {
        if (term.name != kFieldTerms[i]) continue;
        if (!term.value) {
            return fail(Status::BadArg,
                        fmt::format("{}: {} needs a value ({}=N)", e.text, term.name, term.name));
        }
        auto v = number("");
        if (!v) return std::unexpected(v.error());
        e.fields[i] = *v;
        return {};
    }
    if (term.name == "name") {
        if (!term.value) {
            return fail(Status::BadArg,
                        fmt::format("{}: name needs a value (name=WHAT_REPORTS_CALL_IT)", e.text));
        }
        e.name = *term.value;
        return {};
    }
    if (std::ranges::find(kSamplingTerms, term.name) != kSamplingTerms.end()) {
        return fail(Status::BadArg,
                    fmt::format("{}: {}= sets a sampling rate, which a count does not take "
                                "(`monctl perf profile` takes --period and --frequency); leave "
                                "it out",
                                e.text, term.name));
    }
    const auto format_path = e.dir / "format" / term.name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(format_path, ec)) {
        auto contents = read_text_file(format_path, kLongestFile);
        if (!contents) return std::unexpected(contents.error());
        auto format = parse_format(*contents);
        if (!format) {
            return fail(Status::BadData, fmt::format("{}: {}: {}", e.text, format_path.string(),
                                                     format.error().message));
        }
        const std::uint64_t max = format_max(format->bits);
        std::uint64_t value = 1;
        if (!term.value) {
            if (format_width(format->bits) > 1) {
                return fail(
                    Status::BadArg,
                    fmt::format("{}: term '{}' needs a value ({}=N, N from 0 to {:#x}: "
                                "{}); only a one-bit term stands alone",
                                e.text, term.name, term.name, max, describe_format(*format)));
            }
        } else {
            auto v = number(
                fmt::format(" ({} is {}, 0 to {:#x})", term.name, describe_format(*format), max));
            if (!v) return std::unexpected(v.error());
            value = *v;
        }
        if (value > max) {
            return fail(Status::BadArg,
                        fmt::format("{}: {}={} is too wide for the term: {} has {} bit{}, so "
                                    "0 to {:#x}",
                                    e.text, term.name, *term.value, describe_format(*format),
                                    format_width(format->bits),
                                    format_width(format->bits) == 1 ? "" : "s", max));
        }
        place_value(format->bits, value, e.fields[static_cast<std::size_t>(format->field)]);
        return {};
    }
    if (!term.value && !in_alias) {
        if (auto file = alias_file(e.dir, term.name)) {
            auto contents = read_text_file(*file, kLongestFile);
            if (!contents) return std::unexpected(contents.error());
            const std::string where = fmt::format("{} (its {})", e.text, file->string());
            auto terms = parse_terms(*contents, where);
            if (!terms) return std::unexpected(terms.error());
            Encoding inner = e;
            inner.text = where;
            for (const auto& t : *terms) {
                if (auto ok = apply_term(inner, t, true); !ok) return ok;
            }
            e.fields = inner.fields;
            if (inner.name) e.name = inner.name;
            e.alias = file->filename().string();
            return {};
        }
    }
    return std::unexpected(unknown_term(e, term));
}

Result<EventSpec> SysfsPmus::resolve_pmu_event(std::string_view text) const {
    auto parsed = parse_pmu_event(text);
    if (!parsed) return std::unexpected(parsed.error());
    Encoding e;
    e.text = text;
    e.pmu = parsed->pmu;
    e.dir = devices_ / std::string(parsed->pmu);
    std::error_code ec;
    if (!std::filesystem::is_directory(e.dir, ec)) {
        return fail(Status::NoEvent,
                    fmt::format("{}: no PMU '{}' on this machine ({} has {})", text, e.pmu,
                                devices_.string(), fmt::join(names_in(devices_), ", ")));
    }
    const auto type = read_number(e.dir / "type");
    if (!type || *type > 0xffffffffU) {
        return fail(Status::NoPmu, fmt::format("{}: PMU '{}' gives no type in {}", text, e.pmu,
                                               (e.dir / "type").string()));
    }
    for (const auto& t : parsed->terms) {
        if (auto ok = apply_term(e, t, false); !ok) return std::unexpected(ok.error());
    }
    auto m = parse_modifiers(parsed->modifiers, text, std::nullopt, precise_limit(e.pmu, e.dir));
    if (!m) return std::unexpected(m.error());

    EventSpec spec;
    spec.name = e.name ? std::string(*e.name) : std::string(text);
    spec.canonical = std::string(parsed->body);
    spec.pmu = std::string(e.pmu);
    spec.description =
        e.alias.empty()
            ? fmt::format("PMU {} (type {}): config {:#x}, config1 {:#x}, config2 {:#x}", e.pmu,
                          *type, e.fields[0], e.fields[1], e.fields[2])
            : fmt::format("PMU {}'s event {} (type {}): config {:#x}, config1 {:#x}", e.pmu,
                          e.alias, *type, e.fields[0], e.fields[1]);
    spec.type = static_cast<std::uint32_t>(*type);
    spec.config = e.fields[0];
    spec.config1 = e.fields[1];
    spec.config2 = e.fields[2];
    m->apply_to(spec);
    place_on_counters(spec, is_core(e.pmu, e.dir));
    return spec;
}

Result<EventSpec> SysfsPmus::resolve_raw(std::string_view text, std::uint64_t code,
                                         std::string_view modifiers) const {
    // perf's rNNN: the core PMU's own code, PERF_TYPE_RAW, which the kernel gives to the
    // processor's PMU.
    constexpr std::string_view kCore = "cpu";
    auto m = parse_modifiers(modifiers, text, std::nullopt,
                             precise_limit(kCore, devices_ / std::string(kCore)));
    if (!m) return std::unexpected(m.error());
    EventSpec spec;
    spec.name = std::string(text);
    spec.canonical = fmt::format("r{:x}", code);
    spec.pmu = kCore;
    spec.description = "raw event code of the processor's PMU";
    spec.type = PERF_TYPE_RAW;
    spec.config = code;
    m->apply_to(spec);
    place_on_counters(spec, true);
    return spec;
}

Result<EventSpec> SysfsPmus::resolve(const EventName& name) const {
    const std::string_view text = name.full;
    if (is_pmu_syntax(text)) return resolve_pmu_event(text);
    const auto colon = text.find(':');
    const std::string_view event = text.substr(0, colon);
    const std::string_view mods = colon == std::string_view::npos ? "" : text.substr(colon + 1);
    if (auto code = parse_raw_code(event)) return resolve_raw(text, *code, mods);
    return fail(Status::NoEvent, fmt::format("{}: neither PMU/TERMS/ nor a raw code rHEX", text));
}

}  // namespace

bool is_perf_syntax_name(std::string_view name) {
    return is_pmu_syntax(name) || parse_raw_code(name.substr(0, name.find(':'))).has_value();
}

std::unique_ptr<PmuModule> make_sysfs_pmus(std::filesystem::path sys_root, CoreCounters core) {
    return std::make_unique<SysfsPmus>(std::move(sys_root), std::move(core));
}

}  // namespace monitor::perf
