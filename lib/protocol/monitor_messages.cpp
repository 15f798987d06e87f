#include "monitor/protocol/monitor_messages.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace monitor::protocol {
namespace {

using nlohmann::json;

// Loads are reported to a thousandth of a percent: finer than any source resolves.
double rounded(double v) {
    return std::round(v * 1000.0) / 1000.0;
}

json optional_number(const std::optional<double>& v) {
    return v ? json(rounded(*v)) : json(nullptr);
}

// An object with a key per state (time_state_names()), as StateShares and StateSeconds are
// sent.
json per_state_json(const std::array<double, kTimeStateCount>& values, bool round) {
    json j = json::object();
    const auto names = time_state_names();
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        j[std::string{names[i]}] = round ? rounded(values[i]) : values[i];
    }
    return j;
}

// Keys this version does not know are skipped; a state missing from a peer's reply reads 0.
std::array<double, kTimeStateCount> per_state_from_json(const json& j) {
    std::array<double, kTimeStateCount> values{};
    const auto names = time_state_names();
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        auto it = j.find(names[i]);
        if (it != j.end() && it->is_number()) values[i] = it->get<double>();
    }
    return values;
}

json shares_json(const StateShares& shares) {
    return per_state_json(shares.percent, /*round=*/true);
}

json states_json(const StateStats& s) {
    return json{
        {"last", s.last ? shares_json(*s.last) : json(nullptr)},
        {"avg", shares_json(s.avg)},
        {"samples", s.samples},
    };
}

StateShares shares_from_json(const json& j) {
    return StateShares{per_state_from_json(j)};
}

// Counters are sent unrounded: their growth, not their size, is what readers look at.
json seconds_json(const StateSeconds& s) {
    return per_state_json(s.seconds, /*round=*/false);
}

StateSeconds seconds_from_json(const json& j) {
    return StateSeconds{per_state_from_json(j)};
}

StateStats states_from_json(const json& j) {
    StateStats s;
    if (auto last = j.find("last"); last != j.end() && last->is_object()) {
        s.last = shares_from_json(*last);
    }
    s.avg = shares_from_json(j.at("avg"));
    s.samples =
        static_cast<std::size_t>(std::max<std::int64_t>(0, j.at("samples").get<std::int64_t>()));
    return s;
}

json stats_json(const SourceLoad& l) {
    if (!l.stats) return nullptr;
    const LoadStats& s = *l.stats;
    json j{
        {"avg_prev_sec", optional_number(s.avg_prev_sec)},
        {"avg_prev_min", rounded(s.avg_prev_min)},
        {"min_prev_min", rounded(s.min_prev_min)},
        {"max_prev_min", rounded(s.max_prev_min)},
        {"samples", s.samples},
    };
    if (!l.history.empty()) {
        json h = json::array();
        for (const auto& v : l.history) h.push_back(optional_number(v));
        j["history"] = std::move(h);
    }
    if (l.states) j["states"] = states_json(*l.states);
    if (l.state_seconds) j["state_seconds"] = seconds_json(*l.state_seconds);
    return j;
}

json sources_json(const std::vector<SourceLoad>& loads, json j = json::object()) {
    for (const auto& l : loads) j[l.source] = stats_json(l);
    return j;
}

std::optional<double> number_or_null(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return it->get<double>();
}

SourceLoad source_from_json(const std::string& name, const json& j) {
    SourceLoad l;
    l.source = name;
    if (j.is_null()) return l;
    LoadStats s;
    s.avg_prev_sec = number_or_null(j, "avg_prev_sec");
    s.avg_prev_min = j.at("avg_prev_min").get<double>();
    s.min_prev_min = j.at("min_prev_min").get<double>();
    s.max_prev_min = j.at("max_prev_min").get<double>();
    s.samples =
        static_cast<std::size_t>(std::max<std::int64_t>(0, j.at("samples").get<std::int64_t>()));
    l.stats = s;
    if (auto h = j.find("history"); h != j.end() && h->is_array()) {
        for (const auto& v : *h) {
            l.history.push_back(v.is_null() ? std::nullopt
                                            : std::optional<double>{v.get<double>()});
        }
    }
    if (auto st = j.find("states"); st != j.end() && st->is_object()) {
        l.states = states_from_json(*st);
    }
    if (auto secs = j.find("state_seconds"); secs != j.end() && secs->is_object()) {
        l.state_seconds = seconds_from_json(*secs);
    }
    return l;
}

