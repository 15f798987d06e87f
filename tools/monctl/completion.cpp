#include "completion.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <system_error>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/protocol/daemon_client.hpp"

namespace monctl {

namespace {

// The option `word` names ("-e", "--events", "--events=x") among those of `chain`, the
// innermost command first (monctl's own options fall through to every command).
const CLI::Option* find_option(const std::vector<const CLI::App*>& chain, std::string_view word) {
    word = word.substr(0, word.find('='));
    const bool is_long = word.starts_with("--");
    const std::string name{word.substr(is_long ? 2 : 1)};
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        for (const auto* opt : (*it)->get_options()) {
            const auto& names = is_long ? opt->get_lnames() : opt->get_snames();
            if (std::ranges::find(names, name) != names.end()) return opt;
        }
    }
    return nullptr;
}

const CLI::App* find_subcommand(const CLI::App& app, std::string_view name) {
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (sub->get_name() == name) return sub;
    }
    return nullptr;
}

std::vector<std::string> from(const std::function<std::vector<std::string>()>& source) {
    return source ? source() : std::vector<std::string>{};
}

// The values of `opt` (by its long name, or a positional's name) for the word `word`.
std::vector<std::string> values_of(const CLI::Option& opt, std::string_view word,
                                   const CompletionSources& sources) {
    const auto& longs = opt.get_lnames();
    auto named = [&](std::string_view n) {
        return std::ranges::find(longs, n) != longs.end() || opt.get_name() == n;
    };
    if (named("events") || named("event") || named("metrics")) {
        // A list: the names complete its last item, after what the word has so far.
        const auto comma = word.rfind(',');
        const std::string before{comma == std::string_view::npos ? std::string_view{}
                                                                 : word.substr(0, comma + 1)};
        auto names = from(named("metrics") ? sources.metrics : sources.events);
        for (auto& n : names) n.insert(0, before);
        return names;
    }
    if (named("unit")) return from(sources.units);
    if (named("cpu")) return from(sources.cpus);
    if (named("mux")) return {"daemon", "kernel"};
    if (named("call-graph")) return {"fp", "dwarf"};
    if (named("pmu")) return from(sources.pmus);
    if (named("name")) return from(sources.sessions);
    if (named("socket") || named("folded") || named("pprof") || named("command")) {
        return {std::string{kCompleteFiles}};
    }
    return {};
}

// The names of the items of `list` in the reply of `method` (no parameters) from the daemon at
// `socket`, asked with a short timeout (the shell waits for it at every tab); none when no
// daemon answers.
template <typename In, typename Out, typename Item>
std::vector<std::string> names_from_daemon(const std::string& socket,
                                           const monitor::protocol::Method<In, Out>& method,
                                           std::vector<Item> Out::*list) {
    std::vector<std::string> names;
    auto c = monitor::protocol::DaemonClient::connect(socket);
    if (!c) return names;
    c->set_timeout(std::chrono::milliseconds(500));
    if (auto r = c->call(method)) {
        for (const auto& item : (*r).*list) names.push_back(item.name);
    }
    return names;
}

}  // namespace

