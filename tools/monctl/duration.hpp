// The durations monctl's options take: "5s", "250ms", "2m", "1h", "1.5" (seconds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "monitor/status.hpp"

namespace monctl {

// `text` in milliseconds (at least 1): a decimal number (digits and at most one point, no
// sign or exponent) and a unit (s, ms, m or min, h; none: seconds), from 1 ms to
// monitor::kMaxCountingDuration. BADARG naming the text otherwise.
monitor::Result<std::int64_t> parse_duration_ms(const std::string& text);

// The decimal number that `text` starts with ("1.5", "250", ".5": digits and at most one
// point, no sign or exponent) and what follows it; nullopt when there is none. Read by hand:
// strtod follows the locale's decimal point, and libc++ has no floating-point from_chars.
std::optional<std::pair<double, std::string_view>> leading_decimal(std::string_view text);

}  // namespace monctl
