#include "config.hpp"

#include <fmt/format.h>
#include <grp.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <system_error>
#include <type_traits>
#include <vector>

#include "logging.hpp"
#include "monitor/text_file.hpp"
#include "monitord-config.h"

namespace monitord {
namespace {

using monitor::fail;
using monitor::Result;
using monitor::Status;

constexpr auto kMaxHistorySeconds = static_cast<long long>(monitor::kMaxHistorySeconds);
constexpr long long kMaxWatchdogTimeout = monitor::kMaxWatchdogTimeout.count();
// The daemon's probes pet once a tick, whatever their mode (monitor/runtime/runtime.hpp).
constexpr long long kMinWatchdogTimeout = monitor::kMinSleepWatchdogTimeout.count();
constexpr std::string_view kGroupName =
    "the name of a group of this machine (getent group lists them)";

// A key that reads a value of type `Raw` (std::string or std::int64_t) with `parse` into
// Config's `Field`.
template <auto Field, typename Raw, typename Parse>
ConfigKey key(std::string_view section, std::string_view name, std::string accepted,
              OnReload reload, Parse parse) {
    return {
        section,
        name,
        std::move(accepted),
        reload,
        [parse](const RawValue& raw, Config& c) -> Result<void> {
            const Raw* v = std::get_if<Raw>(&raw);
            if (v == nullptr) {
                return fail(Status::BadArg, std::is_same_v<Raw, std::string>
                                                ? "expected a string"
                                                : "expected an integer");
            }
            auto parsed = parse(*v);
            if (!parsed) return std::unexpected(parsed.error());
            c.*Field = std::move(*parsed);
            return {};
        },
        [](const Config& a, const Config& b) { return a.*Field == b.*Field; },
        [](const Config& from, Config& to) { to.*Field = from.*Field; },
    };
}

// A key whose value is one of `names`; another is "'x' is not accepted".
template <auto Field, typename E, std::size_t N>
ConfigKey enum_key(std::string_view section, std::string_view name, OnReload reload,
                   const std::array<monitor::EnumName<E>, N>& names) {
    return key<Field, std::string>(section, name, monitor::names_list(names), reload,
                                   [&names](const std::string& text) -> Result<E> {
                                       if (auto v = monitor::value_named(names, text)) return *v;
                                       return fail(Status::BadArg,
                                                   "'" + text + "' is not accepted");
                                   });
}

Result<std::string> existing_group(const std::string& name) {
    if (auto g = group_id(name); !g) return std::unexpected(g.error());
    return name;
}

const std::vector<ConfigKey>& keys() {
    using enum OnReload;
    static const std::vector<ConfigKey> table{
        key<&Config::socket, std::string>(
            "daemon", "socket", "an absolute path, e.g. \"/run/monitord/io.monitord.Monitor\"",
            AtRestart, parse_socket_path),
        key<&Config::log_level, std::string>(
            "daemon", "log-level", monitor::names_list(kLogLevelNames), Applies, parse_log_level),
        key<&Config::state_directory, std::string>(
            "daemon", "state-directory",
            "an absolute path, e.g. \"/var/lib/monitord\", or \"\" for no history", AtRestart,
            parse_state_directory),
        key<&Config::history_seconds, std::int64_t>(
            "loading", "history-seconds",
            "an integer from 1 to " + std::to_string(kMaxHistorySeconds), Applies,
            parse_history_seconds),
        key<&Config::probe, std::string>("loading", "probe",
                                         monitor::names_list(monitor::kProbeModeNames), AtRestart,
                                         parse_probe),
        key<&Config::history_per_second, std::int64_t>(
            "history", "per-second",
            "an integer from " + std::to_string(kMinHistorySecondsKept.count()) + " to " +
                std::to_string(kMaxHistoryKept.count()) + " (seconds)",
            Applies, parse_history_per_second),
        key<&Config::history_keep, std::int64_t>(
            "history", "keep",
            "an integer from " + std::to_string(kMinHistorySecondsKept.count()) + " to " +
                std::to_string(kMaxHistoryKept.count()) + " (seconds)",
            Applies, parse_history_keep),
        key<&Config::history_max_size, std::int64_t>(
            "history", "max-size",
            "an integer from 1 to " + std::to_string(kMaxHistoryMaxMiB) + " (MiB)", Applies,
            parse_history_max_size),
        key<&Config::watchdog_device, std::string>(
            "watchdog", "device", "an absolute path such as \"/dev/watchdog\", or \"\" for none",
            AtRestart, parse_watchdog_device),
        key<&Config::watchdog_timeout, std::int64_t>(
            "watchdog", "timeout",
            "an integer from " + std::to_string(kMinWatchdogTimeout) + " to " +
                std::to_string(kMaxWatchdogTimeout) + " (seconds)",
            AtRestart, parse_watchdog_timeout),
        enum_key<&Config::watchdog_policy>("watchdog", "policy", AtRestart,
                                           monitor::watchdog::kPetPolicyNames),
        enum_key<&Config::watchdog_on_stop>("watchdog", "on-stop", Applies,
                                            monitor::watchdog::kOnStopNames),
        key<&Config::socket_group, std::string>("access", "socket-group",
                                                std::string{kGroupName} + ", e.g. \"monitor\"",
                                                AtRestart, existing_group),
        key<&Config::control_group, std::string>(
            "access", "control-group", std::string{kGroupName} + ", or \"\" for root only", Applies,
            [](const std::string& v) {
                return v.empty() ? Result<std::string>{} : existing_group(v);
            }),
        key<&Config::idle_timeout, std::int64_t>("limits", "idle-timeout",
                                                 "an integer from 0 (never) to " +
                                                     std::to_string(kMaxIdleTimeout.count()) +
                                                     " (seconds)",
                                                 Applies, parse_idle_timeout),
        key<&Config::reply_memory_per_user, std::int64_t>(
            "limits", "reply-memory-per-user",
            "an integer from 1 to " + std::to_string(kMaxReplyMemoryPerUser) + " (MiB)", Applies,
            parse_reply_memory_per_user),
        key<&Config::profiles_per_user, std::int64_t>(
            "limits", "profiles-per-user",
            "an integer from 0 (root only) to " + std::to_string(kMaxProfiles), Applies,
            parse_profiles_per_user),
        key<&Config::profile_duration, std::int64_t>(
            "limits", "profile-duration",
            "an integer from 1 to " + std::to_string(kMaxProfileDuration.count()) + " (seconds)",
            Applies, parse_profile_duration),
        key<&Config::perf_files_per_session, std::int64_t>(
            "limits", "perf-files-per-session",
            "an integer from 1 to " + std::to_string(kMaxPerfFilesPerSession), Applies,
            parse_perf_files_per_session),
    };
    return table;
}

const ConfigKey* find_key(std::string_view section, std::string_view name) {
    for (const auto& k : keys()) {
        if (k.section == section && k.name == name) return &k;
    }
    return nullptr;
}

RawValue raw_value(const toml::node& n) {
    if (auto s = n.value_exact<std::string>()) return *s;
    if (auto i = n.value_exact<std::int64_t>()) return *i;
    return std::monostate{};
}

std::string where(const std::filesystem::path& file, const toml::source_region& src) {
    return file.string() + ":" + std::to_string(src.begin.line);
}

// The line of the first character outside ASCII that is not in a comment. toml++ 3.3 (Debian
// 12's) looks such characters up in its Unicode tables wherever it might take them for
// whitespace, and that lookup is undefined for some code points (toml++ issues 190 and 295):
// outside strings, after a backslash in a string, after a string that follows a value. No key
// takes text outside ASCII, so it may stand in comments only. Strings are followed only so
// that a '#' in one does not start a comment. Found by tests/fuzz (regressions/config).
std::optional<std::size_t> non_ascii_outside_comments(std::string_view text) {
    enum class In { Value, Comment, Basic, Literal, MultiBasic, MultiLiteral } in = In::Value;
    std::size_t line = 1;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
            if (in == In::Comment || in == In::Basic || in == In::Literal) in = In::Value;
            continue;
        }
        if (in == In::Comment) continue;
        if (static_cast<unsigned char>(c) >= 0x80) return line;
        const std::string_view rest = text.substr(i);
        switch (in) {
            case In::Value:
                if (c == '#') in = In::Comment;
                if (c == '"') in = rest.starts_with("\"\"\"") ? In::MultiBasic : In::Basic;
                if (c == '\'') in = rest.starts_with("\'\'\'") ? In::MultiLiteral : In::Literal;
                if (in == In::MultiBasic || in == In::MultiLiteral) i += 2;
                break;
            case In::Basic:
            case In::MultiBasic:
                if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') ++i;  // escaped
                if (in == In::Basic && c == '"') in = In::Value;
                if (in == In::MultiBasic && rest.starts_with("\"\"\"")) {
                    in = In::Value;
                    i += 2;
                }
                break;
            case In::Literal:
                if (c == '\'') in = In::Value;
                break;
            case In::MultiLiteral:
                if (rest.starts_with("\'\'\'")) {
                    in = In::Value;
                    i += 2;
                }
                break;
            case In::Comment:
                break;
        }
    }
    return std::nullopt;
}

