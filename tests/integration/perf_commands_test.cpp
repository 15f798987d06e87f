// The performance-counter commands end to end: the real monctl against the real monitord,
// counting the kernel's software events with perf_event_open.
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cgroups.hpp"
#include "daemon_process.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/caller_rights.hpp"
#include "test_support.hpp"

namespace itest {
namespace {

namespace fs = std::filesystem;

class PerfCommands : public SharedDaemonTest {
  protected:
    PerfCommands() : SharedDaemonTest("counting every CPU needs root or CAP_PERFMON") {}
};

TEST_F(PerfCommands, InfoListsThePmusWithPpc750) {
    auto r = daemon_->monctl({"perf", "info"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("ppc750"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("perf_event_paranoid"), std::string::npos) << r.out;
    auto j = daemon_->call("GetPmuInfo");
    ASSERT_TRUE(j.contains("pmus"));
    bool found = false;
    for (const auto& p : j["pmus"]) {
        if (p["name"] == "ppc750") {
            found = true;
            EXPECT_EQ(p["counters"], 4);
            EXPECT_EQ(p["counter_width"], 32);
        }
    }
    EXPECT_TRUE(found);
}

// This machine is not a 750: ppc750 codes are listed and planned, but counting them is
// refused for what the processor is (they would count other events on another PMU).
TEST_F(PerfCommands, Ppc750CodesAreRefusedOnThisProcessor) {
#if defined(__powerpc__)
    GTEST_SKIP() << "a PowerPC machine may be a 750 with a PMU driver";
#endif
    auto info = daemon_->monctl({"perf", "info"});
    EXPECT_NE(info.out.find("ppc750 cannot count here"), std::string::npos) << info.out;
    auto j = daemon_->call("GetPmuInfo");
    for (const auto& p : j["pmus"]) {
        if (p["name"] == "breakpoint") continue;  // perf_breakpoints checks it
        const bool table = p["name"] == "ppc750";
        EXPECT_EQ(p["unavailable"].is_string(), table) << p.dump();
    }
    auto r = daemon_->monctl({"perf", "collect", "-e", "ppc750::CYCLES", "--duration", "200ms"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("ppc750::CYCLES: counts only on a PowerPC 750"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("this machine has"), std::string::npos) << r.err;
    EXPECT_EQ(daemon_->monctl({"perf", "plan", "-e", "ppc750::CYCLES"}).exit_code, 0);
}

TEST_F(PerfCommands, ListShowsTheCountersOfEachEvent) {
    auto r = daemon_->monctl({"perf", "list", "ppc750"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("ppc750::L1_ICACHE_MISSES"), std::string::npos) << r.out;
    auto line = r.out.substr(r.out.find("ppc750::L1_ICACHE_MISSES"));
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find("PMC2"), std::string::npos) << line;
    auto bad = daemon_->monctl({"perf", "list", "no_such_pmu"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("unknown PMU 'no_such_pmu'"), std::string::npos) << bad.err;
}

TEST_F(PerfCommands, PlanPacksPpc750EventsIntoSets) {
    auto r = daemon_->monctl(
        {"perf", "plan", "-e",
         "ppc750::EIEIO_COMPLETED,ppc750::INSTR_EA_DELIVERED,ppc750::L1_ICACHE_MISSES,"
         "ppc750::ITLB_MISSES,ppc750::L1_DCACHE_MISSES,ppc750::DTLB_MISSES,ppc750::L2_CASTOUTS,"
         "ppc750::BRANCHES_MISPREDICTED"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("2 counter sets take turns"), std::string::npos) << r.out;
    auto bad =
        daemon_->monctl({"perf", "plan", "-e", "{ppc750::L1_ICACHE_MISSES,ppc750::ITLB_MISSES}"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("PMC2"), std::string::npos) << bad.err;
}

TEST_F(PerfCommands, CollectCountsSoftwareEventsOnEveryCpu) {
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES",
                              "--duration", "500ms", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("CollectCounters", j), "");
    const auto& events = j["report"]["events"];
    ASSERT_EQ(events.size(), 2u);
    // A CPU's task clock runs with wall time: about 0.5 s per online CPU.
    const auto cpus = daemon_->call("GetStatus")["cpus"].size();
    const double task_ns = events[0]["value"]["count"].get<double>();
    EXPECT_NEAR(task_ns, 0.5e9 * static_cast<double>(cpus), 0.05e9 * static_cast<double>(cpus));
    EXPECT_GT(events[1]["value"]["count"].get<std::uint64_t>(), 0u);
    EXPECT_TRUE(j["report"]["final"].get<bool>());
}

// perf's letters: -a all CPUs added up (the default), -A each CPU; the two exclude each other.
TEST_F(PerfCommands, AllCpusAddedUpOrEachCpu) {
    const auto cpus = daemon_->call("GetStatus")["cpus"].size();
    auto all = daemon_->monctl(
        {"perf", "collect", "-a", "-e", "perf::TASK-CLOCK", "--duration", "200ms", "--json"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    auto a = nlohmann::json::parse(all.out)["report"]["events"][0];
    EXPECT_FALSE(a.contains("cpus")) << a.dump();
    EXPECT_NEAR(a["value"]["count"].get<double>(), 0.2e9 * static_cast<double>(cpus),
                0.05e9 * static_cast<double>(cpus));

    auto each = daemon_->monctl(
        {"perf", "collect", "-A", "-e", "perf::TASK-CLOCK", "--duration", "200ms", "--json"});
    ASSERT_EQ(each.exit_code, 0) << each.err;
    auto e = nlohmann::json::parse(each.out)["report"]["events"][0];
    ASSERT_TRUE(e.contains("cpus")) << e.dump();
    EXPECT_EQ(e["cpus"].size(), cpus);

    auto both = daemon_->monctl({"perf", "collect", "-a", "-A", "-e", "perf::TASK-CLOCK"});
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

// perf's -C takes a list: those CPUs added up, or each on its own with -A; in perf's words.
TEST_F(PerfCommands, CpuListsCountThoseCpus) {
    auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    if (online->size() < 2) GTEST_SKIP() << "one CPU online: no list to count";
    const int first = online->front();
    const int last = online->back();
    const std::string list = fmt::format("{},{}", first, last);
    auto each = daemon_->monctl({"perf", "collect", "-A", "-C", std::to_string(last), "-e",
                                 "perf::TASK-CLOCK", "--duration", "200ms", "--json"});
    ASSERT_EQ(each.exit_code, 0) << each.err;
    auto e = nlohmann::json::parse(each.out)["report"]["events"][0];
    ASSERT_EQ(e["cpus"].size(), 1u) << e.dump();
    EXPECT_EQ(e["cpus"][0]["cpu"], last) << e.dump();

    auto both = daemon_->monctl(
        {"perf", "collect", "-C", list, "-e", "perf::TASK-CLOCK", "--duration", "200ms", "--json"});
    ASSERT_EQ(both.exit_code, 0) << both.err;
    auto b = nlohmann::json::parse(both.out)["report"]["events"][0];
    EXPECT_FALSE(b.contains("cpus")) << b.dump();
    // Two CPUs' clocks added up over 200 ms.
    EXPECT_NEAR(b["value"]["count"].get<double>(), 0.4e9, 0.1e9) << b.dump();

    auto text = daemon_->monctl(
        {"perf", "collect", "-C", list, "-e", "perf::TASK-CLOCK", "--duration", "100ms"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find(" Performance counter stats for 'CPU(s) " + list + "':"),
              std::string::npos)
        << text.out;
    // A profile of one listed CPU samples that CPU only.
    auto profile = daemon_->monctl({"perf", "profile", "-A", "-C", std::to_string(last),
                                    "--duration", "200ms", "-F", "500", "--json"});
    ASSERT_EQ(profile.exit_code, 0) << profile.err;
    std::string final_line;
    std::istringstream replies{profile.out};
    for (std::string l; std::getline(replies, l);) {
        if (!l.empty()) final_line = l;
    }
    auto p = nlohmann::json::parse(final_line)["report"];
    ASSERT_EQ(p["cpus"].size(), 1u) << p.dump();
    EXPECT_EQ(p["cpus"][0]["cpu"], last);
    EXPECT_EQ(p["target"], fmt::format("each of cpu{}", last));

    auto offline = daemon_->monctl({"perf", "collect", "-C", fmt::format("{},4095", first), "-e",
                                    "perf::TASK-CLOCK", "--duration", "100ms"});
    EXPECT_EQ(offline.exit_code, 1);
    EXPECT_NE(offline.err.find("cpu4095 is not online"), std::string::npos) << offline.err;
    auto garbage = daemon_->monctl(
        {"perf", "collect", "-C", "1-x", "-e", "perf::TASK-CLOCK", "--duration", "100ms"});
    EXPECT_NE(garbage.exit_code, 0);
    EXPECT_NE(garbage.err.find("'1-x' is not a list of CPUs"), std::string::npos) << garbage.err;
}

TEST_F(PerfCommands, IntervalsStreamPerPeriodCounts) {
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "1s",
                              "--interval", "250ms", "--csv"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("time,period,event,cpu,count"), std::string::npos) << r.out;
    for (auto p : {"Z,1,perf::TASK-CLOCK,all,", "Z,4,perf::TASK-CLOCK,all,",
                   "Z,total,perf::TASK-CLOCK,all,"}) {
        EXPECT_NE(r.out.find(p), std::string::npos) << p << " in\n" << r.out;
    }
}

// Whole seconds: periods end on the daemon's loading ticks (one wake-up a second for both),
// so the first lasts 0.5 to 1.5 s and the next ones 1 s; the plan comes with the first record
// and with the totals only.
TEST_F(PerfCommands, WholeSecondIntervalsEndOnTheLoadingTicks) {
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "3500ms",
                              "--interval", "1s", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::vector<nlohmann::json> records;
    for (std::string line; std::getline(lines, line);) {
        records.push_back(nlohmann::json::parse(line));
        EXPECT_EQ(check_reply("CollectCounters", records.back()), "") << line;
    }
    // 3 or 4 periods (the last one cut by the duration), then the totals.
    ASSERT_GE(records.size(), 4u) << r.out;
    ASSERT_LE(records.size(), 5u) << r.out;
    const auto& totals = records.back()["report"];
    EXPECT_TRUE(totals["final"].get<bool>());
    EXPECT_TRUE(records.back().contains("plan"));
    EXPECT_TRUE(records.front().contains("plan"));
    const std::size_t periods = records.size() - 1;
    double sum = 0;
    for (std::size_t i = 0; i < periods; ++i) {
        const auto& report = records[i]["report"];
        EXPECT_EQ(report["period"].get<int>(), static_cast<int>(i + 1));
        if (i > 0) {
            EXPECT_FALSE(records[i].contains("plan")) << "period " << i + 1;
        }
        const double elapsed = report["elapsed"].get<double>();
        sum += elapsed;
        if (i == 0) {
            EXPECT_GE(elapsed, 0.49);
            EXPECT_LE(elapsed, 1.51);
        } else if (i + 1 < periods) {
            EXPECT_NEAR(elapsed, 1.0, 0.02) << "period " << i + 1;  // tick to tick
        }
    }
    // The periods cover the collection, which lasts its duration.
    EXPECT_NEAR(sum, totals["elapsed"].get<double>(), 0.01);
    EXPECT_NEAR(totals["elapsed"].get<double>(), 3.5, 0.05);
}

TEST_F(PerfCommands, MultiplexingWithACounterBudgetScales) {
    auto r = daemon_->monctl({"perf", "collect", "-e",
                              "perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK",
                              "--counters", "2", "--duration", "1s", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["report"]["slots"], 2);
    EXPECT_GT(j["report"]["rotations"].get<int>(), 5);
    const auto cpus = daemon_->call("GetStatus")["cpus"].size();
    for (const auto& e : j["report"]["events"]) {
        EXPECT_LT(e["value"]["running"].get<double>(), 0.7);
        EXPECT_NEAR(e["value"]["scaled"].get<double>(), 1e9 * static_cast<double>(cpus),
                    0.05e9 * static_cast<double>(cpus));
    }
}

TEST_F(PerfCommands, UnknownEventsGetSuggestions) {
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOK", "--duration", "100ms"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("unknown event 'perf::TASK-CLOK'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("perf::TASK-CLOCK"), std::string::npos) << r.err;
    monitor::varlink::Client c = daemon_->connect();
    auto reply =
        c.call("io.monitord.Monitor.CollectCounters",
               {{"request", {{"events", "ppc750::L1_ICACHE_MISES"}}}, {"duration_ms", 100}});
    ASSERT_TRUE(reply) << reply.error().to_string();
    ASSERT_TRUE(reply->error);
    EXPECT_EQ(*reply->error, "io.monitord.Monitor.NoSuchEvent");
    EXPECT_EQ(reply->parameters["suggestions"][0], "ppc750::L1_ICACHE_MISSES");
}

TEST_F(PerfCommands, OneSessionAtATimeAndStopEndsIt) {
    auto start = daemon_->monctl({"perf", "start", "-e", "perf::CONTEXT-SWITCHES"});
    ASSERT_EQ(start.exit_code, 0) << start.err;
    auto second =
        daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms"});
    EXPECT_EQ(second.exit_code, 1);
    EXPECT_NE(second.err.find("already collecting"), std::string::npos) << second.err;
    auto read = daemon_->monctl({"perf", "read", "--csv"});
    EXPECT_EQ(read.exit_code, 0) << read.err;
    EXPECT_NE(read.out.find("total,perf::CONTEXT-SWITCHES,all,"), std::string::npos) << read.out;
    auto stop = daemon_->monctl({"perf", "stop"});
    EXPECT_EQ(stop.exit_code, 0) << stop.err;
    EXPECT_NE(stop.out.find("perf::CONTEXT-SWITCHES"), std::string::npos) << stop.out;
    auto again = daemon_->monctl({"perf", "stop"});
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_NE(again.err.find("no counter session is running"), std::string::npos) << again.err;
}

// pfm's PCNTCLEARCNT: a reset shows the counts up to it, then the session counts from zero
// again (its elapsed time too) and grows.
TEST_F(PerfCommands, ResetCountsFromZeroAgain) {
    auto start = daemon_->monctl({"perf", "start", "-e", "perf::TASK-CLOCK"});
    ASSERT_EQ(start.exit_code, 0) << start.err;
    auto report = [&](std::vector<std::string> args) {
        args.insert(args.begin(), "perf");
        args.push_back("--json");
        auto r = daemon_->monctl(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["report"] : nlohmann::json{};
    };
    auto count = [](const nlohmann::json& rep) {
        return rep.is_object() ? rep["events"][0]["value"]["count"].get<double>() : -1.0;
    };
    std::this_thread::sleep_for(500ms);
    const auto before_read = report({"read"});
    const auto at_reset = report({"reset"});
    const auto after = report({"read"});
    std::this_thread::sleep_for(500ms);
    const auto later = report({"read"});
    auto text = daemon_->monctl({"perf", "reset"});
    auto stop = daemon_->monctl({"perf", "stop"});
    EXPECT_EQ(stop.exit_code, 0) << stop.err;

    std::printf(
        "task-clock: %.0f read, %.0f at the reset (%.3f s), %.0f just after (%.3f s), "
        "%.0f half a second later\n",
        count(before_read), count(at_reset), at_reset["elapsed"].get<double>(), count(after),
        after["elapsed"].get<double>(), count(later));
    EXPECT_GT(count(before_read), 0);
    EXPECT_GE(count(at_reset), count(before_read));  // nothing counted is lost
    EXPECT_GE(at_reset["elapsed"].get<double>(), 0.5);
    // From zero: what two CPUs count while monctl starts and reads (0.33 s in a sanitizer
    // build on a slow machine), against over a second before the reset.
    EXPECT_LT(count(after), count(at_reset) / 2);
    EXPECT_LT(after["elapsed"].get<double>(), 0.6);
    EXPECT_GT(count(later), count(after));
    EXPECT_GE(later["elapsed"].get<double>(), 0.5);
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("The running session counts from zero again; its counts up to the "
                            "reset:"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("perf::TASK-CLOCK"), std::string::npos) << text.out;

    // No session to reset, and no standing session of that name.
    auto none = daemon_->monctl({"perf", "reset"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("no counter session is running"), std::string::npos) << none.err;
    auto unknown = daemon_->monctl({"perf", "reset", "nope"});
    EXPECT_EQ(unknown.exit_code, 1);
    EXPECT_NE(unknown.err.find("no standing session 'nope'"), std::string::npos) << unknown.err;
}

// pfm's PCNTRDISABLE and PCNTRENABLE on a session started on `target` (monctl's options),
// which `busy` keeps busy: paused, its counts and enabled times stand still (to the
// nanosecond, on every CPU) and its reports say so; paused again, nothing changes; resumed,
// it counts again, the time paused said in its reports and under perf stop's totals.
void expect_pause_stands_still(Daemon& d, const std::vector<std::string>& target) {
    std::vector<std::string> start = {"perf", "start", "-e", "perf::TASK-CLOCK"};
    start.insert(start.end(), target.begin(), target.end());
    auto started = d.monctl(start);
    ASSERT_EQ(started.exit_code, 0) << started.err;
    auto report = [&](const char* verb) {
        auto r = d.monctl({"perf", verb, "--json"});
        EXPECT_EQ(r.exit_code, 0) << verb << ": " << r.err;
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["report"] : nlohmann::json{};
    };
    // Every count of the report (the total, each CPU's), and its enabled times.
    auto counts = [](const nlohmann::json& rep) {
        std::vector<std::uint64_t> out;
        if (!rep.is_object()) return out;
        const auto& e = rep["events"][0];
        out.push_back(e["value"]["count"].get<std::uint64_t>());
        out.push_back(e["value"]["enabled_ns"].get<std::uint64_t>());
        for (const auto& c : e.value("cpus", nlohmann::json::array())) {
            out.push_back(c["value"]["count"].get<std::uint64_t>());
            out.push_back(c["value"]["enabled_ns"].get<std::uint64_t>());
        }
        return out;
    };
    std::this_thread::sleep_for(300ms);
    const auto at_pause = report("pause");
    std::this_thread::sleep_for(500ms);
    const auto paused = report("read");
    const auto paused_again = report("pause");
    const auto at_resume = report("resume");
    std::this_thread::sleep_for(300ms);
    const auto resumed = report("read");
    auto stop = d.monctl({"perf", "stop"});
    ASSERT_EQ(stop.exit_code, 0) << stop.err;
    ASSERT_FALSE(counts(at_pause).empty());
    ASSERT_FALSE(counts(resumed).empty());

    EXPECT_GT(counts(at_pause)[0], 0u) << at_pause.dump();
    EXPECT_EQ(counts(paused), counts(at_pause)) << paused.dump() << "\n" << at_pause.dump();
    EXPECT_EQ(counts(paused_again), counts(at_pause)) << paused_again.dump();
    // Read just after the resume: what counted since, far from the half second paused.
    EXPECT_GE(counts(at_resume)[0], counts(at_pause)[0]) << at_resume.dump();
    EXPECT_LT(counts(at_resume)[0], counts(at_pause)[0] + 100'000'000u) << at_resume.dump();
    EXPECT_EQ(at_pause.value("paused", false), true) << at_pause.dump();
    EXPECT_EQ(paused.value("paused", false), true) << paused.dump();
    EXPECT_GE(paused.value("paused_seconds", 0.0), 0.5) << paused.dump();
    EXPECT_FALSE(resumed.contains("paused")) << resumed.dump();
    EXPECT_GT(counts(resumed)[0], counts(at_resume)[0]) << resumed.dump();
    // The time paused is the session's, not the time since: it stays, below the elapsed.
    const double paused_s = resumed.value("paused_seconds", 0.0);
    EXPECT_GE(paused_s, 0.5) << resumed.dump();
    EXPECT_LT(paused_s, resumed["elapsed"].get<double>() - 0.5) << resumed.dump();
    EXPECT_NE(stop.out.find("seconds of it paused, counting nothing"), std::string::npos)
        << stop.out;
}

TEST_F(PerfCommands, PauseStandsTheCountsStillAndResumeCountsOn) {
    Child spinner(Child::Does::Spin);
    ASSERT_GT(spinner.pid(), 0);
    for (const auto& target : std::vector<std::vector<std::string>>{
             {}, {"--per-cpu"}, {"-C", "0"}, {"-p", std::to_string(spinner.pid())}}) {
        SCOPED_TRACE(target.empty() ? std::string{"all CPUs"}
                                    : fmt::format("{}", fmt::join(target, " ")));
        expect_pause_stands_still(*daemon_, target);
        if (HasFatalFailure()) return;
    }
    // The text says what happened, and what undoes it.
    auto start = daemon_->monctl({"perf", "start", "-e", "perf::TASK-CLOCK"});
    ASSERT_EQ(start.exit_code, 0) << start.err;
    auto pause = daemon_->monctl({"perf", "pause"});
    auto read = daemon_->monctl({"perf", "read"});
    auto resume = daemon_->monctl({"perf", "resume"});
    auto stop = daemon_->monctl({"perf", "stop"});
    EXPECT_EQ(pause.exit_code, 0) << pause.err;
    EXPECT_NE(pause.out.find("The running session is paused (`monctl perf resume` counts again); "
                             "its counts up to the pause:"),
              std::string::npos)
        << pause.out;
    EXPECT_NE(read.out.find("(paused now)"), std::string::npos) << read.out;
    EXPECT_NE(resume.out.find("The running session counts again; its counts so far:"),
              std::string::npos)
        << resume.out;
    EXPECT_EQ(stop.exit_code, 0) << stop.err;
    // Nothing to pause.
    for (const char* verb : {"pause", "resume"}) {
        auto none = daemon_->monctl({"perf", verb});
        EXPECT_EQ(none.exit_code, 1) << verb;
        EXPECT_NE(none.err.find("no counter session is running"), std::string::npos) << none.err;
        auto unknown = daemon_->monctl({"perf", verb, "nope"});
        EXPECT_EQ(unknown.exit_code, 1) << verb;
        EXPECT_NE(unknown.err.find("no standing session 'nope'"), std::string::npos) << unknown.err;
    }
}

// A collect's records while paused: each says how much of its interval was paused, and counts
// only the rest.
TEST_F(PerfCommands, ACollectPausedSaysItInItsRecords) {
    auto c = daemon_->connect();
    monitor::varlink::Call call{.method = "io.monitord.Monitor.CollectCounters", .more = true};
    call.parameters = {
        {"request", {{"events", "perf::TASK-CLOCK"}}}, {"duration_ms", 3000}, {"interval_ms", 500}};
    auto first = c.call(call);  // the first record, at the end of its interval
    ASSERT_TRUE(first) << first.error().message;
    ASSERT_FALSE(first->error) << *first->error << " " << first->parameters.dump();
    std::vector<nlohmann::json> records{first->parameters["report"]};
    bool more = first->continues;
    std::this_thread::sleep_for(200ms);
    auto pause = daemon_->monctl({"perf", "pause", "--json"});
    ASSERT_EQ(pause.exit_code, 0) << pause.err;
    std::this_thread::sleep_for(1200ms);
    auto resume = daemon_->monctl({"perf", "resume", "--json"});
    ASSERT_EQ(resume.exit_code, 0) << resume.err;
    while (more) {
        auto r = c.receive();
        ASSERT_TRUE(r) << r.error().message;
        ASSERT_FALSE(r->error) << *r->error << " " << r->parameters.dump();
        records.push_back(r->parameters["report"]);
        more = r->continues;
    }
    ASSERT_GE(records.size(), 4u);
    const auto totals = records.back();
    records.pop_back();
    // A record wholly paused counts nothing; the paused seconds of the records add up to the
    // totals'.
    double paused_s = 0;
    int wholly_paused = 0;
    for (const auto& r : records) {
        const double p = r.value("paused_seconds", 0.0);
        paused_s += p;
        if (p >= r["elapsed"].get<double>() - 1e-3) {
            ++wholly_paused;
            EXPECT_EQ(r["events"][0]["value"]["count"].get<std::uint64_t>(), 0u) << r.dump();
        }
    }
    EXPECT_GE(wholly_paused, 1);
    EXPECT_NEAR(paused_s, totals.value("paused_seconds", 0.0), 1e-3) << totals.dump();
    EXPECT_GE(totals.value("paused_seconds", 0.0), 1.1) << totals.dump();
    EXPECT_LE(totals.value("paused_seconds", 0.0), 1.6) << totals.dump();
}

TEST_F(PerfCommands, AClientThatGoesAwayFreesTheCounters) {
    {
        monitor::varlink::Client c = daemon_->connect();
        monitor::varlink::Call call;
        call.method = "io.monitord.Monitor.CollectCounters";
        call.parameters = {{"request", {{"events", "perf::TASK-CLOCK"}}}, {"duration_ms", 60'000}};
        std::string text = monitor::varlink::encode(call);
        text.push_back('\0');
        ASSERT_TRUE(c.send_raw(text));
        std::this_thread::sleep_for(300ms);
        auto busy =
            daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "50ms"});
        EXPECT_EQ(busy.exit_code, 1) << busy.out;
    }  // the client disconnects
    bool freed = false;
    for (int i = 0; i < 50 && !freed; ++i) {
        auto r =
            daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "50ms"});
        freed = r.exit_code == 0;
        if (!freed) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(freed) << daemon_->log();
}

TEST_F(PerfCommands, StatCountsACommandAndReturnsItsExitCode) {
    auto r = run({monctl_bin(), "perf", "stat", "-e", "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES",
                  "--csv", "--", "sh", "-c", "echo out; exit 7"});
    EXPECT_EQ(r.exit_code, 7) << r.err;
    EXPECT_EQ(r.out, "out\n");
    EXPECT_NE(r.err.find("total,perf::TASK-CLOCK,all,"), std::string::npos) << r.err;
    auto missing = run({monctl_bin(), "perf", "stat", "--", "/no/such/program"});
    EXPECT_EQ(missing.exit_code, 127);
    EXPECT_NE(missing.err.find("cannot run /no/such/program"), std::string::npos) << missing.err;
}

// The line of `text` that holds `word`, or "".
std::string line_with(const std::string& text, const std::string& word) {
    std::istringstream in{text};
    for (std::string l; std::getline(in, l);) {
        if (l.find(word) != std::string::npos) return l;
    }
    return {};
}

std::size_t fields_of(const std::string& line, char sep) {
    return static_cast<std::size_t>(std::ranges::count(line, sep)) + 1;
}

// monctl perf stat beside perf stat for the same command: the same title, columns, metrics,
// footer; -r's spread, -x's fields, -I's time column and -o's header as perf writes them.
TEST_F(PerfCommands, StatPrintsWhatPerfStatPrints) {
    const std::string perf = find_in_path("perf");
    if (perf.empty()) GTEST_SKIP() << "perf (linux-perf) is not installed";
    auto theirs = run({perf, "stat", "-e", "task-clock,page-faults", "--", "true"});
    if (theirs.exit_code != 0) GTEST_SKIP() << "perf stat cannot count here: " << theirs.err;
    auto ours = run(
        {monctl_bin(), "perf", "stat", "-e", "perf::TASK-CLOCK,perf::PAGE-FAULTS", "--", "true"});
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    std::cout << "perf stat:\n" << theirs.err << "monctl perf stat:\n" << ours.err;
    for (const auto* text : {&theirs.err, &ours.err}) {
        EXPECT_NE(text->find("\n Performance counter stats for 'true':\n\n"), std::string::npos)
            << *text;
        EXPECT_TRUE(
            std::regex_search(*text, std::regex{R"(\n {7}\d\.\d{9} seconds time elapsed\n)"}))
            << *text;
        EXPECT_TRUE(std::regex_search(
            *text, std::regex{R"(\n {7}\d\.\d{9} seconds user\n {7}\d\.\d{9} seconds sys\n)"}))
            << *text;
    }
    // The columns: the unit, the event and '#' where perf puts them, the same metric words.
    const std::string their_clock = line_with(theirs.err, "task-clock");
    const std::string our_clock = line_with(ours.err, "perf::TASK-CLOCK");
    EXPECT_EQ(their_clock.find(" msec "), our_clock.find(" msec ")) << their_clock << '\n'
                                                                    << our_clock;
    EXPECT_EQ(their_clock.find('#'), our_clock.find('#')) << their_clock << '\n' << our_clock;
    EXPECT_EQ(their_clock.find("CPUs utilized"), our_clock.find("CPUs utilized"))
        << their_clock << '\n'
        << our_clock;
    const std::string their_faults = line_with(theirs.err, "page-faults");
    const std::string our_faults = line_with(ours.err, "perf::PAGE-FAULTS");
    EXPECT_EQ(their_faults.find("page-faults"), our_faults.find("perf::PAGE-FAULTS"))
        << their_faults << '\n'
        << our_faults;
    EXPECT_EQ(their_faults.find('#'), our_faults.find('#')) << their_faults << '\n' << our_faults;
    EXPECT_NE(our_faults.find("K/sec"), std::string::npos) << our_faults;

    // -r 3: the runs in the title, a spread on every event line and on the elapsed time.
    auto repeated = run({monctl_bin(), "perf", "stat", "-r", "3", "-e",
                         "perf::TASK-CLOCK,perf::PAGE-FAULTS", "--", "true"});
    ASSERT_EQ(repeated.exit_code, 0) << repeated.err;
    EXPECT_NE(repeated.err.find(" Performance counter stats for 'true' (3 runs):"),
              std::string::npos)
        << repeated.err;
    EXPECT_TRUE(std::regex_search(line_with(repeated.err, "perf::PAGE-FAULTS"),
                                  std::regex{R"(\( \+- +\d+\.\d\d% \)$)"}))
        << repeated.err;
    EXPECT_TRUE(std::regex_search(
        repeated.err, std::regex{R"(\d \+- [\d.]+ seconds time elapsed  \( \+- +[\d.]+% \))"}))
        << repeated.err;

    // -x: as many fields as perf's, the same unit and metric words.
    auto their_x = run({perf, "stat", "-x", ";", "-e", "task-clock,page-faults", "--", "true"});
    auto our_x = run({monctl_bin(), "perf", "stat", "-x", ";", "-e",
                      "perf::TASK-CLOCK,perf::PAGE-FAULTS", "--", "true"});
    ASSERT_EQ(our_x.exit_code, 0) << our_x.err;
    const std::string their_x_clock = line_with(their_x.err, "task-clock");
    const std::string our_x_clock = line_with(our_x.err, "perf::TASK-CLOCK");
    EXPECT_EQ(fields_of(their_x_clock, ';'), fields_of(our_x_clock, ';')) << their_x_clock << '\n'
                                                                          << our_x_clock;
    EXPECT_TRUE(std::regex_match(
        our_x_clock,
        std::regex{R"([\d.]+;msec;perf::TASK-CLOCK;\d+;100\.00;[\d.]+;CPUs utilized)"}))
        << our_x_clock;
    EXPECT_EQ(fields_of(line_with(their_x.err, "page-faults"), ';'),
              fields_of(line_with(our_x.err, "perf::PAGE-FAULTS"), ';'))
        << their_x.err << our_x.err;

    // -I: perf's header, then lines that start with the time, while the command runs; the
    // last is the part of a period before the command ended, and no totals follow (as perf's).
    auto every = run({monctl_bin(), "perf", "stat", "-I", "100", "-e", "perf::TASK-CLOCK", "--",
                      "sleep", "0.35"});
    ASSERT_EQ(every.exit_code, 0) << every.err;
    EXPECT_NE(every.err.find("#           time             counts unit events\n"),
              std::string::npos)
        << every.err;
    std::size_t timed = 0;
    double last = 0;
    std::istringstream lines{every.err};
    const std::regex timed_line{R"(^ +([0-9]+\.[0-9]{9}) +.* perf::TASK-CLOCK)"};
    for (std::string l; std::getline(lines, l);) {
        std::smatch m;
        if (!std::regex_search(l, m, timed_line)) continue;
        ++timed;
        last = std::stod(m[1].str());
    }
    EXPECT_GE(timed, 2u) << every.err;
    EXPECT_GE(last, 0.35) << every.err;
    EXPECT_EQ(every.err.find("seconds time elapsed"), std::string::npos) << every.err;
    EXPECT_EQ(every.err.find("Performance counter stats"), std::string::npos) << every.err;

    // -o: the counts in the file after perf's header; the command's output stays its own.
    ScratchDir dir{"stat-output"};
    const auto file = dir / "counts.txt";
    auto to_file =
        run({monctl_bin(), "perf", "stat", "-o", file.string(), "--", "sh", "-c", "echo out"});
    ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
    EXPECT_EQ(to_file.out, "out\n");
    EXPECT_EQ(to_file.err.find("Performance counter stats"), std::string::npos) << to_file.err;
    std::ifstream in{file};
    std::stringstream text;
    text << in.rdbuf();
    const std::string written = text.str();
    EXPECT_TRUE(std::regex_search(
        written, std::regex{R"(^# started on \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\n\n)"}))
        << written;
    EXPECT_NE(written.find("Performance counter stats for 'sh -c echo out':"), std::string::npos)
        << written;
    auto unwritable =
        run({monctl_bin(), "perf", "stat", "-o", "/nonexistent/dir/counts", "--", "true"});
    EXPECT_EQ(unwritable.exit_code, 1);
    EXPECT_NE(unwritable.err.find("-o /nonexistent/dir/counts: cannot write it"), std::string::npos)
        << unwritable.err;
}

// Letters that perf gives another meaning are not ours: perf's -d is --detailed, -i
// --no-inherit; the duration, interval and unit have long names.
// Derived metrics by group: the shipped set lists what counts here, -M counts a group's events
// (besides those of -e, each once) and reports its metrics; a standing session asks by
// `metrics`, with [[metrics]] of its own.
TEST_F(PerfCommands, MetricGroupsCountTheirEventsAndReportTheirFormulas) {
    auto list = daemon_->monctl({"perf", "list", "--metrics"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_NE(list.out.find("context_switches_per_second"), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("task-clock / 1e9 / seconds"), std::string::npos) << list.out;
    // The 750's own definitions are not listed on this machine, but counted as such.
    EXPECT_EQ(list.out.find("ppc750::"), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("more defined for events this machine cannot count"), std::string::npos)
        << list.out;
    auto all = daemon_->monctl({"perf", "list", "--metrics", "--all", "--json"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    const auto listed = nlohmann::json::parse(all.out);
    EXPECT_EQ(check_reply("ListMetrics", listed), "");
    bool a_750_one = false;
    for (const auto& m : listed["metrics"]) {
        if (m["formula"].get<std::string>().find("ppc750::") == std::string::npos) continue;
        a_750_one = true;
        EXPECT_TRUE(m["unavailable"].is_string()) << m.dump();
        EXPECT_EQ(m["source"].get<std::string>().rfind("metrics.toml:", 0), 0u) << m.dump();
    }
    EXPECT_TRUE(a_750_one) << all.out;
    // What is listed as counting here counts here: the PMU was asked (a machine without one
    // lists the software metrics alone).
    for (const auto& m : listed["metrics"]) {
        if (!m["unavailable"].is_null()) continue;
        const std::string name = m["name"];
        auto counted = daemon_->monctl({"perf", "collect", "-M", name, "--duration", "100ms"});
        EXPECT_EQ(counted.exit_code, 0) << name << ": " << counted.err;
    }

    // A process kept busy: about one CPU utilized, whatever else the machine does.
    Child spinner(Child::Does::Spin);
    ASSERT_GT(spinner.pid(), 0);
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "-M", "sched", "-p",
                              std::to_string(spinner.pid()), "--duration", "1s", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("CollectCounters", j), "");
    std::vector<std::string> events;
    for (const auto& e : j["report"]["events"]) events.push_back(e["name"]);
    // perf::TASK-CLOCK is task-clock: counted once, under the name asked.
    EXPECT_EQ(events, (std::vector<std::string>{"perf::TASK-CLOCK", "context-switches",
                                                "cpu-migrations", "page-faults"}));
    std::map<std::string, nlohmann::json> metrics;
    for (const auto& m : j["report"]["metrics"]) metrics[m["name"]] = m;
    for (const char* name :
         {"cpus_utilized", "context_switches_per_second", "cpu_migrations_per_second",
          "page_faults_per_second", "context_switches_per_cpu_second"}) {
        EXPECT_TRUE(metrics.contains(name)) << name << " in " << j["report"]["metrics"].dump();
    }
    ASSERT_TRUE(metrics.contains("cpus_utilized"));
    const double utilized = metrics["cpus_utilized"]["value"];
    std::printf("a spinning process: cpus_utilized %.3f, %s context switches a second\n", utilized,
                metrics["context_switches_per_second"]["value"].dump().c_str());
    EXPECT_GT(utilized, 0.5);
    EXPECT_LT(utilized, 1.05);
    EXPECT_EQ(metrics["cpus_utilized"]["description"],
              "CPUs busy on average (task clock / time counted)");

    // The text shows the metrics with their descriptions.
    auto text = daemon_->monctl({"perf", "collect", "-M", "sched", "--duration", "300ms"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("context switches a second"), std::string::npos) << text.out;

    // What cannot be had says what can.
    auto unknown = daemon_->monctl({"perf", "collect", "-M", "sched,nosuch"});
    EXPECT_EQ(unknown.exit_code, 1);
    EXPECT_NE(unknown.err.find("no metric or metric group \"nosuch\" (groups: ipc, cache, "
                               "branch, stall, sched"),
              std::string::npos)
        << unknown.err;
    auto nothing = daemon_->monctl({"perf", "collect", "--duration", "100ms"});
    EXPECT_EQ(nothing.exit_code, 2);
    EXPECT_NE(nothing.err.find("nothing to count"), std::string::npos) << nothing.err;
    auto plan = daemon_->monctl({"perf", "plan", "-M", "sched", "--json"});
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_EQ(nlohmann::json::parse(plan.out)["plan"]["groups"][0]["members"].size(), 4u)
        << plan.out;
}

TEST_F(PerfCommands, AStandingSessionReportsTheMetricsItsTableAsksFor) {
    ScratchDir dir{ScratchDir::Everyone};
    const auto conf = dir / "monitord.conf";
    test_support::write_file(conf,
                             "[[counters]]\nname = \"machine\"\nmetrics = \"sched,busy_share\"\n\n"
                             "[[metrics]]\nname = \"busy_share\"\n"
                             "description = \"share of the CPUs' time busy\"\n"
                             "formula = \"task-clock / (cpu-clock)\"\n");
    auto d = Daemon::start({.args = {"--probe", "off", "--config", conf.string()}});
    ASSERT_TRUE(d);
    nlohmann::json totals;
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            auto r = d->monctl({"perf", "show", "machine", "--json"});
            if (r.exit_code != 0) return false;
            totals =
                nlohmann::json::parse(r.out)["sessions"].at(0).value("totals", nlohmann::json{});
            return totals.is_object() && !totals["metrics"].empty();
        },
        5s))
        << d->log();
    std::map<std::string, double> metrics;
    for (const auto& m : totals["metrics"]) metrics[m["name"]] = m["value"];
    ASSERT_TRUE(metrics.contains("busy_share")) << totals.dump();
    // Counting every CPU, the task clock and the CPU clock both run with wall time.
    EXPECT_NEAR(metrics["busy_share"], 1.0, 0.05);
    EXPECT_TRUE(metrics.contains("cpus_utilized")) << totals.dump();
    auto shown = d->monctl({"perf", "show", "machine"});
    EXPECT_NE(shown.out.find("share of the CPUs' time busy"), std::string::npos) << shown.out;
}

TEST_F(PerfCommands, PerfsLettersKeepPerfsMeaning) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"perf", "collect", "-e", "perf::TASK-CLOCK", "-d", "100ms"},
             {"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms", "-i", "50ms"},
             {"perf", "collect", "-e", "perf::TASK-CLOCK", "-u", "x.service"},
             {"perf", "profile", "-d", "100ms"},
             {"perf", "overflows", "-e", "perf::TASK-CLOCK", "-c", "1000", "-d", "100ms"}}) {
        auto r = daemon_->monctl(args);
        EXPECT_NE(r.exit_code, 0) << args[1] << ' ' << args.back() << ": " << r.out;
    }
    auto every = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration",
                                  "300ms", "-I", "100", "-x", ","});
    ASSERT_EQ(every.exit_code, 0) << every.err;
    std::size_t periods = 0;
    std::istringstream lines{every.out};
    for (std::string l; std::getline(lines, l);) {
        if (std::regex_match(l, std::regex{R"( +0\.\d{9},[\d.]+,msec,perf::TASK-CLOCK,.*)"}))
            ++periods;
    }
    EXPECT_GE(periods, 2u) << every.out;
    auto both = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "300ms",
                                 "-I", "100", "--interval", "100ms"});
    EXPECT_NE(both.exit_code, 0) << both.out;
}

// Standing sessions from monitord.conf: counted from the start beside on-demand sessions,
// shown by `monctl perf show`, changed by a reload, kept by a reload that fails.
TEST_F(PerfCommands, StandingSessionsFollowTheConfigurationAndItsReloads) {
    ScratchDir dir{ScratchDir::Everyone};
    const auto conf = dir / "monitord.conf";
    test_support::write_file(conf,
                             "[[counters]]\nname = \"clock\"\nevents = \"perf::TASK-CLOCK\"\n\n"
                             "[[counters]]\nname = \"later\"\nevents = \"perf::TASK-CLOCK\"\n"
                             "target = \"unit\"\nunit = \"monitord-no-such-unit.service\"\n");
    auto d = Daemon::start({.args = {"--probe", "off", "--config", conf.string()}});
    ASSERT_TRUE(d);
    auto show_json = [&](std::vector<std::string> args = {}) {
        args.insert(args.begin(), {"perf", "show", "--json"});
        auto r = d->monctl(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["sessions"] : nlohmann::json{};
    };
    // The first reading comes with the tick after the start.
    ASSERT_TRUE(test_support::wait_until(
        [&] { return show_json({"clock"}).at(0).contains("totals"); }, 5s));

    auto shown = d->monctl({"perf", "show"});
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    const std::string table = conf.string() + ":1";
    EXPECT_NE(shown.out.find("Standing session 'clock' (" + table +
                             "): perf::TASK-CLOCK on all "
                             "CPUs"),
              std::string::npos)
        << shown.out;
    EXPECT_NE(shown.out.find("since it started"), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("not counting: no cgroup for unit monitord-no-such-unit.service"),
              std::string::npos)
        << shown.out;
    auto clock = show_json({"clock"});
    ASSERT_EQ(clock.size(), 1u);
    const double counted = clock[0]["totals"]["events"][0]["value"]["count"];
    EXPECT_GT(counted, 0) << clock.dump();

    // A reset by name: the counts up to it, then the totals count from zero on the next tick.
    auto reset = d->monctl({"perf", "reset", "clock", "--json"});
    ASSERT_EQ(reset.exit_code, 0) << reset.err;
    const double up_to_reset =
        nlohmann::json::parse(reset.out)["report"]["events"][0]["value"]["count"];
    EXPECT_GE(up_to_reset, counted);
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            auto c = show_json({"clock"});
            return c.at(0)["totals"]["events"][0]["value"]["count"].get<double>() < up_to_reset;
        },
        3s));
    auto failed_reset = d->monctl({"perf", "reset", "later"});
    EXPECT_EQ(failed_reset.exit_code, 1);
    EXPECT_NE(failed_reset.err.find("standing session 'later' is not counting"), std::string::npos)
        << failed_reset.err;

    // Paused by name: its totals stand still from the pause on, tick after tick, and say so;
    // resumed, they grow again.
    auto pause = d->monctl({"perf", "pause", "clock", "--json"});
    ASSERT_EQ(pause.exit_code, 0) << pause.err;
    const auto at_pause = nlohmann::json::parse(pause.out)["report"];
    const std::uint64_t paused_count = at_pause["events"][0]["value"]["count"];
    EXPECT_EQ(at_pause.value("paused", false), true) << at_pause.dump();
    std::this_thread::sleep_for(2200ms);
    auto still = show_json({"clock"});
    EXPECT_EQ(still.at(0)["totals"]["events"][0]["value"]["count"].get<std::uint64_t>(),
              paused_count)
        << still.dump();
    EXPECT_EQ(still.at(0)["totals"].value("paused", false), true) << still.dump();
    EXPECT_GE(still.at(0)["totals"].value("paused_seconds", 0.0), 1.0) << still.dump();
    EXPECT_EQ(still.at(0)["last"]["events"][0]["value"]["count"].get<std::uint64_t>(), 0u)
        << "a second wholly paused counted: " << still.dump();
    auto resume = d->monctl({"perf", "resume", "clock"});
    ASSERT_EQ(resume.exit_code, 0) << resume.err;
    EXPECT_NE(resume.out.find("Standing session 'clock' counts again"), std::string::npos)
        << resume.out;
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            auto c = show_json({"clock"});
            return c.at(0)["totals"]["events"][0]["value"]["count"].get<std::uint64_t>() >
                   paused_count;
        },
        3s));
    auto failed_pause = d->monctl({"perf", "pause", "later"});
    EXPECT_EQ(failed_pause.exit_code, 1);
    EXPECT_NE(failed_pause.err.find("standing session 'later' is not counting"), std::string::npos)
        << failed_pause.err;

