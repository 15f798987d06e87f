// The exporter's metrics from made-up monitord replies, and its two formats, content
// negotiation and gzip.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <map>

#include "exposition.hpp"
#include "machine_metrics.hpp"

namespace exporter {
namespace {

using monitor::LoadStats;
using monitor::SourceLoad;

std::string text(const Scrape& s, Format f = Format::Text,
                 const CollectorSet& on = CollectorSet::defaults()) {
    return render(machine_metrics(s, ExporterFacts{"1.2.3", 7, 2}, on), f);
}

CollectorSet all_collectors() {
    auto on = CollectorSet::none();
    for (const auto& c : collectors()) on.set(c.id, true);
    return on;
}

// "name{labels}" -> value, from the text format.
std::map<std::string, double> samples(const std::string& exposition) {
    std::map<std::string, double> out;
    std::size_t at = 0;
    while (at < exposition.size()) {
        auto end = exposition.find('\n', at);
        std::string line = exposition.substr(at, end - at);
        at = end + 1;
        if (line.empty() || line[0] == '#') continue;
        auto space = line.rfind(' ');
        out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

Scrape two_cpus() {
    Scrape s;
    s.at = std::chrono::system_clock::time_point{std::chrono::seconds{1'800'000'000}};
    monitor::protocol::DaemonStatus st;
    st.version = "0.1.0";
    st.uptime = 100;
    st.cpus = {0, 1};
    st.probe_mode = "spin";
    st.probes = {{0, "running", 2500.0, 10, 1.5, ""}, {1, "failed", std::nullopt, 0, 0, "no"}};
    s.status = st;
    monitor::LoadingReport l;
    l.window_seconds = 60;
    auto source = [](const char* name, std::optional<double> last, double avg) {
        SourceLoad sl;
        sl.source = name;
        sl.stats = LoadStats{last, avg, avg / 2, avg * 1.5, 30};
        return sl;
    };
    l.machine = {source("procstat", 50.0, 40.0)};
    monitor::CpuLoading c0{0, true, {source("procstat", 25.0, 20.0)}};
    monitor::StateSeconds secs;
    secs.seconds[static_cast<std::size_t>(monitor::TimeState::User)] = 12.5;
    secs.seconds[static_cast<std::size_t>(monitor::TimeState::Idle)] = 87.5;
    c0.sources[0].state_seconds = secs;
    // cpu1's last second was a gap: no last-second figure, the window's still.
    monitor::CpuLoading c1{1, true, {source("procstat", std::nullopt, 60.0)}};
    l.cpus = {c0, c1};
    monitor::UnitLoading units;
    units.accounting = "cgroup2 cpu.stat";
    units.count = 42;
    units.top = {{"nginx.service", "/system.slice/nginx.service", 150, 120, 30, 80, 200, 25},
                 {"/batch/job1", "/batch/job1", 5, 5, 0, 2.5, 10, std::nullopt}};
    l.units = units;
    // The context's second sample (rates over 1 s): PSI and cpufreq present, cpu1 without a
    // clock.
    monitor::CpuContextSample c;
    c.procs_running = 5;
    c.procs_blocked = 1;
    c.pressure_some = 0.25;
    c.pressure_avg10 = 12.5;  // the kernel's percent
    c.pressure_avg60 = 6.25;
    c.pressure_avg300 = 3.125;
    c.waiting = 1.5;
    c.interrupts = 1200;
    c.softirqs = 300;
    c.interrupt_sources = {{"LOC", "Local timer interrupts", 1000}, {"24", "PCI-MSI eth0", 200}};
    c.softirq_kinds = {{"TIMER", "", 250}, {"RCU", "", 50}};
    c.cpus = {{0, 1.25, 2400, 700, 200, "LOC"}, {1, 0.25, std::nullopt, 500, 100, "LOC"}};
    c.seconds = 1;
    l.context = monitor::CpuContextReport{.sample = c};
    s.loading = l;
    return s;
}

TEST(MachineMetrics, MonitordDownIsUpZeroWithOnlyTheExportersOwnFigures) {
    Scrape s;
    auto v = samples(text(s));
    EXPECT_EQ(v["monitord_up"], 0);
    EXPECT_EQ(v["monitord_exporter_scrapes_total"], 7);
    EXPECT_EQ(v["monitord_exporter_scrape_errors_total"], 2);
    EXPECT_EQ((v["monitord_exporter_build_info{version=\"1.2.3\"}"]), 1);
    for (const auto& [name, value] : v) {
        EXPECT_TRUE(name.starts_with("monitord_up") || name.starts_with("monitord_exporter_"))
            << name << " while monitord is down";
    }
}

TEST(MachineMetrics, RatiosSecondsAndProbeStates) {
    auto v = samples(text(two_cpus(), Format::Text, all_collectors()));
    EXPECT_EQ(v["monitord_up"], 1);
    EXPECT_DOUBLE_EQ((v["monitord_load_ratio{source=\"procstat\"}"]), 0.5);
    EXPECT_DOUBLE_EQ((v["monitord_load_window_avg_ratio{source=\"procstat\"}"]), 0.4);
    EXPECT_DOUBLE_EQ((v["monitord_load_window_min_ratio{source=\"procstat\"}"]), 0.2);
    EXPECT_DOUBLE_EQ((v["monitord_load_window_max_ratio{source=\"procstat\"}"]), 0.6);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_load_ratio{cpu=\"0\",source=\"procstat\"}"]), 0.25);
    EXPECT_FALSE(v.contains("monitord_cpu_load_ratio{cpu=\"1\",source=\"procstat\"}"))
        << "a gap is no sample, not a zero";
    EXPECT_DOUBLE_EQ((v["monitord_cpu_load_window_avg_ratio{cpu=\"1\",source=\"procstat\"}"]), 0.6);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_seconds_total{cpu=\"0\",mode=\"user\"}"]), 12.5);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_seconds_total{cpu=\"0\",mode=\"idle\"}"]), 87.5);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_seconds_total{cpu=\"0\",mode=\"guest_nice\"}"]), 0);
    EXPECT_FALSE(v.contains("monitord_cpu_seconds_total{cpu=\"1\",mode=\"idle\"}"));
    EXPECT_EQ((v["monitord_probe_state{cpu=\"0\",state=\"running\"}"]), 1);
    EXPECT_EQ((v["monitord_probe_state{cpu=\"0\",state=\"failed\"}"]), 0);
    EXPECT_EQ((v["monitord_probe_state{cpu=\"1\",state=\"failed\"}"]), 1);
    EXPECT_EQ((v["monitord_probes{state=\"running\"}"]), 1);
    EXPECT_EQ((v["monitord_probes{state=\"failed\"}"]), 1);
    EXPECT_EQ((v["monitord_probes{state=\"starting\"}"]), 0);
    EXPECT_DOUBLE_EQ((v["monitord_probe_idle_seconds_total{cpu=\"0\"}"]), 1.5);
    EXPECT_DOUBLE_EQ((v["monitord_probe_baseline_seconds{cpu=\"0\"}"]), 2.5e-6);
    EXPECT_DOUBLE_EQ(v["monitord_start_time_seconds"], 1'800'000'000 - 100);
    EXPECT_EQ(v["monitord_load_window_seconds"], 60);
    EXPECT_FALSE(v.contains("monitord_watchdog_armed")) << "no watchdog, no watchdog series";
    EXPECT_EQ(v["monitord_probe_fallback"], 0);
}