std::string known_keys(std::string_view section) {
    std::string s;
    for (const auto& k : keys()) {
        if (k.section != section) continue;
        s += s.empty() ? "" : ", ";
        s += k.name;
    }
    return s;
}

constexpr std::string_view kCountersSection = "counters";
constexpr std::string_view kMetricsSection = "metrics";

std::string known_sections() {
    std::string s;
    for (const auto& k : keys()) {
        std::string sec = "[" + std::string{k.section} + "]";
        if (s.find(sec) != std::string::npos) continue;
        s += s.empty() ? "" : ", ";
        s += sec;
    }
    return s + ", [[counters]], [[metrics]]";
}

// The keys of a [[counters]] table, in the order of monitord.conf(5), with their types.
struct CounterKey {
    std::string_view name;
    bool integer;
};
constexpr CounterKey kCounterKeys[] = {
    {"name", false}, {"events", false}, {"target", false},  {"cpu", true},      {"cgroup", false},
    {"unit", false}, {"mux", false},    {"slice-ms", true}, {"metrics", false},
};

std::string counter_keys_list() {
    std::string s;
    for (const auto& k : kCounterKeys) s += (s.empty() ? "" : ", ") + std::string{k.name};
    return s;
}

bool valid_session_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
    });
}

// Reads one [[counters]] table; `taken` are the sessions of the tables above it.
Result<StandingSessionConfig> parse_counters(const std::filesystem::path& file,
                                             const toml::table& table,
                                             const std::vector<StandingSessionConfig>& taken) {
    StandingSessionConfig s;
    s.where = where(file, table.source());
    s.request.mux = monitor::perf::MuxMode::Kernel;
    // The keys in file order, so that the first problem of the table is the one reported.
    std::vector<std::pair<std::string, const toml::node*>> keys;
    for (const auto& [k, v] : table) keys.emplace_back(std::string{k.str()}, &v);
    std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        return a.second->source().begin.line < b.second->source().begin.line;
    });
    std::string label = "[[counters]]";
    if (auto n = table["name"].value_exact<std::string>()) label += " '" + *n + "'";
    // Each key by name, not through a structured binding: the lambda below captures it, which
    // clang's analyzer takes for an uninitialized value (llvm/llvm-project#142267).
    for (const auto& key : keys) {
        const std::string& k = key.first;
        const toml::node* node = key.second;
        const std::string at = where(file, node->source());
        const auto* spec = std::find_if(std::begin(kCounterKeys), std::end(kCounterKeys),
                                        [&k](const CounterKey& c) { return c.name == k; });
        if (spec == std::end(kCounterKeys)) {
            return fail(Status::BadArg,
                        fmt::format("{}: {}: unknown key '{}'; keys of [[counters]] are {}", at,
                                    label, k, counter_keys_list()));
        }
        const RawValue raw = raw_value(*node);
        const auto* text = std::get_if<std::string>(&raw);
        const auto* number = std::get_if<std::int64_t>(&raw);
        if (spec->integer ? number == nullptr : text == nullptr) {
            return fail(Status::BadArg, fmt::format("{}: {}: {}: expected {}", at, label, k,
                                                    spec->integer ? "an integer" : "a string"));
        }
        auto bad = [&](const std::string& what) {
            return fail(Status::BadArg, fmt::format("{}: {}: {}: {}", at, label, k, what));
        };
        if (k == "name") {
            if (!valid_session_name(*text)) {
                return bad("'" + *text +
                           "' is not a session name; use 1 to 64 letters, digits, '_', '-' or '.'");
            }
            for (const auto& t : taken) {
                if (t.name == *text) {
                    return bad("'" + *text + "' names the session at " + t.where +
                               " already; give each session a name of its own");
                }
            }
            s.name = *text;
        } else if (k == "events") {
            s.request.events = *text;
        } else if (k == "target") {
            const auto kind = monitor::value_named(monitor::protocol::kTargetKindNames, *text);
            if (kind == monitor::protocol::TargetRequest::Kind::Process) {
                return bad(
                    "a standing session cannot count a process, which ends; count its "
                    "cgroup or its unit, or all, each or one cpu");
            }
            if (!kind) {
                return bad("'" + *text + "' is not a target; use all, each, cpu, cgroup or unit");
            }
            s.request.target.kind = *kind;
        } else if (k == "cpu") {
            if (*number < 0 || *number > 65535) {
                return bad(std::to_string(*number) + " is not a CPU number; use 0 to 65535");
            }
            s.request.target.cpu = static_cast<int>(*number);
        } else if (k == "cgroup") {
            s.request.target.cgroup = *text;
        } else if (k == "unit") {
            s.request.target.unit = *text;
        } else if (k == "mux") {
            const auto mux = monitor::value_named(monitor::protocol::kMuxModeNames, *text);
            if (!mux) return bad("'" + *text + "' is not accepted; use kernel or daemon");
            s.request.mux = *mux;
        } else if (k == "slice-ms") {
            s.request.slice_ms = *number;
        } else if (k == "metrics") {
            s.request.metrics = *text;
        }
    }
    const std::string at = s.where + ": " + label + ": ";
    if (s.name.empty()) {
        return fail(Status::BadArg, at + "no name; give the table name = \"...\" (letters, "
                                         "digits, '_', '-' or '.')");
    }
    if (s.request.events.empty() && s.request.metrics.empty()) {
        return fail(Status::BadArg, at + "no events; give it events = \"task-clock,...\" "
                                         "(monctl perf list lists them) or metrics = \"sched\" "
                                         "(monctl perf list --metrics)");
    }
    // Each target's own key, and no other target's.
    const auto& target = s.request.target;
    const std::string target_name{name_of(monitor::protocol::kTargetKindNames, target.kind)};
    const std::pair<const char*, bool> target_keys[] = {
        {"cpu", target.cpu.has_value()},
        {"cgroup", !target.cgroup.empty()},
        {"unit", !target.unit.empty()},
    };
    for (const auto& [key, given] : target_keys) {
        if (target_name == key && !given) {
            return fail(Status::BadArg,
                        fmt::format("{}target \"{}\" needs {} = ...", at, target_name, key));
        }
        if (target_name != key && given) {
            return fail(Status::BadArg,
                        fmt::format("{}{} is for target = \"{}\"; this table's target is \"{}\"",
                                    at, key, key, target_name));
        }
    }
    if (s.request.slice_ms && s.request.mux != monitor::perf::MuxMode::Daemon) {
        return fail(Status::BadArg,
                    at + "slice-ms is for mux = \"daemon\" (the kernel rotates on its own)");
    }
    // The events' syntax and the slice's range, as a request checks them.
    if (auto o = monitor::protocol::counting_options(s.request); !o) {
        return fail(Status::BadArg, at + o.error().message);
    }
    return s;
}

