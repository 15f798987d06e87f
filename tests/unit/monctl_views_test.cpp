// monctl's human-readable views of the daemon's replies.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "perf_stat_views.hpp"
#include "perf_views.hpp"
#include "views.hpp"

namespace monctl {
namespace {

using monitor::CpuLoading;
using monitor::LoadingReport;
using monitor::LoadStats;
using monitor::SourceLoad;

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in{text};
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0;
}

// The first line that starts with `prefix`, or "" when there is none.
std::string line_starting(const std::string& text, const std::string& prefix) {
    for (const auto& l : lines_of(text)) {
        if (starts_with(l, prefix)) return l;
    }
    return {};
}

// Whitespace-separated words of a line.
std::vector<std::string> words(const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in{line};
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

LoadStats stats(std::optional<double> last, double avg, double min, double max) {
    LoadStats s;
    s.avg_prev_sec = last;
    s.avg_prev_min = avg;
    s.min_prev_min = min;
    s.max_prev_min = max;
    s.samples = 60;
    return s;
}

LoadingReport sample_report() {
    LoadingReport r;
    r.timestamp = std::chrono::system_clock::now();
    r.window_seconds = 60;
    r.machine = {SourceLoad{"procstat", stats(12.5, 10.31, 1.0, 99.5), {}}};
    r.cpus = {
        CpuLoading{0, true, {SourceLoad{"procstat", stats(100.0, 50.0, 0.0, 100.0), {}}}},
        CpuLoading{1, false, {SourceLoad{"procstat", stats(std::nullopt, 3.0, 1.0, 5.0), {}}}},
        CpuLoading{2, true, {SourceLoad{"procstat", std::nullopt, {}}}},
        CpuLoading{3, true, {}},
    };
    return r;
}

// ---- format_range ----

TEST(FormatRange, SaysTheStretchAskedForAndTheSecondsKept) {
    const auto report = sample_report();  // 60 seconds kept, the last now
    const auto until = *report.timestamp;
    const std::string line = format_range(report, until - std::chrono::hours(1), until);
    EXPECT_TRUE(starts_with(line, "History from ")) << line;
    // Counts in the user's locale ("3,600" in en_US, "3600" in C).
    EXPECT_NE(line.find("(" + format_count(3600) + " s): 60 s kept, the last at "),
              std::string::npos)
        << line;
}

TEST(FormatRange, WithoutSinceItIsUpToUntilNotFrom1970) {
    auto report = sample_report();
    const auto until = *report.timestamp;
    const std::string line = format_range(report, std::chrono::system_clock::time_point{}, until);
    EXPECT_TRUE(starts_with(line, "History up to ")) << line;
    EXPECT_NE(line.find(": 60 s kept, the last at "), std::string::npos) << line;
    EXPECT_EQ(line.find("1970"), std::string::npos) << line;
    report.timestamp.reset();
    const std::string none = format_range(report, std::chrono::system_clock::time_point{}, until);
    EXPECT_TRUE(starts_with(none, "History up to ")) << none;
    EXPECT_NE(none.find("nothing kept of it"), std::string::npos) << none;
}

// ---- format_history_runs ----

TEST(FormatHistoryRuns, EachRunSaysHowItEndedAndAResetShowsItsLastSeconds) {
    using monitor::protocol::HistoryRunInfo;
    const std::int64_t t0 = 1'800'000'000'000'000;  // microseconds
    monitor::protocol::HistoryRunsOut out;
    out.file = "/var/lib/monitord/history.db";
    out.runs.push_back(HistoryRunInfo{.id = 1,
                                      .boot_id = "a",
                                      .started = t0,
                                      .last = t0 + 60'000'000,
                                      .stopped = t0 + 61'000'000,
                                      .ended = "stopped",
                                      .watchdog = std::nullopt,
                                      .boot_reset_by_watchdog = std::nullopt,
                                      .last_seconds = {}});
    out.runs.push_back(HistoryRunInfo{
        .id = 2,
        .boot_id = "a",
        .started = t0 + 100'000'000,
        .last = t0 + 200'000'000,
        .stopped = std::nullopt,
        .ended = "watchdog_reset",
        .watchdog = "/dev/watchdog",
        .boot_reset_by_watchdog = false,
        .last_seconds = {
            {.at = t0 + 199'000'000, .machine = {{"procstat", 99.5}, {"probe", std::nullopt}}},
            {.at = t0 + 200'000'000, .machine = {{"procstat", 100.0}, {"probe", 100.0}}}}});
    out.runs.push_back(HistoryRunInfo{.id = 3,
                                      .boot_id = "b",
                                      .started = t0 + 300'000'000,
                                      .last = std::nullopt,
                                      .stopped = std::nullopt,
                                      .ended = "running",
                                      .watchdog = std::nullopt,
                                      .boot_reset_by_watchdog = std::nullopt,
                                      .last_seconds = {}});
    const std::string text = format_history_runs(out);
    EXPECT_TRUE(starts_with(text, "Runs of monitord kept in /var/lib/monitord/history.db")) << text;
    EXPECT_NE(text.find("  stopped\n"), std::string::npos) << text;
    EXPECT_NE(text.find("reset by the watchdog; armed /dev/watchdog\n"), std::string::npos) << text;
    EXPECT_NE(text.find("procstat  99.5 %  probe     -"), std::string::npos) << text;
    EXPECT_NE(text.find("procstat 100.0 %  probe 100.0 %"), std::string::npos) << text;
    EXPECT_NE(text.find(" to now  running\n"), std::string::npos) << text;
    // Stopped, reset with its two seconds, running: a line each.
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6) << text;
    out.runs.clear();
    EXPECT_EQ(format_history_runs(out), "No runs kept in /var/lib/monitord/history.db\n");
}

// ---- format_cpu_list ----

TEST(FormatCpuList, Ranges) {
    EXPECT_EQ(format_cpu_list({}), "");
    EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
    EXPECT_EQ(format_cpu_list({4}), "4");
    EXPECT_EQ(format_cpu_list({0, 1}), "0-1");
    EXPECT_EQ(format_cpu_list({0, 2, 4}), "0,2,4");
    EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 4, 5, 6, 7}), "0-7");
    EXPECT_EQ(format_cpu_list({1, 2, 3, 10, 11, 63}), "1-3,10-11,63");
}

