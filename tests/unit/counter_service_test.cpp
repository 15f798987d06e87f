// Tests of the CounterService on the daemon's components (DaemonComponents), counting on the
// SIMULATED PowerPC 750 PMU of tests/support, which CounterServiceOptions::device (the
// DeviceFactory seam) puts in place of perf_event_open, over a catalog that sees a 750 (a
// described /proc/cpuinfo and core PMU). The simulated PMU counts only when its clock is moved
// (on the loop's thread), so every count here is exact: rate x simulated time x CPUs.
#include "counter_service.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "../support/simulated_ppc750_pmu.hpp"
#include "daemon_components.hpp"
#include "interface_check.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using monitor::perf::testing::SimulatedPpc750Pmu;
using monitor::varlink::Reply;
using nlohmann::json;
using test_support::call_checked;

const std::string kMonitor = "io.monitord.Monitor.";

// One event of each counter's own list, so that the plan puts them on PMC1-PMC4 in one set;
// distinct rates (per CPU, events per second of simulated time).
struct PlannedEvent {
    std::string_view name;
    std::string_view counter;
    double rate;
};
constexpr PlannedEvent kPlanned[] = {
    {"ppc750::EIEIO_COMPLETED", "PMC1", 1e6},
    {"ppc750::L1_ICACHE_MISSES", "PMC2", 3e6},
    {"ppc750::L1_DCACHE_MISSES", "PMC3", 5e6},
    {"ppc750::L2_CASTOUTS", "PMC4", 7e6},
};
const json kRequest = {{"events",
                        "ppc750::EIEIO_COMPLETED,ppc750::L1_ICACHE_MISSES,"
                        "ppc750::L1_DCACHE_MISSES,ppc750::L2_CASTOUTS"}};
// The fixture's online CPUs (0-1): the target "all" adds both up.
constexpr int kCpus = 2;

// What `event` counts on all CPUs in `simulated` time.
std::uint64_t expected_count(const PlannedEvent& event, std::chrono::nanoseconds simulated) {
    return static_cast<std::uint64_t>(event.rate * kCpus *
                                      std::chrono::duration<double>(simulated).count());
}

// (The helpers take JSON by value: a missing key then reads as null and fails a check,
// where a const lookup would abort.)
std::optional<json> event_in(json report, std::string_view name) {
    for (const auto& e : report["events"]) {
        if (e.value("name", "") == name) return e;
    }
    ADD_FAILURE() << "no " << name << " in " << report.dump();
    return std::nullopt;
}

// Each planned event counted exactly `simulated` time, the whole time on its counter.
void ExpectCounts(json report, std::chrono::nanoseconds simulated) {
    ASSERT_EQ(report["events"].size(), std::size(kPlanned)) << report.dump();
    for (const auto& planned : kPlanned) {
        auto e = event_in(report, planned.name);
        if (!e) continue;
        json value = (*e)["value"];
        EXPECT_EQ(value["count"].get<std::uint64_t>(), expected_count(planned, simulated))
            << planned.name;
        EXPECT_EQ(value["running"].get<double>(), 1.0) << planned.name;
        EXPECT_EQ(value["scaled"].get<double>(), value["count"].get<double>()) << planned.name;
    }
}

// The plan puts each event on the one counter that can hold it, all in one set.
void ExpectPlan(json plan) {
    EXPECT_EQ(plan["slots"], 1) << plan.dump();
    ASSERT_EQ(plan["groups"].size(), 1u) << plan.dump();
    json group = plan["groups"][0];
    EXPECT_EQ(group["pmu"], "ppc750");
    EXPECT_EQ(group["sets"], 1);
    ASSERT_EQ(group["members"].size(), std::size(kPlanned)) << plan.dump();
    for (std::size_t i = 0; i < std::size(kPlanned); ++i) {
        EXPECT_EQ(group["members"][i]["event"], kPlanned[i].name);
        EXPECT_EQ(group["members"][i]["counter"], kPlanned[i].counter) << kPlanned[i].name;
    }
}

class CounterServiceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        test_support::ComponentOptions o;
        o.cpuinfo = test_support::kPpc750CxeCpuinfo;
        o.core_pmu = true;
        // Nothing but the counter runs wakes the loop: each wake-up below is one of theirs.
        o.manual_ticks = true;
        CounterServiceOptions counters;
        // A FAKE for perf_event_open: a simulated 750 PMU per session, made on the loop's
        // thread, which alone touches it.
        counters.device = [this] {
            if (on_device_) on_device_();
            auto pmu = std::make_unique<SimulatedPpc750Pmu>(kCpus);
            for (const auto& e : kPlanned) {
                EXPECT_TRUE(pmu->set_rate(e.name.substr(e.name.find("::") + 2), e.rate));
            }
            pmu_ = pmu.get();
            ++devices_;
            return pmu;
        };
        o.counters = counters;
        o.on_timer = [this] {
            if (advance_on_timer_ && session_running()) pmu_->advance(*advance_on_timer_);
        };
        components_.emplace(std::move(o));
        ASSERT_TRUE(components_->ok()) << components_->error();
        client_.emplace(components_->connect());
    }

    // The loop's thread only: the PMU of the running session is alive.
    bool session_running() { return !components_->counters().describe().empty(); }

    // Moves the simulated clock of the running session's PMU.
    void advance(std::chrono::nanoseconds dt) {
        components_->on_loop([&] {
            ASSERT_TRUE(session_running()) << "no session to advance the PMU of";
            pmu_->advance(dt);
        });
    }
    bool running() {
        return components_->on_loop([&] { return session_running(); });
    }
    int devices() {
        return components_->on_loop([&] { return devices_; });
    }

    // A call that is to fail: its reply (an error).
    Reply call(const std::string& method, const json& params = json::object()) {
        auto r = client_->call(kMonitor + method, params);
        EXPECT_TRUE(r) << r.error().message;
        return r ? *r : Reply{};
    }
    json collect_params(std::int64_t duration_ms, std::optional<std::int64_t> interval_ms) {
        json p = {{"request", kRequest}, {"duration_ms", duration_ms}};
        if (interval_ms) p["interval_ms"] = *interval_ms;
        return p;
    }

    // The loop's thread only.
    std::function<void()> on_device_;  // called as a session's PMU is made
    SimulatedPpc750Pmu* pmu_ = nullptr;
    int devices_ = 0;
    std::optional<std::chrono::nanoseconds> advance_on_timer_;

    std::optional<test_support::DaemonComponents> components_;
    std::optional<monitor::varlink::Client> client_;
};

// A child that waits to be killed, killed with the test if it is not.
pid_t sleeping_child() {
    const pid_t child = ::fork();
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::pause();
        ::_exit(0);
    }
    return child;
}

// A process that exits between the check of its counters' target and their opening, its pid
// taken by another process meanwhile (made so through the kernel's ns_last_pid, as CRIU
// restores pids), is not counted: the counters would be on the other process.
TEST_F(CounterServiceTest, APidReusedWhileItsCountersOpenIsNotCounted) {
    if (::geteuid() != 0) GTEST_SKIP() << "choosing the next pid (ns_last_pid) needs root";
    const pid_t child = sleeping_child();
    ASSERT_GT(child, 1);
    pid_t successor = -1;
    components_->on_loop([&] {
        on_device_ = [&, child] {
            ::kill(child, SIGKILL);
            ::waitpid(child, nullptr, 0);
            // Another process takes the pid (a few tries: other forks on the machine race).
            for (int i = 0; i < 20 && successor != child; ++i) {
                if (successor > 0) {
                    ::kill(successor, SIGKILL);
                    ::waitpid(successor, nullptr, 0);
                }
                std::ofstream("/proc/sys/kernel/ns_last_pid") << child - 1;
                successor = sleeping_child();
            }
        };
    });
    json request = kRequest;
    request["target"] = {{"kind", "process"}, {"pid", child}};
    auto r = call("StartCounters", {{"request", request}});
    components_->on_loop([&] { on_device_ = nullptr; });
    if (successor != child) {
        if (successor > 0) ::kill(successor, SIGKILL);
        GTEST_SKIP() << "no process could be given pid " << child << " again";
    }
    EXPECT_EQ(r.error, kMonitor + "NoSuchTarget") << r.parameters.dump();
    EXPECT_NE(r.parameters.dump().find("process " + std::to_string(child) +
                                       " exited while its counters were opened"),
              std::string::npos)
        << r.parameters.dump();
    EXPECT_FALSE(running()) << "counting pid " << child << ", another process now";
    ::kill(successor, SIGKILL);
    ::waitpid(successor, nullptr, 0);

    // A process that lives on is counted.
    request["target"]["pid"] = ::getpid();
    r = call("StartCounters", {{"request", request}});
    EXPECT_FALSE(r.error) << *r.error << r.parameters.dump();
    EXPECT_TRUE(running());
}