    // An on-demand session counts beside them.
    auto collect = d->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "200ms"});
    EXPECT_EQ(collect.exit_code, 0) << collect.err;

    auto unknown = d->monctl({"perf", "show", "nope"});
    EXPECT_EQ(unknown.exit_code, 1);
    EXPECT_NE(unknown.err.find("no standing session 'nope'; there are clock, later"),
              std::string::npos)
        << unknown.err;

    // A reload: "clock" changes, "later" goes, "percpu" comes.
    test_support::write_file(conf,
                             "[[counters]]\nname = \"percpu\"\nevents = \"perf::CPU-CLOCK\"\n"
                             "target = \"each\"\n\n"
                             "[[counters]]\nname = \"clock\"\n"
                             "events = \"perf::TASK-CLOCK,perf::CONTEXT-SWITCHES\"\n");
    d->signal(SIGHUP);
    ASSERT_TRUE(test_support::wait_until([&] { return show_json().size() == 2; }, 5s)) << d->log();
    auto after = show_json();
    EXPECT_EQ(after[0]["name"], "percpu");
    EXPECT_EQ(after[1]["name"], "clock");
    EXPECT_EQ(after[1]["request"]["events"], "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES");
    ASSERT_TRUE(test_support::wait_until(
        [&] { return show_json({"percpu"}).at(0).contains("totals"); }, 5s));
    const auto cpus = show_json({"percpu"})[0]["totals"]["events"][0]["cpus"];
    EXPECT_EQ(cpus.size(), d->call("GetStatus")["cpus"].size()) << cpus.dump();
    EXPECT_NE(d->log().find("'later': removed from the configuration"), std::string::npos)
        << d->log();

    // A reload that fails keeps the sessions that count, and says where the table is wrong.
    test_support::write_file(conf, "[[counters]]\nname = \"clock\"\n");
    d->signal(SIGHUP);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return d->log().find("Reload failed") != std::string::npos; }, 5s));
    EXPECT_NE(d->log().find(conf.string() + ":1: [[counters]] 'clock': no events"),
              std::string::npos)
        << d->log();
    EXPECT_EQ(show_json().size(), 2u);

    // At start, a bad table is an error naming its line.
    auto check = run({monitord_bin(), "--check-config", "--config", conf.string()});
    EXPECT_NE(check.exit_code, 0);
    EXPECT_NE(check.err.find(conf.string() + ":1: [[counters]] 'clock': no events"),
              std::string::npos)
        << check.err;
}

