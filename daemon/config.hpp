// monitord's settings: built-in defaults, then /etc/monitord/monitord.conf (TOML), then the
// command line. Every key is documented in monitord.conf(5).
#pragma once

#include <spdlog/common.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "history_store.hpp"
#include "monitor/engine.hpp"
#include "monitor/loading/idle_probe.hpp"
#include "monitor/perf/metric_definitions.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/socket_path.hpp"
#include "monitor/runtime/runtime.hpp"
#include "monitor/status.hpp"
#include "monitor/watchdog/watchdog.hpp"

namespace monitord {

// One [[counters]] table: a standing counter session, counting from the daemon's start (or
// the reload that added it) until the daemon stops (or a reload removes it).
struct StandingSessionConfig {
    std::string name;  // letters, digits, '_', '-', '.'; unique
    monitor::protocol::CounterRequest request;
    std::string where;  // "FILE:LINE" of its table, for messages; "" when not from a file

    // The same session: a reload keeps it counting (its place in the file may have moved).
    bool same_session(const StandingSessionConfig& o) const {
        return name == o.name && request == o.request;
    }
};

inline constexpr std::chrono::seconds kDefaultIdleTimeout{300};
inline constexpr std::chrono::seconds kMaxIdleTimeout{86400};
inline constexpr std::size_t kDefaultReplyMemoryPerUser = 64;  // MiB
inline constexpr std::size_t kMaxReplyMemoryPerUser = 4096;
inline constexpr std::size_t kDefaultProfilesPerUser = 2;
// The daemon runs at most this many at once, for everyone (ProfileServiceOptions).
inline constexpr std::size_t kMaxProfiles = 8;
inline constexpr std::chrono::seconds kDefaultProfileDuration{3600};
inline constexpr std::chrono::seconds kMaxProfileDuration{7 * 86400};
// 16 events on each of 1024 CPUs; a process of 64 threads sampled on 256 CPUs.
inline constexpr std::size_t kDefaultPerfFilesPerSession = 16384;
inline constexpr std::size_t kMaxPerfFilesPerSession = std::size_t{1} << 20;
// Where that limit comes from, as a refusal names it (perf::FileBudget::source).
inline constexpr const char* kPerfFilesSource =
    "[limits] perf-files-per-session in monitord.conf(5), for a user other than root";

struct Config {
    // [daemon]
    std::filesystem::path socket;  // empty: the default path for this user
    spdlog::level::level_enum log_level = spdlog::level::info;
    // Where the history is kept (history.db): nullopt for the default place of the daemon's
    // socket (default_state_directory()), empty for no history.
    std::optional<std::filesystem::path> state_directory;
    // [loading]
    std::size_t history_seconds = monitor::kDefaultHistorySeconds;
    // Sleeping probes: no spinning, loading from /proc/stat (monitord(8), the cost of each).
    monitor::ProbeMode probe = monitor::ProbeMode::Sleep;
    // [history]
    std::chrono::seconds history_per_second = kDefaultHistorySecondsKept;
    std::chrono::seconds history_keep = kDefaultHistoryKept;
    std::uint64_t history_max_size = kDefaultHistoryMaxBytes >> 20;  // MiB
    HistoryLimits history_limits() const {
        return {history_per_second, history_keep, history_max_size << 20};
    }
    // [watchdog]
    // Empty: none (the default: a watchdog resets the machine, so only a configuration arms
    // one); a path: that device, which must open.
    std::filesystem::path watchdog_device;
    std::chrono::seconds watchdog_timeout =
        monitor::kDefaultWatchdogTimeout;  // asked of the driver
    monitor::watchdog::PetPolicyKind watchdog_policy = monitor::watchdog::PetPolicyKind::All;
    monitor::watchdog::OnStop watchdog_on_stop = monitor::watchdog::OnStop::Disarm;
    // [access]
    // The group of the socket the daemon makes itself (mode 0660); nullopt: "monitor" when
    // that group exists, else the daemon's own group.
    std::optional<std::string> socket_group;
    std::string control_group;  // may start and stop counter sessions; "": root only
    // [limits], for clients other than root
    // A control connection with no call under way closes after this long without a byte from
    // its client; zero: never (root's too).
    std::chrono::seconds idle_timeout = kDefaultIdleTimeout;
    // The replies waiting to be read by one user's connections, in MiB.
    std::size_t reply_memory_per_user = kDefaultReplyMemoryPerUser;
    // The profiles and watches of overflows one user may run at once.
    std::size_t profiles_per_user = kDefaultProfilesPerUser;
    // The longest one of them runs (a process sampled until it exits, too).
    std::chrono::seconds profile_duration = kDefaultProfileDuration;
    // The perf_event files one counter session, profile or watch of overflows may open.
    std::size_t perf_files_per_session = kDefaultPerfFilesPerSession;
    // [[counters]], in file order; a reload applies them (adds, restarts, removes sessions).
    std::vector<StandingSessionConfig> counters;
    // [[metrics]], in file order: the derived metrics defined besides the shipped ones
    // (metric_definitions()), and before them. A reload applies them to sessions started after.
    std::vector<monitor::perf::MetricDefinition> metrics;
};

// The metrics monitord ships (etc/metrics.toml, built in).
const std::vector<monitor::perf::MetricDefinition>& shipped_metrics();
// The text they are read from.
std::string_view shipped_metrics_text();
// Every metric definition of `config`: its [[metrics]] first, then the shipped ones.
std::vector<monitor::perf::MetricDefinition> metric_definitions(const Config& config);
// The [[metrics]] tables of a file's text (the shipped file's), in the errors of
// parse_config; the file's other tables are ignored.
monitor::Result<std::vector<monitor::perf::MetricDefinition>> parse_metric_tables(
    std::string_view text, const std::filesystem::path& file);

// What a reload (SIGHUP) does with a key's new value. No zero value: a key must say.
enum class OnReload : std::uint8_t {
    Applies = 1,  // the running daemon takes it
    AtRestart,    // the daemon keeps its running value until it starts again
};

// A value as the file or a flag gives it, before its key reads it; monostate for a value of
// another type (a float, a table...).
using RawValue = std::variant<std::monostate, std::string, std::int64_t>;

// One key of the file. The flags are read by the same keys, so a setting means the same
// wherever it is written.
struct ConfigKey {
    std::string_view section;
    std::string_view name;
    std::string accepted;  // what would work, for error messages
    OnReload reload;
    // Checks the value and stores it in its field; the message says what is wrong.
    std::function<monitor::Result<void>(const RawValue&, Config&)> parse;
    std::function<bool(const Config&, const Config&)> same;  // the field is equal
    std::function<void(const Config& from, Config& to)> copy;