TEST_F(CounterServiceTest, TheCatalogSeesA750) {
    json info = call_checked(*client_, "GetPmuInfo");
    bool found = false;
    for (const auto& pmu : info["pmus"]) {
        if (pmu["name"] != "ppc750") continue;
        found = true;
        EXPECT_EQ(pmu["counters"], 4);
        EXPECT_EQ(pmu["counter_width"], 32);
        EXPECT_TRUE(pmu.value("unavailable", json()).is_null()) << pmu.dump();
    }
    EXPECT_TRUE(found) << info.dump();
}

TEST_F(CounterServiceTest, StartReadStopCountWhatTheSimulatedPmuCounted) {
    json started = call_checked(*client_, "StartCounters", {{"request", kRequest}});
    ExpectPlan(started["plan"]);
    EXPECT_FALSE(started.contains("threads"));
    EXPECT_EQ(devices(), 1);

    advance(100ms);
    json read = call_checked(*client_, "ReadCounters");
    ExpectCounts(read["report"], 100ms);
    EXPECT_EQ(read["report"]["final"], false);

    advance(200ms);
    read = call_checked(*client_, "ReadCounters");
    ExpectCounts(read["report"], 300ms);

    json stopped = call_checked(*client_, "StopCounters");
    ExpectCounts(stopped["report"], 300ms);
    EXPECT_EQ(stopped["report"]["final"], true);
    EXPECT_FALSE(running());
}

// Paused, the 750's counters are frozen: the simulated time that passes counts nothing, and
// the reports say the session is paused; resumed, every counter counts on from where it stood.
TEST_F(CounterServiceTest, PausedCountersCountNothingUntilResumed) {
    call_checked(*client_, "StartCounters", {{"request", kRequest}});
    advance(100ms);
    json at_pause = call_checked(*client_, "PauseCounters");
    ExpectCounts(at_pause["report"], 100ms);
    EXPECT_EQ(at_pause["report"]["paused"], true);
    advance(200ms);
    json paused = call_checked(*client_, "ReadCounters");
    ExpectCounts(paused["report"], 100ms);
    EXPECT_EQ(paused["report"]["paused"], true);
    EXPECT_GT(paused["report"].value("paused_seconds", 0.0), 0.0) << paused.dump();
    ExpectCounts(call_checked(*client_, "PauseCounters")["report"], 100ms);  // no change

    json resumed = call_checked(*client_, "ResumeCounters");
    ExpectCounts(resumed["report"], 100ms);
    EXPECT_FALSE(resumed["report"].contains("paused")) << resumed.dump();
    advance(50ms);
    json stopped = call_checked(*client_, "StopCounters");
    ExpectCounts(stopped["report"], 150ms);
    EXPECT_LE(stopped["report"].value("paused_seconds", 0.0),
              stopped["report"]["elapsed"].get<double>());
    EXPECT_GE(stopped["report"].value("paused_seconds", 0.0),
              paused["report"].value("paused_seconds", 0.0));
    // Nothing to pause now, and no standing session of that name.
    EXPECT_EQ(call("PauseCounters").error, kMonitor + "PerfNotRunning");
    EXPECT_EQ(call("ResumeCounters").error, kMonitor + "PerfNotRunning");
    EXPECT_EQ(call("PauseCounters", {{"session", "nope"}}).error, kMonitor + "NoSuchSession");
}