// By default, per CPU: node_exporter's ten series of CPU time and the window's busiest
// second of each source; the machine's load and the probes' states as counts.
TEST(Collectors, TheDefaultsPerCpuAreTheModesAndThePeakSecond) {
    EXPECT_EQ(CollectorSet::defaults().names(), "cpu,load,probes,watchdog,perf,context");
    auto v = samples(text(two_cpus()));
    std::size_t cpu0 = 0;
    for (const auto& [name, value] : v) {
        if (name.find("cpu=\"0\"") != std::string::npos) ++cpu0;
    }
    EXPECT_EQ(cpu0, 10u + 1u) << "ten modes, the peak second of the one source";
    EXPECT_DOUBLE_EQ((v["monitord_cpu_load_window_max_ratio{cpu=\"0\",source=\"procstat\"}"]), 0.3);
    EXPECT_DOUBLE_EQ((v["monitord_load_ratio{source=\"procstat\"}"]), 0.5);
    EXPECT_EQ((v["monitord_probes{state=\"failed\"}"]), 1);
    EXPECT_FALSE(v.contains("monitord_cpu_load_ratio{cpu=\"0\",source=\"procstat\"}"));
    EXPECT_FALSE(v.contains("monitord_probe_state{cpu=\"1\",state=\"failed\"}"));
}