// The string at `key` of `o`, or "" when there is none or it is not a string.
std::string text(const json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// The number at `key` of `o`, or 0 when there is none or it is not a number.
double number(const json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_number() ? it->get<double>() : 0.0;
}

json units_json(const UnitLoading& u) {
    json top = json::array();
    for (const auto& l : u.top) {
        json e{
            {"unit", l.unit},
            {"cgroup", l.cgroup},
            {"cpu", rounded(l.cpu)},
            {"user", rounded(l.user)},
            {"system", rounded(l.system)},
            {"avg_window", rounded(l.window_avg)},
            {"max_window", rounded(l.window_max)},
        };
        if (l.pressure) e["pressure"] = rounded(*l.pressure);
        top.push_back(std::move(e));
    }
    json j{{"count", u.count}, {"top", std::move(top)}};
    if (!u.accounting.empty()) j["accounting"] = u.accounting;
    if (!u.unavailable.empty()) j["unavailable"] = u.unavailable;
    return j;
}

// Entries that are not objects, or lack a name, are skipped; a missing figure reads 0.
UnitLoading units_from_json(const json& j) {
    UnitLoading u;
    u.accounting = text(j, "accounting");
    u.unavailable = text(j, "unavailable");
    if (auto c = j.find("count");
        c != j.end() && c->is_number_integer() && c->get<std::int64_t>() >= 0) {
        u.count = static_cast<std::size_t>(c->get<std::int64_t>());
    }
    if (auto top = j.find("top"); top != j.end() && top->is_array()) {
        for (const auto& e : *top) {
            if (!e.is_object()) continue;
            UnitLoad l;
            l.unit = text(e, "unit");
            if (l.unit.empty()) continue;
            l.cgroup = text(e, "cgroup");
            l.cpu = number(e, "cpu");
            l.user = number(e, "user");
            l.system = number(e, "system");
            l.window_avg = number(e, "avg_window");
            l.window_max = number(e, "max_window");
            if (auto p = e.find("pressure"); p != e.end() && p->is_number()) {
                l.pressure = p->get<double>();
            }
            u.top.push_back(std::move(l));
        }
    }
    return u;
}

json tasks_json(const TaskLoading& t) {
    json top = json::array();
    for (const auto& l : t.top) {
        json e{
            {"pid", l.pid},
            {"tid", l.tid},
            {"comm", l.comm},
            {"cpu", l.cpu},
            {"load", rounded(l.load)},
            {"user", rounded(l.user)},
            {"system", rounded(l.system)},
        };
        if (!l.unit.empty()) e["unit"] = l.unit;
        if (!l.cgroup.empty()) e["cgroup"] = l.cgroup;
        top.push_back(std::move(e));
    }
    json j{{"interval", rounded(t.seconds)},
           {"count", t.count},
           {"processes", t.processes},
           {"top", std::move(top)}};
    if (!t.unavailable.empty()) j["unavailable"] = t.unavailable;
    return j;
}

// Entries that are not objects, or lack a pid, a tid or a CPU, are skipped; a missing figure
// reads 0.
TaskLoading tasks_from_json(const json& j) {
    TaskLoading t;
    auto count = [](const json& o, const char* key) -> std::size_t {
        auto it = o.find(key);
        return it != o.end() && it->is_number_integer() && it->get<std::int64_t>() >= 0
                   ? static_cast<std::size_t>(it->get<std::int64_t>())
                   : 0;
    };
    // A non-negative integer that fits an int (pids and CPUs do).
    auto id = [](const json& o, const char* key) -> std::optional<int> {
        auto it = o.find(key);
        if (it == o.end() || !it->is_number_integer()) return std::nullopt;
        const auto v = it->get<std::int64_t>();
        if (v < 0 || v > std::numeric_limits<int>::max()) return std::nullopt;
        return static_cast<int>(v);
    };
    t.seconds = std::max(0.0, number(j, "interval"));
    t.count = count(j, "count");
    t.processes = count(j, "processes");
    t.unavailable = text(j, "unavailable");
    if (auto top = j.find("top"); top != j.end() && top->is_array()) {
        for (const auto& e : *top) {
            if (!e.is_object()) continue;
            const auto pid = id(e, "pid");
            const auto tid = id(e, "tid");
            const auto cpu = id(e, "cpu");
            if (!pid || !tid || !cpu) continue;
            TaskLoad l;
            l.pid = *pid;
            l.tid = *tid;
            l.cpu = *cpu;
            l.comm = text(e, "comm");
            l.load = number(e, "load");
            l.user = number(e, "user");
            l.system = number(e, "system");
            l.unit = text(e, "unit");
            l.cgroup = text(e, "cgroup");
            t.top.push_back(std::move(l));
        }
    }
    return t;
}

json rates_json(const std::vector<InterruptRate>& rates) {
    json out = json::array();
    for (const auto& r : rates) {
        json e{{"source", r.source}, {"per_second", rounded(r.per_second)}};
        if (!r.description.empty()) e["description"] = r.description;
        out.push_back(std::move(e));
    }
    return out;
}

json context_json(const CpuContextReport& c) {
    json j = json::object();
    if (!c.unavailable.empty()) j["unavailable"] = c.unavailable;
    if (!c.sample) return j;
    const auto& s = *c.sample;
    auto put = [](json& o, const char* key, const std::optional<double>& v) {
        if (v) o[key] = rounded(*v);
    };
    json o{{"interval", rounded(s.seconds)}};
    if (s.procs_running) o["procs_running"] = *s.procs_running;
    if (s.procs_blocked) o["procs_blocked"] = *s.procs_blocked;
    if (s.pressure_avg10) {
        json p{{"avg10", rounded(*s.pressure_avg10)},
               {"avg60", rounded(s.pressure_avg60.value_or(0))},
               {"avg300", rounded(s.pressure_avg300.value_or(0))}};
        put(p, "some", s.pressure_some);
        o["pressure"] = std::move(p);
    }
    put(o, "waiting", s.waiting);
    put(o, "interrupts", s.interrupts);
    put(o, "softirqs", s.softirqs);
    o["interrupt_sources"] = rates_json(s.interrupt_sources);
    o["softirq_kinds"] = rates_json(s.softirq_kinds);
    if (!s.cpus.empty()) {
        json cpus = json::array();
        for (const auto& f : s.cpus) {
            json e{{"cpu", f.cpu}};
            put(e, "waiting", f.waiting);
            put(e, "frequency_mhz", f.frequency_mhz);
            put(e, "interrupts", f.interrupts);
            put(e, "softirqs", f.softirqs);
            if (!f.top_interrupt.empty()) e["top_interrupt"] = f.top_interrupt;
            cpus.push_back(std::move(e));
        }
        o["cpus"] = std::move(cpus);
    }
    o["unavailable"] = s.unavailable;
    j["sample"] = std::move(o);
    return j;
}

// What is not of the right type is left out, as for the units.
CpuContextReport context_from_json(const json& j) {
    CpuContextReport c;
    auto number = [](const json& o, const char* key) -> std::optional<double> {
        auto it = o.find(key);
        if (it == o.end() || !it->is_number()) return std::nullopt;
        return it->get<double>();
    };
    auto count = [&](const json& o, const char* key) -> std::optional<std::uint64_t> {
        auto it = o.find(key);
        if (it == o.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) {
            return std::nullopt;
        }
        return it->get<std::uint64_t>();
    };
    auto rates = [&](const json& o, const char* key) {
        std::vector<InterruptRate> out;
        auto it = o.find(key);
        if (it == o.end() || !it->is_array()) return out;
        for (const auto& e : *it) {
            if (!e.is_object() || text(e, "source").empty()) continue;
            out.push_back(
                {text(e, "source"), text(e, "description"), number(e, "per_second").value_or(0)});
        }
        return out;
    };
    c.unavailable = text(j, "unavailable");
    auto sample = j.find("sample");
    if (sample == j.end() || !sample->is_object()) return c;
    const json& o = *sample;
    CpuContextSample s;
    s.seconds = std::max(0.0, number(o, "interval").value_or(0));
    s.procs_running = count(o, "procs_running");
    s.procs_blocked = count(o, "procs_blocked");
    if (auto p = o.find("pressure"); p != o.end() && p->is_object()) {
        s.pressure_some = number(*p, "some");
        s.pressure_avg10 = number(*p, "avg10");
        s.pressure_avg60 = number(*p, "avg60");
        s.pressure_avg300 = number(*p, "avg300");
    }
    s.waiting = number(o, "waiting");
    s.interrupts = number(o, "interrupts");
    s.softirqs = number(o, "softirqs");
    s.interrupt_sources = rates(o, "interrupt_sources");
    s.softirq_kinds = rates(o, "softirq_kinds");
    if (auto cpus = o.find("cpus"); cpus != o.end() && cpus->is_array()) {
        for (const auto& e : *cpus) {
            if (!e.is_object()) continue;
            auto cpu = count(e, "cpu");
            if (!cpu || *cpu > 1'000'000) continue;
            CpuContextFigures f;
            f.cpu = static_cast<int>(*cpu);
            f.waiting = number(e, "waiting");
            f.frequency_mhz = number(e, "frequency_mhz");
            f.interrupts = number(e, "interrupts");
            f.softirqs = number(e, "softirqs");
            f.top_interrupt = text(e, "top_interrupt");
            s.cpus.push_back(std::move(f));
        }
    }
    if (auto u = o.find("unavailable"); u != o.end() && u->is_array()) {
        for (const auto& w : *u) {
            if (w.is_string()) s.unavailable.push_back(w.get<std::string>());
        }
    }
    c.sample = std::move(s);
    return c;
}

// The sources present in an object that has a key per source. Keys this version does not
// know (added by a newer daemon) and values that are not objects are skipped.
std::vector<SourceLoad> sources_from_json(const json& j) {
    std::vector<SourceLoad> out;
    for (std::string_view name : kLoadSources) {
        auto it = j.find(name);
        if (it == j.end() || !(it->is_object() || it->is_null())) continue;
        out.push_back(source_from_json(std::string{name}, *it));
    }
    return out;
}

}  // namespace