// ---- format_duration ----

TEST(FormatDuration, UnderAMinuteInSeconds) {
    EXPECT_EQ(format_duration(0), "0.0 s");
    EXPECT_EQ(format_duration(0.34), "0.3 s");
    EXPECT_EQ(format_duration(42), "42.0 s");
    EXPECT_EQ(format_duration(59.5), "59.5 s");
}

TEST(FormatDuration, HoursMinutesSeconds) {
    EXPECT_EQ(format_duration(60), "00:01:00");
    EXPECT_EQ(format_duration(61.9), "00:01:01");
    EXPECT_EQ(format_duration(3723.25), "01:02:03");
    EXPECT_EQ(format_duration(86399), "23:59:59");
}

TEST(FormatDuration, Days) {
    EXPECT_EQ(format_duration(86400), "1d 00:00:00");
    EXPECT_EQ(format_duration(93784), "1d 02:03:04");
    EXPECT_EQ(format_duration(10 * 86400 + 59), "10d 00:00:59");
}

// ---- format_status ----

TEST(FormatStatus, ShowsVersionPidStateCpusAndSources) {
    monitor::protocol::DaemonStatus st;
    st.version = "0.1.0";
    st.uptime = 3723.25;
    st.state = "running";
    st.pid = 4242;
    st.cpus = {0, 1, 2, 3, 6};
    st.sources = {"procstat", "probe"};
    st.history_seconds = 90;
    std::string out = format_status(st, "/run/monitord/io.monitord.Monitor");

    auto lines = lines_of(out);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0], "monitord 0.1.0 (pid 4242), running, up 01:02:03");
    EXPECT_NE(out.find("/run/monitord/io.monitord.Monitor"), std::string::npos) << out;
    EXPECT_NE(line_starting(out, "  CPUs:").find("0-3,6 (5 online)"), std::string::npos) << out;
    EXPECT_NE(line_starting(out, "  sources:").find("procstat, probe"), std::string::npos) << out;
    EXPECT_NE(line_starting(out, "  history:").find("90 s"), std::string::npos) << out;
}

// Each probe mode is named and said in words.
TEST(FormatStatus, SaysWhatEachProbeModeDoes) {
    monitor::protocol::DaemonStatus st;
    st.version = "0.1.0";
    for (auto [mode, words] :
         {std::pair{"sleep", "woken at each tick while a watchdog is armed"},
          std::pair{"spin", "spins: the probe source"}, std::pair{"off", "none: no watchdog"}}) {
        st.probe_mode = mode;
        const auto line = line_starting(format_status(st, "/s"), "  probes:");
        EXPECT_EQ(line.rfind(std::string{"  probes:  "} + mode + " (", 0), 0u) << line;
        EXPECT_NE(line.find(words), std::string::npos) << line;
    }
}

