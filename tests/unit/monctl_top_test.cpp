// monctl top's model and frame, from hand-made reports: the rows, scrolling, sorting, the
// source switch, the bars' segments, the sparklines, the counter panel, a daemon gone, a moment
// of the past.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "perf_views.hpp"
#include "top_frame.hpp"
#include "top_model.hpp"

namespace monctl::top {
namespace {

using monitor::CpuLoading;
using monitor::LoadingReport;
using monitor::LoadStats;
using monitor::SourceLoad;
using monitor::StateShares;
using monitor::StateStats;
using monitor::TimeState;

LoadStats stats(std::optional<double> last, double avg = 10, double min = 1, double max = 90) {
    LoadStats s;
    s.avg_prev_sec = last;
    s.avg_prev_min = avg;
    s.min_prev_min = min;
    s.max_prev_min = max;
    s.samples = 60;
    return s;
}

StateShares shares(double user, double system, double idle) {
    StateShares s;
    s[TimeState::User] = user;
    s[TimeState::System] = system;
    s[TimeState::Idle] = idle;
    return s;
}

// procstat with states (the last second: `last`% user, the rest idle) and a history, and
// probe with `probe_last`.
SourceLoad procstat(std::optional<double> last) {
    SourceLoad l{"procstat", stats(last), std::vector<std::optional<double>>(60, 5.0), {}};
    if (last) l.states = StateStats{shares(*last, 0, 100 - *last), shares(1, 1, 98), 60};
    return l;
}
SourceLoad probe(std::optional<double> last) {
    return SourceLoad{"probe", stats(last), std::vector<std::optional<double>>(60, 5.0), {}};
}

// A snapshot of `cpus` CPUs, cpu N at `load(N)` in both sources (probe 1 point higher).
template <typename Load>
Snapshot snapshot(int cpus, Load load) {
    Snapshot s;
    s.status.version = "0.1.0";
    s.status.uptime = 3723;
    s.status.state = "running";
    for (int c = 0; c < cpus; ++c) s.status.cpus.push_back(c);
    s.loading.timestamp = std::chrono::system_clock::now();
    s.loading.window_seconds = 60;
    s.loading.machine = {probe(26), procstat(25)};
    for (int c = 0; c < cpus; ++c) {
        const std::optional<double> l = load(c);
        s.loading.cpus.push_back(
            CpuLoading{c, true, {probe(l ? std::optional{*l + 1} : l), procstat(l)}});
    }
    return s;
}
Snapshot snapshot(int cpus) {
    return snapshot(cpus, [](int c) { return std::optional<double>{c % 100}; });
}

TopModel model_of(Snapshot s) {
    TopModel m;
    m.update(std::move(s));
    return m;
}

FrameOptions size(int width, int height) {
    FrameOptions o;
    o.width = width;
    o.height = height;
    return o;
}

std::vector<std::string> texts(const Frame& f) {
    std::vector<std::string> out;
    for (const auto& l : f.lines) out.push_back(line_text(l));
    return out;
}

// The index of the line that starts with `prefix` followed by a blank, or -1.
int line_of(const Frame& f, const std::string& prefix) {
    const auto t = texts(f);
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (t[i].rfind(prefix + " ", 0) == 0) return static_cast<int>(i);
    }
    return -1;
}

// The CPU labels of the rows shown, in order.
std::vector<std::string> cpu_labels(const Frame& f) {
    std::vector<std::string> out;
    for (const auto& t : texts(f)) {
        if (t.rfind("cpu", 0) == 0 && t.rfind("cpu ", 0) != 0)
            out.push_back(t.substr(0, t.find(' ')));
    }
    return out;
}

int count_style(const Line& l, Style s) {
    return static_cast<int>(std::ranges::count_if(l, [&](const Cell& c) { return c.style == s; }));
}

TEST(TopFrame, EveryCpuHasARowWhenTheyFit) {
    auto m = model_of(snapshot(8));
    const auto f = build_frame(m, size(100, 30));
    EXPECT_EQ(cpu_labels(f), (std::vector<std::string>{"cpu0", "cpu1", "cpu2", "cpu3", "cpu4",
                                                       "cpu5", "cpu6", "cpu7"}));
    EXPECT_EQ(f.first_row, 0);
    EXPECT_EQ(f.rows, 8);
    EXPECT_EQ(f.page, 8);
    const auto t = texts(f);
    EXPECT_EQ(t[0].rfind("monitord 0.1.0, up 01:02:03, 8 CPUs", 0), 0u) << t[0];
    EXPECT_NE(t[0].find("source procstat, by cpu"), std::string::npos) << t[0];
    EXPECT_EQ(t[1], "watchdog: none");
    EXPECT_EQ(line_of(f, "CPU"), 2);
    EXPECT_EQ(line_of(f, "all"), 3);
    EXPECT_NE(t.back().find("cpu 1-8 of 8"), std::string::npos) << t.back();
    EXPECT_NE(t.back().find("q quit"), std::string::npos) << t.back();
    EXPECT_LE(f.lines.size(), 30u);
    // cpu5: the last second, the window's average, minimum and maximum.
    EXPECT_NE(t[static_cast<std::size_t>(line_of(f, "cpu5"))].find("    5.0   10.0    1.0   90.0"),
              std::string::npos);
}

TEST(TopFrame, ManyCpusScrollIn80x24AndTheTopStays) {
    auto m = model_of(snapshot(256));
    const auto check = [](const Frame& f) {
        EXPECT_LE(f.lines.size(), 24u);
        for (const auto& l : f.lines) EXPECT_LE(l.size(), 80u) << line_text(l);
        const auto t = texts(f);
        EXPECT_EQ(t[0].rfind("monitord 0.1.0", 0), 0u) << t[0];
        EXPECT_EQ(line_of(f, "CPU"), 2);
        EXPECT_EQ(line_of(f, "all"), 3);
        // Readable: every row keeps its four figures.
        for (const auto& label : cpu_labels(f)) {
            EXPECT_NE(t[static_cast<std::size_t>(line_of(f, label))].find("   10.0    1.0   90.0"),
                      std::string::npos)
                << label;
        }
    };
    auto f = build_frame(m, size(80, 24));
    check(f);
    ASSERT_EQ(f.page, 24 - 5);  // title, watchdog, heading, machine, keys
    EXPECT_EQ(cpu_labels(f).front(), "cpu0");
    EXPECT_EQ(cpu_labels(f).back(), "cpu18");
    EXPECT_GT(f.columns.bar, 0);
    EXPECT_GT(f.columns.spark, 0);

    m.apply(Action::PageDown, f.page);
    f = build_frame(m, size(80, 24));
    check(f);
    EXPECT_EQ(f.first_row, 19);
    EXPECT_EQ(cpu_labels(f).front(), "cpu19");
    EXPECT_NE(line_text(f.lines.back()).find("cpu 20-38 of 256"), std::string::npos);

    m.apply(Action::Down, f.page);
    f = build_frame(m, size(80, 24));
    EXPECT_EQ(cpu_labels(f).front(), "cpu20");
    m.apply(Action::Up, f.page);
    m.apply(Action::PageUp, f.page);
    f = build_frame(m, size(80, 24));
    EXPECT_EQ(f.first_row, 0);

    m.apply(Action::End, f.page);
    f = build_frame(m, size(80, 24));
    m.clamp_scroll(f.rows, f.page);
    check(f);
    EXPECT_EQ(f.first_row, 256 - 19);
    EXPECT_EQ(cpu_labels(f).back(), "cpu255");
    EXPECT_EQ(m.scroll(), 256 - 19);
    // Past the end stays at the end.
    m.apply(Action::PageDown, f.page);
    f = build_frame(m, size(80, 24));
    m.clamp_scroll(f.rows, f.page);
    EXPECT_EQ(f.first_row, 256 - 19);
    EXPECT_EQ(m.scroll(), 256 - 19);

    m.apply(Action::Home, f.page);
    EXPECT_EQ(build_frame(m, size(80, 24)).first_row, 0);
}

// h (or ? or F1) shows the help instead of the CPUs, as htop does; any other key takes it
// away and does nothing else; the scroll position stays; q still quits.
TEST(TopFrame, TheHelpReplacesTheCpusUntilAKey) {
    auto m = model_of(snapshot(256));
    auto f = build_frame(m, size(80, 24));
    EXPECT_NE(line_text(f.lines.back()).find("h help"), std::string::npos);
    m.apply(Action::PageDown, f.page);
    f = build_frame(m, size(80, 24));
    ASSERT_EQ(f.first_row, 19);

    ASSERT_TRUE(m.apply(Action::Help, f.page));
    EXPECT_TRUE(m.help());
    f = build_frame(m, size(80, 24));
    m.clamp_scroll(f.rows, f.page);
    const auto t = texts(f);
    EXPECT_EQ(t[0].rfind("monitord 0.1.0", 0), 0u) << t[0];
    EXPECT_EQ(line_of(f, "all"), -1) << "no CPU rows under the help";
    EXPECT_TRUE(cpu_labels(f).empty());
    EXPECT_LE(f.lines.size(), 24u);
    for (const auto& l : f.lines) EXPECT_LE(l.size(), 80u) << line_text(l);
    std::string all;
    for (const auto& l : t) all += l + "\n";
    for (const char* needle : {"F10", "F1", "quit", "procstat", "iowait", "NO_COLOR", "offline"}) {
        EXPECT_NE(all.find(needle), std::string::npos) << needle << " in\n" << all;
    }
    EXPECT_NE(t.back().find("any key returns"), std::string::npos) << t.back();

    // A key that would sort only takes the help away.
    ASSERT_TRUE(m.apply(Action::ToggleSort, f.page));
    EXPECT_FALSE(m.help());
    EXPECT_EQ(m.sort(), SortOrder::Cpu);
    f = build_frame(m, size(80, 24));
    EXPECT_EQ(f.first_row, 19) << "the place in the list is kept";
    // The help key again shows it and takes it away.
    m.apply(Action::Help, f.page);
    EXPECT_TRUE(m.help());
    m.apply(Action::Help, f.page);
    EXPECT_FALSE(m.help());
    // Quit quits, help or not.
    m.apply(Action::Help, f.page);
    EXPECT_FALSE(m.apply(Action::Quit, f.page));
    // A tiny terminal: what fits, and the last line says how to return.
    const auto tiny = build_frame(m, size(30, 4));
    ASSERT_EQ(tiny.lines.size(), 4u);
    EXPECT_NE(line_text(tiny.lines.back()).find("any key"), std::string::npos);
}

TEST(TopFrame, ATinyTerminalGetsWhatFits) {
    auto m = model_of(snapshot(4));
    for (auto [w, h] : {std::pair{20, 3}, {1, 1}, {0, 0}, {10, 6}, {30, 5}}) {
        const auto f = build_frame(m, size(w, h));
        if (h > 0) {
            EXPECT_LE(f.lines.size(), static_cast<std::size_t>(h)) << w << "x" << h;
        }
        for (const auto& l : f.lines) EXPECT_LE(l.size(), static_cast<std::size_t>(w));
        EXPECT_GE(f.page, 0);
    }
}

TEST(TopFrame, OnceShowsEveryRowWithoutTheKeys) {
    auto m = model_of(snapshot(256));
    const auto f = build_frame(m, size(80, 0));
    EXPECT_EQ(f.page, 256);
    EXPECT_EQ(cpu_labels(f).size(), 256u);
    EXPECT_EQ(cpu_labels(f).back(), "cpu255");
    const auto text = frame_text(f);
    EXPECT_EQ(text.find("q quit"), std::string::npos) << text;
    // Without colour, a legend of the bars' letters.
    EXPECT_NE(text.find("bar: u user, n nice, s system"), std::string::npos) << text;
    for (const auto& l : f.lines) EXPECT_LE(l.size(), 80u) << line_text(l);
}

// The busiest units above the CPUs, as many as leave the CPUs five rows; u takes them away
// and brings them back; a machine without accounting has no pane.
TEST(TopFrame, TheBusiestUnitsAboveTheCpus) {
    auto s = snapshot(8);
    monitor::UnitLoading units;
    units.accounting = "cgroup2 cpu.stat";
    units.count = 40;
    for (int i = 0; i < 10; ++i) {
        const std::string name = "unit" + std::to_string(i) + ".service";
        units.top.push_back({name, "/system.slice/" + name, 100.0 - i, 90.0 - i, 10, 50, 120});
    }
    units.top[0].unit = "a-very-long-name-that-does-not-fit-in-what-is-left.service";
    s.loading.units = units;
    auto m = model_of(s);

    auto f = build_frame(m, size(60, 24));
    const auto t = texts(f);
    const int heading = line_of(f, "UNIT");
    ASSERT_GE(heading, 0) << frame_text(f);
    EXPECT_EQ(t[static_cast<std::size_t>(heading)],
              "UNIT (10 of 40)             last   user    sys    avg    max");
    // The end of a long name, marked as cut.
    EXPECT_EQ(t[static_cast<std::size_t>(heading) + 1],
              "~in-what-is-left.service   100.0   90.0   10.0   50.0  120.0");
    EXPECT_EQ(t[static_cast<std::size_t>(heading) + 2],
              "unit1.service               99.0   89.0   10.0   50.0  120.0");
    EXPECT_LT(heading, line_of(f, "CPU")) << "above the CPUs";
    EXPECT_EQ(cpu_labels(f).size(), 8u);

    // 16 rows: five for the CPUs, what is left (the heading and 5) for the units.
    f = build_frame(m, size(60, 16));
    EXPECT_EQ(cpu_labels(f).size(), 5u) << frame_text(f);
    EXPECT_NE(frame_text(f).find("UNIT (5 of 40)"), std::string::npos) << frame_text(f);
    // No room: no pane, not a heading alone.
    f = build_frame(m, size(60, 11));
    EXPECT_EQ(line_of(f, "UNIT"), -1) << frame_text(f);

    ASSERT_TRUE(m.apply(Action::ToggleUnits, 1));
    EXPECT_EQ(line_of(build_frame(m, size(60, 24)), "UNIT"), -1);
    ASSERT_TRUE(m.apply(Action::ToggleUnits, 1));
    EXPECT_GE(line_of(build_frame(m, size(60, 24)), "UNIT"), 0);
    // --once: every unit the daemon sent.
    EXPECT_NE(frame_text(build_frame(m, size(60, 0))).find("unit9.service"), std::string::npos);
    // Where the kernel keeps a pressure per unit, a sixth figure; "-" for a unit without.
    s.loading.units->top[1].pressure = 37.5;
    m.update(s);
    f = build_frame(m, size(60, 24));
    const int psi = line_of(f, "UNIT");
    ASSERT_GE(psi, 0) << frame_text(f);
    EXPECT_EQ(texts(f)[static_cast<std::size_t>(psi)],
              "UNIT (10 of 40)      last   user    sys    avg    max  psi10");
    EXPECT_EQ(texts(f)[static_cast<std::size_t>(psi) + 2],
              "unit1.service        99.0   89.0   10.0   50.0  120.0   37.5");
    EXPECT_EQ(texts(f)[static_cast<std::size_t>(psi) + 3],
              "unit2.service        98.0   88.0   10.0   50.0  120.0      -");
    s.loading.units->top[1].pressure.reset();
    m.update(s);

    s.loading.units = monitor::UnitLoading{.unavailable = "/sys/fs/cgroup: no cgroup2 tree"};
    m.update(s);
    f = build_frame(m, size(60, 24));
    EXPECT_EQ(frame_text(f).find("units:"), std::string::npos) << frame_text(f);
    EXPECT_EQ(line_of(f, "UNIT"), -1);
    s.loading.units = monitor::UnitLoading{.accounting = "cgroup v1 cpuacct", .count = 3};
    m.update(s);
    EXPECT_NE(frame_text(build_frame(m, size(60, 24)))
                  .find("units: none of the 3 used CPU time in the window"),
              std::string::npos);
    // A machine whose tree has no unit (no systemd): said so.
    s.loading.units = monitor::UnitLoading{.accounting = "cgroup2 cpu.stat", .count = 0};
    m.update(s);
    EXPECT_NE(frame_text(build_frame(m, size(60, 24))).find("units: none in the cgroup tree"),
              std::string::npos);
}

// The task pane on 't', in the units' place: each CPU's busiest tasks in the order chosen with
// '<' and '>' (its column titled in capitals), or why there are none yet.
TEST(TopFrame, TheTaskPaneSortedAsHtops) {
    auto s = snapshot(4);
    monitor::UnitLoading units{.accounting = "cgroup2 cpu.stat", .count = 1, .top = {}};
    units.top.push_back({"a.service", "/system.slice/a.service", 50, 40, 10, 50, 60});
    s.loading.units = units;
    auto m = model_of(s);
    EXPECT_FALSE(m.tasks()) << "off until asked: the daemon reads every process for them";
    ASSERT_TRUE(m.apply(Action::ToggleTasks, 1));
    auto f = build_frame(m, size(80, 24));
    EXPECT_EQ(line_of(f, "UNIT"), -1) << "in the units' place";
    EXPECT_NE(frame_text(f).find("tasks: asked for"), std::string::npos) << frame_text(f);
    s.loading.tasks = monitor::TaskLoading{.seconds = 0, .count = 0, .processes = 0, .top = {}};
    m.update(s);
    EXPECT_NE(frame_text(build_frame(m, size(80, 24))).find("from its next second on"),
              std::string::npos);
    s.loading.tasks = monitor::TaskLoading{.unavailable = "/proc: not a procfs"};
    m.update(s);
    EXPECT_NE(frame_text(build_frame(m, size(80, 24))).find("tasks: /proc: not a procfs"),
              std::string::npos);

    s.loading.tasks = monitor::TaskLoading{.seconds = 1, .count = 812, .processes = 190, .top = {}};
    auto& top = s.loading.tasks->top;
    top.push_back({.pid = 300,
                   .tid = 301,
                   .comm = "worker",
                   .cpu = 1,
                   .load = 20,
                   .user = 15,
                   .system = 5,
                   .cgroup = "/system.slice/b.service",
                   .unit = "b.service"});
    top.push_back({.pid = 100,
                   .tid = 100,
                   .comm = "spin\x1b[2J",
                   .cpu = 2,
                   .load = 99.5,
                   .user = 99.5,
                   .cgroup = "/system.slice/a.service",
                   .unit = "a.service"});
    top.push_back({.pid = 7, .tid = 7, .comm = "kworker/0:1", .cpu = 0, .load = 3, .system = 3});
    m.update(s);
    f = build_frame(m, size(80, 24));
    auto t = texts(f);
    const int heading = line_of(f, " cpu");
    ASSERT_GE(heading, 0) << frame_text(f);
    const auto h = static_cast<std::size_t>(heading);
    EXPECT_EQ(t[h],
              " cpu     pid     tid comm             unit (3 of 812)         LOAD   user    sys");
    EXPECT_EQ(t[h + 1],
              "   2     100     100 spin?[2J         a.service               99.5   99.5    0.0")
        << "busiest first; the name's escape shown as '?'";
    EXPECT_EQ(t[h + 2].substr(0, 8), "   1    ");
    EXPECT_EQ(t[h + 3],
              "   0       7       7 kworker/0:1      -                        3.0    0.0    3.0");
    EXPECT_LT(heading, line_of(f, "CPU")) << "above the CPUs";

    auto order = [&] {
        std::vector<int> pids;
        for (const auto* r : m.task_rows()) pids.push_back(r->pid);
        return pids;
    };
    EXPECT_EQ(order(), (std::vector<int>{100, 300, 7}));
    m.apply(Action::NextTaskSort, 1);
    EXPECT_EQ(m.task_sort(), TaskSort::Cpu);
    EXPECT_EQ(order(), (std::vector<int>{7, 300, 100}));
    EXPECT_EQ(texts(build_frame(m, size(80, 24)))[h].substr(0, 8), " CPU    ");
    m.apply(Action::NextTaskSort, 1);
    EXPECT_EQ(order(), (std::vector<int>{7, 100, 300})) << "by pid";
    m.apply(Action::NextTaskSort, 1);
    EXPECT_EQ(order(), (std::vector<int>{7, 100, 300})) << "by name: kworker, spin, worker";
    m.apply(Action::NextTaskSort, 1);
    EXPECT_EQ(m.task_sort(), TaskSort::Unit);
    EXPECT_EQ(order(), (std::vector<int>{100, 300, 7})) << "a, b, then no unit";
    m.apply(Action::NextTaskSort, 1);
    EXPECT_EQ(m.task_sort(), TaskSort::Load) << "round again";
    m.apply(Action::PrevTaskSort, 1);
    EXPECT_EQ(m.task_sort(), TaskSort::Unit);

    // 12 rows: five for the CPUs, the rest (a heading and one task) for the pane.
    f = build_frame(m, size(80, 12));
    EXPECT_EQ(cpu_labels(f).size(), 4u) << frame_text(f);
    EXPECT_NE(frame_text(f).find("(1 of 812)"), std::string::npos) << frame_text(f);
    for (const auto& l : build_frame(m, size(40, 24)).lines) EXPECT_LE(l.size(), 40u);
    // Off again: the units are back.
    m.apply(Action::ToggleTasks, 1);
    EXPECT_GE(line_of(build_frame(m, size(80, 24)), "UNIT"), 0);
}

// The CPUs' context: the machine's line under the watchdog's, and each CPU's figures in its
// row on 'c' (the machine's row has the sums); rates from the daemon's second reading.
TEST(TopFrame, TheCpusContext) {
    auto s = snapshot(2);
    auto m = model_of(s);
    EXPECT_EQ(line_of(build_frame(m, size(100, 24)), "context"), -1) << "not asked: no line";

    s.loading.context = monitor::CpuContextReport{};
    m.update(s);
    EXPECT_EQ(texts(build_frame(m, size(100, 24)))[2], "context: first reading");
    s.loading.context->unavailable = "/nowhere: not a procfs";
    m.update(s);
    EXPECT_EQ(texts(build_frame(m, size(100, 24)))[2], "context: /nowhere: not a procfs");

    monitor::CpuContextSample c;
    c.procs_running = 5;
    c.procs_blocked = 1;
    c.pressure_some = 0.25;
    c.pressure_avg10 = 12.5;  // the kernel's percent
    c.waiting = 1.5;
    c.interrupts = 1200;
    c.softirqs = 300;
    c.interrupt_sources = {{"LOC", "Local timer interrupts", 1000}, {"24", "eth0", 200}};
    c.softirq_kinds = {{"TIMER", "", 250}, {"RCU", "", 50}};
    c.cpus = {{0, 1.25, 2400, 700, 200, "LOC"}, {1, 0.25, std::nullopt, 2'500'000, 100, "LOC"}};
    c.seconds = 0;  // the first reading
    s.loading.context = monitor::CpuContextReport{.sample = c};
    m.update(s);
    auto f = build_frame(m, size(100, 24));
    EXPECT_EQ(texts(f)[2], "tasks 5 running, 1 blocked  (rates from the next second)");

    s.loading.context->sample->seconds = 1;
    m.update(s);
    f = build_frame(m, size(140, 24));
    EXPECT_EQ(texts(f)[2],
              "tasks 5 running, 1 blocked, 1.50 waiting  pressure 25.0% (10 s 12.5%)  irq " +
                  format_count(1200) + "/s (LOC " + format_count(1000) +
                  ")  softirq 300/s (TIMER 250)");
    EXPECT_EQ(texts(f)[static_cast<std::size_t>(line_of(f, "CPU"))].find("wait"), std::string::npos)
        << "each CPU's: on request";

    ASSERT_TRUE(m.apply(Action::ToggleContext, 1));
    EXPECT_TRUE(m.context());
    f = build_frame(m, size(100, 24));
    const auto t = texts(f);
    EXPECT_NE(t[static_cast<std::size_t>(line_of(f, "CPU"))].find(
                  "   last    avg    min    max   wait    MHz  irq/s sirq/s"),
              std::string::npos)
        << frame_text(f);
    EXPECT_NE(t[static_cast<std::size_t>(line_of(f, "all"))].find("   1.50      -   1200    300"),
              std::string::npos)
        << "the machine: the sums, no one clock\n"
        << frame_text(f);
    EXPECT_NE(t[static_cast<std::size_t>(line_of(f, "cpu0"))].find("   1.25   2400    700    200"),
              std::string::npos)
        << frame_text(f);
    // No clock: "-"; a rate too wide for its column in thousands.
    EXPECT_NE(t[static_cast<std::size_t>(line_of(f, "cpu1"))].find("   0.25      -  2500k    100"),
              std::string::npos)
        << frame_text(f);
    // The figures of the load keep their place before the context's, at any width.
    for (int w : {200, 100, 80, 60, 40}) {
        const auto cols = fit_columns(w, 4, 60, kContextWidth);
        EXPECT_EQ(cols.context, kContextWidth);
        const int used = 4 + 1 + (cols.bar > 0 ? cols.bar + 2 : 0) + 4 * kFigureWidth +
                         cols.context + (cols.spark > 0 ? cols.spark + 1 : 0);
        EXPECT_LE(used, std::max(w, 4 + 1 + 4 * kFigureWidth + kContextWidth)) << w;
    }
    // The first reading: the clock now, no rate.
    s.loading.context->sample->seconds = 0;
    m.update(s);
    f = build_frame(m, size(100, 24));
    EXPECT_NE(
        texts(f)[static_cast<std::size_t>(line_of(f, "cpu0"))].find("      -   2400      -      -"),
        std::string::npos)
        << frame_text(f);
    ASSERT_TRUE(m.apply(Action::ToggleContext, 1));
    EXPECT_FALSE(m.context());
}

TEST(TopFrame, SortByLoadPutsTheBusiestFirst) {
    const std::vector<std::optional<double>> loads = {10, 90, 50, std::nullopt, 90, 0};
    auto m = model_of(snapshot(6, [&](int c) { return loads[static_cast<std::size_t>(c)]; }));
    EXPECT_EQ(cpu_labels(build_frame(m, size(100, 30))),
              (std::vector<std::string>{"cpu0", "cpu1", "cpu2", "cpu3", "cpu4", "cpu5"}));
    m.apply(Action::ToggleSort, 1);
    EXPECT_EQ(m.sort(), SortOrder::Load);
    const auto f = build_frame(m, size(100, 30));
    // Equal loads by CPU number; a CPU without a figure last.
    EXPECT_EQ(cpu_labels(f),
              (std::vector<std::string>{"cpu1", "cpu4", "cpu2", "cpu0", "cpu5", "cpu3"}));
    EXPECT_NE(line_text(f.lines[0]).find("by load"), std::string::npos);
    EXPECT_EQ(line_of(f, "all"), 3) << "the machine stays on top";
    m.apply(Action::ToggleSort, 1);
    EXPECT_EQ(cpu_labels(build_frame(m, size(100, 30))).front(), "cpu0");
}

TEST(TopFrame, BarSegmentsAreProportionalToTheStates) {
    auto cells_of = [](const std::vector<Segment>& segs, Style s) {
        for (const auto& seg : segs) {
            if (seg.style == s) return seg.cells;
        }
        return -1;
    };
    const auto half_user = state_segments(shares(50, 25, 25), 40);
    EXPECT_EQ(cells_of(half_user, Style::User), 20);
    EXPECT_EQ(cells_of(half_user, Style::System), 10);
    EXPECT_EQ(cells_of(half_user, Style::Irq), 0);
    EXPECT_EQ(cells_of(half_user, Style::IoWait), 0);

    // irq and softirq share a segment; iowait is drawn after the load; the segments add up
    // to the busy share of the bar, rounded once.
    StateShares s;
    s[TimeState::User] = 33.3;
    s[TimeState::Irq] = 10;
    s[TimeState::SoftIrq] = 23.3;
    s[TimeState::IoWait] = 33.4;
    const auto mixed = state_segments(s, 10);
    EXPECT_EQ(cells_of(mixed, Style::User), 3);
    EXPECT_EQ(cells_of(mixed, Style::Irq), 4);
    EXPECT_EQ(cells_of(mixed, Style::IoWait), 3);
    EXPECT_EQ(mixed.back().style, Style::IoWait);
    int sum = 0;
    for (const auto& seg : mixed) sum += seg.cells;
    EXPECT_EQ(sum, 10);

    // In a frame: a width whose bar is 40 cells, cpu0 at 50 % user and 25 % system.
    auto snap = snapshot(4);
    snap.loading.cpus[0].sources[1].states->last = shares(50, 25, 25);
    auto m = model_of(std::move(snap));
    int width = 0;
    for (int w = 60; w < 400 && width == 0; ++w) {
        if (build_frame(m, size(w, 30)).columns.bar == 40) width = w;
    }
    ASSERT_GT(width, 0) << "no width gives a bar of 40 cells";
    for (bool colour : {false, true}) {
        auto o = size(width, 30);
        o.colour = colour;
        const auto f = build_frame(m, o);
        const auto& row = f.lines[static_cast<std::size_t>(line_of(f, "cpu0"))];
        EXPECT_EQ(count_style(row, Style::User), 20) << line_text(row);
        EXPECT_EQ(count_style(row, Style::System), 10) << line_text(row);
        if (!colour) {
            // Without colour the letters say the state.
            EXPECT_NE(line_text(row).find("[" + std::string(20, 'u') + std::string(10, 's') +
                                          std::string(10, ' ') + "]"),
                      std::string::npos)
                << line_text(row);
        } else {
            EXPECT_NE(line_text(row).find("[" + std::string(30, '|') + std::string(10, ' ') + "]"),
                      std::string::npos)
                << line_text(row);
        }
    }
}

TEST(TopFrame, TheSourceSwitchShowsTheOtherSourcesFigures) {
    auto m = model_of(snapshot(4));
    EXPECT_EQ(m.sources(), (std::vector<std::string>{"probe", "procstat"}));
    EXPECT_EQ(m.source(), "procstat");
    auto f = build_frame(m, size(100, 30));
    EXPECT_NE(line_text(f.lines[0]).find("source procstat"), std::string::npos);
    // cpu3: procstat 3.0, probe 4.0 in the last second.
    EXPECT_NE(texts(f)[static_cast<std::size_t>(line_of(f, "cpu3"))].find("    3.0   10.0"),
              std::string::npos);
    auto coloured = size(100, 30);
    coloured.colour = true;
    const auto legend = build_frame(m, coloured).lines[2];
    EXPECT_NE(line_text(legend).find("[us ni sy hi gu st wa"), std::string::npos)
        << line_text(legend);
    EXPECT_EQ(count_style(legend, Style::System), 2) << "sy in the colour of system";

    m.apply(Action::NextSource, 1);
    EXPECT_EQ(m.source(), "probe");
    f = build_frame(m, size(100, 30));
    EXPECT_NE(line_text(f.lines[0]).find("source probe"), std::string::npos);
    EXPECT_NE(texts(f)[static_cast<std::size_t>(line_of(f, "cpu3"))].find("    4.0   10.0"),
              std::string::npos);
    // The probe knows no states: its bar is the load.
    EXPECT_NE(texts(f)[2].find("[load"), std::string::npos) << texts(f)[2];

    m.apply(Action::NextSource, 1);
    EXPECT_EQ(m.source(), "procstat");

    // A daemon with only procstat (probe = off): the switch stays there.
    auto only = snapshot(2);
    only.loading.machine.erase(only.loading.machine.begin());
    for (auto& c : only.loading.cpus) c.sources.erase(c.sources.begin());
    m.update(std::move(only));
    m.apply(Action::NextSource, 1);
    EXPECT_EQ(m.source(), "procstat");
}

TEST(TopFrame, NarrowScreensDropTheSparklineThenNarrowTheBarBeforeTheFigures) {
    const auto wide = fit_columns(120, 6, 60);
    EXPECT_GT(wide.bar, 0);
    EXPECT_GT(wide.spark, 0);
    const auto at80 = fit_columns(80, 6, 60);
    EXPECT_GT(at80.spark, 0);
    EXPECT_LT(at80.spark, 60) << "shortened to the newest seconds";
    const auto at50 = fit_columns(50, 6, 60);
    EXPECT_EQ(at50.spark, 0);
    EXPECT_GE(at50.bar, kMinBar);
    const auto at40 = fit_columns(40, 6, 60);
    EXPECT_EQ(at40.bar, 0);
    EXPECT_EQ(at40.spark, 0);
    for (int w : {200, 120, 100, 80, 60, 50, 40, 35}) {
        const auto c = fit_columns(w, 6, 60);
        const int used = 6 + 1 + (c.bar > 0 ? c.bar + 2 : 0) + 4 * kFigureWidth +
                         (c.spark > 0 ? c.spark + 1 : 0);
        EXPECT_LE(used, w) << w;
        EXPECT_LE(c.bar, kMaxBar);
    }
    auto m = model_of(snapshot(4));
    const auto f = build_frame(m, size(40, 24));
    EXPECT_NE(
        texts(f)[static_cast<std::size_t>(line_of(f, "cpu2"))].find("2.0   10.0    1.0   90.0"),
        std::string::npos);
}

TEST(TopFrame, SparklinesInBlocksOrAscii) {
    const std::vector<std::optional<double>> v = {0, 12.5, 50, 100, std::nullopt};
    EXPECT_EQ(sparkline(v, 6, true), (std::vector<std::string>{" ", " ", "▁", "▄", "█", " "}));
    EXPECT_EQ(sparkline(v, 6, false), (std::vector<std::string>{" ", " ", ".", "=", "@", " "}));
    // The newest seconds when the line is shorter than the history.
    EXPECT_EQ(sparkline(v, 2, false), (std::vector<std::string>{"@", " "}));
    EXPECT_EQ(sparkline({1.0, 99.0}, 2, true), (std::vector<std::string>{"▁", "█"}));
}

TEST(TopFrame, TheWatchdogLine) {
    auto s = snapshot(2);
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/watchdog0";
    w.armed = true;
    w.timeout = 10;
    w.time_left = 7;
    w.since_last_pet = 0.1;
    w.pets = 42;
    s.status.watchdog = w;
    auto m = model_of(std::move(s));
    EXPECT_EQ(line_text(build_frame(m, size(120, 30)).lines[1]),
              "watchdog /dev/watchdog0: armed, timeout 10 s, 7 s left, last pet 0.10 s ago, 42 "
              "pets");
    // A near miss is said, as a warning.
    auto late = snapshot(2);
    w.late_pets = 3;
    w.longest_pet_gap = 6.25;
    late.status.watchdog = w;
    auto ml = model_of(std::move(late));
    const auto line = build_frame(ml, size(140, 30)).lines[1];
    EXPECT_EQ(line_text(line),
              "watchdog /dev/watchdog0: armed, timeout 10 s, 7 s left, last pet 0.10 s ago, 42 "
              "pets, 3 late (longest gap 6.2 s)");
    EXPECT_EQ(line[0].style, Style::Warning);
}

TEST(TopFrame, WhatTheDaemonSaysCannotMoveTheCursor) {
    auto s = snapshot(2);
    monitor::protocol::WatchdogInfo w;
    w.device = "\x1b[2J\x1b]0;owned\x07/dev/watchdog\xff";
    s.status.watchdog = w;
    s.status.version = "1\r\n2";
    auto m = model_of(std::move(s));
    for (bool utf8 : {false, true}) {
        auto o = size(120, 30);
        o.utf8 = utf8;
        const auto text = frame_text(build_frame(m, o));
        for (char c : text) {
            EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c);
        }
        EXPECT_NE(text.find("watchdog ?[2J?]0;owned?/dev/watchdog?: disarmed"), std::string::npos)
            << text;
    }
}