// Each collector switched off takes its families away, and only those.
TEST(Collectors, EachOneOffTakesAwayItsFamiliesOnly) {
    auto s = two_cpus();
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/watchdog0";
    s.status->watchdog = w;
    monitor::protocol::StandingSession web;
    web.name = "web";
    web.counting = true;
    s.standing = {web};
    // A family of each collector.
    const std::map<Collector, std::string> owned = {
        {Collector::Cpu, "monitord_cpu_seconds_total{"},
        {Collector::Load, "monitord_cpu_load_window_max_ratio{"},
        {Collector::CpuLoad, "monitord_cpu_load_ratio{"},
        {Collector::Probes, "monitord_probes{"},
        {Collector::ProbeCpu, "monitord_probe_state{"},
        {Collector::Watchdog, "monitord_watchdog_armed"},
        {Collector::Perf, "monitord_perf_session_counting{"},
        {Collector::Units, "monitord_unit_cpu_ratio{"},
        {Collector::Context, "monitord_cpu_pressure_ratio"},
        {Collector::CpuContext, "monitord_cpu_tasks_waiting{"},
    };
    ASSERT_EQ(owned.size(), kCollectorCount);
    auto has = [](const std::map<std::string, double>& v, const std::string& prefix) {
        return std::ranges::any_of(v, [&](const auto& kv) { return kv.first.starts_with(prefix); });
    };
    for (const auto& c : collectors()) {
        SCOPED_TRACE(std::string{c.name});
        auto on = all_collectors();
        on.set(c.id, false);
        const auto v = samples(text(s, Format::Text, on));
        for (const auto& [id, family] : owned) {
            EXPECT_EQ(has(v, family), id != c.id) << family;
        }
        EXPECT_TRUE(has(v, "monitord_up")) << "always";
        EXPECT_TRUE(has(v, "monitord_build_info{")) << "always";
    }
    // None: what is always there.
    const auto v = samples(text(s, Format::Text, CollectorSet::none()));
    for (const auto& [name, value] : v) {
        EXPECT_TRUE(name.starts_with("monitord_up") || name.starts_with("monitord_exporter_") ||
                    name.starts_with("monitord_build_info") ||
                    name.starts_with("monitord_probe_fallback") ||
                    name.starts_with("monitord_start_time_seconds") ||
                    name.starts_with("monitord_cpus_online"))
            << name;
    }
}

