// io.monitord.Monitor parameters between C++ and JSON, checked against the embedded interface.
#include "monitor/protocol/monitor_messages.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "monitor/loading/idle_probe.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/varlink_idl.hpp"
#include "monitor/watchdog/watchdog.hpp"

namespace monitor::protocol {
namespace {

using nlohmann::json;
using varlink::Extra;

constexpr std::chrono::system_clock::time_point kTimestamp{
    std::chrono::microseconds{1'718'000'000'123'456}};

LoadStats stats(std::optional<double> last, double avg, double min, double max,
                std::size_t samples) {
    LoadStats s;
    s.avg_prev_sec = last;
    s.avg_prev_min = avg;
    s.min_prev_min = min;
    s.max_prev_min = max;
    s.samples = samples;
    return s;
}

SourceLoad procstat(std::optional<LoadStats> s, std::vector<std::optional<double>> history = {}) {
    return SourceLoad{"procstat", s, std::move(history)};
}

LoadingReport machine_only() {
    LoadingReport r;
    r.timestamp = kTimestamp;
    r.window_seconds = 60;
    r.machine = {procstat(stats(12.5, 10.25, 1.0, 99.5, 60))};
    return r;
}

LoadingReport per_cpu_with_history() {
    LoadingReport r;
    r.timestamp = kTimestamp;
    r.window_seconds = 3;
    r.machine = {procstat(stats(50.0, 40.0, 30.0, 50.0, 3), {30.0, 40.0, 50.0})};
    r.cpus = {
        CpuLoading{0, true, {procstat(stats(100.0, 90.0, 80.0, 100.0, 3), {80.0, 90.0, 100.0})}},
        // Offline for the last second: a gap in the history and no figure for the last second.
        CpuLoading{1, false, {procstat(stats(std::nullopt, 5.5, 1.0, 10.0, 2), {1.0, 10.0, {}})}},
        // Not sampled yet.
        CpuLoading{2, true, {procstat(std::nullopt)}},
    };
    return r;
}

LoadingReport before_first_sample() {
    LoadingReport r;
    r.window_seconds = 60;
    r.machine = {procstat(std::nullopt)};
    return r;
}

DaemonStatus sample_status() {
    DaemonStatus s;
    s.version = "0.1.0";
    s.uptime = 3723.25;
    s.state = "running";
    s.pid = 4242;
    s.cpus = {0, 1, 2, 3, 6};
    s.sources = {"procstat"};
    s.history_seconds = 60;
    return s;
}

void expect_same_source(const SourceLoad& a, const SourceLoad& b) {
    EXPECT_EQ(a.source, b.source);
    ASSERT_EQ(a.stats.has_value(), b.stats.has_value()) << a.source;
    if (a.stats) {
        EXPECT_EQ(a.stats->avg_prev_sec.has_value(), b.stats->avg_prev_sec.has_value());
        if (a.stats->avg_prev_sec && b.stats->avg_prev_sec) {
            EXPECT_DOUBLE_EQ(*a.stats->avg_prev_sec, *b.stats->avg_prev_sec);
        }
        EXPECT_DOUBLE_EQ(a.stats->avg_prev_min, b.stats->avg_prev_min);
        EXPECT_DOUBLE_EQ(a.stats->min_prev_min, b.stats->min_prev_min);
        EXPECT_DOUBLE_EQ(a.stats->max_prev_min, b.stats->max_prev_min);
        EXPECT_EQ(a.stats->samples, b.stats->samples);
    }
    EXPECT_EQ(a.history, b.history);
    ASSERT_EQ(a.states.has_value(), b.states.has_value()) << a.source;
    if (a.states) {
        EXPECT_EQ(a.states->samples, b.states->samples);
        ASSERT_EQ(a.states->last.has_value(), b.states->last.has_value());
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            EXPECT_DOUBLE_EQ(a.states->avg.percent[k], b.states->avg.percent[k]) << k;
            if (a.states->last) {
                EXPECT_DOUBLE_EQ(a.states->last->percent[k], b.states->last->percent[k]) << k;
            }
        }
    }
    ASSERT_EQ(a.state_seconds.has_value(), b.state_seconds.has_value()) << a.source;
    if (a.state_seconds) {
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            EXPECT_DOUBLE_EQ(a.state_seconds->seconds[k], b.state_seconds->seconds[k]) << k;
        }
    }
}

// States that add up to 100, each distinct so that a swapped key shows.
StateShares shares(double base) {
    StateShares s;
    double sum = 0;
    for (std::size_t k = 0; k + 1 < kTimeStateCount; ++k) {
        s.percent[k] = base + static_cast<double>(k);
        sum += s.percent[k];
    }
    s[TimeState::Idle] = 100.0 - sum;
    return s;
}

LoadingReport with_states() {
    LoadingReport r = per_cpu_with_history();
    r.machine[0].states = StateStats{shares(1.0), shares(2.0), 3};
    r.cpus[0].sources[0].states = StateStats{shares(0.5), shares(1.5), 3};
    // Offline for the last second: no last interval.
    r.cpus[1].sources[0].states = StateStats{std::nullopt, shares(0.25), 2};
    return r;
}

// The time by state so far, with digits beyond the three the shares keep.
StateSeconds seconds_of(double base) {
    StateSeconds s;
    for (std::size_t k = 0; k < kTimeStateCount; ++k) {
        s.seconds[k] = base * static_cast<double>(k + 1) + 0.000123456;
    }
    return s;
}

void expect_same_report(const LoadingReport& a, const LoadingReport& b) {
    EXPECT_EQ(a.timestamp, b.timestamp);
    EXPECT_EQ(a.window_seconds, b.window_seconds);
    ASSERT_EQ(a.machine.size(), b.machine.size());
    for (std::size_t i = 0; i < a.machine.size(); ++i) {
        expect_same_source(a.machine[i], b.machine[i]);
    }
    ASSERT_EQ(a.cpus.size(), b.cpus.size());
    for (std::size_t i = 0; i < a.cpus.size(); ++i) {
        SCOPED_TRACE("cpu entry " + std::to_string(i));
        EXPECT_EQ(a.cpus[i].cpu, b.cpus[i].cpu);
        EXPECT_EQ(a.cpus[i].online, b.cpus[i].online);
        ASSERT_EQ(a.cpus[i].sources.size(), b.cpus[i].sources.size());
        for (std::size_t j = 0; j < a.cpus[i].sources.size(); ++j) {
            expect_same_source(a.cpus[i].sources[j], b.cpus[i].sources[j]);
        }
    }
}

// Checks `value` against the output of `method` in io.monitord.Monitor, strictly.
void expect_conforms(std::string_view method, const json& value) {
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const varlink::Method* m = iface->method(method);
    ASSERT_NE(m, nullptr) << method;
    auto mm = iface->check(*m->output, value, Extra::Reject);
    EXPECT_FALSE(mm) << method << " output does not conform at '" << mm->path << "': " << mm->reason
                     << "\n"
                     << value.dump(2);
}

// ---- DaemonStatus ----

TEST(DaemonStatusJson, RoundTrip) {
    const DaemonStatus s = sample_status();
    DaemonStatus back = status_from_json(to_json(s));
    EXPECT_EQ(back.version, s.version);
    EXPECT_DOUBLE_EQ(back.uptime, s.uptime);
    EXPECT_EQ(back.state, s.state);
    EXPECT_EQ(back.pid, s.pid);
    EXPECT_EQ(back.cpus, s.cpus);
    EXPECT_EQ(back.sources, s.sources);
    EXPECT_EQ(back.history_seconds, s.history_seconds);
    EXPECT_FALSE(back.probe_group);
}

// Every kind of group the probes can be in goes on the wire as the interface says, and back.
TEST(DaemonStatusJson, ProbeGroupRoundTripsAndConforms) {
    ProbeGroup own{ProbeGroup::Kind::Autogroup, "/autogroup-42", 19, true};
    ProbeGroup shared{ProbeGroup::Kind::Autogroup, "/autogroup-7", 0, false};
    ProbeGroup cgroup{ProbeGroup::Kind::Cgroup, "/system.slice/monitord.service", {}, false};
    for (const auto& g : {own, shared, cgroup, ProbeGroup{}}) {
        DaemonStatus s = sample_status();
        s.probe_group = probe_group_info(g);
        SCOPED_TRACE(s.probe_group->note);
        expect_conforms("GetStatus", to_json(s));
        DaemonStatus back = status_from_json(to_json(s));
        ASSERT_TRUE(back.probe_group);
        EXPECT_EQ(back.probe_group->kind, probe_group_kind_name(g.kind));
        EXPECT_EQ(back.probe_group->name, g.name);
        EXPECT_EQ(back.probe_group->nice, g.nice);
        EXPECT_EQ(back.probe_group->yields, g.yields());
        EXPECT_EQ(back.probe_group->note, describe_probe_group(g));
    }
    EXPECT_TRUE(own.yields());
    EXPECT_FALSE(shared.yields());
    EXPECT_FALSE(cgroup.yields());
    EXPECT_TRUE(ProbeGroup{}.yields());
}

TEST(DaemonStatusJson, ConformsToGetStatus) {
    for (const char* state : {"starting", "running", "reloading", "stopping"}) {
        SCOPED_TRACE(state);
        DaemonStatus s = sample_status();
        s.state = state;
        expect_conforms("GetStatus", to_json(s));
    }
    DaemonStatus empty = sample_status();
    empty.cpus.clear();
    empty.sources.clear();
    empty.uptime = 0;
    expect_conforms("GetStatus", to_json(empty));
}

// The settings' values go on the wire by their names in the configuration file, made enum
// values: every name of every value is one the interface declares.
TEST(DaemonStatusJson, SettingNamesAreTheInterfaceEnumValues) {
    EXPECT_EQ(enum_value("keep-armed"), "keep_armed");
    EXPECT_EQ(enum_value("disarm"), "disarm");
    DaemonStatus s = sample_status();
    s.watchdog = WatchdogInfo{};
    for (const auto& [mode, name] : kProbeModeNames) {
        SCOPED_TRACE(name);
        s.probe_mode = enum_value(name);
        expect_conforms("GetStatus", to_json(s));
    }
    for (const auto& [policy, name] : watchdog::kPetPolicyNames) {
        SCOPED_TRACE(name);
        s.watchdog->policy = enum_value(name);
        expect_conforms("GetStatus", to_json(s));
    }
    for (const auto& [on_stop, name] : watchdog::kOnStopNames) {
        SCOPED_TRACE(name);
        s.watchdog->on_stop = enum_value(name);
        expect_conforms("GetStatus", to_json(s));
    }
    // The file's spelling itself is not a wire value.
    s.watchdog->on_stop = "keep-armed";
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    EXPECT_TRUE(iface->check(*iface->method("GetStatus")->output, to_json(s), Extra::Reject));
}

TEST(DaemonStatusJson, UptimeIsRoundedToThreeDecimals) {
    DaemonStatus s = sample_status();
    s.uptime = 1.23456789;
    json j = to_json(s);
    ASSERT_TRUE(j["uptime"].is_number());
    EXPECT_DOUBLE_EQ(j["uptime"].get<double>(), 1.235);
}

// ---- LoadingReport ----

TEST(LoadingReportJson, RoundTripMachineOnly) {
    const LoadingReport r = machine_only();
    expect_same_report(loading_from_json(to_json(r)), r);
}

TEST(LoadingReportJson, RoundTripPerCpuWithHistory) {
    const LoadingReport r = per_cpu_with_history();
    expect_same_report(loading_from_json(to_json(r)), r);
}

TEST(LoadingReportJson, RoundTripBeforeFirstSample) {
    const LoadingReport r = before_first_sample();
    LoadingReport back = loading_from_json(to_json(r));
    expect_same_report(back, r);
    EXPECT_FALSE(back.timestamp.has_value());
    ASSERT_EQ(back.machine.size(), 1u);
    EXPECT_FALSE(back.machine[0].stats.has_value());
}

TEST(LoadingReportJson, Shape) {
    json j = to_json(per_cpu_with_history());
    EXPECT_EQ(j["timestamp"], 1'718'000'000'123'456);
    EXPECT_EQ(j["window_seconds"], 3);
    ASSERT_TRUE(j["machine"]["procstat"].is_object());
    EXPECT_EQ(j["machine"]["procstat"]["samples"], 3);
    EXPECT_EQ(j["machine"]["procstat"]["history"], (json{30.0, 40.0, 50.0}));
    ASSERT_TRUE(j["cpus"].is_array());
    ASSERT_EQ(j["cpus"].size(), 3u);
    EXPECT_EQ(j["cpus"][1]["cpu"], 1);
    EXPECT_EQ(j["cpus"][1]["online"], false);
    EXPECT_TRUE(j["cpus"][1]["procstat"]["avg_prev_sec"].is_null());
    EXPECT_TRUE(j["cpus"][1]["procstat"]["history"][2].is_null());
    EXPECT_TRUE(j["cpus"][2]["procstat"].is_null());

    json m = to_json(machine_only());
    EXPECT_FALSE(m.contains("cpus"));
    EXPECT_FALSE(m["machine"]["procstat"].contains("history"));

    json b = to_json(before_first_sample());
    ASSERT_TRUE(b.contains("timestamp"));
    EXPECT_TRUE(b["timestamp"].is_null());
    EXPECT_TRUE(b["machine"]["procstat"].is_null());
}

TEST(LoadingReportJson, ConformsToGetLoading) {
    {
        SCOPED_TRACE("machine only");
        expect_conforms("GetLoading", to_json(machine_only()));
    }
    {
        SCOPED_TRACE("per CPU with history, gaps and null stats");
        expect_conforms("GetLoading", to_json(per_cpu_with_history()));
    }
    {
        SCOPED_TRACE("before the first sample");
        expect_conforms("GetLoading", to_json(before_first_sample()));
    }
    {
        SCOPED_TRACE("machine history only");
        LoadingReport r = machine_only();
        r.machine[0].history = {std::nullopt, 1.0, std::nullopt, 2.0};
        expect_conforms("GetLoading", to_json(r));
    }
    {
        SCOPED_TRACE("per CPU without history");
        LoadingReport r = machine_only();
        r.cpus = {CpuLoading{0, true, {procstat(stats(1.0, 2.0, 0.0, 3.0, 60))}},
                  CpuLoading{5, false, {procstat(std::nullopt)}}};
        expect_conforms("GetLoading", to_json(r));
    }
    {
        SCOPED_TRACE("a window with no valid sample");
        LoadingReport r = machine_only();
        r.machine[0] = procstat(stats(std::nullopt, 0.0, 0.0, 0.0, 0), {{}, {}, {}});
        expect_conforms("GetLoading", to_json(r));
    }
}

TEST(LoadingReportJson, StatesRoundTripAndConform) {
    const LoadingReport r = with_states();
    expect_same_report(loading_from_json(to_json(r)), r);
    expect_conforms("GetLoading", to_json(r));
}

TEST(LoadingReportJson, StatesShape) {
    json j = to_json(with_states());
    const json& m = j["machine"]["procstat"]["states"];
    ASSERT_TRUE(m.is_object()) << j.dump();
    EXPECT_EQ(m["samples"], 3);
    EXPECT_DOUBLE_EQ(m["last"]["user"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(m["last"]["guest_nice"].get<double>(), 9.0);
    EXPECT_DOUBLE_EQ(m["avg"]["nice"].get<double>(), 3.0);
    EXPECT_EQ(m["last"].size(), kTimeStateCount);
    EXPECT_TRUE(j["cpus"][1]["procstat"]["states"]["last"].is_null());
    // Not asked for: no key at all.
    EXPECT_FALSE(to_json(machine_only())["machine"]["procstat"].contains("states"));
}

TEST(LoadingReportJson, StateSecondsRoundTripUnroundedAndConform) {
    LoadingReport r = with_states();
    r.machine[0].state_seconds = seconds_of(1000.5);
    r.cpus[0].sources[0].state_seconds = seconds_of(500.25);
    json j = to_json(r);
    expect_conforms("GetLoading", j);
    expect_same_report(loading_from_json(j), r);
    const json& m = j["machine"]["procstat"]["state_seconds"];
    ASSERT_TRUE(m.is_object()) << j.dump();
    EXPECT_EQ(m.size(), kTimeStateCount);
    EXPECT_DOUBLE_EQ(m["user"].get<double>(), 1000.500123456) << "counters are not rounded";
    EXPECT_DOUBLE_EQ(m["idle"].get<double>(), 10005.000123456);
    EXPECT_FALSE(j["cpus"][1]["procstat"].contains("state_seconds"));
}

TEST(LoadingReportJson, LoadsAreRoundedToThreeDecimals) {
    LoadingReport r = machine_only();
    r.machine[0] = procstat(stats(33.33349, 66.6666, 0.0004, 99.99951, 5), {12.34567, {}});
    json j = to_json(r);
    const json& p = j["machine"]["procstat"];
    EXPECT_DOUBLE_EQ(p["avg_prev_sec"].get<double>(), 33.333);
    EXPECT_DOUBLE_EQ(p["avg_prev_min"].get<double>(), 66.667);
    EXPECT_DOUBLE_EQ(p["min_prev_min"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(p["max_prev_min"].get<double>(), 100.0);
    EXPECT_DOUBLE_EQ(p["history"][0].get<double>(), 12.346);
    EXPECT_TRUE(p["history"][1].is_null());
    EXPECT_EQ(p["samples"], 5);
}

// ---- LoadingQuery ----

TEST(LoadingQueryJson, FromJson) {
    LoadingQuery q = loading_query_from_json(json::object());
    EXPECT_FALSE(q.per_cpu);
    EXPECT_FALSE(q.history);

    q = loading_query_from_json(json{{"per_cpu", true}});
    EXPECT_TRUE(q.per_cpu);
    EXPECT_FALSE(q.history);

    q = loading_query_from_json(json{{"history", true}, {"per_cpu", false}});
    EXPECT_FALSE(q.per_cpu);
    EXPECT_TRUE(q.history);

    q = loading_query_from_json(json{{"per_cpu", nullptr}, {"history", nullptr}});
    EXPECT_FALSE(q.per_cpu);
    EXPECT_FALSE(q.history);
}

TEST(LoadingQueryJson, RoundTripAndConformsToGetLoadingInput) {
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const varlink::Method* m = iface->method("GetLoading");
    ASSERT_NE(m, nullptr);
    for (bool per_cpu : {false, true}) {
        for (bool history : {false, true}) {
            for (bool states : {false, true}) {
                for (bool totals : {false, true}) {
                    LoadingQuery q{per_cpu, history, states, totals};
                    json j = to_json(q);
                    auto mm = iface->check(*m->input, j, Extra::Reject);
                    EXPECT_FALSE(mm) << j.dump() << ": " << mm->path << ": " << mm->reason;
                    LoadingQuery back = loading_query_from_json(j);
                    EXPECT_EQ(back.per_cpu, per_cpu);
                    EXPECT_EQ(back.history, history);
                    EXPECT_EQ(back.states, states);
                    EXPECT_EQ(back.totals, totals);
                }
            }
        }
    }
    EXPECT_EQ(to_json(LoadingQuery{}), json::object());
}

// ---- Units ----

TEST(LoadingReportJson, UnitsRoundTripAndConform) {
    LoadingReport r = machine_only();
    r.units = UnitLoading{.accounting = "cgroup2 cpu.stat", .count = 42, .top = {}};
    r.units->top.push_back({.unit = "nginx.service",
                            .cgroup = "/system.slice/nginx.service",
                            .cpu = 99.51234,
                            .user = 90.5,
                            .system = 9.01234,
                            .window_avg = 50.25,
                            .window_max = 100.5,
                            .pressure = 12.5});
    r.units->top.push_back({.unit = "/batch/job1", .cgroup = "/batch/job1", .cpu = 400});
    const json j = to_json(r);
    expect_conforms("GetLoading", j);
    EXPECT_EQ(j["units"]["top"][0]["cpu"], 99.512);
    EXPECT_EQ(j["units"]["top"][0]["avg_window"], 50.25);
    EXPECT_FALSE(j["units"].contains("unavailable"));
    const LoadingReport back = loading_from_json(j);
    ASSERT_TRUE(back.units);
    EXPECT_EQ(back.units->accounting, "cgroup2 cpu.stat");
    EXPECT_EQ(back.units->count, 42u);
    ASSERT_EQ(back.units->top.size(), 2u);
    EXPECT_EQ(back.units->top[0].unit, "nginx.service");
    EXPECT_EQ(back.units->top[0].cgroup, "/system.slice/nginx.service");
    EXPECT_DOUBLE_EQ(back.units->top[0].system, 9.012);
    EXPECT_DOUBLE_EQ(back.units->top[0].window_max, 100.5);
    EXPECT_DOUBLE_EQ(back.units->top[1].cpu, 400);
    ASSERT_TRUE(back.units->top[0].pressure);
    EXPECT_DOUBLE_EQ(*back.units->top[0].pressure, 12.5);
    EXPECT_FALSE(j["units"]["top"][1].contains("pressure")) << "none where the kernel keeps none";
    EXPECT_FALSE(back.units->top[1].pressure);

    // None on this machine: why, and no accounting.
    r.units = UnitLoading{.unavailable = "/sys/fs/cgroup: no cgroup2 tree"};
    const json none = to_json(r);
    expect_conforms("GetLoading", none);
    EXPECT_FALSE(none["units"].contains("accounting"));
    EXPECT_EQ(loading_from_json(none).units->unavailable, "/sys/fs/cgroup: no cgroup2 tree");
    // Not asked for: not there.
    EXPECT_FALSE(to_json(machine_only()).contains("units"));
    EXPECT_FALSE(loading_from_json(to_json(machine_only())).units);
}

// ---- The CPUs' context ----

TEST(LoadingReportJson, ContextRoundTripsAndConforms) {
    LoadingReport r = machine_only();
    CpuContextSample s;
    s.seconds = 1.0004;
    s.procs_running = 7;
    s.procs_blocked = 1;
    s.pressure_some = 0.25;
    s.pressure_avg10 = 12.5;
    s.pressure_avg60 = 3;
    s.pressure_avg300 = 1.25;
    s.waiting = 3.1;
    s.interrupts = 3601;
    s.softirqs = 1040;
    s.interrupt_sources = {{"LOC", "Local timer interrupts", 2000}, {"ERR", "", 1}};
    s.softirq_kinds = {{"TIMER", "", 1000}};
    s.cpus = {{.cpu = 0,
               .waiting = 0.1,
               .frequency_mhz = 2400,
               .interrupts = 600,
               .softirqs = 260,
               .top_interrupt = "LOC"},
              {.cpu = 3}};
    s.unavailable = {"/proc/schedstat: No such file or directory"};
    r.context = CpuContextReport{.sample = s, .unavailable = {}};
    const json j = to_json(r);
    expect_conforms("GetLoading", j);
    const json& js = j["context"]["sample"];
    EXPECT_EQ(js["procs_running"], 7) << "a count, not a float";
    EXPECT_EQ(js["interval"], 1.0);
    EXPECT_FALSE(js["interrupt_sources"][1].contains("description"));
    EXPECT_FALSE(js["cpus"][1].contains("waiting")) << "what is not known is absent";
    const LoadingReport back = loading_from_json(j);
    ASSERT_TRUE(back.context && back.context->sample);
    const auto& b = *back.context->sample;
    EXPECT_EQ(b.procs_running, 7u);
    EXPECT_EQ(b.procs_blocked, 1u);
    EXPECT_DOUBLE_EQ(b.pressure_some.value_or(-1), 0.25);
    EXPECT_DOUBLE_EQ(b.pressure_avg300.value_or(-1), 1.25);
    EXPECT_DOUBLE_EQ(b.waiting.value_or(-1), 3.1);
    ASSERT_EQ(b.interrupt_sources.size(), 2u);
    EXPECT_EQ(b.interrupt_sources[0].description, "Local timer interrupts");
    EXPECT_DOUBLE_EQ(b.interrupt_sources[1].per_second, 1);
    ASSERT_EQ(b.cpus.size(), 2u);
    EXPECT_EQ(b.cpus[0].top_interrupt, "LOC");
    EXPECT_DOUBLE_EQ(b.cpus[0].frequency_mhz.value_or(-1), 2400);
    EXPECT_FALSE(b.cpus[1].interrupts);
    EXPECT_EQ(b.unavailable, s.unavailable);

    // Asked for, not sampled yet: no interval; none at all: why.
    r.context = CpuContextReport{};
    const json starting = to_json(r);
    expect_conforms("GetLoading", starting);
    EXPECT_FALSE(starting["context"].contains("sample"));
    EXPECT_FALSE(loading_from_json(starting).context->sample);
    r.context = CpuContextReport{.sample = {}, .unavailable = "/proc: not a procfs"};
    const json none = to_json(r);
    expect_conforms("GetLoading", none);
    EXPECT_EQ(loading_from_json(none).context->unavailable, "/proc: not a procfs");
    EXPECT_FALSE(to_json(machine_only()).contains("context"));

    // A confused peer's figures are left out, not trusted.
    json bad = j;
    bad["context"]["sample"]["procs_running"] = -3;
    bad["context"]["sample"]["cpus"] =
        json::array({json{{"cpu", -1}}, 5, json{{"cpu", 2}, {"waiting", "x"}}});
    bad["context"]["sample"]["interrupt_sources"] = json::array({json{{"per_second", 1}}, "LOC"});
    const auto confused = loading_from_json(bad);
    ASSERT_TRUE(confused.context && confused.context->sample);
    EXPECT_FALSE(confused.context->sample->procs_running);
    ASSERT_EQ(confused.context->sample->cpus.size(), 1u);
    EXPECT_EQ(confused.context->sample->cpus[0].cpu, 2);
    EXPECT_FALSE(confused.context->sample->cpus[0].waiting);
    EXPECT_TRUE(confused.context->sample->interrupt_sources.empty());
    // The query's flag.
    EXPECT_EQ(to_json(LoadingQuery{.context = true}), (json{{"context", true}}));
    EXPECT_TRUE(loading_query_from_json(json{{"context", true}}).context);
}

TEST(LoadingReportJson, UnitsOfAConfusedPeerAreSkippedNotTrusted) {
    json j = to_json(machine_only());
    j["units"] = json{{"count", -3},
                      {"top", json::array({json(7), json{{"cpu", 5}},
                                           json{{"unit", "a.service"}, {"cpu", "lots"}}})}};
    const auto r = loading_from_json(j);
    ASSERT_TRUE(r.units);
    EXPECT_EQ(r.units->count, 0u);
    ASSERT_EQ(r.units->top.size(), 1u);  // the entry without a name and the number are skipped
    EXPECT_EQ(r.units->top[0].unit, "a.service");
    EXPECT_EQ(r.units->top[0].cpu, 0);
}

TEST(LoadingQueryJson, UnitsAreCheckedAgainstTheirRange) {
    EXPECT_EQ(loading_query_from_json(json{{"units", 10}}).units, 10);
    EXPECT_EQ(to_json(LoadingQuery{.units = 10}), json({{"units", 10}}));
    EXPECT_TRUE(check(loading_query_from_json(json{{"units", 1000}})));
    for (const json& bad :
         {json(-1), json(1001), json(std::numeric_limits<std::uint64_t>::max())}) {
        const auto q = loading_query_from_json(json{{"units", bad}});
        const auto r = check(q);
        ASSERT_FALSE(r) << bad.dump();
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find("units: "), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("1 to 1000"), std::string::npos) << r.error().message;
    }
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const varlink::Method* m = iface->method("GetLoading");
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(iface->check(*m->input, to_json(LoadingQuery{.units = 5}), Extra::Reject));
}

// ---- Tasks ----

TEST(LoadingReportJson, TasksRoundTripAndConform) {
    LoadingReport r = machine_only();
    r.tasks = TaskLoading{.seconds = 1.00049, .count = 812, .processes = 190, .top = {}};
    r.tasks->top.push_back({.pid = 42,
                            .tid = 43,
                            .comm = "worker",
                            .cpu = 3,
                            .load = 99.51234,
                            .user = 90.5,
                            .system = 9.01234,
                            .cgroup = "/system.slice/nginx.service",
                            .unit = "nginx.service"});
    r.tasks->top.push_back({.pid = 2, .tid = 2, .comm = "kthreadd", .cpu = 0, .load = 1});
    const json j = to_json(r);
    expect_conforms("GetLoading", j);
    EXPECT_EQ(j["tasks"]["top"][0]["cpu"], 3) << "the CPU, as the issue's scripts expect";
    EXPECT_EQ(j["tasks"]["top"][0]["load"], 99.512);
    EXPECT_FALSE(j["tasks"]["top"][1].contains("unit")) << "none for the root cgroup";
    const LoadingReport back = loading_from_json(j);
    ASSERT_TRUE(back.tasks);
    EXPECT_DOUBLE_EQ(back.tasks->seconds, 1.0);
    EXPECT_EQ(back.tasks->count, 812u);
    EXPECT_EQ(back.tasks->processes, 190u);
    ASSERT_EQ(back.tasks->top.size(), 2u);
    EXPECT_EQ(back.tasks->top[0].pid, 42);
    EXPECT_EQ(back.tasks->top[0].tid, 43);
    EXPECT_EQ(back.tasks->top[0].comm, "worker");
    EXPECT_EQ(back.tasks->top[0].cpu, 3);
    EXPECT_DOUBLE_EQ(back.tasks->top[0].system, 9.012);
    EXPECT_EQ(back.tasks->top[0].unit, "nginx.service");
    EXPECT_EQ(back.tasks->top[0].cgroup, "/system.slice/nginx.service");
    EXPECT_EQ(back.tasks->top[1].unit, "");

    r.tasks = TaskLoading{.unavailable = "/proc: No such file or directory"};
    const json none = to_json(r);
    expect_conforms("GetLoading", none);
    EXPECT_EQ(loading_from_json(none).tasks->unavailable, "/proc: No such file or directory");
    EXPECT_FALSE(to_json(machine_only()).contains("tasks"));
    EXPECT_FALSE(loading_from_json(to_json(machine_only())).tasks);
}

TEST(LoadingReportJson, TasksOfAConfusedPeerAreSkippedNotTrusted) {
    json j = to_json(machine_only());
    j["tasks"] =
        json{{"interval", -1},
             {"count", "many"},
             {"top",
              json::array(
                  {json(7), json{{"pid", 1}, {"tid", 1}}, json{{"pid", -1}, {"tid", 1}, {"cpu", 0}},
                   json{{"pid", 1}, {"tid", 1LL << 40}, {"cpu", 0}},
                   json{{"pid", 5}, {"tid", 6}, {"cpu", 1}, {"comm", 9}, {"load", "lots"}}})}};
    const auto r = loading_from_json(j);
    ASSERT_TRUE(r.tasks);
    EXPECT_EQ(r.tasks->seconds, 0);
    EXPECT_EQ(r.tasks->count, 0u);
    ASSERT_EQ(r.tasks->top.size(), 1u) << "no CPU, a negative pid, a tid past an int: skipped";
    EXPECT_EQ(r.tasks->top[0].tid, 6);
    EXPECT_EQ(r.tasks->top[0].comm, "");
    EXPECT_EQ(r.tasks->top[0].load, 0);
}

TEST(LoadingQueryJson, TasksAreCheckedAgainstTheirRange) {
    EXPECT_EQ(loading_query_from_json(json{{"tasks", 3}}).tasks, 3);
    EXPECT_EQ(to_json(LoadingQuery{.tasks = 3}), json({{"tasks", 3}}));
    EXPECT_TRUE(check(loading_query_from_json(json{{"tasks", 100}})));
    for (const json& bad : {json(-1), json(101), json(std::numeric_limits<std::uint64_t>::max())}) {
        const auto r = check(loading_query_from_json(json{{"tasks", bad}}));
        ASSERT_FALSE(r) << bad.dump();
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find("tasks: "), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("1 to 100"), std::string::npos) << r.error().message;
    }
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const varlink::Method* m = iface->method("GetLoading");
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(iface->check(*m->input, to_json(LoadingQuery{.tasks = 5}), Extra::Reject));
}

TEST(LoadingQueryJson, ARangeIsReadAndCheckedAndWhatTheHistoryLacksIsRefused) {
    const auto q = loading_query_from_json(json{{"since", 1'000'000}, {"until", 2'000'000}});
    EXPECT_EQ(q.since, 1'000'000);
    EXPECT_EQ(q.until, 2'000'000);
    EXPECT_TRUE(q.ranged());
    EXPECT_TRUE(check(q));
    EXPECT_EQ(to_json(q), json({{"since", 1'000'000}, {"until", 2'000'000}}));
    EXPECT_FALSE(loading_query_from_json(json::object()).ranged());
    EXPECT_EQ(
        loading_query_from_json(json{{"until", std::numeric_limits<std::uint64_t>::max()}}).until,
        std::numeric_limits<std::int64_t>::max());
    auto refused = [](const LoadingQuery& bad, const char* says) {
        const auto r = check(bad);
        ASSERT_FALSE(r) << says;
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
    };
    refused(LoadingQuery{.since = 5, .until = 4}, "ends (4) before it begins (5)");
    refused(LoadingQuery{.since = -1}, "before 1970");
    refused(LoadingQuery{.units = 3, .since = 1}, "not the units");
    refused(LoadingQuery{.context = true, .until = 1}, "not the units");
    refused(LoadingQuery{.tasks = 1, .since = 1}, "not the units");
    refused(LoadingQuery{.totals = true, .since = 1}, "the totals");
    const varlink::Interface* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const varlink::Method* m = iface->method("GetLoading");
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(iface->check(*m->input, to_json(q), Extra::Reject));
}

// A stream's records: the kept JSON of the last one, its numbers replaced, is exactly the new
// record's JSON; another shape is refused, and rebuilding gives the same text.
CounterReport stream_record(std::uint64_t base, bool per_cpu, std::size_t events,
                            std::optional<std::int64_t> period) {
    CounterReport r;
    r.elapsed = 1.0 + static_cast<double>(base) / 1000;
    r.period = period;
    r.slots = 2;
    r.rotations = static_cast<int>(base % 7);
    for (std::size_t i = 0; i < events; ++i) {
        ReportedEvent e;
        e.name = "perf::EVENT-NUMBER-" + std::to_string(i);
        e.canonical = "perf::PERF_COUNT_SW_" + std::to_string(i);
        e.pmu = "perf";
        e.value = {base * (i + 1), 1000 + base, 900 + base, 1.5 * static_cast<double>(base), 0.9};
        if (per_cpu) {
            e.cpus = {{0, {base, 10, 9, 1.0, 0.9}}, {3, {base + 1, 11, 11, 2.0, 1.0}}};
        }
        r.events.push_back(e);
    }
    r.metrics.push_back(
        {"cpus_utilized", "CPUs busy on average", 0.5 * static_cast<double>(base), base % 2 == 0});
    return r;
}

TEST(CounterMessages, AStreamRecordUpdatesTheLastOnesJsonInPlace) {
    for (bool per_cpu : {false, true}) {
        json j = to_json(stream_record(1, per_cpu, 3, 1));
        for (std::uint64_t base : {2u, 17u, 123456789u}) {
            const auto next = stream_record(base, per_cpu, 3, static_cast<std::int64_t>(base));
            ASSERT_TRUE(update_json(j, next)) << base;
            EXPECT_EQ(j, to_json(next)) << base;
            EXPECT_EQ(j.dump(), to_json(next).dump()) << base;
        }
    }
}

TEST(CounterMessages, AnotherShapeIsNotUpdatedInPlace) {
    const json kept = to_json(stream_record(1, false, 3, 1));
    std::vector<CounterReport> others = {
        stream_record(2, false, 4, 2),             // another event
        stream_record(2, true, 3, 2),              // per CPU now
        stream_record(2, false, 3, std::nullopt),  // no period
    };
    others.push_back(stream_record(2, false, 3, 2));
    others.back().events[1].name = "perf::OTHER";  // another name
    others.push_back(stream_record(2, false, 3, 2));
    others.back().metrics.clear();  // a metric no longer computed
    others.push_back(stream_record(2, false, 3, 2));
    others.back().metrics[0].name = "ipc";
    for (std::size_t i = 0; i < others.size(); ++i) {
        json j = kept;
        EXPECT_FALSE(update_json(j, others[i])) << i;
    }
    json null;
    EXPECT_FALSE(update_json(null, stream_record(2, false, 3, 2)));
    // A process's threads, in one record and not in the other.
    json without = kept;
    CounterReport threads = stream_record(2, false, 3, 2);
    threads.threads = 4;
    EXPECT_FALSE(update_json(without, threads));
    json with = to_json(threads);
    EXPECT_FALSE(update_json(with, stream_record(3, false, 3, 3)));
}

// A paused session's report says so, and how long it was paused, in the interface's shape,
// read back; a record of the same pause state updates in place, one that paused or resumed
// since is rebuilt.
TEST(CounterMessages, APausedReportSaysItAndTheTimePaused) {
    CounterReport r = stream_record(5, false, 2, 3);
    EXPECT_FALSE(to_json(r).contains("paused"));
    EXPECT_FALSE(to_json(r).contains("paused_seconds"));
    r.paused = true;
    r.paused_seconds = 0.75;
    json j = to_json(r);
    EXPECT_EQ(j["paused"], true);
    EXPECT_EQ(j["paused_seconds"], 0.75);
    expect_conforms("PauseCounters", json{{"report", j}});
    const auto back = counter_report_from_json(j);
    EXPECT_TRUE(back.paused);
    EXPECT_EQ(back.paused_seconds, 0.75);
    CounterReport next = r;
    next.paused_seconds = 1.0;
    ASSERT_TRUE(update_json(j, next));
    EXPECT_EQ(j, to_json(next));
    CounterReport resumed = next;
    resumed.paused = false;
    EXPECT_FALSE(update_json(j, resumed));
    json unpaused = to_json(stream_record(5, false, 2, 3));
    EXPECT_FALSE(update_json(unpaused, next));
}

// The threads of a process target: in the report, the interface's shape, read back; a stream
// record of the same shape updates them in place.
TEST(CounterMessages, AProcessReportSaysHowManyThreads) {
    CounterReport r = stream_record(5, false, 2, std::nullopt);
    EXPECT_FALSE(to_json(r).contains("threads"));
    r.threads = 1000;
    json j = to_json(r);
    EXPECT_EQ(j["threads"], 1000);
    expect_conforms("ReadCounters", json{{"report", j}});
    EXPECT_EQ(counter_report_from_json(j).threads, 1000);
    EXPECT_EQ(counter_report_from_json(to_json(stream_record(5, false, 2, 1))).threads,
              std::nullopt);
    CounterReport next = r;
    next.threads = 999;
    ASSERT_TRUE(update_json(j, next));
    EXPECT_EQ(j, to_json(next));

    perf::PerfReport rep;
    rep.instances = {-1};
    rep.threads = 4;
    EXPECT_EQ(make_report(perf::Plan{}, rep, ReportShape{}, std::nullopt, true, {}).threads, 4);
    rep.threads = 0;
    rep.instances = {0, 1};
    const std::vector<int> online = {0, 1};
    EXPECT_EQ(make_report(perf::Plan{}, rep, ReportShape{}, std::nullopt, true, online).threads,
              std::nullopt);
}

// The CPUs of a report that are not online when it is made: named in the report, in the
// interface's shape, read back; a record whose offline CPUs differ is rebuilt, not updated.
TEST(CounterMessages, AReportNamesItsOfflineCpus) {
    perf::PerfReport rep;
    rep.instances = {0, 1, 2, 5};
    rep.events.push_back({"perf::TASK-CLOCK",
                          "perf::PERF_COUNT_SW_TASK_CLOCK",
                          "perf",
                          {},
                          std::vector<perf::CountValue>(4)});
    const std::vector<int> all = {0, 1, 2, 3, 4, 5};
    EXPECT_TRUE(
        make_report(perf::Plan{}, rep, ReportShape{.per_cpu = true}, std::nullopt, false, all)
            .offline_cpus.empty());
    const std::vector<int> some = {5, 0, 3};  // in any order
    CounterReport r = make_report(perf::Plan{}, rep, ReportShape{.per_cpu = true}, 1, false, some);
    EXPECT_EQ(r.offline_cpus, (std::vector<int>{1, 2}));
    EXPECT_EQ(r.events[0].cpus.size(), 4u);  // their counts stay in the report

    json j = to_json(r);
    EXPECT_EQ(j["offline_cpus"], json::array({1, 2}));
    expect_conforms("ReadCounters", json{{"report", j}});
    EXPECT_EQ(counter_report_from_json(j).offline_cpus, (std::vector<int>{1, 2}));
    EXPECT_FALSE(
        to_json(make_report(perf::Plan{}, rep, ReportShape{.per_cpu = true}, 1, false, all))
            .contains("offline_cpus"));

    // A process total is on no one CPU: none is offline.
    perf::PerfReport total;
    total.instances = {-1};
    EXPECT_TRUE(make_report(perf::Plan{}, total, ReportShape{}, std::nullopt, false, {})
                    .offline_cpus.empty());

    // Stream records: the same offline CPUs update in place; others do not.
    CounterReport next = r;
    next.elapsed += 1;
    json same = j;
    ASSERT_TRUE(update_json(same, next));
    EXPECT_EQ(same, to_json(next));
    for (const std::vector<int>& other :
         {std::vector<int>{}, std::vector<int>{1}, std::vector<int>{1, 5}}) {
        json k = j;
        next.offline_cpus = other;
        EXPECT_FALSE(update_json(k, next)) << json(other).dump();
    }
    json none =
        to_json(make_report(perf::Plan{}, rep, ReportShape{.per_cpu = true}, 1, false, all));
    EXPECT_FALSE(update_json(none, r));
}

// Per group of CPUs: each group's counts, enabled and running times are its CPUs' added up
// (then scaled, as perf stat --per-core does), in place of the CPUs'; in the interface's
// shape, read back, updated in place by the next record of the same groups.
TEST(CounterMessages, AReportPerCoreAddsItsCpusUp) {
    perf::PerfReport rep;
    rep.instances = {0, 1, 2, 3};
    std::vector<perf::CountValue> per_cpu = {
        {100, 1000, 1000}, {200, 1000, 500}, {300, 1000, 1000}, {7, 1000, 1000}};
    perf::CountValue total;
    for (const auto& v : per_cpu) total += v;
    rep.events.push_back({"cycles", "cycles", "cpu", total, per_cpu});
    ReportShape shape{.per_cpu = true,
                      .groups = {{"S0-D0-C0", {0, 2}}, {"S0-D0-C1", {1, 5}}, {"cpu3", {3}}}};
    const std::vector<int> online = {0, 1, 2, 3};
    CounterReport r = make_report(perf::Plan{}, rep, shape, 1, false, online);
    EXPECT_TRUE(r.events[0].cpus.empty()) << "the groups instead";
    ASSERT_EQ(r.events[0].groups.size(), 3u);
    EXPECT_EQ(r.events[0].groups[0].first, "S0-D0-C0");
    EXPECT_EQ(r.events[0].groups[0].second.count, 400u);
    EXPECT_EQ(r.events[0].groups[0].second.enabled_ns, 2000u);
    EXPECT_DOUBLE_EQ(r.events[0].groups[0].second.scaled, 400);
    // cpu5 was not counted: the group holds cpu1's alone, scaled by its running time.
    EXPECT_EQ(r.events[0].groups[1].second.count, 200u);
    EXPECT_DOUBLE_EQ(r.events[0].groups[1].second.scaled, 400);
    EXPECT_DOUBLE_EQ(r.events[0].groups[1].second.running, 0.5);
    EXPECT_EQ(r.events[0].groups[2].second.count, 7u);
    EXPECT_EQ(r.groups, shape.groups);

    json j = to_json(r);
    expect_conforms("ReadCounters", json{{"report", j}});
    EXPECT_EQ(j["groups"][0], (json{{"id", "S0-D0-C0"}, {"cpus", {0, 2}}}));
    EXPECT_EQ(j["events"][0]["groups"][1]["id"], "S0-D0-C1");
    EXPECT_FALSE(j["events"][0].contains("cpus"));
    const CounterReport back = counter_report_from_json(j);
    EXPECT_EQ(back.groups, shape.groups);
    ASSERT_EQ(back.events[0].groups.size(), 3u);
    EXPECT_EQ(back.events[0].groups[0].second.count, 400u);

    // The next record: updated in place; one of other groups is rebuilt.
    rep.events[0].per_instance[0].count += 50;
    CounterReport next = make_report(perf::Plan{}, rep, shape, 2, false, online);
    json same = j;
    ASSERT_TRUE(update_json(same, next));
    EXPECT_EQ(same, to_json(next));
    EXPECT_EQ(same["events"][0]["groups"][0]["value"]["count"], 450);
    ReportShape other = shape;
    other.groups.pop_back();
    EXPECT_FALSE(update_json(j, make_report(perf::Plan{}, rep, other, 2, false, online)));
}

}  // namespace
}  // namespace monitor::protocol
