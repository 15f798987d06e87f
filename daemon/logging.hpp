// Where monitord's log goes: the journal when systemd connected stderr to it
// (JOURNAL_STREAM names stderr), standard error otherwise.
#pragma once

#include <string>

namespace monitord {

// True when JOURNAL_STREAM's device:inode matches standard error.
bool stderr_is_journal();

// Installs the default logger. `level` is one of config's log levels.
void setup_logging(const std::string& level);
void set_log_level(const std::string& level);

}  // namespace monitord