// The busiest units in CPUs (1: one CPU's worth), labelled with their unit and cgroup; none
// where the machine has no cgroup accounting.
TEST(MachineMetrics, TheBusiestUnits) {
    auto s = two_cpus();
    auto on = CollectorSet::defaults();
    EXPECT_FALSE(samples(text(s, Format::Text, on))
                     .contains("monitord_units{accounting=\"cgroup2 cpu.stat\"}"))
        << "off by default";
    on.set(Collector::Units, true);
    auto v = samples(text(s, Format::Text, on));
    EXPECT_EQ((v["monitord_units{accounting=\"cgroup2 cpu.stat\"}"]), 42);
    const std::string nginx = "{unit=\"nginx.service\",cgroup=\"/system.slice/nginx.service\"";
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_ratio" + nginx + "}"], 1.5);
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_mode_ratio" + nginx + ",mode=\"user\"}"], 1.2);
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_mode_ratio" + nginx + ",mode=\"system\"}"], 0.3);
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_window_avg_ratio" + nginx + "}"], 0.8);
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_window_max_ratio" + nginx + "}"], 2);
    EXPECT_DOUBLE_EQ(v["monitord_unit_cpu_pressure_avg_ratio" + nginx + "}"], 0.25);
    EXPECT_FALSE(v.contains(
        "monitord_unit_cpu_pressure_avg_ratio{unit=\"/batch/job1\",cgroup=\"/batch/job1\"}"));
    EXPECT_DOUBLE_EQ((v["monitord_unit_cpu_ratio{unit=\"/batch/job1\",cgroup=\"/batch/job1\"}"]),
                     0.05);

    s.loading->units = monitor::UnitLoading{.unavailable = "no cgroup tree"};
    v = samples(text(s, Format::Text, on));
    for (const auto& [name, value] : v) {
        EXPECT_FALSE(name.starts_with("monitord_unit")) << name << " without accounting";
    }
}

// The CPUs' context: the machine's figures by default, each CPU's on request; rates only
// from monitord's second reading, and a figure the machine lacks without a series.
TEST(MachineMetrics, TheCpusContext) {
    auto s = two_cpus();
    auto v = samples(text(s));
    EXPECT_EQ(v["monitord_tasks_running"], 5);
    EXPECT_EQ(v["monitord_tasks_blocked"], 1);
    EXPECT_DOUBLE_EQ(v["monitord_tasks_waiting"], 1.5);
    EXPECT_DOUBLE_EQ(v["monitord_cpu_pressure_ratio"], 0.25);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_pressure_avg_ratio{window=\"10s\"}"]), 0.125);
    EXPECT_DOUBLE_EQ((v["monitord_cpu_pressure_avg_ratio{window=\"300s\"}"]), 0.03125);
    EXPECT_EQ(v["monitord_interrupts_per_second"], 1200);
    EXPECT_EQ((v["monitord_interrupt_source_per_second{source=\"24\",description=\"PCI-MSI "
                 "eth0\"}"]),
              200);
    EXPECT_EQ((v["monitord_softirqs_per_second{kind=\"TIMER\"}"]), 250);
    EXPECT_FALSE(v.contains("monitord_cpu_frequency_hertz{cpu=\"0\"}")) << "per CPU: on request";

    auto on = CollectorSet::defaults();
    on.set(Collector::CpuContext, true);
    v = samples(text(s, Format::Text, on));
    EXPECT_DOUBLE_EQ((v["monitord_cpu_tasks_waiting{cpu=\"0\"}"]), 1.25);
    EXPECT_EQ((v["monitord_cpu_frequency_hertz{cpu=\"0\"}"]), 2.4e9);
    EXPECT_FALSE(v.contains("monitord_cpu_frequency_hertz{cpu=\"1\"}")) << "no clock: no series";
    EXPECT_EQ((v["monitord_cpu_interrupts_per_second{cpu=\"1\"}"]), 500);
    EXPECT_EQ((v["monitord_cpu_softirqs_per_second{cpu=\"1\"}"]), 100);

    // The first reading: what is read now, no rate.
    auto& first = *s.loading->context->sample;
    first.seconds = 0;
    first.pressure_avg60.reset();  // a figure the kernel did not give
    v = samples(text(s, Format::Text, on));
    EXPECT_EQ(v["monitord_tasks_running"], 5);
    EXPECT_EQ((v["monitord_cpu_frequency_hertz{cpu=\"0\"}"]), 2.4e9);
    EXPECT_FALSE(v.contains("monitord_cpu_pressure_avg_ratio{window=\"60s\"}"));
    for (const auto& [name, value] : v) {
        EXPECT_FALSE(name.find("per_second") != std::string::npos ||
                     name.starts_with("monitord_tasks_waiting") ||
                     name.starts_with("monitord_cpu_tasks_waiting") ||
                     name == "monitord_cpu_pressure_ratio")
            << name << ": a rate from the first reading";
    }
    // Before the first reading, or when the daemon has no context: none of its families.
    s.loading->context = monitor::CpuContextReport{.unavailable = "not a procfs"};
    v = samples(text(s, Format::Text, on));
    EXPECT_FALSE(v.contains("monitord_tasks_running"));
}

