#include "config.hpp"

#include <grp.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <functional>
#include <initializer_list>
#include <vector>

#include "monitor/loading/idle_probe.hpp"
#include "monitord-config.h"

namespace monitord {
namespace {

using monitor::fail;
using monitor::Result;
using monitor::Status;

constexpr std::array kLogLevels{"trace", "debug", "info", "warning", "error"};
constexpr long long kMaxHistorySeconds = 3600;

struct Key {
    std::string_view section;
    std::string_view name;
    std::string_view accepted;  // what would work, for error messages
    std::function<Result<void>(const toml::node&, Config&)> apply;
};

Result<std::string> as_string(const toml::node& n) {
    if (auto v = n.value<std::string>()) return *v;
    return fail(Status::BadArg, "expected a string");
}

Result<void> one_of(const std::string& value, std::initializer_list<const char*> accepted) {
    for (const char* a : accepted) {
        if (value == a) return {};
    }
    return fail(Status::BadArg, "'" + value + "' is not accepted");
}

// A key whose value is a string: checked by `check`, then stored by `store`.
Key string_key(std::string_view section, std::string_view name, std::string_view accepted,
               std::function<Result<void>(const std::string&)> check,
               std::function<void(Config&, std::string)> store) {
    return {section, name, accepted,
            [check = std::move(check), store = std::move(store)](const toml::node& n,
                                                                 Config& c) -> Result<void> {
                auto s = as_string(n);
                if (!s) return std::unexpected(s.error());
                if (auto r = check(*s); !r) return r;
                store(c, std::move(*s));
                return {};
            }};
}

// A key whose value is an integer: checked by `check`, then stored by `store`.
Key integer_key(std::string_view section, std::string_view name, std::string_view accepted,
                std::function<Result<void>(long long)> check,
                std::function<void(Config&, std::int64_t)> store) {
    return {section, name, accepted,
            [check = std::move(check), store = std::move(store)](const toml::node& n,
                                                                 Config& c) -> Result<void> {
                auto v = n.value_exact<std::int64_t>();
                if (!v) return fail(Status::BadArg, "expected an integer");
                if (auto r = check(*v); !r) return r;
                store(c, *v);
                return {};
            }};
}

Result<void> existing_group(const std::string& name) {
    if (auto g = group_id(name); !g) return std::unexpected(g.error());
    return {};
}

const std::array<Key, 10>& keys() {
    static const std::array<Key, 10> table{{
        string_key("daemon", "socket",
                   "an absolute path, e.g. \"/run/monitord/io.monitord.Monitor\"",
                   validate_socket_path, [](Config& c, std::string v) { c.socket = std::move(v); }),
        string_key("daemon", "log-level", kLogLevelsAccepted, validate_log_level,
                   [](Config& c, std::string v) { c.log_level = std::move(v); }),
        integer_key(
            "loading", "history-seconds", kHistorySecondsAccepted, validate_history_seconds,
            [](Config& c, std::int64_t v) { c.history_seconds = static_cast<std::size_t>(v); }),
        string_key("loading", "probe", kProbeAccepted, validate_probe,
                   [](Config& c, std::string v) { c.probe = std::move(v); }),
        string_key("watchdog", "device", kWatchdogDeviceAccepted, validate_watchdog_device,
                   [](Config& c, std::string v) { c.watchdog_device = std::move(v); }),
        integer_key("watchdog", "timeout", kWatchdogTimeoutAccepted, validate_watchdog_timeout,
                    [](Config& c, std::int64_t v) { c.watchdog_timeout = v; }),
        string_key(
            "watchdog", "policy", kWatchdogPolicyAccepted,
            [](const std::string& v) {
                return one_of(v, {"any", "all"});
            },
            [](Config& c, std::string v) { c.watchdog_policy = std::move(v); }),
        string_key(
            "watchdog", "on-stop", kWatchdogOnStopAccepted,
            [](const std::string& v) {
                return one_of(v, {"disarm", "keep-armed"});
            },
            [](Config& c, std::string v) { c.watchdog_on_stop = std::move(v); }),
        string_key("access", "socket-group", kGroupAccepted, existing_group,
                   [](Config& c, std::string v) { c.socket_group = std::move(v); }),
        string_key(
            "access", "control-group", kControlGroupAccepted,
            [](const std::string& v) { return v.empty() ? Result<void>{} : existing_group(v); },
            [](Config& c, std::string v) { c.control_group = std::move(v); }),
    }};
    return table;
}

std::string where(const std::filesystem::path& file, const toml::source_region& src) {
    return file.string() + ":" + std::to_string(src.begin.line);
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

std::string known_sections() {
    std::string s;
    for (const auto& k : keys()) {
        std::string sec = "[" + std::string{k.section} + "]";
        if (s.find(sec) != std::string::npos) continue;
        s += s.empty() ? "" : ", ";
        s += sec;
    }
    return s;
}

}  // namespace

std::filesystem::path default_config_path() {
    return std::filesystem::path{MONITORD_SYSCONFDIR} / "monitord" / "monitord.conf";
}

Result<void> validate_log_level(const std::string& level) {
    for (const char* l : kLogLevels) {
        if (level == l) return {};
    }
    return fail(Status::BadArg,
                "unknown log level '" + level + "' (use trace, debug, info, warning or error)");
}

Result<void> validate_history_seconds(long long seconds) {
    if (seconds >= 1 && seconds <= kMaxHistorySeconds) return {};
    return fail(Status::BadArg, std::to_string(seconds) + " is out of range (1 to " +
                                    std::to_string(kMaxHistorySeconds) + ")");
}

Result<void> validate_socket_path(const std::string& path) {
    constexpr std::size_t kMax = 107;  // sizeof(sockaddr_un::sun_path) - 1
    if (path.empty() || path[0] != '/')
        return fail(Status::BadArg, "'" + path + "' is not absolute");
    if (path.size() > kMax) {
        return fail(Status::BadArg, "'" + path + "' is longer than " + std::to_string(kMax) +
                                        " bytes, the most a socket address holds");
    }
    return {};
}

Result<void> validate_watchdog_device(const std::string& path) {
    if (path.empty() || path[0] == '/') return {};
    return fail(Status::BadArg, "'" + path + "' is not absolute");
}

Result<void> validate_watchdog_timeout(long long seconds) {
    if (seconds >= 1 && seconds <= 3600) return {};
    return fail(Status::BadArg, std::to_string(seconds) + " is out of range");
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

Result<void> Overrides::validate() const {
    auto flag = [](const char* name, Result<void> r, const char* accepted) -> Result<void> {
        if (r) return r;
        return fail(Status::BadArg,
                    std::string{name} + ": " + r.error().message + "; use " + accepted);
    };
    if (socket) {
        if (auto r = flag("--socket", validate_socket_path(*socket), "an absolute path"); !r)
            return r;
    }
    if (log_level) {
        if (auto r = flag("--log-level", validate_log_level(*log_level), kLogLevelsAccepted); !r) {
            return r;
        }
    }
    if (history_seconds) {
        auto r = flag("--history-seconds", validate_history_seconds(*history_seconds),
                      kHistorySecondsAccepted);
        if (!r) return r;
    }
    if (probe) {
        if (auto r = flag("--probe", validate_probe(*probe), kProbeAccepted); !r) return r;
    }
    if (watchdog_device && *watchdog_device != "none") {
        auto r = flag("--watchdog", validate_watchdog_device(*watchdog_device),
                      "an absolute path such as /dev/watchdog, or none");
        if (!r) return r;
    }
    if (watchdog_timeout) {
        auto r = flag("--watchdog-timeout", validate_watchdog_timeout(*watchdog_timeout),
                      kWatchdogTimeoutAccepted);
        if (!r) return r;
    }
    return {};
}

void Overrides::apply(Config& c) const {
    if (socket) c.socket = *socket;
    if (log_level) c.log_level = *log_level;
    if (history_seconds) c.history_seconds = static_cast<std::size_t>(*history_seconds);
    if (probe) c.probe = *probe;
    if (watchdog_device) c.watchdog_device = *watchdog_device == "none" ? "" : *watchdog_device;
    if (watchdog_timeout) c.watchdog_timeout = *watchdog_timeout;
}

Result<void> validate_probe(const std::string& mode) {
    if (monitor::probe_mode_from_name(mode)) return {};
    return fail(Status::BadArg, "unknown probe mode '" + mode + "'");
}

Result<Config> load_config(const std::filesystem::path& file, Config base) {
    toml::table doc;
    try {
        doc = toml::parse_file(file.string());
    } catch (const toml::parse_error& e) {
        if (!std::filesystem::exists(file)) {
            return fail(Status::NoDev, file.string() + ": no such file");
        }
        return fail(Status::BadArg, where(file, e.source()) + ": " + std::string{e.description()});
    }

    // Problems are reported in file order: toml++ iterates tables in key order, so collect
    // every entry with its line first.
    struct Entry {
        std::size_t line;
        std::string section;
        std::string key;  // empty for a whole section
        const toml::node* node;
    };
    std::vector<Entry> entries;
    for (const auto& [section_name, section] : doc) {
        std::string sec{section_name.str()};
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

    for (const auto& e : entries) {
        const std::string at = where(file, e.node->source());
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
        const Key* spec = nullptr;
        for (const auto& k : keys()) {
            if (k.section == e.section && k.name == e.key) spec = &k;
        }
        if (spec == nullptr) {
            return fail(Status::BadArg, at + ": [" + e.section + "] unknown key '" + e.key +
                                            "'; keys of [" + e.section + "] are " +
                                            known_keys(e.section));
        }
        if (auto r = spec->apply(*e.node, base); !r) {
            return fail(Status::BadArg, at + ": [" + e.section + "] " + e.key + ": " +
                                            r.error().message + "; use " +
                                            std::string{spec->accepted});
        }
    }
    return base;
}

}  // namespace monitord
