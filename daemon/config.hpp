// monitord's settings: built-in defaults, then /etc/monitord/monitord.conf (TOML), then the
// command line. Every key is documented in monitord.conf(5).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "monitor/status.hpp"

namespace monitord {

struct Config {
    // [daemon]
    std::string socket;              // empty: the default path for this user
    std::string log_level = "info";  // trace, debug, info, warning, error
    // [loading]
    std::size_t history_seconds = 60;
    std::string probe = "spin";  // spin, sleep, off
    // [watchdog]
    // nullopt: /dev/watchdog when it exists (a missing or refused device is then only a
    // warning); "": off; a path: that device, which must open.
    std::optional<std::string> watchdog_device;
    long long watchdog_timeout = 10;          // seconds, as asked of the driver
    std::string watchdog_policy = "all";      // any, all
    std::string watchdog_on_stop = "disarm";  // disarm, keep-armed
    // [access]
    // The group of the socket the daemon makes itself (mode 0660); nullopt: "monitor" when
    // that group exists, else the daemon's own group.
    std::optional<std::string> socket_group;
    std::string control_group;  // may start and stop counter sessions; "": root only
};

// Settings given on the command line; each one given replaces the file's value, at start
// and at every reload.
struct Overrides {
    std::optional<std::string> socket;
    std::optional<std::string> log_level;
    std::optional<long long> history_seconds;
    std::optional<std::string> probe;
    std::optional<std::string> watchdog_device;  // "none" or "": off
    std::optional<long long> watchdog_timeout;

    // Checks the values given; the error names the flag and what would work.
    monitor::Result<void> validate() const;
    void apply(Config& c) const;
};

// The configuration file used when --config is not given.
std::filesystem::path default_config_path();

// Reads `file` over `base`: keys present in the file replace base's values. Errors are
// BADARG with a message "FILE:LINE: [section] key: what is wrong; what would work".
monitor::Result<Config> load_config(const std::filesystem::path& file, Config base);

// Checks values that may come from the command line as well as the file. The messages say
// what is wrong; the caller adds what would work (kLogLevelsAccepted, ...).
inline constexpr const char* kLogLevelsAccepted = "trace, debug, info, warning or error";
inline constexpr const char* kHistorySecondsAccepted = "an integer from 1 to 3600";
inline constexpr const char* kProbeAccepted = "spin, sleep or off";
inline constexpr const char* kWatchdogDeviceAccepted =
    "an absolute path such as \"/dev/watchdog\", or \"\" for none";
inline constexpr const char* kWatchdogTimeoutAccepted = "an integer from 1 to 3600 (seconds)";
inline constexpr const char* kWatchdogPolicyAccepted = "any or all";
inline constexpr const char* kWatchdogOnStopAccepted = "disarm or keep-armed";
inline constexpr const char* kGroupAccepted =
    "the name of a group of this machine (getent group lists them), e.g. \"monitor\"";
inline constexpr const char* kControlGroupAccepted =
    "the name of a group of this machine (getent group lists them), or \"\" for root only";
monitor::Result<void> validate_log_level(const std::string& level);
monitor::Result<void> validate_history_seconds(long long seconds);
monitor::Result<void> validate_probe(const std::string& mode);
monitor::Result<void> validate_socket_path(const std::string& path);
monitor::Result<void> validate_watchdog_device(const std::string& path);
monitor::Result<void> validate_watchdog_timeout(long long seconds);
// The group's id; BADARG "unknown group 'x'" when this machine has no such group.
monitor::Result<gid_t> group_id(const std::string& name);

}  // namespace monitord