std::string enum_value(std::string_view name) {
    std::string v{name};
    std::replace(v.begin(), v.end(), '-', '_');
    return v;
}

json to_json(const WatchdogInfo& w) {
    auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
    return json{
        {"device", w.device},
        {"identity", opt(w.identity)},
        {"armed", w.armed},
        {"timeout", opt(w.timeout)},
        {"time_left", opt(w.time_left)},
        {"since_last_pet", w.since_last_pet ? json(rounded(*w.since_last_pet)) : json(nullptr)},
        {"pets", w.pets},
        {"pet_errors", w.pet_errors},
        {"late_pets", w.late_pets},
        {"longest_pet_gap", rounded(w.longest_pet_gap)},
        {"last_error", opt(w.last_error)},
        {"last_reset_by_watchdog", w.last_reset_by_watchdog},
        {"nowayout", w.nowayout},
        {"policy", w.policy},
        {"waiting_for", w.waiting_for},
        {"on_stop", w.on_stop},
    };
}

ProbeStatus probe_status(const ProbeReading& r) {
    ProbeStatus ps;
    ps.cpu = r.cpu;
    ps.state = probe_state_name(r.state);
    if (r.baseline) ps.baseline_ns = r.baseline->count();
    ps.count = r.count;
    ps.cpu_seconds = static_cast<double>(r.cpu_ns) / 1e9;
    ps.error = r.error;
    return ps;
}