std::vector<std::string> complete(const CLI::App& app, const std::vector<std::string>& words,
                                  const CompletionSources& sources) {
    std::vector<const CLI::App*> chain{&app};
    const CLI::Option* pending = nullptr;  // an option whose value comes next
    bool command = false;                  // after "--": a command and its arguments
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        const std::string_view w = words[i];
        if (command) continue;
        if (pending != nullptr) {
            pending = nullptr;
            continue;
        }
        if (w == "--") {
            command = true;
            continue;
        }
        if (w.starts_with("-") && w.size() > 1) {
            const auto* opt = find_option(chain, w);
            if (opt != nullptr && opt->get_expected_min() > 0 &&
                w.find('=') == std::string_view::npos) {
                pending = opt;
            }
            continue;
        }
        if (const auto* sub = find_subcommand(*chain.back(), w)) chain.push_back(sub);
    }
    const std::string_view word = words.back();
    if (command) return {std::string{kCompleteFiles}};
    if (pending != nullptr) return values_of(*pending, word, sources);

    std::vector<std::string> out;
    if (word.starts_with("-")) {
        std::set<std::string> seen;
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            for (const auto* opt : (*it)->get_options()) {
                for (const auto& n : opt->get_lnames()) {
                    if (seen.insert("--" + n).second) out.push_back("--" + n);
                }
                for (const auto& n : opt->get_snames()) {
                    if (seen.insert("-" + n).second) out.push_back("-" + n);
                }
            }
        }
        return out;
    }
    // The commands below this one (those with a group: CLI11 hides the others), then the
    // values of its first positional argument.
    for (const auto* sub : chain.back()->get_subcommands([](const CLI::App*) { return true; })) {
        if (!sub->get_group().empty()) out.push_back(sub->get_name());
    }
    for (const auto* opt : chain.back()->get_options()) {
        if (!opt->nonpositional()) {
            auto values = values_of(*opt, word, sources);
            out.insert(out.end(), values.begin(), values.end());
            break;
        }
    }
    return out;
}

CompletionSources live_sources(const std::vector<std::string>& words,
                               const std::string& cgroup_root) {
    std::string socket;
    constexpr std::string_view kAssigned = "--socket=";
    for (std::size_t i = 0; i < words.size(); ++i) {
        if ((words[i] == "-s" || words[i] == "--socket") && i + 1 < words.size()) {
            socket = words[i + 1];
        } else if (words[i].starts_with(kAssigned)) {
            socket = words[i].substr(kAssigned.size());
        }
    }
    CompletionSources s;
    s.events = [socket] {
        return names_from_daemon(socket, monitor::protocol::method::ListEvents,
                                 &monitor::protocol::EventsOut::events);
    };
    s.metrics = [socket] {
        std::set<std::string> names;
        auto c = monitor::protocol::DaemonClient::connect(socket);
        if (!c) return std::vector<std::string>{};
        c->set_timeout(std::chrono::milliseconds(500));
        if (auto r = c->call(monitor::protocol::method::ListMetrics)) {
            for (const auto& m : r->metrics) {
                if (!m.unavailable.empty()) continue;
                names.insert(m.name);
                names.insert(m.groups.begin(), m.groups.end());
            }
        }
        return std::vector<std::string>(names.begin(), names.end());
    };
    s.pmus = [socket] {
        return names_from_daemon(socket, monitor::protocol::method::GetPmuInfo,
                                 &monitor::protocol::PmuInfoOut::pmus);
    };
    s.sessions = [socket] {
        return names_from_daemon(socket, monitor::protocol::method::GetStandingCounters,
                                 &monitor::protocol::StandingSessionsOut::sessions);
    };
    s.units = [cgroup_root] {
        // A unit that runs something has a cgroup of its name: a few levels down in v2
        // (system.slice/x.service, user.slice/user-1000.slice/user@1000.service/...), one more
        // in v1, below each controller's hierarchy.
        std::set<std::string> units;
        std::error_code ec;
        namespace fs = std::filesystem;
        fs::recursive_directory_iterator it(cgroup_root, ec), end;
        for (; !ec && it != end; it.increment(ec)) {
            if (it.depth() >= 5) {
                it.disable_recursion_pending();
                continue;
            }
            if (!it->is_directory(ec)) continue;
            const std::string name = it->path().filename().string();
            for (const char* kind :
                 {".service", ".scope", ".slice", ".socket", ".mount", ".swap"}) {
                if (name.ends_with(kind)) units.insert(name);
            }
        }
        return std::vector<std::string>(units.begin(), units.end());
    };
    s.cpus = [] {
        std::vector<std::string> cpus;
        if (auto online = monitor::read_online_cpus("/sys")) {
            for (int cpu : *online) cpus.push_back(std::to_string(cpu));
        }
        return cpus;
    };
    return s;
}

}  // namespace monctl
