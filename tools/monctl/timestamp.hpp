// The times --since and --until take, as journalctl takes them (systemd.time(7)): "now",
// "today", "yesterday", "tomorrow"; "2026-12-01 03:00[:SS]", "2026-12-01", "03:00[:SS]"
// (today), each with an optional " UTC"; "@1764558000" (seconds since the epoch); and spans
// before or after now: "-2h", "+30min", "1h 30min ago".
#pragma once

#include <chrono>
#include <string>

#include "monitor/status.hpp"

namespace monctl {

using WallTime = std::chrono::system_clock::time_point;

// `text` as a point in time, local times in this process's time zone ($TZ); BADARG naming the
// text and showing what would work otherwise.
monitor::Result<WallTime> parse_timestamp(const std::string& text, WallTime now);

}  // namespace monctl