TEST_F(CounterServiceTest, ASecondStartIsPerfRunning) {
    call_checked(*client_, "StartCounters", {{"request", kRequest}});
    auto again = call("StartCounters", {{"request", kRequest}});
    EXPECT_EQ(again.error, kMonitor + "PerfRunning");
    EXPECT_NE(again.parameters.value("message", "").find("already collecting"), std::string::npos)
        << again.parameters.dump();
    // Who started the running session, and when: a forgotten one is told from a new one.
    EXPECT_TRUE(std::regex_search(
        again.parameters.value("message", ""),
        std::regex{
            R"(a session started by pid [0-9]+ \(uid [0-9]+\) at 20[0-9]{2}-[01][0-9]-[0-3][0-9] )"
            R"([0-2][0-9]:[0-5][0-9]:[0-6][0-9] UTC, counting 4 events;)"}))
        << again.parameters.dump();
    auto collect = call("CollectCounters", collect_params(300, std::nullopt));
    EXPECT_EQ(collect.error, kMonitor + "PerfRunning");
    EXPECT_EQ(devices(), 1) << "a refused start opened counters";
    call_checked(*client_, "StopCounters");
}

TEST_F(CounterServiceTest, StopOrReadWithoutASessionIsPerfNotRunning) {
    for (const char* method : {"StopCounters", "ReadCounters"}) {
        auto r = call(method);
        EXPECT_EQ(r.error, kMonitor + "PerfNotRunning") << method;
        EXPECT_NE(r.parameters.value("message", "").find("no counter session"), std::string::npos)
            << r.parameters.dump();
    }
    // And after a session ended.
    call_checked(*client_, "StartCounters", {{"request", kRequest}});
    call_checked(*client_, "StopCounters");
    EXPECT_EQ(call("StopCounters").error, kMonitor + "PerfNotRunning");
}

// Every wake-up of the loop (a period's end) moves the simulated clock 100 ms: each period
// counts exactly that, and the totals are their sum.
TEST_F(CounterServiceTest, ACollectWithAnIntervalStreamsARecordPerPeriodThenTheTotals) {
    components_->on_loop([&] { advance_on_timer_ = 100ms; });
    auto first = client_->call(
        test_support::make_call(kMonitor + "CollectCounters", collect_params(300, 100), true));
    ASSERT_TRUE(first) << first.error().message;
    std::vector<Reply> replies{*first};
    while (replies.back().continues && replies.size() < 10) {
        auto next = client_->receive();
        ASSERT_TRUE(next) << next.error().message;
        replies.push_back(*next);
    }
    for (const auto& r : replies) {
        ASSERT_FALSE(r.error) << *r.error << " " << r.parameters.dump();
        EXPECT_EQ(test_support::check_reply("CollectCounters", r.parameters), "");
    }
    // Three periods of 100 ms in 300 ms; fewer only when the loop woke very late (a period
    // that ends within a millisecond of the duration is the last).
    const std::size_t periods = replies.size() - 1;
    EXPECT_GE(periods, 1u);
    EXPECT_LE(periods, 3u);
    for (std::size_t i = 0; i < periods; ++i) {
        SCOPED_TRACE("period " + std::to_string(i + 1));
        json record = replies[i].parameters;
        EXPECT_TRUE(replies[i].continues);
        EXPECT_EQ(record["report"]["period"], i + 1);
        EXPECT_EQ(record["report"]["final"], false);
        // The plan comes with the first record and the totals.
        EXPECT_EQ(record.contains("plan"), i == 0);
        ExpectCounts(record["report"], 100ms);
    }
    json totals = replies.back().parameters;
    EXPECT_FALSE(replies.back().continues);
    EXPECT_EQ(totals["report"]["final"], true);
    EXPECT_TRUE(totals["report"]["period"].is_null());
    ExpectPlan(totals["plan"]);
    ExpectCounts(totals["report"], periods * 100ms);
    EXPECT_FALSE(running());
    EXPECT_EQ(call_checked(*client_, "StartCounters", {{"request", kRequest}}).contains("plan"),
              true)
        << "the collect's end freed the counters";
}