std::optional<WatchdogInfo> watchdog_info(const watchdog::WatchdogStatus& s, std::string on_stop) {
    if (s.device.empty()) return std::nullopt;
    WatchdogInfo w;
    w.device = s.device;
    if (s.identity) w.identity = s.identity->identity;
    w.armed = s.armed;
    w.timeout = s.timeout_s;
    w.time_left = s.time_left_s;
    if (s.since_last_pet) {
        w.since_last_pet = std::chrono::duration<double>(*s.since_last_pet).count();
    }
    w.pets = s.pets;
    w.pet_errors = s.pet_errors;
    w.late_pets = s.late_pets;
    w.longest_pet_gap = std::chrono::duration<double>(s.longest_pet_gap).count();
    if (!s.last_error.empty()) w.last_error = s.last_error;
    w.last_reset_by_watchdog = s.last_reset_by_watchdog;
    w.nowayout = s.nowayout;
    w.policy = watchdog::pet_policy_name(s.policy);
    w.waiting_for = s.waiting_for;
    w.on_stop = std::move(on_stop);
    return w;
}

WatchdogInfo watchdog_from_json(const json& j) {
    WatchdogInfo w;
    auto str = [&](const char* key) -> std::optional<std::string> {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return std::nullopt;
        return it->get<std::string>();
    };
    auto integer = [&](const char* key) -> std::optional<std::int64_t> {
        auto it = j.find(key);
        if (it == j.end() || it->is_null()) return std::nullopt;
        return it->get<std::int64_t>();
    };
    w.device = j.at("device").get<std::string>();
    w.identity = str("identity");
    w.armed = j.at("armed").get<bool>();
    w.timeout = integer("timeout");
    w.time_left = integer("time_left");
    w.since_last_pet = number_or_null(j, "since_last_pet");
    w.pets = j.at("pets").get<std::uint64_t>();
    w.pet_errors = j.at("pet_errors").get<std::uint64_t>();
    w.late_pets = j.at("late_pets").get<std::uint64_t>();
    w.longest_pet_gap = j.at("longest_pet_gap").get<double>();
    w.last_error = str("last_error");
    w.last_reset_by_watchdog = j.at("last_reset_by_watchdog").get<bool>();
    w.nowayout = j.at("nowayout").get<bool>();
    w.policy = j.at("policy").get<std::string>();
    w.waiting_for = j.at("waiting_for").get<std::vector<int>>();
    w.on_stop = j.at("on_stop").get<std::string>();
    return w;
}