// Reads one [[metrics]] table.
Result<monitor::perf::MetricDefinition> parse_metrics(const std::filesystem::path& file,
                                                      const toml::table& table) {
    monitor::perf::MetricDefinition d;
    d.where = where(file, table.source());
    std::string label = "[[metrics]]";
    if (auto n = table["name"].value_exact<std::string>()) label += " '" + *n + "'";
    constexpr std::string_view kKeys = "name, description, formula, groups";
    std::vector<std::pair<std::string, const toml::node*>> keys;
    for (const auto& [k, v] : table) keys.emplace_back(std::string{k.str()}, &v);
    std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        return a.second->source().begin.line < b.second->source().begin.line;
    });
    bool have_formula = false;
    for (const auto& key : keys) {
        const std::string& k = key.first;
        const toml::node* node = key.second;
        const std::string at = fmt::format("{}: {}: {}: ", where(file, node->source()), label, k);
        if (k == "groups") {
            const auto* list = node->as_array();
            if (list == nullptr) {
                return fail(Status::BadArg, at + "expected a list of strings: [\"ipc\"]");
            }
            for (const auto& g : *list) {
                const auto group = g.value_exact<std::string>();
                if (!group) return fail(Status::BadArg, at + "expected a list of strings");
                if (auto ok = monitor::perf::check_metric_name(*group, "group"); !ok) {
                    return fail(Status::BadArg, at + ok.error().message);
                }
                d.groups.push_back(*group);
            }
            continue;
        }
        const auto text = node->value_exact<std::string>();
        if (k != "name" && k != "description" && k != "formula") {
            return fail(Status::BadArg,
                        fmt::format("{}unknown key; keys of [[metrics]] are {}", at, kKeys));
        }
        if (!text) return fail(Status::BadArg, at + "expected a string");
        if (k == "name") {
            if (auto ok = monitor::perf::check_metric_name(*text, "metric"); !ok) {
                return fail(Status::BadArg, at + ok.error().message);
            }
            d.name = *text;
        } else if (k == "description") {
            d.description = *text;
        } else {
            auto f = monitor::perf::MetricFormula::parse(*text);
            if (!f) return fail(Status::BadArg, at + f.error().message);
            if (f->events().empty()) {
                return fail(Status::BadArg, at + "the formula names no event");
            }
            d.formula = std::move(*f);
            have_formula = true;
        }
    }
    const std::string at = d.where + ": " + label + ": ";
    if (d.name.empty()) {
        return fail(Status::BadArg, at + "no name; give the table name = \"...\" (lower-case "
                                         "letters, digits and '_')");
    }
    if (!have_formula) {
        return fail(Status::BadArg, at + "no formula; give it formula = \"instructions / "
                                         "cycles\" (events, numbers, + - * / and seconds)");
    }
    if (d.description.empty()) d.description = d.formula.text();
    return d;
}

}  // namespace

