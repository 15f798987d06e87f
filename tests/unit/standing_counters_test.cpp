// The standing counter sessions of monitord.conf ([[counters]]) in the CounterService, on the
// daemon's components (DaemonComponents), each session counting on its own SIMULATED PowerPC
// 750 PMU (tests/support), which CounterServiceOptions::device puts in place of
// perf_event_open. The simulated PMUs count only when the test moves their clocks, so the
// counts are exact; the periods that read them end on the loading ticks the test makes.
#include "standing_counters.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../support/simulated_ppc750_pmu.hpp"
#include "counter_service.hpp"
#include "daemon_components.hpp"
#include "interface_check.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using monitor::perf::testing::SimulatedPpc750Pmu;
using nlohmann::json;
using test_support::call_checked;

constexpr int kCpus = 2;
// Events per second of simulated time on each CPU.
constexpr double kL1Rate = 1e6;
constexpr double kL2Rate = 3e6;

StandingSessionConfig table(std::string name, std::string events, std::string where = "t:1") {
    StandingSessionConfig c;
    c.name = std::move(name);
    c.request.events = std::move(events);
    c.request.mux = monitor::perf::MuxMode::Kernel;
    c.where = std::move(where);
    return c;
}

// The count of `event` in a report, or -1 when it is not there.
double count_of(const json& report, const std::string& event) {
    for (const auto& e : report.value("events", json::array())) {
        if (e.value("name", "") == event) return e["value"]["count"].get<double>();
    }
    return -1;
}

class StandingCountersTest : public ::testing::Test {
  protected:
    void SetUp() override {
        test_support::ComponentOptions o;
        o.cpuinfo = test_support::kPpc750CxeCpuinfo;
        o.core_pmu = true;
        o.manual_ticks = true;
        CounterServiceOptions counters;
        counters.cgroup_root = cgroups_.path();
        // A FAKE for perf_event_open: a simulated 750 PMU per session, made and touched on the
        // loop's thread only.
        counters.device = [this] {
            auto pmu = std::make_unique<SimulatedPpc750Pmu>(kCpus);
            EXPECT_TRUE(pmu->set_rate("L1_ICACHE_MISSES", kL1Rate));
            EXPECT_TRUE(pmu->set_rate("L2_CASTOUTS", kL2Rate));
            pmus_.push_back(pmu.get());
            return pmu;
        };
        o.counters = counters;
        components_.emplace(std::move(o));
        ASSERT_TRUE(components_->ok()) << components_->error();
        client_.emplace(components_->connect());
    }

    void configure(const std::vector<StandingSessionConfig>& tables) {
        components_->on_loop([&] {
            components_->counters().configure_standing(tables, std::chrono::steady_clock::now());
        });
    }
    // Moves the clock of the PMU made `index`-th (the sessions' PMUs, in the order they opened).
    void advance(std::size_t index, std::chrono::nanoseconds dt) {
        components_->on_loop([&] {
            ASSERT_LT(index, pmus_.size());
            pmus_[index]->advance(dt);
        });
    }
    std::size_t devices() {
        return components_->on_loop([&] { return pmus_.size(); });
    }
    json sessions() { return call_checked(*client_, "GetStandingCounters")["sessions"]; }
    json session(const std::string& name) {
        json all = call_checked(*client_, "GetStandingCounters", {{"name", name}})["sessions"];
        EXPECT_EQ(all.size(), 1u) << all.dump();
        return all.empty() ? json::object() : all[0];
    }
    // The loading ticks: every standing session's period ends and its counters are read.
    void tick() { components_->tick(); }

    // The PMUs the sessions made (the loop's thread only); they live while their session does.
    std::vector<SimulatedPpc750Pmu*> pmus_;
    test_support::ScratchDir cgroups_{"standing-cgroups"};
    std::optional<test_support::DaemonComponents> components_;
    std::optional<monitor::varlink::Client> client_;
};