ProbeGroupInfo probe_group_info(const ProbeGroup& group) {
    ProbeGroupInfo info;
    info.kind = probe_group_kind_name(group.kind);
    info.name = group.name;
    info.nice = group.nice;
    info.yields = group.yields();
    info.note = describe_probe_group(group);
    return info;
}

json to_json(const DaemonStatus& s) {
    json probes = json::array();
    for (const auto& p : s.probes) {
        json j{{"cpu", p.cpu},
               {"state", p.state},
               {"baseline_ns", p.baseline_ns ? json(rounded(*p.baseline_ns)) : json(nullptr)},
               {"count", p.count},
               {"cpu_seconds", rounded(p.cpu_seconds)}};
        if (!p.error.empty()) j["error"] = p.error;
        probes.push_back(std::move(j));
    }
    return json{
        {"version", s.version},
        {"uptime", rounded(s.uptime)},
        {"state", s.state},
        {"pid", s.pid},
        {"cpus", s.cpus},
        {"sources", s.sources},
        {"probe_mode", s.probe_mode},
        {"probes", std::move(probes)},
        {"probe_group",
         s.probe_group
             ? json{{"kind", s.probe_group->kind},
                    {"name", s.probe_group->name},
                    {"nice", s.probe_group->nice ? json(*s.probe_group->nice) : json(nullptr)},
                    {"yields", s.probe_group->yields},
                    {"note", s.probe_group->note}}
             : json(nullptr)},
        {"probe_fallback", s.probe_fallback ? json(*s.probe_fallback) : json(nullptr)},
        {"history_seconds", s.history_seconds},
        {"watchdog", s.watchdog ? to_json(*s.watchdog) : json(nullptr)},
    };
}

DaemonStatus status_from_json(const json& j) {
    DaemonStatus s;
    s.version = j.at("version").get<std::string>();
    s.uptime = j.at("uptime").get<double>();
    s.state = j.at("state").get<std::string>();
    s.pid = j.at("pid").get<std::int64_t>();
    s.cpus = j.at("cpus").get<std::vector<int>>();
    s.sources = j.at("sources").get<std::vector<std::string>>();
    s.probe_mode = j.at("probe_mode").get<std::string>();
    for (const auto& p : j.at("probes")) {
        ProbeStatus ps;
        ps.cpu = p.at("cpu").get<int>();
        ps.state = p.at("state").get<std::string>();
        ps.baseline_ns = number_or_null(p, "baseline_ns");
        ps.count = p.at("count").get<std::uint64_t>();
        ps.cpu_seconds = p.at("cpu_seconds").get<double>();
        if (auto e = p.find("error"); e != p.end() && e->is_string())
            ps.error = e->get<std::string>();
        s.probes.push_back(std::move(ps));
    }
    if (auto g = j.find("probe_group"); g != j.end() && !g->is_null()) {
        ProbeGroupInfo info;
        info.kind = g->at("kind").get<std::string>();
        info.name = g->at("name").get<std::string>();
        if (auto n = g->find("nice"); n != g->end() && !n->is_null()) {
            info.nice = n->get<std::int64_t>();
        }
        info.yields = g->at("yields").get<bool>();
        info.note = g->at("note").get<std::string>();
        s.probe_group = std::move(info);
    }
    if (auto f = j.find("probe_fallback"); f != j.end() && f->is_string()) {
        s.probe_fallback = f->get<std::string>();
    }
    s.history_seconds = j.at("history_seconds").get<std::int64_t>();
    if (auto w = j.find("watchdog"); w != j.end() && !w->is_null()) {
        s.watchdog = watchdog_from_json(*w);
    }
    return s;
}