TEST(TopFrame, TheCounterPanelShowsCountsAndRates) {
    auto first = snapshot(2);
    monitor::protocol::CounterReport r;
    r.elapsed = 1;
    r.slots = 1;
    r.events.push_back({"perf::TASK-CLOCK", "", "perf", {300, 1, 1, 300, 1}, {}});
    r.events.push_back({"cycles", "", "cpu", {100, 1, 1, 200, 0.5}, {}});
    first.counters = r;
    TopModel m;
    m.update(first);
    ASSERT_EQ(m.rates().size(), 2u);
    EXPECT_DOUBLE_EQ(m.rates()[0].per_second, 300);  // its first read: since the start

    auto second = snapshot(2);
    r.elapsed = 2;
    r.events[0].value = {900, 2, 2, 900, 1};
    r.events[1].value = {200, 2, 1, 400, 0.5};
    second.counters = r;
    m.update(second);
    EXPECT_DOUBLE_EQ(m.rates()[0].per_second, 600);  // over the last interval
    EXPECT_DOUBLE_EQ(m.rates()[1].per_second, 200);  // of the estimate

    const auto f = build_frame(m, size(100, 30));
    const auto t = texts(f);
    EXPECT_EQ(t[2].rfind("counters, 2.0 s", 0), 0u) << t[2];
    EXPECT_NE(t[3].find("perf::TASK-CLOCK"), std::string::npos) << t[3];
    EXPECT_NE(t[3].find("900"), std::string::npos) << t[3];
    EXPECT_NE(t[3].find("600/s"), std::string::npos) << t[3];
    EXPECT_NE(t[4].find("[400]"), std::string::npos) << t[4];
    EXPECT_NE(t[4].find("(50.0% counted)"), std::string::npos) << t[4];
    EXPECT_EQ(line_of(f, "CPU"), 5);

    // The session ended: the panel goes.
    m.update(snapshot(2));
    EXPECT_TRUE(m.rates().empty());
    EXPECT_EQ(line_of(build_frame(m, size(100, 30)), "CPU"), 2);
}

