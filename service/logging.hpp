// Where monitord's log goes: the journal when systemd connected stderr to it
// (JOURNAL_STREAM names stderr), standard error otherwise.
#pragma once

#include <spdlog/common.h>

#include <array>

#include "monitor/enum_names.hpp"

namespace monitord {

// The levels by the names [daemon] log-level and --log-level take.
inline constexpr std::array<monitor::EnumName<spdlog::level::level_enum>, 5> kLogLevelNames{{
    {spdlog::level::trace, "trace"},
    {spdlog::level::debug, "debug"},
    {spdlog::level::info, "info"},
    {spdlog::level::warn, "warning"},
    {spdlog::level::err, "error"},
}};

// True when JOURNAL_STREAM's device:inode matches standard error.
bool stderr_is_journal();

// Installs the default logger.
void setup_logging(spdlog::level::level_enum level);
void set_log_level(spdlog::level::level_enum level);

}  // namespace monitord