TEST_F(StandingCountersTest, ASessionCountsFromItsStartAndIsReadOnTheTick) {
    configure({table("l1", "ppc750::L1_ICACHE_MISSES")});
    json s = session("l1");
    EXPECT_EQ(s["state"], "counting") << s.dump();
    EXPECT_EQ(s["source"], "t:1");
    EXPECT_FALSE(s.contains("totals")) << "no reading before the first period ends";
    advance(0, 300ms);
    tick();
    s = session("l1");
    EXPECT_EQ(count_of(s["totals"], "ppc750::L1_ICACHE_MISSES"), kL1Rate * 0.3 * kCpus);
    EXPECT_EQ(s["last"]["period"], 1);
    advance(0, 200ms);
    tick();
    s = session("l1");
    EXPECT_EQ(s["last"]["period"], 2);
    EXPECT_EQ(count_of(s["totals"], "ppc750::L1_ICACHE_MISSES"), kL1Rate * 0.5 * kCpus);
    EXPECT_EQ(count_of(s["last"], "ppc750::L1_ICACHE_MISSES"), kL1Rate * 0.2 * kCpus);
    EXPECT_EQ(s["plan"]["groups"][0]["members"][0]["counter"], "PMC2") << s["plan"].dump();
}

TEST_F(StandingCountersTest, AReloadKeepsTheUnchangedRestartsTheChangedAndEndsTheRemoved) {
    configure({table("keep", "ppc750::L1_ICACHE_MISSES"), table("change", "ppc750::L2_CASTOUTS"),
               table("drop", "ppc750::L2_CASTOUTS")});
    ASSERT_EQ(devices(), 3u);
    for (std::size_t i = 0; i < 3; ++i) advance(i, 100ms);
    tick();

    // "keep" moved in the file (another line): the same session.
    configure({table("keep", "ppc750::L1_ICACHE_MISSES", "t:9"),
               table("change", "ppc750::L1_ICACHE_MISSES"), table("new", "ppc750::L2_CASTOUTS")});
    ASSERT_EQ(devices(), 5u) << "only the changed and the new sessions open counters";
    advance(0, 100ms);  // keep's PMU
    advance(3, 100ms);  // change's new PMU
    tick();
    json keep = session("keep");
    EXPECT_EQ(keep["source"], "t:9");
    EXPECT_EQ(count_of(keep["totals"], "ppc750::L1_ICACHE_MISSES"), kL1Rate * 0.2 * kCpus)
        << "an unchanged session counts on";
    json change = session("change");
    EXPECT_EQ(count_of(change["totals"], "ppc750::L1_ICACHE_MISSES"), kL1Rate * 0.1 * kCpus)
        << "a changed session starts again";
    EXPECT_EQ(change["request"]["events"], "ppc750::L1_ICACHE_MISSES");
    json all = sessions();
    ASSERT_EQ(all.size(), 3u) << all.dump();
    EXPECT_EQ(all[0]["name"], "keep");
    EXPECT_EQ(all[1]["name"], "change");
    EXPECT_EQ(all[2]["name"], "new");

    configure({});
    EXPECT_TRUE(sessions().empty());
    auto r = client_->call("io.monitord.Monitor.GetStandingCounters", {{"name", "keep"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, "io.monitord.Monitor.NoSuchSession");
    EXPECT_NE(r->parameters["message"].get<std::string>().find("no [[counters]] tables"),
              std::string::npos)
        << r->parameters.dump();
}

TEST_F(StandingCountersTest, ASessionThatCannotOpenSaysWhyAndIsTriedAgain) {
    auto box = table("box", "ppc750::L1_ICACHE_MISSES");
    box.request.target = {.kind = monitor::protocol::TargetRequest::Kind::Cgroup, .cgroup = "box"};
    configure({box, table("bad", "ppc750::NO_SUCH_EVENT")});
    json bad = session("bad");
    EXPECT_EQ(bad["state"], "failed");
    EXPECT_NE(bad["error"].get<std::string>().find("NO_SUCH_EVENT"), std::string::npos)
        << bad.dump();
    EXPECT_FALSE(bad.contains("totals"));
    json s = session("box");
    EXPECT_EQ(s["state"], "failed") << s.dump();
    EXPECT_NE(s["error"].get<std::string>().find("box"), std::string::npos) << s.dump();

    // The cgroup appears; before the retry interval nothing is tried, after it the session
    // counts.
    std::filesystem::create_directory(cgroups_.path() / "box");
    const auto now = std::chrono::steady_clock::now();
    components_->on_loop([&] { components_->counters().ticked(now + 1s); });
    EXPECT_EQ(session("box")["state"], "failed");
    components_->on_loop(
        [&] { components_->counters().ticked(now + StandingCounters::kRetryInterval + 1s); });
    EXPECT_EQ(session("box")["state"], "counting") << session("box").dump();
    EXPECT_EQ(session("bad")["state"], "failed");

    auto r = client_->call("io.monitord.Monitor.GetStandingCounters", {{"name", "nope"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, "io.monitord.Monitor.NoSuchSession");
    EXPECT_EQ(r->parameters["sessions"], (json{"box", "bad"}));
}

TEST_F(StandingCountersTest, ACgroupMadeAgainOrGoneIsSeenWithinTheRetryInterval) {
    const auto box_dir = cgroups_.path() / "box";
    std::filesystem::create_directory(box_dir);
    auto box = table("box", "ppc750::L1_ICACHE_MISSES");
    box.request.target = {.kind = monitor::protocol::TargetRequest::Kind::Cgroup, .cgroup = "box"};
    configure({box});
    ASSERT_EQ(session("box")["state"], "counting");
    ASSERT_EQ(devices(), 1u);
    const auto now = std::chrono::steady_clock::now();
    auto look = [&](std::chrono::seconds after) {
        components_->on_loop([&] { components_->counters().ticked(now + after); });
    };
    look(11s);
    EXPECT_EQ(devices(), 1u) << "the same cgroup: nothing to do";

    // A unit that restarts: its cgroup is made again at the same path (a rename keeps the old
    // directory, so the new one cannot reuse its inode).
    std::filesystem::rename(box_dir, cgroups_.path() / "box-old");
    std::filesystem::create_directory(box_dir);
    look(15s);
    EXPECT_EQ(devices(), 1u) << "looked at every 10 s, not every tick";
    look(22s);
    EXPECT_EQ(devices(), 2u) << "opened again on the new cgroup";
    EXPECT_EQ(session("box")["state"], "counting");

    std::filesystem::rename(box_dir, cgroups_.path() / "box-gone");
    look(33s);
    json gone = session("box");
    EXPECT_EQ(gone["state"], "failed") << gone.dump();
    EXPECT_NE(gone.value("error", "").find("box"), std::string::npos) << gone.dump();
}

TEST_F(StandingCountersTest, AnOnDemandPlanSaysWhichStandingSessionsShareItsCounters) {
    configure({table("l2", "ppc750::L2_CASTOUTS")});
    const json request = {{"events", "ppc750::L1_ICACHE_MISSES"}};
    json plan = call_checked(*client_, "PlanCounters", {{"request", request}})["plan"];
    EXPECT_EQ(plan["shared_with"], (json{"l2"})) << plan.dump();
    json started = call_checked(*client_, "StartCounters", {{"request", request}});
    EXPECT_EQ(started["plan"]["shared_with"], (json{"l2"})) << started.dump();
    call_checked(*client_, "StopCounters");

    configure({});
    plan = call_checked(*client_, "PlanCounters", {{"request", request}})["plan"];
    EXPECT_FALSE(plan.contains("shared_with")) << plan.dump();
}

// The rule itself: only groups that take counters of one PMU share.
TEST(SharesCounters, OnlyCounterTakingGroupsOfOnePmu) {
    using monitor::perf::Plan;
    auto group = [](std::string pmu, bool counter) {
        Plan::Group g;
        g.pmu = std::move(pmu);
        g.set = counter ? 0 : monitor::perf::kFreeRunningSet;
        g.members.push_back({0, counter ? 1 : monitor::perf::kNoCounter, counter ? "PMC2" : ""});
        return g;
    };
    Plan software, core, other_pmu, core_and_software;
    software.kernel_groups = {group("perf", false)};
    core.kernel_groups = {group("cpu", true)};
    other_pmu.kernel_groups = {group("ppc750", true)};
    core_and_software.kernel_groups = {group("perf", false), group("cpu", true)};
    EXPECT_FALSE(monitor::perf::shares_counters(software, software));
    EXPECT_FALSE(monitor::perf::shares_counters(software, core));
    EXPECT_FALSE(monitor::perf::shares_counters(core, other_pmu));
    EXPECT_TRUE(monitor::perf::shares_counters(core, core));
    EXPECT_TRUE(monitor::perf::shares_counters(core_and_software, core));
    EXPECT_TRUE(monitor::perf::shares_counters(core, core_and_software));
}

}  // namespace
}  // namespace monitord
