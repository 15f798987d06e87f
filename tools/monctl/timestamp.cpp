#include "timestamp.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>
#include <string_view>

#include "duration.hpp"

namespace monctl {
namespace {

using monitor::Result;
using std::chrono::microseconds;

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

bool ends_with_word(std::string_view& s, std::string_view word) {
    if (s.size() < word.size() || s.substr(s.size() - word.size()) != word) return false;
    const std::string_view before = s.substr(0, s.size() - word.size());
    if (!before.empty() && !std::isspace(static_cast<unsigned char>(before.back()))) return false;
    s = trim(before);
    return true;
}

// systemd.time(7)'s units, in microseconds; the longest name first where one starts another.
struct Unit {
    std::string_view name;
    double us;
};
constexpr double kSecond = 1e6;
constexpr std::array kUnits{
    Unit{"usec", 1},
    Unit{"us", 1},
    Unit{"msec", 1e3},
    Unit{"ms", 1e3},
    Unit{"seconds", kSecond},
    Unit{"second", kSecond},
    Unit{"sec", kSecond},
    Unit{"s", kSecond},
    Unit{"minutes", 60 * kSecond},
    Unit{"minute", 60 * kSecond},
    Unit{"min", 60 * kSecond},
    Unit{"months", 2'629'800 * kSecond},
    Unit{"month", 2'629'800 * kSecond},
    Unit{"M", 2'629'800 * kSecond},
    Unit{"m", 60 * kSecond},
    Unit{"hours", 3600 * kSecond},
    Unit{"hour", 3600 * kSecond},
    Unit{"hr", 3600 * kSecond},
    Unit{"h", 3600 * kSecond},
    Unit{"days", 86400 * kSecond},
    Unit{"day", 86400 * kSecond},
    Unit{"d", 86400 * kSecond},
    Unit{"weeks", 604800 * kSecond},
    Unit{"week", 604800 * kSecond},
    Unit{"w", 604800 * kSecond},
    Unit{"years", 31'557'600 * kSecond},
    Unit{"year", 31'557'600 * kSecond},
    Unit{"y", 31'557'600 * kSecond},
};

// "1h 30min", "90s", "1.5h": the sum, in microseconds; a number without a unit is seconds.
std::optional<double> span_us(std::string_view s) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    double total = 0;
    while (!s.empty()) {
        auto number = leading_decimal(s);
        if (!number) return std::nullopt;
        s = trim(number->second);
        const Unit* unit = nullptr;
        for (const auto& u : kUnits) {
            if (s.substr(0, u.name.size()) != u.name) continue;
            const std::string_view rest = s.substr(u.name.size());
            if (!rest.empty() && std::isalpha(static_cast<unsigned char>(rest.front()))) continue;
            unit = &u;
            break;
        }
        total += number->first * (unit != nullptr ? unit->us : kSecond);
        if (unit != nullptr) s = trim(s.substr(unit->name.size()));
        if (unit == nullptr && !s.empty()) return std::nullopt;
    }
    return total;
}

bool digits(std::string_view s, std::size_t n, int& out) {
    if (s.size() != n) return false;
    for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
    std::from_chars(s.data(), s.data() + s.size(), out);
    return true;
}

// "HH:MM[:SS[.frac]]" into tm (and the fraction, in microseconds).
bool clock_time(std::string_view s, std::tm& tm, long& us) {
    const auto c1 = s.find(':');
    if (c1 == std::string_view::npos) return false;
    int h = 0;
    int m = 0;
    int sec = 0;
    if (!digits(s.substr(0, c1), 2, h) && !digits(s.substr(0, c1), 1, h)) return false;
    std::string_view rest = s.substr(c1 + 1);
    const auto c2 = rest.find(':');
    if (!digits(rest.substr(0, c2), 2, m)) return false;
    us = 0;
    if (c2 != std::string_view::npos) {
        std::string_view seconds = rest.substr(c2 + 1);
        const auto dot = seconds.find('.');
        if (!digits(seconds.substr(0, dot), 2, sec)) return false;
        if (dot != std::string_view::npos) {
            std::string_view fraction = seconds.substr(dot + 1);
            if (fraction.empty() || fraction.size() > 6) return false;
            int f = 0;
            if (!digits(fraction, fraction.size(), f)) return false;
            us = f;
            for (std::size_t i = fraction.size(); i < 6; ++i) us *= 10;
        }
    }
    if (h > 23 || m > 59 || sec > 60) return false;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    return true;
}

// "YYYY-MM-DD" into tm.
bool date(std::string_view s, std::tm& tm) {
    int y = 0;
    int mo = 0;
    int d = 0;
    if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !digits(s.substr(0, 4), 4, y) ||
        !digits(s.substr(5, 2), 2, mo) || !digits(s.substr(8, 2), 2, d)) {
        return false;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31) return false;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    return true;
}

