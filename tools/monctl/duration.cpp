#include "duration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "monitor/runtime/counter_run.hpp"

namespace monctl {

using monitor::Result;
using monitor::Status;

std::optional<std::pair<double, std::string_view>> leading_decimal(std::string_view text) {
    const std::size_t length = std::min(text.find_first_not_of("0123456789."), text.size());
    const std::string_view number = text.substr(0, length);
    const std::size_t point = std::min(number.find('.'), number.size());
    const std::string_view whole = number.substr(0, point);
    const std::string_view fraction = number.substr(std::min(point + 1, number.size()));
    if ((whole.empty() && fraction.empty()) || fraction.find('.') != std::string_view::npos) {
        return std::nullopt;
    }
    std::uint64_t integer = 0;
    if (!whole.empty() &&
        std::from_chars(whole.data(), whole.data() + whole.size(), integer).ec != std::errc{}) {
        return std::nullopt;  // too large for 64 bits
    }
    auto value = static_cast<double>(integer);
    double scale = 0.1;
    for (const char c : fraction) {
        value += (c - '0') * scale;
        scale /= 10;
    }
    return std::pair{value, text.substr(length)};
}

Result<std::int64_t> parse_duration_ms(const std::string& text) {
    const auto number = leading_decimal(text);
    const double value = number ? number->first : 0;
    const std::string_view unit = number ? number->second : std::string_view{};
    double factor = 0;
    if (unit.empty() || unit == "s") {
        factor = 1000;
    } else if (unit == "ms") {
        factor = 1;
    } else if (unit == "m" || unit == "min") {
        factor = 60'000;
    } else if (unit == "h") {
        factor = 3'600'000;
    }
    if (!number || factor == 0 || !(value > 0) ||
        value * factor > static_cast<double>(monitor::kMaxCountingDuration.count())) {
        return monitor::fail(Status::BadArg,
                             fmt::format("'{}' is not a duration (examples: 5s, 250ms, "
                                         "2m, 1.5)",
                                         text));
    }
    return std::max<std::int64_t>(1, std::llround(value * factor));
}

}  // namespace monctl