std::filesystem::path default_config_path() {
    return std::filesystem::path{MONITORD_SYSCONFDIR} / "monitord" / "monitord.conf";
}

std::filesystem::path default_state_directory(monitor::protocol::SocketPlaceKind kind,
                                              const std::function<std::string(const char*)>& env) {
    using enum monitor::protocol::SocketPlaceKind;
    if (kind == Given || kind == Environment) return {};
    // systemd's list may name several, separated by ':'; ours is the first.
    if (std::string dir = env("STATE_DIRECTORY"); !dir.empty() && dir[0] == '/') {
        return dir.substr(0, dir.find(':'));
    }
    if (kind == System) return std::filesystem::path{MONITORD_LOCALSTATEDIR} / "lib/monitord";
    if (std::string dir = env("XDG_STATE_HOME"); !dir.empty() && dir[0] == '/') {
        return std::filesystem::path{dir} / "monitord";
    }
    if (std::string home = env("HOME"); !home.empty() && home[0] == '/') {
        return std::filesystem::path{home} / ".local/state/monitord";
    }
    return {};
}

bool default_config_present(const std::filesystem::path& file) {
    std::error_code error;  // not set when the file is known to be absent
    return std::filesystem::exists(file, error) || error;
}

Result<spdlog::level::level_enum> parse_log_level(const std::string& level) {
    if (auto l = monitor::value_named(kLogLevelNames, level)) return *l;
    // The key's message adds what would work.
    return fail(Status::BadArg, "unknown log level '" + level + "'");
}