TEST(Collectors, NamesAndWhatTheyAskOfMonitord) {
    ASSERT_EQ(collectors().size(), kCollectorCount);
    for (std::size_t i = 0; i < kCollectorCount; ++i) {
        EXPECT_EQ(static_cast<std::size_t>(collectors()[i].id), i);
        EXPECT_EQ(collector_named(collectors()[i].name), collectors()[i].id);
    }
    EXPECT_FALSE(collector_named("cpufreq"));
    auto on = CollectorSet::none();
    EXPECT_FALSE(on.needs_per_cpu());
    EXPECT_FALSE(on.needs_standing());
    EXPECT_FALSE(on.needs_context());
    on.set(Collector::CpuContext, true);
    EXPECT_TRUE(on.needs_context());
    EXPECT_TRUE(on.needs_per_cpu()) << "each CPU's context";
    on.set(Collector::CpuContext, false);
    EXPECT_TRUE(CollectorSet::defaults().needs_context());
    on.set(Collector::Load, true);
    EXPECT_TRUE(on.needs_per_cpu());
    EXPECT_FALSE(on.needs_totals());
    on.set(Collector::Cpu, true);
    EXPECT_TRUE(on.needs_totals());
    on.set(Collector::Perf, true);
    EXPECT_TRUE(on.needs_standing());
    EXPECT_EQ(on.names(), "cpu,load,perf");
    EXPECT_EQ(on.units_asked(), 0);
    on.set(Collector::Units, true);
    EXPECT_EQ(on.units_asked(), kDefaultUnitsLimit);
    on.set_units_limit(25);
    EXPECT_EQ(on.units_asked(), 25);
}

// Spinning probes asked for but without a place where they yield: the scrape says so.
TEST(MachineMetrics, TheProbesFallingBack) {
    auto s = two_cpus();
    s.status->probe_mode = "sleep";
    s.status->probe_fallback = "the idle probes are in cgroup /x under the cpu controller";
    auto v = samples(text(s));
    EXPECT_EQ(v["monitord_probe_fallback"], 1);
    EXPECT_EQ((v["monitord_build_info{version=\"0.1.0\",probe_mode=\"sleep\"}"]), 1);
}