// Where the probes compete, and a warning when they take time from other sessions' work.
TEST(FormatStatus, ShowsTheProbesGroupAndWarnsWhenTheyDoNotYield) {
    monitor::protocol::DaemonStatus st;
    st.version = "0.1.0";
    st.probe_mode = "spin";
    st.probe_group = monitor::protocol::probe_group_info(
        {monitor::ProbeGroup::Kind::Autogroup, "/autogroup-42", 19, true});
    std::string out = format_status(st, "/s");
    EXPECT_EQ(line_starting(out, "  probes:"),
              "  probes:  spin (a thread per CPU at idle priority spins: the probe source, MON's "
              "method), in autogroup /autogroup-42 at nice 19")
        << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;

    st.probe_group = monitor::protocol::probe_group_info(
        {monitor::ProbeGroup::Kind::Autogroup, "/autogroup-7", 0, false});
    out = format_status(st, "/s");
    EXPECT_NE(line_starting(out, "  warning:").find("share autogroup /autogroup-7"),
              std::string::npos)
        << out;

    st.probe_group = monitor::protocol::probe_group_info(
        {monitor::ProbeGroup::Kind::Cgroup, "/system.slice/monitord.service", {}, false});
    out = format_status(st, "/s");
    EXPECT_NE(line_starting(out, "  probes:").find("in cgroup /system.slice/monitord.service"),
              std::string::npos)
        << out;
    EXPECT_NE(line_starting(out, "  warning:").find("CPUWeight=idle"), std::string::npos) << out;

    // Placed where they yield: said, without a warning.
    monitor::ProbeGroup idle{monitor::ProbeGroup::Kind::Cgroup, "/monitord.slice", {}, false};
    idle.top = "/monitord.slice";
    idle.top_idle = true;
    st.probe_group = monitor::protocol::probe_group_info(idle);
    out = format_status(st, "/s");
    EXPECT_NE(out.find("  the idle probes are in cgroup /monitord.slice, below /monitord.slice "
                       "with cpu.idle=1"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;

    // Spin asked for, no place found: the probes sleep, and status says why.
    st.probe_mode = "sleep";
    st.probe_group.reset();
    st.probe_fallback = "the idle probes are in cgroup /x under the cpu controller";
    out = format_status(st, "/s");
    EXPECT_EQ(line_starting(out, "  warning:"),
              "  warning: spinning probes were asked for, but the idle probes are in cgroup /x "
              "under the cpu controller")
        << out;
}

TEST(FormatStatus, OtherStates) {
    monitor::protocol::DaemonStatus st;
    st.version = "9.9";
    st.pid = 1;
    for (const char* state : {"starting", "reloading", "stopping"}) {
        st.state = state;
        std::string out = format_status(st, "/s");
        EXPECT_NE(lines_of(out).at(0).find(std::string{", "} + state + ","), std::string::npos)
            << out;
    }
}

// ---- format_loading ----

TEST(FormatLoading, HeaderNamesTheSourceAndTheWindow) {
    std::string out = format_loading(sample_report());
    auto lines = lines_of(out);
    ASSERT_GE(lines.size(), 4u) << out;
    EXPECT_NE(lines[0].find("last 60 s"), std::string::npos) << out;
    EXPECT_EQ(words(lines[1]), std::vector<std::string>{"procstat"}) << out;
    EXPECT_EQ(words(lines[2]), (std::vector<std::string>{"CPU", "last", "avg", "min", "max"}))
        << out;
}

TEST(FormatLoading, MachineRowAndOneRowPerCpu) {
    std::string out = format_loading(sample_report());
    EXPECT_EQ(words(line_starting(out, "all ")),
              (std::vector<std::string>{"all", "12.5", "10.3", "1.0", "99.5"}))
        << out;
    EXPECT_EQ(words(line_starting(out, "cpu0 ")),
              (std::vector<std::string>{"cpu0", "100.0", "50.0", "0.0", "100.0"}))
        << out;
    int cpu_rows = 0;
    for (const auto& l : lines_of(out)) cpu_rows += starts_with(l, "cpu");
    EXPECT_EQ(cpu_rows, 4) << out;
}

TEST(FormatLoading, DashForMissingStats) {
    std::string out = format_loading(sample_report());
    // No figure for the last second.
    EXPECT_EQ(words(line_starting(out, "cpu1")),
              (std::vector<std::string>{"cpu1*", "-", "3.0", "1.0", "5.0"}))
        << out;
    // No stats yet, and no entry for the source at all.
    const std::vector<std::string> dashes{"-", "-", "-", "-"};
    auto cpu2 = words(line_starting(out, "cpu2"));
    ASSERT_EQ(cpu2.size(), 5u) << out;
    EXPECT_EQ(std::vector<std::string>(cpu2.begin() + 1, cpu2.end()), dashes) << out;
    auto cpu3 = words(line_starting(out, "cpu3"));
    ASSERT_EQ(cpu3.size(), 5u) << out;
    EXPECT_EQ(std::vector<std::string>(cpu3.begin() + 1, cpu3.end()), dashes) << out;
}

TEST(FormatLoading, OfflineCpusAreMarked) {
    std::string out = format_loading(sample_report());
    EXPECT_TRUE(starts_with(line_starting(out, "cpu1"), "cpu1*")) << out;
    EXPECT_FALSE(starts_with(line_starting(out, "cpu0"), "cpu0*")) << out;
    EXPECT_FALSE(starts_with(line_starting(out, "cpu2"), "cpu2*")) << out;
    EXPECT_TRUE(starts_with(lines_of(out).back(), "* offline")) << out;

    LoadingReport all_online = sample_report();
    all_online.cpus[1].online = true;
    std::string online = format_loading(all_online);
    EXPECT_EQ(online.find('*'), std::string::npos) << online;
}

TEST(FormatLoading, TableColumnsAreAligned) {
    LoadingReport r = sample_report();
    r.machine.push_back(SourceLoad{"probe", stats(7.0, 6.0, 5.0, 8.0), {}});
    std::string out = format_loading(r);
    auto lines = lines_of(out);
    ASSERT_GE(lines.size(), 8u) << out;
    // Every table line (not the title, not the footnote) has the same width.
    const std::size_t width = lines[2].size();
    for (std::size_t i = 1; i < lines.size() - 1; ++i) {
        EXPECT_EQ(lines[i].size(), width) << "line " << i << ": '" << lines[i] << "'\n" << out;
    }
    EXPECT_EQ(words(lines[1]), (std::vector<std::string>{"procstat", "probe"})) << out;
    EXPECT_EQ(words(line_starting(out, "all ")),
              (std::vector<std::string>{"all", "12.5", "10.3", "1.0", "99.5", "7.0", "6.0", "5.0",
                                        "8.0"}))
        << out;
    // The CPUs have no "probe" entry: dashes in its columns.
    auto cpu0 = words(line_starting(out, "cpu0 "));
    ASSERT_EQ(cpu0.size(), 9u) << out;
    EXPECT_EQ(cpu0[5], "-");
    EXPECT_EQ(cpu0[8], "-");
}

TEST(FormatLoading, BeforeTheFirstSample) {
    LoadingReport r;
    r.window_seconds = 60;
    r.machine = {SourceLoad{"procstat", std::nullopt, {}}};
    std::string out = format_loading(r);
    EXPECT_TRUE(starts_with(out, "No sample yet")) << out;
    EXPECT_EQ(words(line_starting(out, "all ")),
              (std::vector<std::string>{"all", "-", "-", "-", "-"}))
        << out;
    EXPECT_EQ(line_starting(out, "cpu"), "") << out;
}

// ---- format_history ----

TEST(FormatHistory, OneRowPerSampleAlignedOnTheNewest) {
    LoadingReport r;
    r.timestamp = std::chrono::system_clock::now();
    r.window_seconds = 60;
    r.machine = {SourceLoad{"procstat", stats(30.0, 20.0, 10.0, 30.0), {10.0, 20.0, 30.0}}};
    r.cpus = {
        // A shorter history: its values belong to the newest rows.
        CpuLoading{0, true, {SourceLoad{"procstat", stats(2.0, 1.5, 1.0, 2.0), {1.0, 2.0}}}},
        // A gap in the middle.
        CpuLoading{1, false, {SourceLoad{"procstat", stats(6.0, 5.0, 4.0, 6.0), {4.0, {}, 6.0}}}},
    };
    std::string out = format_history(r);
    auto lines = lines_of(out);
    ASSERT_EQ(lines.size(), 4u) << out;
    EXPECT_EQ(words(lines[0]),
              (std::vector<std::string>{"age", "procstat:all", "procstat:cpu0", "procstat:cpu1*"}))
        << out;
    EXPECT_EQ(words(lines[1]), (std::vector<std::string>{"2s", "10.0", "-", "4.0"})) << out;
    EXPECT_EQ(words(lines[2]), (std::vector<std::string>{"1s", "20.0", "1.0", "-"})) << out;
    EXPECT_EQ(words(lines[3]), (std::vector<std::string>{"0s", "30.0", "2.0", "6.0"})) << out;
    for (const auto& l : lines) EXPECT_EQ(l.size(), lines[0].size()) << out;
}

TEST(FormatHistory, NoHistoryGivesOnlyTheHeader) {
    LoadingReport r;
    r.machine = {SourceLoad{"procstat", std::nullopt, {}}};
    auto lines = lines_of(format_history(r));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(words(lines[0]), (std::vector<std::string>{"age", "procstat:all"}));
}

// ---- states and CSV ----

monitor::StateShares shares_with(double user, double system) {
    monitor::StateShares s;
    s[monitor::TimeState::User] = user;
    s[monitor::TimeState::System] = system;
    s[monitor::TimeState::Idle] = 100.0 - user - system;
    return s;
}

LoadingReport states_report() {
    LoadingReport r;
    // 2026-11-24T16:55:01.123Z
    r.timestamp = std::chrono::system_clock::time_point{std::chrono::milliseconds{1795539301123}};
    r.window_seconds = 60;
    SourceLoad machine{"procstat", stats(50.0, 40.0, 30.0, 60.0), {}};
    // The last second with iowait and irq apart, to show which column is which.
    auto last = shares_with(45.0, 5.0);
    last[monitor::TimeState::IoWait] = 4.0;
    last[monitor::TimeState::Irq] = 1.0;
    last[monitor::TimeState::Idle] = 45.0;
    machine.states = monitor::StateStats{last, shares_with(35.0, 5.0), 60};
    r.machine = {machine};
    SourceLoad cpu0{"procstat", stats(90.0, 80.0, 70.0, 95.0), {}};
    cpu0.states = monitor::StateStats{shares_with(88.0, 2.0), shares_with(78.5, 1.5), 60};
    SourceLoad cpu1{"procstat", stats(std::nullopt, 3.0, 1.0, 5.0), {}};
    cpu1.states = monitor::StateStats{std::nullopt, shares_with(2.0, 1.0), 30};
    r.cpus = {CpuLoading{0, true, {cpu0}}, CpuLoading{1, false, {cpu1}}};
    return r;
}

TEST(CsvTime, UtcWithMilliseconds) {
    EXPECT_EQ(
        csv_time(std::chrono::system_clock::time_point{std::chrono::milliseconds{1795539301123}}),
        "2026-11-24T16:55:01.123Z");
    EXPECT_EQ(csv_time(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
}

TEST(FormatStates, MpstatColumnsLastSecondThenTheAverage) {
    const std::string out = format_states(states_report());
    auto lines = lines_of(out);
    const auto header = line_starting(out, "CPU");
    EXPECT_EQ(words(header),
              (std::vector<std::string>{"CPU", "%usr", "%nice", "%sys", "%iowait", "%irq", "%soft",
                                        "%steal", "%guest", "%gnice", "%idle"}))
        << out;
    // The first "all" and "cpu0" rows are the last second, the second ones the average.
    std::vector<std::vector<std::string>> all, cpu0, cpu1;
    for (const auto& l : lines) {
        if (starts_with(l, "all ")) all.push_back(words(l));
        if (starts_with(l, "cpu0 ")) cpu0.push_back(words(l));
        if (starts_with(l, "cpu1* ")) cpu1.push_back(words(l));
    }
    ASSERT_EQ(all.size(), 2u) << out;
    ASSERT_EQ(cpu0.size(), 2u) << out;
    ASSERT_EQ(cpu1.size(), 2u) << out;
    // mpstat's order: iowait before irq.
    EXPECT_EQ(all[0], (std::vector<std::string>{"all", "45.0", "0.0", "5.0", "4.0", "1.0", "0.0",
                                                "0.0", "0.0", "0.0", "45.0"}));
    EXPECT_EQ(all[1][1], "35.0");
    EXPECT_EQ(cpu0[1][1], "78.5");
    EXPECT_EQ(cpu0[1][10], "20.0");
    // No last second for a CPU that was offline: dashes; its average stays.
    EXPECT_EQ(cpu1[0][1], "-");
    EXPECT_EQ(cpu1[1][1], "2.0");
    EXPECT_NE(out.find("offline now"), std::string::npos);
    // Rows line up under the header.
    for (const auto& l : lines) {
        if (starts_with(l, "all ") || starts_with(l, "cpu")) {
            EXPECT_EQ(l.size(), header.size());
        }
    }
}

TEST(FormatStates, NothingYetSaysWhen) {
    LoadingReport r;
    r.machine = {SourceLoad{"procstat", std::nullopt, {}}};
    EXPECT_NE(format_states(r).find("one second after the daemon starts"), std::string::npos);
}

TEST(FormatCsv, LoadingOneLinePerRowAndSource) {
    auto lines = lines_of(format_loading_csv(states_report(), true));
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0], "time,cpu,source,last,avg,min,max,samples");
    EXPECT_EQ(lines[1], "2026-11-24T16:55:01.123Z,all,procstat,50.000,40.000,30.000,60.000,60");
    EXPECT_EQ(lines[3], "2026-11-24T16:55:01.123Z,1,procstat,,3.000,1.000,5.000,60");
    EXPECT_EQ(lines_of(format_loading_csv(states_report(), false)).size(), 3u);
}

TEST(FormatCsv, StatesLastAndAverage) {
    auto lines = lines_of(format_states_csv(states_report(), true));
    ASSERT_EQ(lines.size(), 7u);
    EXPECT_EQ(lines[0],
              "time,cpu,source,interval,user,nice,system,iowait,irq,softirq,steal,guest,"
              "guest_nice,idle");
    EXPECT_EQ(lines[1],
              "2026-11-24T16:55:01.123Z,all,procstat,last,45.000,0.000,5.000,4.000,1.000,0.000,"
              "0.000,0.000,0.000,45.000");
    // An offline CPU's last second is empty fields.
    EXPECT_EQ(lines[5], "2026-11-24T16:55:01.123Z,1,procstat,last,,,,,,,,,,");
}

TEST(FormatCsv, HistoryEverySecondItsOwnTime) {
    LoadingReport r = states_report();
    r.machine[0].history = {10.0, std::nullopt, 30.0};
    r.cpus.clear();
    auto lines = lines_of(format_history_csv(r, true));
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0], "time,cpu,source,load");
    EXPECT_EQ(lines[1], "2026-11-24T16:54:59.123Z,all,procstat,10.000");
    EXPECT_EQ(lines[2], "2026-11-24T16:55:00.123Z,all,procstat,");
    EXPECT_EQ(lines[3], "2026-11-24T16:55:01.123Z,all,procstat,30.000");
    // A watch adds only the newest second.
    auto newest = lines_of(format_history_csv(r, false, true));
    ASSERT_EQ(newest.size(), 1u);
    EXPECT_EQ(newest[0], lines[3]);
}