Result<std::size_t> parse_history_seconds(long long seconds) {
    if (seconds >= 1 && seconds <= kMaxHistorySeconds) return static_cast<std::size_t>(seconds);
    return fail(Status::BadArg, std::to_string(seconds) + " is out of range (1 to " +
                                    std::to_string(kMaxHistorySeconds) + ")");
}

Result<monitor::ProbeMode> parse_probe(const std::string& mode) {
    if (auto m = monitor::probe_mode_from_name(mode)) return *m;
    return fail(Status::BadArg, "unknown probe mode '" + mode + "'");
}

Result<std::filesystem::path> parse_socket_path(const std::string& path) {
    constexpr std::size_t kMax = 107;  // sizeof(sockaddr_un::sun_path) - 1
    if (path.empty() || path[0] != '/')
        return fail(Status::BadArg, "'" + path + "' is not absolute");
    if (path.size() > kMax) {
        return fail(Status::BadArg, "'" + path + "' is longer than " + std::to_string(kMax) +
                                        " bytes, the most a socket address holds");
    }
    return path;
}

Result<std::filesystem::path> parse_watchdog_device(const std::string& path) {
    if (path.empty() || path[0] == '/') return path;
    return fail(Status::BadArg, "'" + path + "' is not absolute");
}

Result<std::filesystem::path> parse_state_directory(const std::string& path) {
    if (path.empty() || path[0] == '/') return path;
    return fail(Status::BadArg, "'" + path + "' is not absolute");
}