// Access: the socket's group may connect and look; counting needs root or the control group.
// nobody's own group (nogroup) plays the part of `monitor` here.
class PerfAccess : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root to run clients as another user";
        if (::getgrnam("nogroup") == nullptr) GTEST_SKIP() << "no group nogroup here";
    }
    std::unique_ptr<Daemon> start(const std::string& access) {
        std::ofstream(conf_ / "monitord.conf") << "[access]\n" << access;
        std::filesystem::permissions(conf_.path(), std::filesystem::perms::others_exec,
                                     std::filesystem::perm_options::add);
        auto d = Daemon::start(
            {.args = {"--probe", "off", "--config", (conf_ / "monitord.conf").string()}});
        if (d) {
            std::filesystem::permissions(d->dir().path(), std::filesystem::perms::others_exec,
                                         std::filesystem::perm_options::add);
        }
        return d;
    }
    RunResult monctl_as(uid_t uid, const Daemon& d, std::vector<std::string> args) {
        args.insert(args.begin(), {monctl_bin(), "--socket", d.socket()});
        return run(args, SpawnOptions{.uid = uid});
    }
    ScratchDir conf_{ScratchDir::Everyone};
};

TEST_F(PerfAccess, TheSocketGroupMayLookButNotCount) {
    auto d = start("socket-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    struct stat st {};
    ASSERT_EQ(::stat(d->socket().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u);
    EXPECT_EQ(st.st_gid, ::getgrnam("nogroup")->gr_gid);
    auto info = monctl_as(nobody_uid(), *d, {"perf", "info"});
    EXPECT_EQ(info.exit_code, 0) << info.err;
    auto collect = monctl_as(nobody_uid(), *d, {"perf", "collect", "-e", "perf::TASK-CLOCK"});
    EXPECT_EQ(collect.exit_code, 1);
    EXPECT_NE(collect.err.find("counting needs root (monitord.conf's [access] control-group"),
              std::string::npos)
        << collect.err;
    auto reset = monctl_as(nobody_uid(), *d, {"perf", "reset"});
    EXPECT_EQ(reset.exit_code, 1);
    EXPECT_NE(reset.err.find("counting needs root"), std::string::npos) << reset.err;
    // A user outside the group cannot connect, and is told what it takes.
    constexpr uid_t kStranger = 54321;
    auto stranger = monctl_as(kStranger, *d, {"status"});
    EXPECT_EQ(stranger.exit_code, 1);
    EXPECT_NE(stranger.err.find("group nogroup"), std::string::npos) << stranger.err;
}

TEST_F(PerfAccess, TheControlGroupMayCount) {
    auto d = start("socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    // A process of the member's own.
    auto own = Process::start({"/bin/sleep", "30"}, SpawnOptions{.uid = nobody_uid()});
    ASSERT_TRUE(own);
    auto collect = monctl_as(nobody_uid(), *d,
                             {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p",
                              std::to_string(own->pid()), "--duration", "100ms"});
    EXPECT_EQ(collect.exit_code, 0) << collect.err;
    EXPECT_NE(collect.out.find("perf::TASK-CLOCK"), std::string::npos) << collect.out;

    // Several of its own, as perf stat -p takes them: one report of both processes' threads.
    auto other = Process::start({"/bin/sleep", "30"}, SpawnOptions{.uid = nobody_uid()});
    ASSERT_TRUE(other);
    const std::string both = std::to_string(own->pid()) + "," + std::to_string(other->pid());
    auto two = monctl_as(
        nobody_uid(), *d,
        {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", both, "--duration", "100ms", "--json"});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    const auto report = nlohmann::json::parse(two.out)["report"];
    EXPECT_EQ(report["threads"], 2) << two.out;  // sleep has one thread
    auto text =
        monctl_as(nobody_uid(), *d,
                  {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", both, "--duration", "100ms"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Performance counter stats for process id '" + both +
                            "' (their 2 threads at the start, and those they start):"),
              std::string::npos)
        << text.out;
    // One that is not its own (init is root's) among them: refused, naming it.
    auto mixed = monctl_as(nobody_uid(), *d,
                           {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p",
                            std::to_string(own->pid()) + ",1", "--duration", "100ms"});
    EXPECT_EQ(mixed.exit_code, 1) << mixed.out;
    EXPECT_NE(mixed.err.find("process 1 is not yours"), std::string::npos) << mixed.err;
    // Not a list of process ids; a profile of several.
    auto bad =
        monctl_as(nobody_uid(), *d, {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", "1,x"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("'x' is not a process id in '1,x': give 42 or a list as perf's: 42,43"),
              std::string::npos)
        << bad.err;
    auto profile = monctl_as(nobody_uid(), *d, {"perf", "profile", "-p", both});
    EXPECT_NE(profile.exit_code, 0);
    EXPECT_NE(profile.err.find("this command takes one process"), std::string::npos) << profile.err;
    other->stop(SIGKILL, 5s);
    own->stop(SIGKILL, 5s);
}

// The kernel's perf_event_paranoid, as the daemon reads it for a member's calls.
int paranoid_level() {
    return monitor::perf::read_perf_sysctls().paranoid;
}

// What a member of the control group measures is what the kernel would let it measure with
// its own perf_event_open: its own processes, CPUs and cgroups by perf_event_paranoid, user
// mode only at 2 and above. Root measures anything.
TEST_F(PerfAccess, AMemberMeasuresWhatTheKernelWouldLetItMeasure) {
    auto d = start("socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    auto own = Process::start({"/bin/sleep", "30"}, SpawnOptions{.uid = nobody_uid()});
    ASSERT_TRUE(own);
    const std::string pid = std::to_string(own->pid());
    const int paranoid = paranoid_level();

    // Root's process: never, whatever the level (init is root's): no counts, no profile, no
    // overflows, and no data breakpoint on its memory (a side channel, and its debug
    // registers).
    for (const auto& what :
         {std::vector<std::string>{"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", "1",
                                   "--duration", "100ms"},
          std::vector<std::string>{"perf", "collect", "-e", "mem:0x10000:rw", "-p", "1",
                                   "--duration", "100ms"},
          std::vector<std::string>{"perf", "profile", "-p", "1", "--duration", "100ms"},
          std::vector<std::string>{"perf", "overflows", "-e", "perf::CPU-CLOCK", "-c", "1000000",
                                   "-p", "1", "--duration", "100ms"}}) {
        auto r = monctl_as(nobody_uid(), *d, what);
        EXPECT_EQ(r.exit_code, 1) << what[1] << ": " << r.out;
        EXPECT_NE(r.err.find("process 1 is not yours"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("ptrace"), std::string::npos) << r.err;
    }
    // Its own process: always; in user mode only above 1, said by the ":u" in the names.
    auto counted = monctl_as(
        nobody_uid(), *d,
        {"perf", "collect", "-e", "perf::CPU-CLOCK", "-p", pid, "--duration", "100ms", "--json"});
    ASSERT_EQ(counted.exit_code, 0) << counted.err;
    const auto counts = nlohmann::json::parse(counted.out);
    EXPECT_EQ(counts["report"]["events"][0]["name"],
              paranoid >= 2 ? "perf::CPU-CLOCK:u" : "perf::CPU-CLOCK")
        << counted.out;
    auto profiled = monctl_as(nobody_uid(), *d,
                              {"perf", "profile", "-p", pid, "--duration", "200ms", "--json"});
    ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
    const auto profile = nlohmann::json::parse(profiled.out);
    EXPECT_EQ(profile["report"]["event"].get<std::string>().ends_with(":u"), paranoid >= 2)
        << profiled.out;
    // Every CPU, and a CPU: at level 0 or below only.
    for (const auto& what :
         {std::vector<std::string>{"perf", "collect", "-e", "perf::TASK-CLOCK", "-a", "--duration",
                                   "100ms"},
          std::vector<std::string>{"perf", "profile", "-C", "0", "--duration", "100ms"}}) {
        auto r = monctl_as(nobody_uid(), *d, what);
        if (paranoid <= 0) {
            EXPECT_EQ(r.exit_code, 0) << r.err;
        } else {
            EXPECT_EQ(r.exit_code, 1) << what[1] << ": " << r.out;
            EXPECT_NE(r.err.find("kernel.perf_event_paranoid 0 or below"), std::string::npos)
                << r.err;
        }
    }
    // Kernel mode: at level 1 or below only.
    auto kernel = monctl_as(nobody_uid(), *d,
                            {"perf", "profile", "--kernel", "-p", pid, "--duration", "100ms"});
    if (paranoid <= 1) {
        EXPECT_EQ(kernel.exit_code, 0) << kernel.err;
    } else {
        EXPECT_EQ(kernel.exit_code, 1) << kernel.out;
        EXPECT_NE(kernel.err.find("kernel mode needs kernel.perf_event_paranoid 1 or below"),
                  std::string::npos)
            << kernel.err;
    }
    // Root: anything.
    auto root = run({monctl_bin(), "--socket", d->socket(), "perf", "profile", "--kernel", "-p",
                     "1", "--duration", "100ms"});
    EXPECT_EQ(root.exit_code, 0) << root.err;
    own->stop(SIGKILL, 5s);
}

// A kernel address is shown to a reader only when kallsyms would show it one: a session that
// samples one CPU, kept idle (the test and its readers run on another), read by root and by a
// member of the socket's group at once. (Sampling every CPU, the last sample was often the
// readers' own user code under the sanitizers: no kernel address to hide.)
TEST_F(PerfAccess, KernelAddressesAreHiddenFromAReaderTheKernelHidesThemFrom) {
    if (monitor::perf::CallerRights::unprivileged(nobody_uid(), 0,
                                                  monitor::perf::read_perf_sysctls())
            .kernel_addresses()) {
        GTEST_SKIP() << "kernel.kptr_restrict 0 and perf_event_paranoid 1 or below here: every "
                        "user sees kernel addresses";
    }
    const auto online = monitor::read_online_cpus("/sys");
    if (!online || online->size() < 2) GTEST_SKIP() << "one CPU: no idle one to sample";
    const int sampled = online->back();
    cpu_set_t readers;
    CPU_ZERO(&readers);
    CPU_SET(online->front(), &readers);
    cpu_set_t before;
    ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
    ASSERT_EQ(::sched_setaffinity(0, sizeof readers, &readers), 0);  // the monctl below too
    struct Restore {
        cpu_set_t set;
        ~Restore() { ::sched_setaffinity(0, sizeof set, &set); }
    } restore{before};
    auto d = start("socket-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    auto started =
        run({monctl_bin(), "--socket", d->socket(), "perf", "start", "-e", "perf::CPU-CLOCK", "-C",
             std::to_string(sampled), "--sample-every", "100000"});
    ASSERT_EQ(started.exit_code, 0) << started.err;
    auto address = [&](std::optional<uid_t> uid) {
        std::vector<std::string> args{monctl_bin(), "--socket", d->socket(),
                                      "perf",       "read",     "--json"};
        auto r = run(args, SpawnOptions{.uid = uid});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        const auto j = nlohmann::json::parse(r.out, nullptr, false);
        const auto& e = j["report"]["events"][0];
        return e.contains("sampled_address") && !e["sampled_address"].is_null()
                   ? std::stoull(e["sampled_address"].get<std::string>(), nullptr, 16)
                   : std::uint64_t{1};
    };
    // An idle CPU is sampled in the kernel (the idle task).
    constexpr std::uint64_t kKernelHalf = std::uint64_t{1} << 63;
    bool root_saw_kernel = false, member_saw_hidden = false;
    for (int i = 0; i < 20 && !(root_saw_kernel && member_saw_hidden); ++i) {
        std::this_thread::sleep_for(100ms);
        root_saw_kernel = root_saw_kernel || address(std::nullopt) >= kKernelHalf;
        const auto member = address(nobody_uid());
        EXPECT_LT(member, kKernelHalf) << "a kernel address shown to uid " << nobody_uid();
        member_saw_hidden = member_saw_hidden || member == 0;
    }
    EXPECT_TRUE(root_saw_kernel) << "root never read a kernel address in 2 s";
    EXPECT_TRUE(member_saw_hidden) << "the member never read a hidden (0x0) address in 2 s";
    EXPECT_EQ(run({monctl_bin(), "--socket", d->socket(), "perf", "stop"}).exit_code, 0);
}

TEST_F(PerfAccess, AUserRunsAtMostItsShareOfProfilesWhileRootRunsMore) {
    auto d = start(
        "socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n"
        "[limits]\nprofiles-per-user = 1\n");
    ASSERT_TRUE(d);
    // Two of nobody's at once: whichever comes second is refused at once, naming the limit.
    std::vector<std::unique_ptr<Process>> nobody;
    for (int i = 0; i < 2; ++i) {
        nobody.push_back(Process::start({monctl_bin(), "--socket", d->socket(), "perf", "profile",
                                         "--duration", "4s", "--", "/bin/sleep", "5"},
                                        SpawnOptions{.uid = nobody_uid()}));
        ASSERT_TRUE(nobody.back());
    }
    std::size_t refused = 2;
    EXPECT_TRUE(test_support::wait_until(
        [&] {
            for (std::size_t i = 0; i < 2; ++i) {
                if (!nobody[i]->alive()) refused = i;
            }
            return refused < 2;
        },
        3s));
    ASSERT_LT(refused, 2u);
    Process& running = *nobody[1 - refused];
    EXPECT_EQ(nobody[refused]->stop(0, 1s), 1);
    EXPECT_NE(nobody[refused]->log().find("[limits] profiles-per-user"), std::string::npos)
        << nobody[refused]->log();
    EXPECT_TRUE(running.alive()) << running.log();
    // Root is held to the daemon's limit only.
    auto root = run(
        {monctl_bin(), "--socket", d->socket(), "perf", "profile", "-a", "--duration", "100ms"});
    EXPECT_EQ(root.exit_code, 0) << root.err;
    // Once the first ended, nobody may run one again.
    EXPECT_EQ(running.stop(0, 10s), 0) << running.log();
    auto again =
        monctl_as(nobody_uid(), *d, {"perf", "profile", "--duration", "100ms", "--", "/bin/true"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
}

// [limits] perf-files-per-session: a member's session, profile or sampled events that would
// open more perf_event files are refused before one is opened, naming the limit; root's are not.
TEST_F(PerfAccess, AUsersSessionOpensAtMostTheLimitsPerfFiles) {
    auto d = start(
        "socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n"
        "[limits]\nperf-files-per-session = 3\n");
    ASSERT_TRUE(d);
    // A process of the member's own with two threads: a file per event (or CPU) and thread.
    auto own = Process::start({profile_burner_bin(), "30", "2"}, SpawnOptions{.uid = nobody_uid()});
    ASSERT_TRUE(own);
    const std::string pid = std::to_string(own->pid());
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            std::error_code ec;
            auto it = std::filesystem::directory_iterator("/proc/" + pid + "/task", ec);
            return !ec && std::distance(it, std::filesystem::directory_iterator{}) == 2;
        },
        5s));
    const std::string two = "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES";
    auto many = monctl_as(nobody_uid(), *d,
                          {"perf", "collect", "-e", two, "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(many.exit_code, 1) << many.out;
    EXPECT_NE(many.err.find(fmt::format("counting 2 events on each of the 2 threads of process {} "
                                        "opens 4 perf_event files, more than the 3 allowed "
                                        "([limits] perf-files-per-session in monitord.conf(5)",
                                        pid)),
              std::string::npos)
        << many.err;
    auto fits =
        monctl_as(nobody_uid(), *d,
                  {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(fits.exit_code, 0) << fits.err;
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus >= 2) {
        auto wide =
            monctl_as(nobody_uid(), *d, {"perf", "profile", "-p", pid, "--duration", "100ms"});
        EXPECT_EQ(wide.exit_code, 1) << wide.out;
        EXPECT_NE(wide.err.find(fmt::format("sampling the 2 threads of process {} on each of {} "
                                            "CPUs opens {} perf_event files",
                                            pid, cpus, 2 * cpus)),
                  std::string::npos)
            << wide.err;
        EXPECT_NE(wide.err.find("[limits] perf-files-per-session"), std::string::npos) << wide.err;
    }
    // Counting one event leaves one file: sampling it on every CPU of two threads takes more.
    auto sampled = monctl_as(nobody_uid(), *d,
                             {"perf", "collect", "-e", "perf::TASK-CLOCK", "--sample-every",
                              "1000000", "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(sampled.exit_code, 1) << sampled.out;
    EXPECT_NE(sampled.err.find("sampling every 1000000 events: "), std::string::npos)
        << sampled.err;
    EXPECT_NE(sampled.err.find("[limits] perf-files-per-session"), std::string::npos)
        << sampled.err;
    // Root is held to RLIMIT_NOFILE only.
    auto root = run({monctl_bin(), "--socket", d->socket(), "perf", "profile", "-p", pid,
                     "--duration", "100ms"});
    EXPECT_EQ(root.exit_code, 0) << root.err;
    auto root_many = run({monctl_bin(), "--socket", d->socket(), "perf", "collect", "-e", two, "-p",
                          pid, "--duration", "100ms"});
    EXPECT_EQ(root_many.exit_code, 0) << root_many.err;
    // Nothing was left open by the refusals: the member counts again within its share.
    auto again =
        monctl_as(nobody_uid(), *d,
                  {"perf", "collect", "-e", "perf::TASK-CLOCK", "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    own->stop(SIGKILL, 5s);
}

// A member watches no kernel memory with a breakpoint, counted or sampled: the kernel lets only
// CAP_SYS_ADMIN do that, whatever kernel.perf_event_paranoid says. Root may.
TEST_F(PerfAccess, AMemberSetsNoBreakpointOnKernelMemory) {
    auto d = start("socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    auto own = Process::start({"/bin/sleep", "30"}, SpawnOptions{.uid = nobody_uid()});
    ASSERT_TRUE(own);
    const std::string pid = std::to_string(own->pid());
    const std::string kernel = "mem:0xffffffff81000000:x";
    auto counted = monctl_as(nobody_uid(), *d,
                             {"perf", "collect", "-e", kernel, "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(counted.exit_code, 1) << counted.out;
    EXPECT_NE(counted.err.find("0xffffffff81000000 is a kernel address, and the kernel lets only "
                               "a user with CAP_SYS_ADMIN watch kernel memory"),
              std::string::npos)
        << counted.err;
    auto sampled = monctl_as(nobody_uid(), *d,
                             {"perf", "profile", "-e", kernel, "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(sampled.exit_code, 1) << sampled.out;
    EXPECT_NE(sampled.err.find("is a kernel address"), std::string::npos) << sampled.err;
    // Root watches kernel data (not code of its entry, which the kernel keeps breakpoints
    // from), at the first data symbol kallsyms shows root.
    std::ifstream kallsyms("/proc/kallsyms");
    std::string data;
    for (std::string line; std::getline(kallsyms, line);) {
        const auto type = line.find(' ') + 1;
        if (line.starts_with("0000000000000000") || type >= line.size() ||
            std::string_view("DdBb").find(line[type]) == std::string_view::npos) {
            continue;
        }
        const auto address = std::stoull(line.substr(0, type - 1), nullptr, 16) & ~7ULL;
        data = fmt::format("mem:{:#x}/8:rw", address);
        break;
    }
    if (data.empty()) GTEST_SKIP() << "kallsyms shows no kernel data address here";
    auto root = run({monctl_bin(), "--socket", d->socket(), "perf", "collect", "-e", data, "-p",
                     pid, "--duration", "100ms"});
    EXPECT_EQ(root.exit_code, 0) << root.err;
    auto member = monctl_as(nobody_uid(), *d,
                            {"perf", "collect", "-e", data, "-p", pid, "--duration", "100ms"});
    EXPECT_EQ(member.exit_code, 1) << member.out;
    own->stop(SIGKILL, 5s);
}

// A member's command that execs a setuid program is sampled up to that exec and no further:
// the kernel takes every event off a task that an exec makes undumpable (perf_event_exit_task
// in begin_new_exec), the daemon's own too, so that a member does not sample root's program
// through the daemon. The same program without the setuid bit is sampled whole.
TEST_F(PerfAccess, AMembersCommandIsNotMeasuredPastASetuidExec) {
    ScratchDir dir{ScratchDir::Everyone};
    struct statvfs fs {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &fs), 0);
    if ((fs.f_flag & ST_NOSUID) != 0) GTEST_SKIP() << dir.path() << " is mounted nosuid";
    const auto plain = dir / "burner";
    const auto setuid = dir / "burner-setuid";
    for (const auto& copy : {plain, setuid}) {
        std::filesystem::copy_file(profile_burner_bin(), copy);
        ASSERT_EQ(::chown(copy.c_str(), 0, 0), 0);
    }
    ASSERT_EQ(::chmod(plain.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(setuid.c_str(), 04755), 0);
    auto d = start("socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n");
    ASSERT_TRUE(d);
    // The samples of the member's profile of the command, through the daemon.
    auto sampled = [&](const std::string& program) -> double {
        const auto start = std::chrono::steady_clock::now();
        auto r = monctl_as(nobody_uid(), *d, {"perf", "profile", "--user", "--", program, "0.4"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_GE(std::chrono::steady_clock::now() - start, 350ms) << program << " burned";
        std::smatch m;
        if (!std::regex_search(r.err, m, std::regex(R"(\n  ([0-9,]+) samples:)"))) {
            ADD_FAILURE() << r.err;
            return -1;
        }
        std::string digits = m[1];
        std::erase(digits, ',');
        return std::stod(digits);
    };
    const double plain_samples = sampled(plain.string());
    const double setuid_samples = sampled(setuid.string());
    EXPECT_GT(plain_samples, 1000) << "0.4 s at 4000 Hz";
    EXPECT_LT(setuid_samples, 0.1 * plain_samples) << "sampled past the setuid exec";
    std::printf(
        "a member's command sampled by the daemon: %.0f samples as itself, %.0f setuid "
        "root\n",
        plain_samples, setuid_samples);
}

// monctl perf stat counts with the user's own perf_event_open: at perf_event_paranoid 2 a user
// counts user mode only, and monctl then does that, as perf stat does, saying so; an event
// of kernel mode only stays refused.
TEST_F(PerfAccess, PerfStatCountsUserModeOnlyWhenThatIsAllTheKernelAllows) {
    const auto sysctls = monitor::perf::read_perf_sysctls();
    if (sysctls.paranoid != 2) {
        GTEST_SKIP() << "kernel.perf_event_paranoid is " << sysctls.paranoid
                     << ": a user counts kernel mode at 1 and below, nothing at 3";
    }
    auto r = run({monctl_bin(), "perf", "stat", "-e", "perf::TASK-CLOCK", "--", "/bin/true"},
                 SpawnOptions{.uid = nobody_uid()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("monctl: counting user mode only: kernel mode needs "
                         "kernel.perf_event_paranoid 1 or below"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("perf::TASK-CLOCK:u"), std::string::npos) << r.err;
    auto kernel = run({monctl_bin(), "perf", "stat", "-e", "perf::TASK-CLOCK:k", "--", "/bin/true"},
                      SpawnOptions{.uid = nobody_uid()});
    EXPECT_EQ(kernel.exit_code, 1) << kernel.err;
    EXPECT_EQ(kernel.err.find("counting user mode only"), std::string::npos) << kernel.err;
}

// [limits] profile-duration: a member's longer duration is refused, and its command sampled
// until it exits is sampled that long at most; root's are not limited.
TEST_F(PerfAccess, AUsersProfileRunsAtMostTheLimitsDuration) {
    auto d = start(
        "socket-group = \"nogroup\"\ncontrol-group = \"nogroup\"\n"
        "[limits]\nprofile-duration = 1\n");
    ASSERT_TRUE(d);
    auto longer =
        monctl_as(nobody_uid(), *d, {"perf", "profile", "--duration", "2s", "--", "/bin/true"});
    EXPECT_EQ(longer.exit_code, 1) << longer.out;
    EXPECT_NE(longer.err.find("[limits] profile-duration"), std::string::npos) << longer.err;
    // The command's profile (on stderr) ends at the limit, and says so; the command goes on.
    auto capped =
        monctl_as(nobody_uid(), *d, {"--json", "perf", "profile", "--", "/bin/sleep", "3"});
    EXPECT_EQ(capped.exit_code, 0) << capped.err;
    const auto last = capped.err.substr(capped.err.rfind("{\"report\""));
    const auto report = nlohmann::json::parse(last, nullptr, false)["report"];
    EXPECT_LT(report["elapsed"].get<double>(), 2.0) << last;
    EXPECT_NE(report["ended"].get<std::string>().find("[limits] profile-duration"),
              std::string::npos)
        << last;
    auto root = run({monctl_bin(), "--socket", d->socket(), "--json", "perf", "profile", "--",
                     "/bin/sleep", "2"});
    EXPECT_EQ(root.exit_code, 0) << root.err;
    EXPECT_EQ(root.err.find("profile-duration"), std::string::npos) << root.err;
    EXPECT_NE(root.err.find("exited"), std::string::npos) << root.err;
}

// Counting the tasks of a cgroup, named by path or by systemd unit. perf_event_open counts a
// cgroup only given a directory of the hierarchy that holds the perf_event controller, so
// these tests make real cgroups in the cgroup2 hierarchy rather than a scratch tree.

using test_support::steal_ns;

// One `monctl perf collect -e perf::TASK-CLOCK` of a cgroup, beside what the kernel's own
// accounting says about the same cgroup over the whole monctl call.
struct CgroupCount {
    RunResult run;
    nlohmann::json reply;
    double counted_ns = 0;  // task-clock, from the daemon
    double elapsed_ns = 0;  // how long the session counted, from the daemon
    double usage_ns = 0;    // the cgroup's CPU time over the monctl call (cpu.stat)
    double wall_ns = 0;     // how long the monctl call took
    double stolen_ns = 0;   // what the hypervisor took from all CPUs meanwhile
};

// Tests of cgroup targets: each has a scratch cgroup of its own, removed after it. They skip
// where perf cannot count cgroup2 directories or no cgroup can be made.
class PerfCgroups : public PerfCommands {
  protected:
    void SetUp() override {
        PerfCommands::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        mount_ = cgroup2_mount();
        if (mount_.empty()) GTEST_SKIP() << "cgroup2 is not mounted";
        if (auto why = perf_event_off_cgroup2(); !why.empty()) {
            GTEST_SKIP() << "perf cannot count cgroup2 directories here: " << why;
        }
        if (mount_ != kCgroupRoot && mount_.parent_path() != kCgroupRoot) {
            GTEST_SKIP() << "cgroup2 is mounted at " << mount_ << ", where the daemon does not "
                         << "look (it takes cgroups below " << kCgroupRoot << ")";
        }
        home_ = own_cgroup(mount_);
        scratch_ = std::make_unique<CgroupDir>(
            mount_ / ("monitord-test-" + std::to_string(::getpid())), home_);
        if (const int err = scratch_->error(); err != 0) {
            const fs::path path = scratch_->path();
            scratch_.reset();
            if (err == EACCES || err == EROFS || err == EPERM) {
                GTEST_SKIP() << "cannot make a cgroup at " << path << ": " << std::strerror(err);
            }
            FAIL() << "cannot make a cgroup at " << path << ": " << std::strerror(err);
        }
    }
    void TearDown() override { scratch_.reset(); }

    // A cgroup below this test's own scratch cgroup.
    std::unique_ptr<CgroupDir> make(const fs::path& below_scratch) const {
        auto cg = std::make_unique<CgroupDir>(scratch_->path() / below_scratch, home_);
        EXPECT_EQ(cg->error(), 0) << cg->path() << ": " << std::strerror(cg->error());
        return cg;
    }

    static std::unique_ptr<Child> spin_in(const CgroupDir& cg) { return spin_at_top_priority(&cg); }

    // Counts task-clock of `cg` for `duration` with the target options `target`.
    static CgroupCount collect(const CgroupDir& cg, const std::vector<std::string>& target,
                               const std::string& duration) {
        std::vector<std::string> args = {"perf",       "collect", "-e",    "perf::TASK-CLOCK",
                                         "--duration", duration,  "--json"};
        args.insert(args.end(), target.begin(), target.end());
        CgroupCount c;
        const auto usage_before = cg.usage_ns();
        const double steal_before = steal_ns();
        const auto started = std::chrono::steady_clock::now();
        c.run = daemon_->monctl(args);
        c.wall_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::steady_clock::now() - started)
                                            .count());
        c.stolen_ns = steal_ns() - steal_before;
        const auto usage_after = cg.usage_ns();
        EXPECT_TRUE(usage_before && usage_after) << "no usage_usec in " << cg.path() / "cpu.stat";
        if (usage_before && usage_after) c.usage_ns = *usage_after - *usage_before;
        if (c.run.exit_code != 0) return c;
        c.reply = nlohmann::json::parse(c.run.out, nullptr, false);
        if (c.reply.is_discarded() || !c.reply.contains("report")) return c;
        const auto& report = c.reply["report"];
        c.elapsed_ns = report["elapsed"].get<double>() * 1e9;
        if (report["events"].size() == 1) {
            // The raw count: for a cgroup the kernel's enabled and running times, and with
            // them the scaled estimate, can be far off (uptime, the first time a cgroup is
            // counted on a CPU).
            c.counted_ns = report["events"][0]["value"]["count"].get<double>();
        }
        return c;
    }

    fs::path mount_;
    fs::path home_;
    std::unique_ptr<CgroupDir> scratch_;
};

std::string describe(const CgroupCount& c) {
    std::ostringstream s;
    s << "task-clock " << c.counted_ns / 1e6 << " ms in a session of " << c.elapsed_ns / 1e6
      << " ms; the cgroup's CPU time " << c.usage_ns / 1e6 << " ms in the " << c.wall_ns / 1e6
      << " ms monctl took; steal " << c.stolen_ns / 1e6 << " ms\n"
      << c.run.out << c.run.err;
    return s.str();
}

// Checks a collect of a cgroup whose one task spins through the session.
void expect_counts_the_spinner(const CgroupCount& c, double duration_ns) {
    SCOPED_TRACE(describe(c));
    ASSERT_EQ(c.run.exit_code, 0);
    EXPECT_EQ(check_reply("CollectCounters", c.reply), "");
    ASSERT_EQ(c.reply["report"]["events"].size(), 1u);
    EXPECT_TRUE(c.reply["report"]["final"].get<bool>());
    // The session counts for the whole duration asked for: its timer fires within a
    // millisecond, and finding the cgroup or opening the counters must not come out of it.
    EXPECT_GE(c.elapsed_ns, duration_ns - 2e6);
    EXPECT_LE(c.elapsed_ns, duration_ns + 250e6);
    // cpu.stat lags a running task by up to a scheduler tick at each end, and the daemon
    // reads the counter of each CPU at a slightly different moment.
    constexpr double kSlackNs = 20e6;
    // Without enough CPU time for the spinner, the bounds below would hold for any count;
    // even at nice -20 that takes a machine far busier than its CPUs.
    if (c.usage_ns < 0.5 * c.elapsed_ns) {
        GTEST_SKIP() << "the spinning child got too little CPU to tell a right count from a "
                        "wrong one: "
                     << describe(c);
    }
    // One spinning thread is on a CPU for the session at most: about 1 s in a 1 s session,
    // not the 2 s of two CPUs or the time of any other task.
    EXPECT_LE(c.counted_ns, c.elapsed_ns + kSlackNs);
    // No more than the cgroup's own CPU time; task-clock also runs while the hypervisor steals
    // the CPU, which cpu.stat leaves out.
    EXPECT_LE(c.counted_ns, c.usage_ns + c.stolen_ns + kSlackNs);
    // And all of it within the session: the cgroup's CPU time over the monctl call, less
    // what one thread can have had outside the session. On a quiet machine the two bounds
    // close in on the whole session; when other work or the hypervisor takes part of the
    // spinner's CPU, the count comes down with its CPU time instead of failing the test.
    EXPECT_GE(c.counted_ns, c.usage_ns - (c.wall_ns - c.elapsed_ns) - kSlackNs);
}

TEST_F(PerfCgroups, CollectCountsTheTasksOfACgroup) {
    auto busy = make("busy");
    auto idle = make("idle");
    ASSERT_FALSE(HasFailure());
    auto spinner = spin_in(*busy);
    Child sleeper(Child::Does::Sleep);
    ASSERT_GT(sleeper.pid(), 0);
    ASSERT_EQ(idle->add(sleeper.pid()), "");
    ASSERT_FALSE(HasFailure());

    // By absolute path.
    const auto b = collect(*busy, {"--cgroup", busy->path().string()}, "1s");
    expect_counts_the_spinner(b, 1e9);
    if (IsSkipped() || HasFatalFailure()) return;

    // By a path below the cgroup root, while the spinner goes on in its own cgroup: a count
    // of anything but the sleeping process would show it.
    const auto i =
        collect(*idle, {"--cgroup", idle->path().lexically_relative(kCgroupRoot)}, "500ms");
    SCOPED_TRACE(describe(i));
    ASSERT_EQ(i.run.exit_code, 0);
    EXPECT_EQ(check_reply("CollectCounters", i.reply), "");
    EXPECT_GE(i.elapsed_ns, 498e6);
    EXPECT_LT(i.counted_ns, 1e6);
}

TEST_F(PerfCgroups, CollectFindsTheCgroupOfAUnit) {
    const std::string name = "monitord-test-" + std::to_string(::getpid());
    const std::string unit = name + ".service";
    // As systemd lays out a service: a directory named after the unit in a slice.
    auto slice = make("test.slice");
    ASSERT_FALSE(HasFailure());
    auto service = make(fs::path("test.slice") / unit);
    ASSERT_FALSE(HasFailure());
    // The daemon looks five levels down, deep enough for system.slice/NAME.service on
    // cgroup2 alone and below /sys/fs/cgroup/unified.
    const auto below_root = service->path().lexically_relative(kCgroupRoot);
    if (std::distance(below_root.begin(), below_root.end()) > 5) {
        GTEST_SKIP() << service->path() << " is deeper than the daemon looks for units";
    }
    auto spinner = spin_in(*service);
    ASSERT_FALSE(HasFailure());

    const auto c = collect(*service, {"--unit", unit}, "1s");
    expect_counts_the_spinner(c, 1e9);
    if (IsSkipped() || HasFatalFailure()) return;

    // Without a suffix the name is a service's.
    const auto s = collect(*service, {"--unit", name}, "300ms");
    expect_counts_the_spinner(s, 300e6);
}

// perf stat's --per-core and its kin, on this machine's CPUs counted for real and a topology
// the test describes (--sys-root): every online CPU a thread of one core of socket 0, node 0.
TEST(PerfTopology, PerCorePerSocketPerNodeAddTheirCpusUp) {
    if (::geteuid() != 0) GTEST_SKIP() << "counting every CPU needs root or CAP_PERFMON";
    auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    test_support::ScratchDir sys;
    std::string list;
    for (int cpu : *online) {
        const auto topology = sys / ("devices/system/cpu/cpu" + std::to_string(cpu)) / "topology";
        test_support::write_file(topology / "physical_package_id", "0\n");
        test_support::write_file(topology / "die_id", "0\n");
        test_support::write_file(topology / "core_id", "0\n");
        list += (list.empty() ? "" : ",") + std::to_string(cpu);
    }
    test_support::write_file(sys / "devices/system/cpu/online", list + "\n");
    test_support::write_file(sys / "devices/system/node/node0/cpulist", list + "\n");
    auto d = Daemon::start({.args = {"--sys-root", sys.path().string(), "--probe", "off"}});
    ASSERT_TRUE(d);
    const auto n = static_cast<double>(online->size());

    auto core = d->monctl({"perf", "collect", "-a", "--per-core", "-e", "perf::TASK-CLOCK",
                           "--duration", "200ms", "--json"});
    ASSERT_EQ(core.exit_code, 0) << core.err;
    const auto r = nlohmann::json::parse(core.out)["report"];
    ASSERT_EQ(r["groups"].size(), 1u) << r.dump();
    EXPECT_EQ(r["groups"][0]["id"], "S0-D0-C0");
    EXPECT_EQ(r["groups"][0]["cpus"].get<std::vector<int>>(), *online);
    const auto& e = r["events"][0];
    EXPECT_FALSE(e.contains("cpus")) << e.dump();
    ASSERT_EQ(e["groups"].size(), 1u) << e.dump();
    // Every CPU's clock over 200 ms, added up, as the total is.
    EXPECT_NEAR(e["groups"][0]["value"]["count"].get<double>(), 0.2e9 * n, 0.05e9 * n);
    EXPECT_EQ(e["groups"][0]["value"]["count"], e["value"]["count"]);

    // In perf stat's words: the group, how many CPUs it has, the count.
    auto text = d->monctl(
        {"perf", "collect", "--per-socket", "-e", "perf::TASK-CLOCK", "--duration", "100ms"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_TRUE(std::regex_search(
        text.out, std::regex{fmt::format(R"((^|\n)S0 +{} +[0-9.,]+ msec +perf::TASK-CLOCK)",
                                         online->size())}))
        << text.out;
    auto node = d->monctl({"perf", "collect", "--per-node", "-x", ",", "-e", "perf::TASK-CLOCK",
                           "--duration", "100ms"});
    ASSERT_EQ(node.exit_code, 0) << node.err;
    EXPECT_TRUE(
        std::regex_search(node.out, std::regex{fmt::format(R"((^|\n)N0,{},)", online->size())}))
        << node.out;

    // One level at a time, and not for a process.
    auto two = d->monctl({"perf", "collect", "--per-core", "--per-die", "-e", "perf::TASK-CLOCK"});
    EXPECT_NE(two.exit_code, 0) << two.err;
    EXPECT_NE(two.err.find("excludes"), std::string::npos) << two.err;
    auto process = d->monctl({"perf", "collect", "--per-core", "-p", std::to_string(::getpid()),
                              "-e", "perf::TASK-CLOCK"});
    EXPECT_NE(process.exit_code, 0) << process.err;
    EXPECT_NE(process.err.find("excludes"), std::string::npos) << process.err;
}

TEST_F(PerfCommands, CollectNamesAMissingUnitOrCgroup) {
    const std::string absent = "monitord-test-" + std::to_string(::getpid()) + "-absent";
    auto unit = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms",
                                 "--unit", absent + ".service"});
    EXPECT_EQ(unit.exit_code, 1);
    EXPECT_NE(
        unit.err.find("no cgroup for unit " + absent + ".service under " + kCgroupRoot.string()),
        std::string::npos)
        << unit.err;
    EXPECT_NE(unit.err.find("is the unit running?"), std::string::npos) << unit.err;
    EXPECT_EQ(unit.out, "");

    auto bare = daemon_->monctl(
        {"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms", "--unit", absent});
    EXPECT_EQ(bare.exit_code, 1);
    EXPECT_NE(bare.err.find("no cgroup for unit " + absent + ".service"), std::string::npos)
        << bare.err;

    auto slash = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration",
                                  "100ms", "--unit", "a/b.service"});
    EXPECT_EQ(slash.exit_code, 1);
    EXPECT_NE(slash.err.find("'a/b.service' is not a unit name"), std::string::npos) << slash.err;

    // A path below the cgroup root and an absolute one both name the directory they miss.
    for (const auto& path : {absent, (kCgroupRoot / absent).string()}) {
        auto cgroup = daemon_->monctl(
            {"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms", "--cgroup", path});
        EXPECT_EQ(cgroup.exit_code, 1) << path;
        EXPECT_NE(cgroup.err.find("cgroup " + (kCgroupRoot / absent).string() +
                                  ": No such file or directory"),
                  std::string::npos)
            << path << ": " << cgroup.err;
    }

    // A path that could lead out of the cgroup tree is refused before anything is opened.
    auto out = daemon_->monctl(
        {"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "100ms", "--cgroup", "../etc"});
    EXPECT_EQ(out.exit_code, 1);
    EXPECT_NE(out.err.find("cgroup '../etc': '..' could lead out of the cgroup tree"),
              std::string::npos)
        << out.err;

    // Over varlink both are NoSuchTarget.
    monitor::varlink::Client c = daemon_->connect();
    for (const auto& target : {nlohmann::json{{"kind", "unit"}, {"unit", absent + ".service"}},
                               nlohmann::json{{"kind", "cgroup"}, {"cgroup", absent}}}) {
        auto reply = c.call("io.monitord.Monitor.CollectCounters",
                            {{"request", {{"events", "perf::TASK-CLOCK"}, {"target", target}}},
                             {"duration_ms", 100}});
        ASSERT_TRUE(reply) << reply.error().to_string();
        ASSERT_TRUE(reply->error) << target.dump();
        EXPECT_EQ(*reply->error, "io.monitord.Monitor.NoSuchTarget") << target.dump();
    }

    // None of them left a session behind.
    auto after =
        daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--duration", "50ms"});
    EXPECT_EQ(after.exit_code, 0) << after.err;
}

}  // namespace
}  // namespace itest