// A profile shows its target, event and time, the modes, what was lost and throttled (also
// when nothing was), the top lines and the histogram's buckets.
TEST(FormatTasks, ARowPerTaskByCpuWithItsUnit) {
    LoadingReport r = sample_report();
    r.tasks = monitor::TaskLoading{.seconds = 1.0, .count = 812, .processes = 190, .top = {}};
    r.tasks->top.push_back({.pid = 4242,
                            .tid = 4243,
                            .comm = "worker",
                            .cpu = 0,
                            .load = 99.5,
                            .user = 90.5,
                            .system = 9.0,
                            .cgroup = "/system.slice/nginx.service",
                            .unit = "nginx.service"});
    r.tasks->top.push_back({.pid = 15, .tid = 15, .comm = "ksoftirqd/1", .cpu = 1, .load = 2});
    const std::string out = format_tasks(r);
    EXPECT_NE(out.find("812 threads in 190 processes"), std::string::npos) << out;
    const auto header = line_starting(out, " CPU");
    EXPECT_EQ(words(header), (std::vector<std::string>{"CPU", "PID", "TID", "COMM", "UNIT", "LOAD",
                                                       "USER", "SYS"}))
        << out;
    const auto row = line_starting(out, "   0 ");
    EXPECT_EQ(words(row), (std::vector<std::string>{"0", "4242", "4243", "worker", "nginx.service",
                                                    "99.5", "90.5", "9.0"}))
        << out;
    EXPECT_EQ(row.size(), header.size()) << "aligned:\n" << out;
    EXPECT_EQ(words(line_starting(out, "   1 "))[4], "-") << "no unit: a dash\n" << out;
}