TEST(MachineMetrics, TheWatchdog) {
    auto s = two_cpus();
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/watchdog0";
    w.identity = "i6300ESB timer";
    w.armed = true;
    w.timeout = 10;
    w.since_last_pet = 0.25;
    w.pets = 42;
    w.late_pets = 2;
    w.longest_pet_gap = 6.5;
    w.last_reset_by_watchdog = true;
    w.nowayout = true;
    s.status->watchdog = w;
    auto v = samples(text(s));
    EXPECT_EQ(v["monitord_watchdog_nowayout"], 1);
    EXPECT_EQ(v["monitord_watchdog_armed"], 1);
    EXPECT_EQ(v["monitord_watchdog_timeout_seconds"], 10);
    EXPECT_FALSE(v.contains("monitord_watchdog_time_left_seconds")) << "the driver cannot tell";
    EXPECT_DOUBLE_EQ(v["monitord_watchdog_last_pet_age_seconds"], 0.25);
    EXPECT_EQ(v["monitord_watchdog_pets_total"], 42);
    EXPECT_EQ(v["monitord_watchdog_late_pets_total"], 2);
    EXPECT_DOUBLE_EQ(v["monitord_watchdog_longest_pet_gap_seconds"], 6.5);
    EXPECT_EQ(v["monitord_watchdog_last_reset_by_watchdog"], 1);
    EXPECT_EQ((v["monitord_watchdog_info{device=\"/dev/watchdog0\",identity=\"i6300ESB timer\","
                 "policy=\"all\",on_stop=\"disarm\"}"]),
              1);
}

TEST(MachineMetrics, StandingCounterSessions) {
    using monitor::protocol::Count;
    using monitor::protocol::CounterReport;
    using monitor::protocol::ReportedEvent;
    using monitor::protocol::StandingSession;
    auto s = two_cpus();
    StandingSession web;
    web.name = "web";
    web.counting = true;
    CounterReport totals;
    // Counted half the time it was enabled: the counters were shared.
    totals.events = {ReportedEvent{
        "cycles", "cpu::cycles", "cpu", Count{1000, 4'000'000'000, 2'000'000'000, 2000, 0.5}, {}}};
    totals.paused = true;
    totals.paused_seconds = 2.5;
    web.totals = totals;
    CounterReport last;
    last.metrics = {{"ipc", "instructions per cycle", 1.25, true}};
    web.last = last;
    StandingSession each;
    each.name = "each";
    each.counting = true;
    CounterReport per_cpu;
    per_cpu.events = {ReportedEvent{
        "task-clock",
        "perf::TASK_CLOCK",
        "perf",
        Count{},
        {{0, Count{7, 1'000'000'000, 1'000'000'000, 7, 1}}, {1, Count{9, 1, 1, 9, 1}}}}};
    each.totals = per_cpu;
    StandingSession failed;
    failed.name = "gone";
    failed.error = "no cgroup";
    s.standing = {web, each, failed};
    auto v = samples(text(s));
    EXPECT_EQ((v["monitord_perf_session_counting{session=\"web\"}"]), 1);
    EXPECT_EQ((v["monitord_perf_session_counting{session=\"gone\"}"]), 0);
    EXPECT_EQ((v["monitord_perf_events_total{session=\"web\",event=\"cycles\"}"]), 1000);
    EXPECT_EQ((v["monitord_perf_enabled_seconds_total{session=\"web\",event=\"cycles\"}"]), 4);
    EXPECT_EQ((v["monitord_perf_running_seconds_total{session=\"web\",event=\"cycles\"}"]), 2);
    EXPECT_EQ((v["monitord_perf_metric{session=\"web\",metric=\"ipc\"}"]), 1.25);
    // Paused (monctl perf pause web): said, with the time it stood still.
    EXPECT_EQ((v["monitord_perf_session_paused{session=\"web\"}"]), 1);
    EXPECT_EQ((v["monitord_perf_paused_seconds_total{session=\"web\"}"]), 2.5);
    EXPECT_EQ((v["monitord_perf_session_paused{session=\"each\"}"]), 0);
    EXPECT_FALSE(v.contains("monitord_perf_session_paused{session=\"gone\"}"));
    // Target "each": a series per CPU, and no total beside them (sum() makes it).
    EXPECT_EQ((v["monitord_perf_events_total{session=\"each\",event=\"task-clock\",cpu=\"0\"}"]),
              7);
    EXPECT_EQ((v["monitord_perf_events_total{session=\"each\",event=\"task-clock\",cpu=\"1\"}"]),
              9);
    EXPECT_FALSE(v.contains("monitord_perf_events_total{session=\"each\",event=\"task-clock\"}"));
    EXPECT_FALSE(v.contains("monitord_perf_events_total{session=\"gone\"}"));
}

