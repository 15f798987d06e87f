#include "monitor/perf/perf_event_syntax.hpp"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <charconv>
#include <cstddef>

namespace monitor::perf {
namespace {

constexpr std::string_view kSpace = " \t\n";
constexpr std::string_view kFields[] = {"config", "config1", "config2"};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

// A term's or PMU's name: name characters only, the first a letter or '_' (so that no name is
// "." or "..", or starts like a number).
bool is_name(std::string_view s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
        return false;
    }
    for (char c : s) {
        if (!is_name_char(c)) return false;
    }
    return true;
}

std::string_view trimmed(std::string_view s) {
    const auto first = s.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

std::optional<unsigned> parse_bit(std::string_view s) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > 63) return std::nullopt;
    return v;
}

}  // namespace

bool is_pmu_syntax(std::string_view text) {
    const auto slash = text.find('/');
    return slash != std::string_view::npos && is_name(text.substr(0, slash));
}

std::size_t find_event_end(std::string_view list, std::string_view separators) {
    enum { Before, Terms, After } where = Before;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const char c = list[i];
        if (c == '/' && where == Before) {
            where = is_name(list.substr(0, i)) ? Terms : After;
        } else if (c == '/' && where == Terms) {
            where = After;
        } else if (where != Terms && separators.find(c) != std::string_view::npos) {
            return i;
        }
    }
    return std::string_view::npos;
}

Result<std::vector<PerfTerm>> parse_terms(std::string_view terms, std::string_view text) {
    std::vector<PerfTerm> out;
    terms = trimmed(terms);
    if (terms.empty()) return out;
    std::size_t index = 0;
    while (true) {
        ++index;
        const auto comma = terms.find(',');
        const std::string_view term = trimmed(terms.substr(0, comma));
        if (term.empty()) {
            return fail(Status::BadArg,
                        fmt::format("{}: term {} is empty (terms are NAME=VALUE or NAME, "
                                    "separated by single commas)",
                                    text, index));
        }
        PerfTerm t;
        const auto eq = term.find('=');
        t.name = trimmed(term.substr(0, eq));
        if (eq != std::string_view::npos) t.value = trimmed(term.substr(eq + 1));
        if (t.name.empty()) {
            return fail(
                Status::BadArg,
                fmt::format("{}: '{}' has no term name before '=' (NAME=VALUE)", text, term));
        }
        if (!is_name(t.name)) {
            return fail(Status::BadArg,
                        fmt::format("{}: '{}' is no term name (letters, digits, '_', '-' and "
                                    "'.', starting with a letter)",
                                    text, t.name));
        }
        if (t.value && t.value->empty()) {
            return fail(Status::BadArg,
                        fmt::format("{}: term '{}' has '=' but no value ({}=N, or {} alone "
                                    "for a one-bit term)",
                                    text, t.name, t.name, t.name));
        }
        out.push_back(t);
        if (comma == std::string_view::npos) break;
        terms.remove_prefix(comma + 1);
    }
    return out;
}

Result<PerfPmuEvent> parse_pmu_event(std::string_view text) {
    const auto open = text.find('/');
    if (open == std::string_view::npos || !is_name(text.substr(0, open))) {
        return fail(Status::BadArg,
                    fmt::format("{}: not PMU/TERMS/ (a PMU's name, then its terms between "
                                "slashes: cpu/event=0x3c,umask=0x00/)",
                                text));
    }
    const auto close = text.find('/', open + 1);
    if (close == std::string_view::npos) {
        return fail(Status::BadArg,
                    fmt::format("{}: no closing '/' after the terms (PMU/TERMS/, e.g. "
                                "{}/{}/)",
                                text, text.substr(0, open), text.substr(open + 1)));
    }
    PerfPmuEvent e;
    e.pmu = text.substr(0, open);
    e.body = text.substr(0, close + 1);
    e.modifiers = text.substr(close + 1);
    if (e.modifiers.starts_with(':')) e.modifiers.remove_prefix(1);
    auto terms = parse_terms(text.substr(open + 1, close - open - 1), text);
    if (!terms) return std::unexpected(terms.error());
    e.terms = std::move(*terms);
    return e;
}

Result<PerfFormat> parse_format(std::string_view contents) {
    const std::string_view text = trimmed(contents);
    const auto colon = text.find(':');
    const std::string_view field = text.substr(0, colon);
    PerfFormat f;
    f.field = -1;
    for (std::size_t i = 0; i < std::size(kFields); ++i) {
        if (field == kFields[i]) f.field = static_cast<int>(i);
    }
    if (colon == std::string_view::npos || f.field < 0) {
        return fail(
            Status::BadArg,
            fmt::format("'{}' is not FIELD:BITS with FIELD config, config1 or config2", text));
    }
    std::string_view ranges = text.substr(colon + 1);
    while (true) {
        const auto comma = ranges.find(',');
        const std::string_view range = ranges.substr(0, comma);
        const auto dash = range.find('-');
        const auto lo = parse_bit(range.substr(0, dash));
        const auto hi = dash == std::string_view::npos ? lo : parse_bit(range.substr(dash + 1));
        if (!lo || !hi || *hi < *lo) {
            return fail(Status::BadArg, fmt::format("'{}': '{}' is not a bit (0-63) or a range "
                                                    "of them (LOW-HIGH)",
                                                    text, range));
        }
        for (unsigned b = *lo; b <= *hi; ++b) f.bits |= std::uint64_t{1} << b;
        if (comma == std::string_view::npos) break;
        ranges.remove_prefix(comma + 1);
    }
    return f;
}

int format_width(std::uint64_t bits) {
    return std::popcount(bits);
}

std::uint64_t format_max(std::uint64_t bits) {
    const int w = format_width(bits);
    return w >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << w) - 1;
}

void place_value(std::uint64_t bits, std::uint64_t value, std::uint64_t& field) {
    int vbit = 0;
    for (int fbit = 0; fbit < 64; ++fbit) {
        const std::uint64_t at = std::uint64_t{1} << fbit;
        if ((bits & at) == 0) continue;
        if ((value >> vbit++ & 1U) != 0) {
            field |= at;
        } else {
            field &= ~at;
        }
    }
}

std::string describe_format(const PerfFormat& format) {
    std::string out(kFields[static_cast<std::size_t>(format.field)]);
    char sep = ':';
    for (int b = 0; b < 64;) {
        if ((format.bits >> b & 1U) == 0) {
            ++b;
            continue;
        }
        int e = b;
        while (e + 1 < 64 && (format.bits >> (e + 1) & 1U) != 0) ++e;
        out += e == b ? fmt::format("{}{}", sep, b) : fmt::format("{}{}-{}", sep, b, e);
        sep = ',';
        b = e + 1;
    }
    return out;
}

}  // namespace monitor::perf