    std::string label() const;  // "[loading] probe"
};

// Every key, by section, in the order of monitord.conf(5).
std::span<const ConfigKey> config_keys();

// Settings given on the command line, read: each one given replaces the file's value, at
// start and at every reload.
class Overrides {
  public:
    void apply(Config& c) const;

  private:
    friend struct Flags;
    Config values_;
    std::vector<const ConfigKey*> given_;
};

// The settings' flags as given on the command line.
struct Flags {
    std::optional<std::string> socket;
    std::optional<std::string> state_directory;  // "none" or "": no history
    std::optional<std::string> log_level;
    std::optional<long long> history_seconds;
    std::optional<std::string> probe;
    std::optional<std::string> watchdog_device;  // "none" or "": off
    std::optional<long long> watchdog_timeout;

    // Reads the values given with their keys' parsers; the error names the flag and what
    // would work.
    monitor::Result<Overrides> parse() const;
};

// What a reload does with a new configuration.
struct ReloadPlan {
    // The new settings, except the keys that take effect at restart: their running values.
    Config config;
    // The keys that changed and take effect at restart, as "[loading] probe".
    std::vector<std::string> at_restart;

    // "[loading] probe, [watchdog] timeout changed; they take effect at restart"; "" when
    // nothing waits for a restart.
    std::string restart_message() const;
};
ReloadPlan plan_reload(const Config& running, const Config& next);

// The configuration file used when --config is not given.
std::filesystem::path default_config_path();
// Where the history is kept when [daemon] state-directory does not say: systemd's
// $STATE_DIRECTORY (StateDirectory=), else LOCALSTATEDIR/lib/monitord for the system daemon
// and $XDG_STATE_HOME/monitord (~/.local/state/monitord) for a user's own. None (empty) for a
// daemon on a socket given to it (--socket, $MONITORD_SOCKET): two daemons never share one.
// `env` reads an environment variable ("" when unset).
std::filesystem::path default_state_directory(monitor::protocol::SocketPlaceKind kind,
                                              const std::function<std::string(const char*)>& env);
// Whether the default file is to be read: only its absence means the built-in defaults. When
// looking for it fails (a directory this user may not search), reading it says why.
bool default_config_present(const std::filesystem::path& file);

// Reads `file` over `base`: keys present in the file replace base's values; [[counters]]
// tables, when the file has any, replace base's list. Errors are BADARG with a message
// "FILE:LINE: [section] key: what is wrong; what would work".
monitor::Result<Config> load_config(const std::filesystem::path& file, Config base);
// The same for the text of a file named `file` (for messages).
monitor::Result<Config> parse_config(std::string_view text, const std::filesystem::path& file,
                                     Config base);
// Longer files are refused: a configuration is a few kilobytes.
inline constexpr std::size_t kMaxConfigSize = std::size_t{1} << 20;

// The parsers of the values that may come from the command line as well as the file. The
// messages say what is wrong; the key's `accepted` says what would work.
monitor::Result<spdlog::level::level_enum> parse_log_level(const std::string& level);
monitor::Result<std::size_t> parse_history_seconds(long long seconds);
monitor::Result<monitor::ProbeMode> parse_probe(const std::string& mode);
monitor::Result<std::filesystem::path> parse_socket_path(const std::string& path);
monitor::Result<std::filesystem::path> parse_watchdog_device(const std::string& path);
monitor::Result<std::filesystem::path> parse_state_directory(const std::string& path);
monitor::Result<std::chrono::seconds> parse_history_per_second(long long seconds);
monitor::Result<std::chrono::seconds> parse_history_keep(long long seconds);
monitor::Result<std::uint64_t> parse_history_max_size(long long mib);
monitor::Result<std::chrono::seconds> parse_watchdog_timeout(long long seconds);
monitor::Result<std::chrono::seconds> parse_idle_timeout(long long seconds);
monitor::Result<std::size_t> parse_reply_memory_per_user(long long mib);
monitor::Result<std::size_t> parse_profiles_per_user(long long profiles);
monitor::Result<std::chrono::seconds> parse_profile_duration(long long seconds);
monitor::Result<std::size_t> parse_perf_files_per_session(long long files);
// The group's id; BADARG "unknown group 'x'" when this machine has no such group.
monitor::Result<gid_t> group_id(const std::string& name);

}  // namespace monitord