TEST(Exposition, OpenMetricsNamesCountersWithoutTotalAndEnds) {
    auto om = text(two_cpus(), Format::OpenMetrics);
    EXPECT_NE(om.find("# TYPE monitord_cpu_seconds counter\n"), std::string::npos);
    EXPECT_NE(om.find("monitord_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 12.5\n"),
              std::string::npos);
    EXPECT_NE(om.find("# TYPE monitord_up gauge\n"), std::string::npos) << om;
    EXPECT_NE(om.find("\nmonitord_up 1\n"), std::string::npos) << om;
    EXPECT_TRUE(om.ends_with("\n# EOF\n"));
    EXPECT_EQ(om.find("# EOF"), om.size() - 6) << "one EOF, at the end";
    // The text format keeps _total in the family's name.
    EXPECT_NE(text(two_cpus()).find("# TYPE monitord_cpu_seconds_total counter"),
              std::string::npos);
}

TEST(Exposition, LabelValuesAreEscaped) {
    auto s = two_cpus();
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/a\"b\\c\nd";
    s.status->watchdog = w;
    for (auto f : {Format::Text, Format::OpenMetrics}) {
        EXPECT_NE(text(s, f).find("device=\"/dev/a\\\"b\\\\c\\nd\""), std::string::npos);
    }
}

TEST(Exposition, NegotiatesTheFormatAsPrometheusAsks) {
    // What Prometheus 2.42 sends.
    EXPECT_EQ(negotiate("application/openmetrics-text;version=1.0.0,application/"
                        "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/"
                        "*;q=0.1"),
              Format::OpenMetrics);
    EXPECT_EQ(negotiate(""), Format::Text);
    EXPECT_EQ(negotiate("*/*"), Format::Text);
    EXPECT_EQ(negotiate("text/plain;version=0.0.4"), Format::Text);
    EXPECT_EQ(negotiate("text/plain;q=1, application/openmetrics-text;q=0.5"), Format::Text);
    EXPECT_EQ(negotiate("application/openmetrics-text;q=0"), Format::Text);
    EXPECT_EQ(negotiate("Application/OpenMetrics-Text; version=1.0.0"), Format::OpenMetrics);
    EXPECT_EQ(content_type(Format::Text), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(Exposition, GzipOnlyWhenAcceptedAndItInflatesBack) {
    EXPECT_TRUE(accepts_gzip("gzip"));
    EXPECT_TRUE(accepts_gzip("deflate, gzip;q=0.5"));
    EXPECT_TRUE(accepts_gzip("*"));
    EXPECT_FALSE(accepts_gzip(""));
    EXPECT_FALSE(accepts_gzip("identity"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0"));

    // Each body its own stream, whatever came before it (the deflate stream is reused).
    auto s = two_cpus();
    s.status->version = "another";
    for (const std::string& body : {text(two_cpus()), text(s), std::string{"x"}}) {
        auto z = gzip(body);
        ASSERT_TRUE(z);
        if (body.size() > 100) {
            EXPECT_LT(z->size(), body.size());
        }
        std::string back(body.size() + 16, '\0');
        z_stream in{};
        ASSERT_EQ(inflateInit2(&in, 16 + MAX_WBITS), Z_OK);
        in.next_in = reinterpret_cast<Bytef*>(z->data());
        in.avail_in = static_cast<uInt>(z->size());
        in.next_out = reinterpret_cast<Bytef*>(back.data());
        in.avail_out = static_cast<uInt>(back.size());
        EXPECT_EQ(inflate(&in, Z_FINISH), Z_STREAM_END);
        back.resize(in.total_out);
        inflateEnd(&in);
        EXPECT_EQ(back, body);
    }
}

}  // namespace
}  // namespace exporter