TEST_F(CounterServiceTest, ACollectWithoutMoreAnswersOnceWithTheTotals) {
    components_->on_loop([&] { advance_on_timer_ = 100ms; });
    json totals = call_checked(*client_, "CollectCounters", collect_params(200, 100));
    ExpectPlan(totals["plan"]);
    EXPECT_EQ(totals["report"]["final"], true);
    // Its periods ended unseen, each a wake-up that moved the clock.
    auto event = event_in(totals["report"], kPlanned[0].name);
    ASSERT_TRUE(event);
    const auto count = (*event)["value"]["count"];
    const std::uint64_t per_period = expected_count(kPlanned[0], 100ms);
    EXPECT_GE(count.get<std::uint64_t>(), per_period);
    EXPECT_LE(count.get<std::uint64_t>(), 2 * per_period);
    EXPECT_EQ(count.get<std::uint64_t>() % per_period, 0u);
    EXPECT_TRUE(test_support::NoReplyWithin(*client_, 200ms));
}

TEST_F(CounterServiceTest, ACollectWhoseClientLeavesEndsItsSession) {
    {
        auto collector = components_->connect();
        const auto collect = test_support::make_call(kMonitor + "CollectCounters",
                                                     collect_params(60'000, std::nullopt));
        ASSERT_TRUE(collector.send_raw(monitor::varlink::encode(collect) + '\0'));
        ASSERT_TRUE(test_support::wait_until([&] { return running(); }, 5s));
        // Only its end or its client ends it.
        auto stop = call("StopCounters");
        EXPECT_EQ(stop.error, kMonitor + "CounterFailure");
        EXPECT_EQ(stop.parameters.value("status", ""), "BADSTATE");
        EXPECT_NE(stop.parameters.value("message", "").find("ends with its duration or its client"),
                  std::string::npos)
            << stop.parameters.dump();
    }  // the collector disconnects
    EXPECT_TRUE(test_support::wait_until([&] { return !running(); }, 5s))
        << "the session outlived its client";
    call_checked(*client_, "StartCounters", {{"request", kRequest}});
    EXPECT_EQ(devices(), 2);
    call_checked(*client_, "StopCounters");
}

TEST_F(CounterServiceTest, BadDurationsAndIntervalsAreInvalidRequestNamingTheValue) {
    const struct {
        std::int64_t duration_ms;
        std::optional<std::int64_t> interval_ms;
        std::string says;
    } bad[] = {
        {0, std::nullopt, "duration of 0 ms"},
        {-5, std::nullopt, "duration of -5 ms"},
        {monitor::kMaxCountingDuration.count() + 1, std::nullopt, "duration of 604800001 ms"},
        {300, 5, "interval of 5 ms"},
        {300, 500, "interval of 500 ms"},
    };
    for (const auto& b : bad) {
        auto r = call("CollectCounters", collect_params(b.duration_ms, b.interval_ms));
        EXPECT_EQ(r.error, kMonitor + "InvalidRequest") << b.says;
        EXPECT_NE(r.parameters.value("message", "").find(b.says), std::string::npos)
            << r.parameters.dump();
    }
    EXPECT_EQ(devices(), 0) << "a refused collect opened counters";
    EXPECT_FALSE(running());
}

TEST_F(CounterServiceTest, AnUnknownEventIsNoSuchEventWithSuggestions) {
    for (const char* events :
         {"ppc750::EIEIO_COMPLETD", "ppc750::L2_CASTOUTS,ppc750::EIEIO_COMPLETD"}) {
        auto r = call("StartCounters", {{"request", {{"events", events}}}});
        EXPECT_EQ(r.error, kMonitor + "NoSuchEvent") << events;
        EXPECT_NE(r.parameters.value("message", "").find("EIEIO_COMPLETD"), std::string::npos)
            << r.parameters.dump();
        json suggestions = r.parameters["suggestions"];
        ASSERT_TRUE(suggestions.is_array()) << r.parameters.dump();
        EXPECT_NE(std::find(suggestions.begin(), suggestions.end(), "ppc750::EIEIO_COMPLETED"),
                  suggestions.end())
            << suggestions.dump();
    }
    EXPECT_FALSE(running());
}

}  // namespace
}  // namespace monitord