// A thread names itself: nothing of its name reaches the terminal as a control.
TEST(FormatTasks, ANameCannotDriveTheTerminal) {
    LoadingReport r = sample_report();
    r.tasks = monitor::TaskLoading{.seconds = 1.0, .count = 1, .processes = 1, .top = {}};
    r.tasks->top.push_back(
        {.pid = 7, .tid = 7, .comm = "a\x1b[2Jb\x07\xc2\x9b", .cpu = 0, .load = 50});
    const std::string out = format_tasks(r);
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
    EXPECT_NE(out.find("a?[2Jb??"), std::string::npos) << out;
}

TEST(FormatTasks, NoneYetNoneAtAllOrNoneBusy) {
    LoadingReport r = sample_report();
    r.tasks = monitor::TaskLoading{};
    EXPECT_NE(format_tasks(r).find("No tasks yet"), std::string::npos);
    r.tasks->unavailable = "/proc: No such file or directory";
    EXPECT_EQ(format_tasks(r), "No tasks: /proc: No such file or directory\n");
    r.tasks = monitor::TaskLoading{.seconds = 1.0, .count = 3, .processes = 3, .top = {}};
    EXPECT_NE(format_tasks(r).find("No task had CPU time"), std::string::npos);
    r.tasks.reset();
    EXPECT_EQ(format_tasks(r), "");
}

