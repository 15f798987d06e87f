// monctl's human-readable views of the daemon's replies.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

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
    EXPECT_NE(out.find("\n      cpu1*   "), std::string::npos) << out;
    EXPECT_NE(out.find("\n      cpu0    "), std::string::npos) << out;
    EXPECT_TRUE(starts_with(lines_of(out).back(), "* cpu1 offline when read")) << out;

    r.events[0].cpus.clear();
    const std::string all = format_counter_report(r, "all CPUs");
    EXPECT_TRUE(starts_with(lines_of(all).back(), "cpu1 offline when read")) << all;
}

}  // namespace
}  // namespace monctl