json to_json(const LoadingReport& r) {
    json j{
        {"timestamp", nullptr},
        {"window_seconds", r.window_seconds},
        {"machine", sources_json(r.machine)},
    };
    if (r.timestamp) {
        j["timestamp"] =
            std::chrono::duration_cast<std::chrono::microseconds>(r.timestamp->time_since_epoch())
                .count();
    }
    if (!r.cpus.empty()) {
        json cpus = json::array();
        for (const auto& c : r.cpus) {
            cpus.push_back(sources_json(c.sources, json{{"cpu", c.cpu}, {"online", c.online}}));
        }
        j["cpus"] = std::move(cpus);
    }
    if (r.units) j["units"] = units_json(*r.units);
    if (r.context) j["context"] = context_json(*r.context);
    if (r.tasks) j["tasks"] = tasks_json(*r.tasks);
    return j;
}

LoadingReport loading_from_json(const json& j) {
    LoadingReport r;
    // Out-of-range values from a confused or hostile peer are dropped, not trusted.
    if (auto t = j.find("timestamp");
        t != j.end() && t->is_number_integer() && t->get<std::int64_t>() >= 0 &&
        t->get<std::int64_t>() <= std::numeric_limits<std::int64_t>::max() / 1000) {
        r.timestamp = std::chrono::system_clock::time_point{
            std::chrono::microseconds{t->get<std::int64_t>()}};
    }
    r.window_seconds = static_cast<std::size_t>(
        std::max<std::int64_t>(0, j.at("window_seconds").get<std::int64_t>()));
    r.machine = sources_from_json(j.at("machine"));
    if (auto cpus = j.find("cpus"); cpus != j.end() && cpus->is_array()) {
        for (const auto& c : *cpus) {
            CpuLoading cl;
            cl.cpu = c.at("cpu").get<int>();
            cl.online = c.at("online").get<bool>();
            cl.sources = sources_from_json(c);
            r.cpus.push_back(std::move(cl));
        }
    }
    if (auto u = j.find("units"); u != j.end() && u->is_object()) r.units = units_from_json(*u);
    if (auto c = j.find("context"); c != j.end() && c->is_object()) {
        r.context = context_from_json(*c);
    }
    if (auto t = j.find("tasks"); t != j.end() && t->is_object()) r.tasks = tasks_from_json(*t);
    return r;
}

LoadingQuery loading_query_from_json(const json& params) {
    LoadingQuery q;
    auto flag = [&](const char* key) {
        auto it = params.find(key);
        return it != params.end() && it->is_boolean() && it->get<bool>();
    };
    q.per_cpu = flag("per_cpu");
    q.history = flag("history");
    q.states = flag("states");
    q.totals = flag("totals");
    q.context = flag("context");
    // Out of range (negative too) is for check() to name; a number too large for the field
    // is as out of range.
    if (auto u = params.find("units"); u != params.end() && u->is_number_integer()) {
        q.units = u->is_number_unsigned() && u->get<std::uint64_t>() > kMaxUnitsListed
                      ? kMaxUnitsListed + 1
                      : u->get<std::int64_t>();
    }
    if (auto t = params.find("tasks"); t != params.end() && t->is_number_integer()) {
        q.tasks = t->is_number_unsigned() && t->get<std::uint64_t>() > kMaxTasksListed
                      ? kMaxTasksListed + 1
                      : t->get<std::int64_t>();
    }
    // A time too large for the field is as far in the future as it goes; negative is for
    // check() to name.
    auto time = [&](const char* key) -> std::optional<std::int64_t> {
        auto it = params.find(key);
        if (it == params.end() || !it->is_number_integer()) return std::nullopt;
        if (it->is_number_unsigned() &&
            it->get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()}) {
            return std::numeric_limits<std::int64_t>::max();
        }
        return it->get<std::int64_t>();
    };
    q.since = time("since");
    q.until = time("until");
    return q;
}

json to_json(const LoadingQuery& q) {
    json j = json::object();
    if (q.per_cpu) j["per_cpu"] = true;
    if (q.history) j["history"] = true;
    if (q.states) j["states"] = true;
    if (q.totals) j["totals"] = true;
    if (q.units != 0) j["units"] = q.units;
    if (q.context) j["context"] = true;
    if (q.tasks != 0) j["tasks"] = q.tasks;
    if (q.since) j["since"] = *q.since;
    if (q.until) j["until"] = *q.until;
    return j;
}

}  // namespace monitor::protocol