TEST(FormatProfile, ShowsModesLossesTopLinesAndBuckets) {
    monitor::protocol::ProfileMessage m;
    m.event = "perf::CPU-CLOCK";
    m.target = "process 42";
    m.threads = 3;
    m.elapsed = 2.0;
    m.final = true;
    m.ended = "process 42 exited";
    m.report.samples = 800;
    m.report.modes = {.idle = 0, .user = 600, .kernel = 200, .other = 0};
    m.report.functions = {{"burn (/usr/bin/app)", 600, 75.0},
                          {"schedule ([kernel.kallsyms])", 200, 25.0}};
    m.report.objects = {{"/usr/bin/app", 600, 75.0}, {"[kernel.kallsyms]", 200, 25.0}};
    m.histogram = monitor::protocol::HistogramMessage{
        .range = {0x1000, 0x1100, 16}, .samples = 5, .buckets = {{0x1010, 5}}};
    const std::string out = format_profile(m);
    EXPECT_NE(out.find("Profile of process 42 (3 threads at the start, and those it started), "
                       "perf::CPU-CLOCK, 2.000 s (process 42 exited)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("800 samples: user 75.0%, kernel 25.0%, idle 0.0%"), std::string::npos)
        << out;
    EXPECT_NE(out.find("lost 0 samples (the ring was full), throttled 0 times"), std::string::npos)
        << "said even when nothing was lost: " << out;
    EXPECT_NE(out.find(" 75.00%         600  burn (/usr/bin/app)"), std::string::npos) << out;
    EXPECT_NE(out.find("Addresses 0x1000-0x1100 in 16-byte buckets: 5 samples (0.6% of all)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("0x0000000000001010           5"), std::string::npos) << out;
    EXPECT_EQ(out.find("kernel functions unnamed"), std::string::npos) << out;

    // The kernel's symbols unreadable: said under the modes, where the kernel's share is.
    m.kernel_symbols = "/proc/kallsyms shows no addresses to this reader";
    EXPECT_NE(format_profile(m).find(
                  "  800 samples: user 75.0%, kernel 25.0%, idle 0.0%\n"
                  "  kernel functions unnamed: /proc/kallsyms shows no addresses to this reader\n"),
              std::string::npos)
        << format_profile(m);
    m.kernel_symbols.clear();

    m.interval = 3;
    m.final = false;
    m.report.lost = 1;
    m.report.throttled = 2;
    const std::string interval = format_profile(m);
    EXPECT_NE(interval.find("Interval 3 (2.000 s), perf::CPU-CLOCK of process 42"),
              std::string::npos)
        << interval;
    EXPECT_NE(interval.find("lost 1 sample (the ring was full), throttled 2 times"),
              std::string::npos)
        << interval;
    EXPECT_EQ(interval.find("not named"), std::string::npos) << interval;
    m.report.unnamed = 12;
    EXPECT_NE(format_profile(m).find("throttled 2 times, 12 not named (the daemon's naming "
                                     "fell behind)"),
              std::string::npos)
        << format_profile(m);
}

// With call chains, the stacks with the most samples (as many as functions shown); by CPU,
// each CPU's modes, losses and functions after the whole's.
TEST(FormatProfile, ShowsTheTopStacksAndEachCpu) {
    monitor::protocol::ProfileMessage m;
    m.event = "perf::CPU-CLOCK";
    m.target = "each CPU";
    m.elapsed = 1.0;
    m.final = true;
    m.report.samples = 100;
    m.report.modes = {.idle = 60, .user = 40};
    m.report.functions = {{"work (/bin/app)", 40, 40.0}};
    m.report.stacks = {{"app;main;work", 30, 30.0}, {"app;main;helper;work", 10, 10.0}};
    m.report.cpus = {
        {.cpu = 0,
         .report = {.samples = 60, .modes = {.idle = 60}, .functions = {{"[idle]", 60, 100.0}}}},
        {.cpu = 1,
         .report = {.samples = 40,
                    .lost = 3,
                    .modes = {.user = 40},
                    .functions = {{"work (/bin/app)", 40, 100.0}}}}};
    const std::string out = format_profile(m);
    EXPECT_NE(out.find("stack (outermost first)\n   30.00%          30  app;main;work\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("app;main;helper;work"), std::string::npos)
        << "as many stacks as functions: " << out;
    EXPECT_NE(out.find("cpu1: 40 samples: user 100.0%, kernel 0.0%, idle 0.0%; lost 3 samples"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("    100.00%          40  work (/bin/app)"), std::string::npos) << out;
    EXPECT_LT(out.find("cpu0:"), out.find("cpu1:"));
}

// monctl perf profile --pprof asks the daemon for every line and cuts the table itself: the
// same table as a profile asked for its top lines, ties, objects and each CPU's lines included.
TEST(KeepTop, ShowsWhatTheDaemonsTopWouldHave) {
    monitor::perf::Profile profile(/*by_cpu=*/true);
    // 30 functions in 3 objects on 2 CPUs, function i with 1 + i % 7 samples: ties at each count.
    for (int i = 0; i < 30; ++i) {
        const monitor::perf::Sample s{.ip = 0x1000u + static_cast<unsigned>(i),
                                      .pid = 42,
                                      .tid = 42,
                                      .cpu = i % 2,
                                      .mode = monitor::perf::SampleMode::User};
        const monitor::perf::SampleLabel label{
            "f" + std::to_string(i) + " (/bin/app" + std::to_string(i % 3) + ")",
            "/bin/app" + std::to_string(i % 3), "f" + std::to_string(i)};
        for (int n = 0; n <= i % 7; ++n) profile.add(s, label, "app;main;" + label.frame);
    }
    const auto all = monitor::protocol::make_profile_message(profile, 0, std::nullopt);
    ASSERT_EQ(all.report.functions.size(), 30u);
    for (const std::size_t top : {1u, 2u, 20u, 0u}) {
        const auto asked = monitor::protocol::make_profile_message(profile, top, std::nullopt);
        EXPECT_EQ(format_profile(all, top), format_profile(asked)) << "top " << top;
        auto cut = monitor::protocol::to_json(all);
        keep_top(cut, top);
        EXPECT_EQ(cut, monitor::protocol::to_json(asked)) << "top " << top;
    }
    auto cut = monitor::protocol::to_json(all);
    keep_top(cut, 2);
    EXPECT_EQ(cut["functions"].size(), 2u);
    EXPECT_EQ(cut["objects"].size(), 2u);
    ASSERT_EQ(cut["cpus"].size(), 2u);
    EXPECT_EQ(cut["cpus"][1]["functions"].size(), 2u);
    EXPECT_EQ(cut["stacks"].size(), 30u) << "every stack, as the daemon sends them";
}

// A counter report's offline CPUs are marked as in the loading's table: a star on their rows
// and a line saying why, which names them when there are no rows (target "all").
TEST(FormatCounterReport, OfflineCpusAreMarked) {
    monitor::protocol::CounterReport r;
    r.elapsed = 2;
    monitor::protocol::ReportedEvent e;
    e.name = "perf::TASK-CLOCK";
    e.value = {2000, 10, 10, 2000, 1};
    e.cpus = {{0, {1500, 5, 5, 1500, 1}}, {1, {500, 5, 5, 500, 1}}};
    r.events.push_back(e);
    const std::string online = format_counter_report(r, "each CPU");
    EXPECT_EQ(online.find('*'), std::string::npos) << online;
    EXPECT_EQ(online.find("offline"), std::string::npos) << online;

    r.offline_cpus = {1};
    const std::string out = format_counter_report(r, "each CPU");
    EXPECT_NE(out.find("\nCPU1*  "), std::string::npos) << out;
    EXPECT_NE(out.find("\nCPU0   "), std::string::npos) << out;
    EXPECT_TRUE(starts_with(lines_of(out).back(), "* cpu1 offline when read")) << out;

    r.events[0].cpus.clear();
    const std::string all = format_counter_report(r, "all CPUs");
    EXPECT_TRUE(starts_with(lines_of(all).back(), "cpu1 offline when read")) << all;
}

// perf stat's report: the task clock in msec with CPUs utilized, the other events with their
// rate per second of task clock or the metric they are the numerator of, an estimate first
// with the share counted, an event never counted, the elapsed time.
monitor::protocol::CounterReport stat_report() {
    monitor::protocol::CounterReport r;
    r.elapsed = 0.5;
    auto event = [&](std::string name, std::string unit, monitor::protocol::Count c) {
        monitor::protocol::ReportedEvent e;
        e.name = std::move(name);
        e.unit = std::move(unit);
        e.value = c;
        r.events.push_back(e);
    };
    event("perf::TASK-CLOCK", "ns", {250'000'000, 500, 500, 250'000'000, 1});
    event("perf::PAGE-FAULTS", "", {1234, 500, 500, 1234, 1});
    event("instructions", "", {1'000'000, 500, 250, 2'000'000, 0.5});
    event("cycles", "", {0, 500, 0, 0, 0});
    r.metrics.push_back({"cpus_utilized", "CPUs busy on average", 0.5, true, "perf::TASK-CLOCK"});
    r.metrics.push_back({"ipc", "instructions per cycle", 1.25, false, "instructions"});
    r.metrics.push_back({"l2_misses_pti", "L2 misses per thousand instructions", 3.5, true, ""});
    r.slots = 2;
    r.rotations = 5;
    return r;
}

TEST(FormatCounterReport, IsLaidOutAsPerfStat) {
    const auto out = format_counter_report(stat_report(), "'sleep 1'");
    const auto lines = lines_of(out);
    ASSERT_GE(lines.size(), 8u) << out;
    EXPECT_EQ(lines[1], " Performance counter stats for 'sleep 1':") << out;
    // perf's columns: the count right-aligned in 18, the unit in 4, the event in 32, '#'.
    EXPECT_EQ(line_starting(out, "            250.00"),
              "            250.00 msec perf::TASK-CLOCK                 #    0.500 CPUs utilized")
        << out;
    const std::string faults = lines[4];
    EXPECT_NE(faults.find("perf::PAGE-FAULTS"), std::string::npos) << out;
    EXPECT_NE(faults.find("#    4.936 K/sec"), std::string::npos) << faults;  // 1234 / 0.25 s
    // The estimate, not the raw count, and the share of the time it was counted.
    const std::string insn = lines[5];
    EXPECT_NE(insn.find("2"), std::string::npos);
    EXPECT_EQ(insn.find("1,000,000"), std::string::npos) << insn;
    EXPECT_NE(insn.find("#    1.250 instructions per cycle"), std::string::npos) << insn;
    EXPECT_TRUE(insn.ends_with("  (50.00%)")) << insn;
    EXPECT_TRUE(lines[6].starts_with("     <not counted>      cycles")) << out;
    EXPECT_EQ(lines[6].find('#'), std::string::npos) << out;
    // The metric no event carries, on a line of its own.
    EXPECT_NE(out.find("#    3.500 L2 misses per thousand instructions"), std::string::npos) << out;
    EXPECT_NE(out.find("\n       0.500000000 seconds time elapsed\n"), std::string::npos) << out;
    EXPECT_NE(out.find("2 counter sets took turns on the counters (5 rotations)"),
              std::string::npos)
        << out;
}

// A metric group may derive several metrics from one event: its line carries the first, and
// the others get lines of their own rather than vanish.
TEST(FormatCounterReport, EveryMetricOfAnEventIsShown) {
    auto r = stat_report();
    r.metrics.push_back({"branch_mispredicts_pti",
                         "mispredicted branches per thousand instructions", 7, true,
                         "instructions"});
    r.metrics.push_back({"cpi", "cycles per instruction", 0.8, true, "cycles"});
    const auto out = format_counter_report(r, "'sleep 1'");
    EXPECT_NE(out.find("#    1.250 instructions per cycle"), std::string::npos) << out;
    EXPECT_NE(out.find("#    7.000 mispredicted branches per thousand instructions"),
              std::string::npos)
        << out;
    // cycles was never counted: its line has no metric, and the metric stands on its own.
    EXPECT_NE(out.find("#    0.800 cycles per instruction"), std::string::npos) << out;
}

// perf stat -I: a header, then every line with the time before it, and no title.
TEST(FormatCounterReport, IntervalLinesStartWithTheTime) {
    auto r = stat_report();
    r.period = 3;
    const auto out = format_counter_report(r, "'sleep 1'", {.time = 1.5, .time_header = true});
    const auto lines = lines_of(out);
    ASSERT_GE(lines.size(), 2u) << out;
    EXPECT_EQ(lines[0], "#           time             counts unit events") << out;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        EXPECT_TRUE(lines[i].starts_with("     1.500000000 ")) << lines[i];
    }
    EXPECT_EQ(out.find("Performance counter stats"), std::string::npos) << out;
    EXPECT_EQ(out.find("time elapsed"), std::string::npos) << out;
    EXPECT_EQ(format_counter_report(r, "x", {.time = 2.5}).find("#           time"),
              std::string::npos);
}

// perf stat -x: count, unit, event, [spread,] running time, share, metric, metric's unit.
TEST(FormatCounterSeparated, HasPerfStatsFields) {
    const auto out = format_counter_separated(stat_report(), ";");
    const auto lines = lines_of(out);
    ASSERT_EQ(lines.size(), 4u) << out;
    EXPECT_EQ(lines[0], "250.00;msec;perf::TASK-CLOCK;500;100.00;0.500;CPUs utilized");
    EXPECT_EQ(lines[1], "1234;;perf::PAGE-FAULTS;500;100.00;4.936;K/sec");
    EXPECT_EQ(lines[2], "2000000;;instructions;250;50.00;1.250;instructions per cycle");
    EXPECT_EQ(lines[3], "<not counted>;;cycles;0;0.00;;");

    RunSpread spread{.runs = 3, .events = {1.5, 2, 3, 0}};
    const auto runs =
        lines_of(format_counter_separated(stat_report(), ",", {.time = 1, .spread = &spread}));
    EXPECT_EQ(runs[0],
              "     1.000000000,250.00,msec,perf::TASK-CLOCK,1.50%,500,100.00,0.500,CPUs utilized");
}

// perf stat -r: the mean, and the standard deviation of the mean relative to it.
TEST(AverageRuns, GivesTheMeanAndPerfsSpread) {
    std::vector<monitor::protocol::CounterReport> runs(3, stat_report());
    const double faults[] = {100, 110, 120};
    const double elapsed[] = {1.0, 1.2, 1.4};
    for (std::size_t i = 0; i < runs.size(); ++i) {
        runs[i].events[1].value.scaled = faults[i];
        runs[i].events[1].value.count = static_cast<std::uint64_t>(faults[i]);
        runs[i].elapsed = elapsed[i];
        runs[i].metrics[1].value = 1.0 + static_cast<double>(i);
    }
    const auto a = average_runs(runs);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->spread.runs, 3);
    EXPECT_DOUBLE_EQ(a->mean.events[1].value.scaled, 110);
    EXPECT_EQ(a->mean.events[1].value.count, 110u);
    // stddev 10, of the mean 10 / sqrt(3): 5.25 % of 110.
    EXPECT_NEAR(a->spread.events[1], 100 * (10 / std::sqrt(3.0)) / 110, 1e-9);
    EXPECT_DOUBLE_EQ(a->spread.events[0], 0);
    EXPECT_NEAR(a->mean.elapsed, 1.2, 1e-12);
    EXPECT_NEAR(a->spread.elapsed_stddev, 0.2 / std::sqrt(3.0), 1e-12);
    EXPECT_DOUBLE_EQ(a->mean.metrics[1].value, 2.0);

    const auto out = format_counter_report(a->mean, "'true'", {.spread = &a->spread});
    EXPECT_NE(out.find(" Performance counter stats for 'true' (3 runs):"), std::string::npos)
        << out;
    EXPECT_NE(out.find("( +-  5.25% )"), std::string::npos) << out;
    // perf's precision: two digits past the deviation's first (0.115: 1 + 2).
    EXPECT_NE(out.find("          1.200 +- 0.115 seconds time elapsed  ( +-  9.62% )"),
              std::string::npos)
        << out;
    EXPECT_FALSE(average_runs({}));
}

}  // namespace
}  // namespace monctl