Result<std::chrono::seconds> parse_watchdog_timeout(long long seconds) {
    if (seconds >= kMinWatchdogTimeout && seconds <= kMaxWatchdogTimeout) {
        return std::chrono::seconds{seconds};
    }
    return fail(Status::BadArg, std::to_string(seconds) + " is out of range");
}

namespace {

// `value` when it is from `low` to `high`; "N is out of range" otherwise.
Result<long long> in_range(long long value, long long low, long long high) {
    if (value >= low && value <= high) return value;
    return fail(Status::BadArg, std::to_string(value) + " is out of range");
}

}  // namespace

Result<std::chrono::seconds> parse_idle_timeout(long long seconds) {
    auto v = in_range(seconds, 0, kMaxIdleTimeout.count());
    if (!v) return std::unexpected(v.error());
    return std::chrono::seconds{*v};
}

Result<std::chrono::seconds> parse_history_per_second(long long seconds) {
    auto v = in_range(seconds, kMinHistorySecondsKept.count(), kMaxHistoryKept.count());
    if (!v) return std::unexpected(v.error());
    return std::chrono::seconds{*v};
}

Result<std::chrono::seconds> parse_history_keep(long long seconds) {
    return parse_history_per_second(seconds);
}

Result<std::uint64_t> parse_history_max_size(long long mib) {
    auto v = in_range(mib, 1, static_cast<long long>(kMaxHistoryMaxMiB));
    if (!v) return std::unexpected(v.error());
    return static_cast<std::uint64_t>(*v);
}

Result<std::size_t> parse_reply_memory_per_user(long long mib) {
    auto v = in_range(mib, 1, static_cast<long long>(kMaxReplyMemoryPerUser));
    if (!v) return std::unexpected(v.error());
    return static_cast<std::size_t>(*v);
}

Result<std::size_t> parse_profiles_per_user(long long profiles) {
    auto v = in_range(profiles, 0, static_cast<long long>(kMaxProfiles));
    if (!v) return std::unexpected(v.error());
    return static_cast<std::size_t>(*v);
}

Result<std::chrono::seconds> parse_profile_duration(long long seconds) {
    auto v = in_range(seconds, 1, kMaxProfileDuration.count());
    if (!v) return std::unexpected(v.error());
    return std::chrono::seconds{*v};
}

Result<std::size_t> parse_perf_files_per_session(long long files) {
    auto v = in_range(files, 1, static_cast<long long>(kMaxPerfFilesPerSession));
    if (!v) return std::unexpected(v.error());
    return static_cast<std::size_t>(*v);
}

Result<gid_t> group_id(const std::string& name) {
    if (name.empty()) return fail(Status::BadArg, "no group named");
    std::vector<char> buf(16384);
    group g{};
    group* found = nullptr;
    if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
        return fail(Status::BadArg, "unknown group '" + name + "'");
    }
    return found->gr_gid;
}

std::string ConfigKey::label() const {
    return "[" + std::string{section} + "] " + std::string{name};
}

std::span<const ConfigKey> config_keys() {
    return keys();
}