TEST(TopFrame, AGoneDaemonIsSaidAndItsReturnClearsIt) {
    auto m = model_of(snapshot(2));
    m.lost("the daemon at /run/x closed the connection");
    EXPECT_TRUE(m.stale());
    auto o = size(100, 30);
    o.interval = 0.5;
    auto f = build_frame(m, o);
    EXPECT_EQ(line_text(f.lines.back()),
              "daemon gone, reconnecting every 0.5 s (q quits): the daemon at /run/x closed the "
              "connection");
    EXPECT_NE(line_text(f.lines[0]).find("(stale)"), std::string::npos);
    EXPECT_EQ(cpu_labels(f).size(), 2u) << "the last figures stay";
    m.update(snapshot(2));
    EXPECT_FALSE(m.stale());
    f = build_frame(m, o);
    EXPECT_EQ(line_text(f.lines.back()).find("daemon gone"), std::string::npos);
    EXPECT_EQ(line_text(f.lines[0]).find("(stale)"), std::string::npos);
}

// Stepping back: a minute or an hour from now, on again up to now (the live view), n for now;
// whole seconds; the moment shown in the title, the history's keys in place of the others,
// the live-only lines gone.
TEST(TopModel, StepsBackAndOnToTheLiveView) {
    using namespace std::chrono_literals;
    const WallTime now = WallTime{} + 1'800'000'000s + 500ms;
    auto m = model_of(snapshot(2));
    EXPECT_FALSE(m.at());
    m.apply(Action::Later, 10, now);
    EXPECT_FALSE(m.at()) << "nothing later than the live view";
    m.apply(Action::Earlier, 10, now);
    ASSERT_TRUE(m.at());
    EXPECT_EQ(*m.at(), WallTime{} + 1'800'000'000s - 60s) << "a minute back, in whole seconds";
    m.apply(Action::MuchEarlier, 10, now);
    EXPECT_EQ(*m.at(), WallTime{} + 1'800'000'000s - 3660s);
    m.apply(Action::Later, 10, now);
    EXPECT_EQ(*m.at(), WallTime{} + 1'800'000'000s - 3600s);
    m.apply(Action::MuchLater, 10, now);
    EXPECT_FALSE(m.at()) << "an hour on reaches now: the live view";
    m.apply(Action::MuchEarlier, 10, now);
    m.apply(Action::MuchEarlier, 10, now);
    m.apply(Action::Now, 10, now);
    EXPECT_FALSE(m.at());
}

TEST(TopModel, AMomentTheDaemonCannotShowReturnsToTheLiveViewAndSaysWhy) {
    auto m = model_of(snapshot(2));
    m.apply(Action::Earlier, 10);
    m.history_failed("since/until: this monitord keeps no history on disk");
    EXPECT_FALSE(m.at());
    auto f = build_frame(m, size(100, 30));
    EXPECT_EQ(line_text(f.lines.back()),
              "no history there: since/until: this monitord keeps no history on disk");
    EXPECT_EQ(f.lines.back()[0].style, Style::Warning);
    m.apply(Action::Down, 10);
    EXPECT_TRUE(m.history_error().empty()) << "until the next key";
    f = build_frame(m, size(100, 30));
    EXPECT_EQ(line_text(f.lines.back()).find("no history"), std::string::npos);
}

TEST(TopFrame, AMomentOfThePast) {
    using namespace std::chrono_literals;
    auto s = snapshot(2);
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/watchdog0";
    w.armed = true;
    s.status.watchdog = w;
    auto m = model_of(std::move(s));
    const auto at =
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) - 120s;
    m.set_at(at + 300ms);
    EXPECT_EQ(*m.at(), at);
    const auto f = build_frame(m, size(120, 30));
    const auto t = texts(f);
    const auto expect = fmt::format("history at {:%Y-%m-%d %H:%M:%S}",
                                    fmt::localtime(std::chrono::system_clock::to_time_t(at)));
    EXPECT_NE(t[0].find(expect), std::string::npos) << t[0];
    EXPECT_EQ(line_of(f, "watchdog"), -1) << "the watchdog is live, not of that moment";
    EXPECT_NE(std::ranges::find(t, "units and tasks: live only (n returns to now)"), t.end());
    EXPECT_EQ(cpu_labels(f), (std::vector<std::string>{"cpu0", "cpu1"}));
    EXPECT_EQ(t.back().rfind("cpu 1-2 of 2   history on disk: [ ] a minute back or on  { } an "
                             "hour  n now  q quit",
                             0),
              0u)
        << t.back();
    // A moment the history holds nothing of.
    auto empty = snapshot(2);
    empty.loading.timestamp.reset();
    m.update(std::move(empty));
    EXPECT_NE(line_text(build_frame(m, size(120, 30)).lines[0]).find(expect + ", nothing kept"),
              std::string::npos);
}

// In the history the CPUs scroll as they do now, and the last line still says which are shown.
TEST(TopFrame, TheHistoryScrollsAsNowDoes) {
    using namespace std::chrono_literals;
    auto m = model_of(snapshot(256));
    m.set_at(std::chrono::system_clock::now() - 1h);
    auto f = build_frame(m, size(100, 24));
    ASSERT_GT(f.page, 0);
    EXPECT_EQ(line_text(f.lines.back())
                  .rfind(fmt::format("cpu 1-{} of 256   history on disk:", f.page), 0),
              0u)
        << line_text(f.lines.back());
    m.apply(Action::PageDown, f.page);
    f = build_frame(m, size(100, 24));
    EXPECT_EQ(f.first_row, f.page);
    EXPECT_EQ(cpu_labels(f).front(), fmt::format("cpu{}", f.page));
    EXPECT_EQ(
        line_text(f.lines.back())
            .rfind(fmt::format("cpu {}-{} of 256   history on disk:", f.page + 1, 2 * f.page), 0),
        0u)
        << line_text(f.lines.back());
}

TEST(TopFrame, NoSampleYet) {
    auto s = snapshot(2, [](int) { return std::optional<double>{}; });
    s.loading.timestamp.reset();
    for (auto& l : s.loading.machine) l.stats.reset(), l.states.reset(), l.history.clear();
    for (auto& c : s.loading.cpus) {
        for (auto& l : c.sources) l.stats.reset(), l.history.clear();
    }
    auto m = model_of(std::move(s));
    const auto f = build_frame(m, size(100, 30));
    EXPECT_NE(line_text(f.lines[0]).find("no sample yet"), std::string::npos);
    EXPECT_NE(texts(f)[3].find("      -      -      -      -"), std::string::npos) << texts(f)[3];
}

}  // namespace
}  // namespace monctl::top
