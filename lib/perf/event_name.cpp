#include "monitor/perf/event_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <tuple>
#include <utility>

namespace monitor::perf {
namespace {

// The part of `s` before its first ':' and the part after it (empty without one).
std::pair<std::string_view, std::string_view> split_at_colon(std::string_view s) {
    const auto colon = s.find(':');
    if (colon == std::string_view::npos) return {s, {}};
    return {s.substr(0, colon), s.substr(colon + 1)};
}

}  // namespace

EventName split_event_name(std::string_view name) {
    EventName n;
    n.full = name;
    std::string_view rest = name;
    if (const auto sep = name.find(kPmuSeparator); sep != std::string_view::npos) {
        n.pmu = name.substr(0, sep);
        rest = name.substr(sep + kPmuSeparator.size());
    }
    std::tie(n.event, n.modifiers) = split_at_colon(rest);
    return n;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::ranges::equal(a, b, [](unsigned char x, unsigned char y) {
               return std::tolower(x) == std::tolower(y);
           });
}

std::optional<std::uint64_t> parse_number(std::string_view text) {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        text.remove_prefix(2);
        base = 16;
    }
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return v;
}

std::optional<std::uint64_t> parse_raw_code(std::string_view event) {
    if (event.size() < 2 || event.size() > 17 || event[0] != 'r') return std::nullopt;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(event.data() + 1, event.data() + event.size(), v, 16);
    if (ec != std::errc{} || end != event.data() + event.size()) return std::nullopt;
    return v;
}

void Modifiers::apply_to(EventSpec& spec) const {
    // perf's rule (parse-events.c, get_event_modifier): naming any mode counts only those named.
    if (user || kernel || hypervisor) {
        spec.exclude_user = !user;
        spec.exclude_kernel = !kernel;
        spec.exclude_hv = !hypervisor;
    }
    spec.precise_ip = static_cast<std::uint8_t>(precise);
}

namespace {

constexpr unsigned kMostPrecise = 3;  // precise_ip's largest value, :ppp

// "ku", "ppp", "upp": a group of perf's one-letter modifiers; false when `mod` is not one.
bool read_letters(std::string_view mod, Modifiers& m, unsigned& precise) {
    if (mod.empty() || mod.find_first_not_of("ukhp") != std::string_view::npos) return false;
    for (char c : mod) {
        switch (c) {
            case 'u':
                m.user = true;
                break;
            case 'k':
                m.kernel = true;
                break;
            case 'h':
                m.hypervisor = true;
                break;
            default:
                ++precise;
                break;
        }
    }
    return true;
}

std::string accepted(std::optional<NumberModifier> number, const PreciseLimit& precise) {
    std::string out = ":u user mode only, :k kernel mode only, :h hypervisor only (together: :uk)";
    const unsigned most = std::min(precise.max, kMostPrecise);
    if (most > 0) {
        out += fmt::format(", :p precise{}",
                           most >= 2 ? fmt::format(" (up to :{})", std::string(most, 'p')) : "");
    }
    if (number) out += fmt::format(", :{}=0-{}", number->name, number->max);
    return out;
}

}  // namespace

Result<Modifiers> parse_modifiers(std::string_view mods, std::string_view name,
                                  std::optional<NumberModifier> number,
                                  const PreciseLimit& precise) {
    Modifiers m;
    unsigned ps = 0;
    while (!mods.empty()) {
        std::string_view mod;
        std::tie(mod, mods) = split_at_colon(mods);
        if (read_letters(mod, m, ps)) {
            continue;
        }
        if (number && mod.starts_with(number->name) &&
            mod.substr(number->name.size()).starts_with('=')) {
            unsigned v = 0;
            const auto digits = mod.substr(number->name.size() + 1);
            auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
            if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() ||
                v > number->max) {
                return fail(Status::BadArg,
                            fmt::format("{}: {} must be a number from 0 to {}, not '{}'", name,
                                        number->name, number->max, digits));
            }
            m.number = v;
        } else {
            return fail(Status::BadArg, fmt::format("{}: unknown modifier ':{}' (accepted: {})",
                                                    name, mod, accepted(number, precise)));
        }
    }
    if (ps > 0 && precise.max == 0) {
        return fail(Status::BadArg,
                    fmt::format("{}: ':{}' asks for a precise event, and {}; leave the p out", name,
                                std::string(ps, 'p'),
                                precise.why_not.empty() ? "this event's PMU takes none"
                                                        : std::string_view(precise.why_not)));
    }
    if (ps > std::min(precise.max, kMostPrecise)) {
        return fail(Status::BadArg,
                    fmt::format("{}: ':{}' asks for precise level {}, and {}; :{} is the most "
                                "it takes",
                                name, std::string(ps, 'p'), ps,
                                precise.why_not.empty() ? "the PMU takes less"
                                                        : std::string_view(precise.why_not),
                                std::string(std::min(precise.max, kMostPrecise), 'p')));
    }
    m.precise = ps;
    return m;
}

}  // namespace monitor::perf