Result<Overrides> Flags::parse() const {
    auto text = [](const std::optional<std::string>& v) -> std::optional<RawValue> {
        if (v) return *v;
        return std::nullopt;
    };
    auto integer = [](const std::optional<long long>& v) -> std::optional<RawValue> {
        if (v) return std::int64_t{*v};
        return std::nullopt;
    };
    // The flags in the order they are checked, each with its key; `accepted` replaces the
    // key's where the command line takes something else.
    struct Flag {
        const char* flag;
        std::string_view section;
        std::string_view key;
        std::optional<RawValue> value;
        const char* accepted;
    };
    const Flag flags[] = {
        {"--socket", "daemon", "socket", text(socket), "an absolute path"},
        {"--log-level", "daemon", "log-level", text(log_level), nullptr},
        {"--state-directory", "daemon", "state-directory",
         text(state_directory == "none" ? std::string{} : state_directory),
         "an absolute path, or none for no history"},
        {"--history-seconds", "loading", "history-seconds", integer(history_seconds), nullptr},
        {"--probe", "loading", "probe", text(probe), nullptr},
        {"--watchdog", "watchdog", "device",
         text(watchdog_device == "none" ? std::string{} : watchdog_device),
         "an absolute path such as /dev/watchdog, or none"},
        {"--watchdog-timeout", "watchdog", "timeout", integer(watchdog_timeout), nullptr},
    };
    Overrides o;
    for (const auto& f : flags) {
        if (!f.value) continue;
        const ConfigKey* k = find_key(f.section, f.key);
        if (auto r = k->parse(*f.value, o.values_); !r) {
            return fail(Status::BadArg, std::string{f.flag} + ": " + r.error().message + "; use " +
                                            (f.accepted ? std::string{f.accepted} : k->accepted));
        }
        o.given_.push_back(k);
    }
    return o;
}

void Overrides::apply(Config& c) const {
    for (const ConfigKey* k : given_) k->copy(values_, c);
}

ReloadPlan plan_reload(const Config& running, const Config& next) {
    ReloadPlan plan{next, {}};
    for (const auto& k : keys()) {
        if (k.reload == OnReload::Applies || k.same(running, next)) continue;
        plan.at_restart.push_back(k.label());
        k.copy(running, plan.config);
    }
    return plan;
}

std::string ReloadPlan::restart_message() const {
    if (at_restart.empty()) return {};
    std::string s;
    for (const auto& k : at_restart) s += (s.empty() ? "" : ", ") + k;
    return s + (at_restart.size() == 1 ? " changed; it takes effect at restart"
                                       : " changed; they take effect at restart");
}

Result<Config> load_config(const std::filesystem::path& file, Config base) {
    auto text = monitor::read_text_file(file, kMaxConfigSize);
    if (!text) {
        if (text.error().status == Status::NoDev) {
            return fail(Status::NoDev, file.string() + ": no such file");
        }
        return std::unexpected(text.error());
    }
    return parse_config(*text, file, std::move(base));
}

