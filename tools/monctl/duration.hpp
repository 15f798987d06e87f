// The durations monctl's options take: "5s", "250ms", "2m", "1h", "1.5" (seconds).
#pragma once

#include <cstdint>
#include <string>

#include "monitor/status.hpp"

namespace monctl {

// `text` in milliseconds (at least 1): a decimal number (digits and at most one point, no
// sign or exponent) and a unit (s, ms, m or min, h; none: seconds), from 1 ms to
// monitor::kMaxCountingDuration. BADARG naming the text otherwise.
monitor::Result<std::int64_t> parse_duration_ms(const std::string& text);

}  // namespace monctl
