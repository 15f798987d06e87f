// The performance-counter commands end to end: the real monctl against the real monitord,
// counting the kernel's software events with perf_event_open.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "daemon_process.hpp"

namespace itest {
namespace {

class PerfCommands : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        daemon_ = Daemon::start({.args = {"--probe", "off"}}).release();
        ASSERT_TRUE(daemon_);
    }
    static void TearDownTestSuite() {
        delete daemon_;
        daemon_ = nullptr;
    }
    void SetUp() override {
        ASSERT_TRUE(daemon_) << "the daemon did not start";
        if (::geteuid() != 0) GTEST_SKIP() << "counting every CPU needs root or CAP_PERFMON";
    }

    static Daemon* daemon_;
};
Daemon* PerfCommands::daemon_ = nullptr;

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
                              "-d", "500ms", "--json"});
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

TEST_F(PerfCommands, IntervalsStreamPerPeriodCounts) {
    auto r = daemon_->monctl(
        {"perf", "collect", "-e", "perf::TASK-CLOCK", "-d", "1s", "-i", "250ms", "--csv"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("period,event,cpu,count"), std::string::npos) << r.out;
    for (auto p : {"\n1,perf::TASK-CLOCK,all,", "\n4,perf::TASK-CLOCK,all,",
                   "\ntotal,perf::TASK-CLOCK,all,"}) {
        EXPECT_NE(r.out.find(p), std::string::npos) << p << " in\n" << r.out;
    }
}

TEST_F(PerfCommands, MultiplexingWithACounterBudgetScales) {
    auto r = daemon_->monctl({"perf", "collect", "-e",
                              "perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK,perf::TASK-CLOCK",
                              "--counters", "2", "-d", "1s", "--json"});
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
    auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOK", "-d", "100ms"});
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
    auto second = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "-d", "100ms"});
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
        auto busy = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "-d", "50ms"});
        EXPECT_EQ(busy.exit_code, 1) << busy.out;
    }  // the client disconnects
    bool freed = false;
    for (int i = 0; i < 50 && !freed; ++i) {
        auto r = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "-d", "50ms"});
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

TEST_F(PerfCommands, OtherUsersMayLookButNotCount) {
    std::filesystem::permissions(daemon_->dir().path(), std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
    SpawnOptions as_nobody{.uid = nobody_uid()};
    auto list = run({monctl_bin(), "--socket", daemon_->socket(), "perf", "info"}, as_nobody);
    if (list.err.find("ermission denied") != std::string::npos) {
        GTEST_SKIP() << "the socket is not reachable by nobody here: " << list.err;
    }
    EXPECT_EQ(list.exit_code, 0) << list.err;
    auto collect = run({monctl_bin(), "--socket", daemon_->socket(), "perf", "collect", "-e",
                        "perf::TASK-CLOCK", "-d", "100ms"},
                       as_nobody);
    EXPECT_EQ(collect.exit_code, 1);
    EXPECT_NE(collect.err.find("counting needs root"), std::string::npos) << collect.err;
}

}  // namespace
}  // namespace itest