// tm as a local time (or UTC); with `exact`, nullopt when that day does not exist (February
// 30th), else days out of range count on (yesterday of the 1st).
std::optional<WallTime> time_of(std::tm tm, bool utc, long us, bool exact = true) {
    const std::tm asked = tm;
    tm.tm_isdst = -1;
    const std::time_t t = utc ? ::timegm(&tm) : std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1) ||
        (exact && (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon))) {
        return std::nullopt;
    }
    return std::chrono::system_clock::from_time_t(t) + microseconds{us};
}

std::tm broken_down(WallTime t, bool utc) {
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    if (utc) {
        ::gmtime_r(&tt, &tm);
    } else {
        ::localtime_r(&tt, &tm);
    }
    return tm;
}

std::optional<WallTime> parse(std::string_view s, WallTime now) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    if (s == "now") return now;
    if (s.front() == '@') {
        auto seconds = leading_decimal(s.substr(1));
        if (!seconds || !seconds->second.empty()) return std::nullopt;
        return WallTime{} + std::chrono::duration_cast<WallTime::duration>(
                                microseconds{std::llround(seconds->first * kSecond)});
    }
    auto shifted = [&](double us, int sign) -> std::optional<WallTime> {
        if (!std::isfinite(us) || us > 1e17) return std::nullopt;
        return now + sign * std::chrono::duration_cast<WallTime::duration>(
                                microseconds{std::llround(us)});
    };
    if (s.front() == '-' || s.front() == '+') {
        auto us = span_us(s.substr(1));
        if (!us) return std::nullopt;
        return shifted(*us, s.front() == '-' ? -1 : 1);
    }
    std::string_view rest = s;
    if (ends_with_word(rest, "ago")) {
        auto us = span_us(rest);
        if (!us) return std::nullopt;
        return shifted(*us, -1);
    }
    if (ends_with_word(rest, "left")) {
        auto us = span_us(rest);
        if (!us) return std::nullopt;
        return shifted(*us, 1);
    }
    const bool utc = ends_with_word(rest, "UTC");
    std::tm tm = broken_down(now, utc);
    long us = 0;
    auto midnight = [&](int days) {
        tm.tm_mday += days;
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        return time_of(tm, utc, 0, false);
    };
    if (rest == "today") return midnight(0);
    if (rest == "yesterday") return midnight(-1);
    if (rest == "tomorrow") return midnight(1);
    // A weekday before the date ("Tue 2026-12-01 03:00"), as journalctl prints it, is skipped.
    if (rest.size() > 4 && std::isalpha(static_cast<unsigned char>(rest[0])) && rest[3] == ' ') {
        rest = trim(rest.substr(4));
    }
    const auto space = rest.find_first_of(" T");
    const std::string_view first = rest.substr(0, space);
    if (date(first, tm)) {
        if (space == std::string_view::npos) {
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        } else if (!clock_time(trim(rest.substr(space + 1)), tm, us)) {
            return std::nullopt;
        }
        return time_of(tm, utc, us);
    }
    if (space == std::string_view::npos && clock_time(rest, tm, us)) return time_of(tm, utc, us);
    return std::nullopt;
}

}  // namespace

Result<WallTime> parse_timestamp(const std::string& text, WallTime now) {
    if (auto t = parse(text, now)) return *t;
    return monitor::fail(monitor::Status::BadArg,
                         fmt::format("'{}' is not a time (examples: \"03:00\", \"yesterday\", "
                                     "\"-2h\", \"2026-12-01 03:00:00\", \"1h ago\", "
                                     "\"@1764558000\"; systemd.time(7))",
                                     text));
}

}  // namespace monctl