Result<Config> parse_config(std::string_view text, const std::filesystem::path& file, Config base) {
    if (auto line = non_ascii_outside_comments(text)) {
        return fail(Status::BadArg, file.string() + ":" + std::to_string(*line) +
                                        ": a character outside ASCII (keys and values are "
                                        "ASCII; other text may stand in comments only)");
    }
    toml::table doc;
    try {
        doc = toml::parse(text, file.string());
    } catch (const toml::parse_error& e) {
        return fail(Status::BadArg, where(file, e.source()) + ": " + std::string{e.description()});
    }

    // Problems are reported in file order: toml++ iterates tables in key order, so collect
    // every entry with its line first.
    struct Entry {
        std::size_t line;
        std::string section;
        std::string key;  // empty for a whole section
        const toml::node* node;
        bool standing = false;  // a [[counters]] or [[metrics]] table
    };
    std::vector<Entry> entries;
    bool have_counters = false;
    bool have_metrics = false;
    for (const auto& [section_name, section] : doc) {
        std::string sec{section_name.str()};
        if (sec == kCountersSection || sec == kMetricsSection) {
            (sec == kCountersSection ? have_counters : have_metrics) = true;
            const auto* tables = section.as_array();
            if (tables != nullptr && tables->is_array_of_tables()) {
                for (const auto& t : *tables) {
                    entries.push_back({t.source().begin.line, sec, {}, &t, true});
                }
                continue;
            }
            // A [counters] or [metrics] table or a value: said at its line below.
        }
        const auto* table = section.as_table();
        // Sections that are not tables, unknown or empty are judged at their header's line.
        if (table == nullptr || table->empty() || known_keys(sec).empty()) {
            entries.push_back({section.source().begin.line, sec, {}, &section});
            continue;
        }
        for (const auto& [key_name, value] : *table) {
            entries.push_back(
                {key_name.source().begin.line, sec, std::string{key_name.str()}, &value});
        }
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.line < b.line; });

    std::vector<StandingSessionConfig> counters;
    std::vector<monitor::perf::MetricDefinition> metrics;
    for (const auto& e : entries) {
        const std::string at = where(file, e.node->source());
        if (e.standing && e.section == kMetricsSection) {
            auto d = parse_metrics(file, *e.node->as_table());
            if (!d) return std::unexpected(d.error());
            metrics.push_back(std::move(*d));
            continue;
        }
        if (e.section == kMetricsSection) {
            return fail(Status::BadArg, at + ": metrics is a list of tables: write each "
                                             "metric as a [[metrics]] table");
        }
        if (e.standing) {
            auto s = parse_counters(file, *e.node->as_table(), counters);
            if (!s) return std::unexpected(s.error());
            counters.push_back(std::move(*s));
            continue;
        }
        if (e.section == kCountersSection) {
            return fail(Status::BadArg, at + ": counters is a list of tables: write each "
                                             "standing session as a [[counters]] table");
        }
        if (!e.node->is_table() && e.key.empty()) {
            // "key = value" above every [section] header (or an array of tables).
            std::string home;
            for (const auto& k : keys()) {
                if (k.name == e.section) home = "[" + std::string{k.section} + "]";
            }
            return fail(Status::BadArg, at + ": '" + e.section + "' is outside any section; " +
                                            (home.empty() ? "settings go under " + known_sections()
                                                          : "put it under " + home));
        }
        if (known_keys(e.section).empty()) {
            return fail(Status::BadArg, at + ": unknown section [" + e.section +
                                            "]; sections are " + known_sections());
        }
        if (e.key.empty()) continue;  // an empty known section
        const ConfigKey* spec = find_key(e.section, e.key);
        if (spec == nullptr) {
            return fail(Status::BadArg, at + ": [" + e.section + "] unknown key '" + e.key +
                                            "'; keys of [" + e.section + "] are " +
                                            known_keys(e.section));
        }
        if (auto r = spec->parse(raw_value(*e.node), base); !r) {
            return fail(Status::BadArg, at + ": " + spec->label() + ": " + r.error().message +
                                            "; use " + std::string{spec->accepted});
        }
    }
    if (have_counters) base.counters = std::move(counters);
    if (have_metrics) base.metrics = std::move(metrics);
    return base;
}

Result<std::vector<monitor::perf::MetricDefinition>> parse_metric_tables(
    std::string_view text, const std::filesystem::path& file) {
    toml::table doc;
    try {
        doc = toml::parse(text, file.string());
    } catch (const toml::parse_error& e) {
        return fail(Status::BadArg, where(file, e.source()) + ": " + std::string{e.description()});
    }
    std::vector<monitor::perf::MetricDefinition> out;
    const auto* tables = doc[kMetricsSection].as_array();
    if (tables == nullptr) return out;
    for (const auto& t : *tables) {
        const auto* table = t.as_table();
        if (table == nullptr) {
            return fail(Status::BadArg, where(file, t.source()) + ": metrics is a list of tables");
        }
        auto d = parse_metrics(file, *table);
        if (!d) return std::unexpected(d.error());
        out.push_back(std::move(*d));
    }
    return out;
}

const std::vector<monitor::perf::MetricDefinition>& shipped_metrics() {
    // Checked by the unit tests: the shipped file always parses.
    static const std::vector<monitor::perf::MetricDefinition> kShipped =
        parse_metric_tables(shipped_metrics_text(), "metrics.toml")
            .value_or(std::vector<monitor::perf::MetricDefinition>{});
    return kShipped;
}

std::vector<monitor::perf::MetricDefinition> metric_definitions(const Config& config) {
    std::vector<monitor::perf::MetricDefinition> all = config.metrics;
    const auto& shipped = shipped_metrics();
    all.insert(all.end(), shipped.begin(), shipped.end());
    return all;
}

}  // namespace monitord
