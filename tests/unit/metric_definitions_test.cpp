// Tests of derived metrics defined as formulas: which definition a machine takes (a described
// 750 and a described x86 machine), what a group or a name brings, the errors, the events a
// session counts for them, and their values counted on the SIMULATED 750 PMU of tests/support.
#include "monitor/perf/metric_definitions.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../support/perf_events_probe.hpp"
#include "../support/simulated_ppc750_pmu.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/perf_session.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

using namespace std::chrono_literals;
using test_support::DescribedMachine;
using ::testing::HasSubstr;

constexpr const char* kX86Cpuinfo =
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
    "model name\t: Intel(R) Xeon(R)\n";

MetricDefinition define(std::string name, std::string formula, std::vector<std::string> groups,
                        std::string where = "test.toml:1") {
    auto f = MetricFormula::parse(formula);
    EXPECT_TRUE(f) << formula << ": " << f.error().to_string();
    return MetricDefinition{std::move(name), "", f.value_or(MetricFormula{}), std::move(groups),
                            std::move(where)};
}

class MetricDefinitions : public ::testing::Test {
  protected:
    void SetUp() override {
        auto c750 = EventCatalog::create(ppc750_.proc(), ppc750_.sys());
        ASSERT_TRUE(c750) << c750.error().to_string();
        on_750_.emplace(std::move(*c750));
        auto cx86 = EventCatalog::create(x86_.proc(), x86_.sys());
        ASSERT_TRUE(cx86) << cx86.error().to_string();
        on_x86_.emplace(std::move(*cx86));
    }

    static std::vector<std::string> formulas(const std::vector<const MetricDefinition*>& chosen) {
        std::vector<std::string> out;
        for (const auto* d : chosen) out.push_back(d->name + ": " + d->formula.text());
        return out;
    }

    // As the shipped set defines them: the 750's own events first, the generic ones after.
    std::vector<MetricDefinition> definitions_{
        define("ipc", "ppc750::INSTRUCTIONS_COMPLETED / ppc750::CYCLES", {"ipc"}),
        define("l1_icache_misses_pti",
               "ppc750::L1_ICACHE_MISSES * 1000 / ppc750::INSTRUCTIONS_COMPLETED", {"cache"}),
        define("branch_mispredicts_pti",
               "ppc750::BRANCHES_MISPREDICTED * 1000 / ppc750::INSTRUCTIONS_COMPLETED", {"branch"}),
        define("ipc", "instructions / cycles", {"ipc"}),
        define("cache_misses_pti", "cache-misses * 1000 / instructions", {"cache"}),
        define("cpus_utilized", "task-clock / 1e9 / seconds", {"sched"}),
        define("switches", "context-switches / seconds", {"sched"}),
        define("typo", "instructionz / cycles", {"broken"}),
    };
    DescribedMachine ppc750_{test_support::kPpc750CxeCpuinfo, true, "ppc750"};
    DescribedMachine x86_{kX86Cpuinfo, true};
    std::optional<EventCatalog> on_750_;
    std::optional<EventCatalog> on_x86_;
};

TEST_F(MetricDefinitions, EachMachineTakesTheFirstDefinitionItCanCount) {
    auto on_750 = choose_metrics(definitions_, "ipc", *on_750_);
    ASSERT_TRUE(on_750) << on_750.error().to_string();
    EXPECT_THAT(formulas(*on_750),
                ::testing::ElementsAre("ipc: ppc750::INSTRUCTIONS_COMPLETED / ppc750::CYCLES"));
    auto on_x86 = choose_metrics(definitions_, "ipc", *on_x86_);
    ASSERT_TRUE(on_x86) << on_x86.error().to_string();
    EXPECT_THAT(formulas(*on_x86), ::testing::ElementsAre("ipc: instructions / cycles"));
}

TEST_F(MetricDefinitions, AGroupBringsWhatCountsHereInFileOrderEachOnce) {
    // Groups in any case, a metric by name, a metric asked twice.
    auto on_750 = choose_metrics(definitions_, "CACHE, ipc,cache ,Ipc", *on_750_);
    ASSERT_TRUE(on_750) << on_750.error().to_string();
    // cache_misses_pti (generic) counts on a 750 too, through the kernel's generic events.
    EXPECT_THAT(formulas(*on_750),
                ::testing::ElementsAre("l1_icache_misses_pti: ppc750::L1_ICACHE_MISSES * 1000 / "
                                       "ppc750::INSTRUCTIONS_COMPLETED",
                                       "cache_misses_pti: cache-misses * 1000 / instructions",
                                       "ipc: ppc750::INSTRUCTIONS_COMPLETED / ppc750::CYCLES"));
    // The 750's own metric of the group is left out where no 750 counts.
    auto on_x86 = choose_metrics(definitions_, "cache", *on_x86_);
    ASSERT_TRUE(on_x86) << on_x86.error().to_string();
    EXPECT_THAT(formulas(*on_x86),
                ::testing::ElementsAre("cache_misses_pti: cache-misses * 1000 / instructions"));
}

TEST_F(MetricDefinitions, WhatCannotBeHadIsSaidWithWhy) {
    auto unknown = choose_metrics(definitions_, "ipc,nosuch", *on_x86_);
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().status, Status::NoEvent);
    EXPECT_THAT(unknown.error().message, HasSubstr("\"nosuch\""));
    EXPECT_THAT(unknown.error().message, HasSubstr("groups: ipc, cache, branch, sched, broken"));

    // A metric named, none of whose definitions counts here.
    auto elsewhere = choose_metrics(definitions_, "branch_mispredicts_pti", *on_x86_);
    ASSERT_FALSE(elsewhere);
    EXPECT_EQ(elsewhere.error().status, Status::NoPmu);
    EXPECT_THAT(elsewhere.error().message,
                HasSubstr("metric branch_mispredicts_pti cannot count here: "
                          "ppc750::BRANCHES_MISPREDICTED"));
    // A group none of whose metrics counts: each one's reason.
    auto broken = choose_metrics(definitions_, "broken", *on_x86_);
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().status, Status::NoPmu);
    EXPECT_THAT(broken.error().message, HasSubstr("metric group broken: none of its metrics"));
    EXPECT_THAT(broken.error().message, HasSubstr("typo: "));
    EXPECT_THAT(broken.error().message, HasSubstr("instructionz"));
    EXPECT_TRUE(cannot_count(definitions_.back(), *on_x86_));
    EXPECT_FALSE(cannot_count(definitions_[3], *on_x86_));

    auto empty = choose_metrics(definitions_, "ipc,,sched", *on_x86_);
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().status, Status::BadArg);
}

// The kernel's generic events map onto some PMUs' codes and not onto others': what the probe
// does not open is left out of a group, and a metric named that needs it is refused.
TEST_F(MetricDefinitions, AProbeLeavesOutWhatThePmuDoesNotOpen) {
    const std::vector<MetricDefinition> defs{
        define("cache_miss_ratio", "cache-misses / cache-references", {"cache"}),
        define("cache_misses_pti", "cache-misses * 1000 / instructions", {"cache"}),
    };
    std::vector<std::string> probed;
    const EventProbe no_references = [&probed](const EventSpec& e) -> std::optional<Error> {
        probed.push_back(e.name);
        if (e.name != "cache-references") return std::nullopt;
        return Error{Status::NoPmu, "cache-references on this thread: not supported by this PMU"};
    };
    auto group = choose_metrics(defs, "cache", *on_x86_, no_references);
    ASSERT_TRUE(group) << group.error().to_string();
    EXPECT_THAT(formulas(*group),
                ::testing::ElementsAre("cache_misses_pti: cache-misses * 1000 / instructions"));
    EXPECT_THAT(probed, ::testing::Contains("cache-references"));
    auto named = choose_metrics(defs, "cache_miss_ratio", *on_x86_, no_references);
    ASSERT_FALSE(named);
    EXPECT_EQ(named.error().status, Status::NoPmu);
    EXPECT_THAT(named.error().message, HasSubstr("not supported by this PMU"));
    // Without a probe, the catalog alone says it can.
    EXPECT_TRUE(choose_metrics(defs, "cache_miss_ratio", *on_x86_));
}

// The real probe on this machine: a software event opens; what the machine lacks does not,
// and says why; a refusal for want of privilege is no answer about the PMU.
TEST(OpeningProbe, OpensAndClosesOnThisThread) {
    SKIP_WITHOUT_PERF_EVENTS();
    auto catalog = EventCatalog::create();
    ASSERT_TRUE(catalog) << catalog.error().to_string();
    PerfEventDevice device;
    const auto probe = opening_probe(device);
    auto clock = catalog->resolve("task-clock");
    ASSERT_TRUE(clock);
    const auto refused = probe(*clock);
    EXPECT_FALSE(refused) << refused->message;
    auto cycles = catalog->resolve("cycles");
    ASSERT_TRUE(cycles);
    if (auto no = probe(*cycles)) {
        EXPECT_EQ(no->status, Status::NoPmu) << no->message;
        EXPECT_THAT(no->message, HasSubstr("cycles"));
    }
}

TEST_F(MetricDefinitions, ASessionCountsTheEventsOnceUnderTheNamesAsked) {
    SessionOptions o;
    o.events = {{"cpu-cycles", kNoGroup}, {"task-clock", kNoGroup}};
    auto chosen = choose_metrics(definitions_, "ipc,sched", *on_x86_);
    ASSERT_TRUE(chosen) << chosen.error().to_string();
    ASSERT_TRUE(add_metrics(o, *chosen, *on_x86_));
    std::vector<std::string> names;
    for (const auto& e : o.events) names.push_back(e.name);
    // cycles is the cpu-cycles asked for; task-clock is asked by the same name.
    EXPECT_THAT(names, ::testing::ElementsAre("cpu-cycles", "task-clock", "instructions",
                                              "context-switches"));
    ASSERT_EQ(o.metrics.size(), 3u);
    EXPECT_EQ(o.metrics[0].name, "ipc");
    EXPECT_EQ(o.metrics[0].events, (std::vector<std::size_t>{2, 0}));
    EXPECT_EQ(o.metrics[1].events, (std::vector<std::size_t>{1}));
    EXPECT_EQ(o.metrics[2].events, (std::vector<std::size_t>{3}));
    auto plan = make_plan(*on_x86_, o);
    ASSERT_TRUE(plan) << plan.error().to_string();
    EXPECT_EQ(plan->metrics, o.metrics);

    // A metric that reads an event the session does not have is refused by the plan.
    o.metrics[0].events = {2, 9};
    auto bad = make_plan(*on_x86_, o);
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message, HasSubstr("metric ipc"));
}

TEST_F(MetricDefinitions, CountedOnTheSimulated750) {
    SessionOptions o;
    o.target.kind = TargetKind::OneCpu;
    o.target.cpu = 0;
    o.cpus = {0};
    auto chosen = choose_metrics(definitions_, "ipc,cache,branch", *on_750_);
    ASSERT_TRUE(chosen) << chosen.error().to_string();
    // cache_misses_pti's generic events are no simulated 750 events: leave it out here.
    std::erase_if(*chosen, [](const auto* d) { return d->name == "cache_misses_pti"; });
    ASSERT_TRUE(add_metrics(o, *chosen, *on_750_));
    auto device = std::make_unique<testing::SimulatedPpc750Pmu>();
    auto* pmu = device.get();
    ASSERT_TRUE(pmu->set_rate("L1_ICACHE_MISSES", 3e6));
    ASSERT_TRUE(pmu->set_rate("BRANCHES_MISPREDICTED", 1.5e6));
    auto s = PerfSession::start(*on_750_, std::move(device), o);
    ASSERT_TRUE(s) << s.error().to_string();
    // CYCLES, INSTRUCTIONS_COMPLETED, L1_ICACHE_MISSES (PMC2), BRANCHES_MISPREDICTED (PMC4):
    // one set of the four counters.
    EXPECT_EQ((*s)->plan().slots, 1);
    pmu->advance(1s);
    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    const auto metrics = derive_metrics((*s)->plan(), *rep);
    auto find = [&metrics](std::string_view name) -> const Metric* {
        for (const auto& m : metrics) {
            if (m.name == name) return &m;
        }
        return nullptr;
    };
    using P = testing::SimulatedPpc750Pmu;
    const auto* ipc = find("ipc");
    ASSERT_NE(ipc, nullptr);
    EXPECT_DOUBLE_EQ(ipc->value, P::kDefaultInstructionsPerSecond / P::kDefaultCyclesPerSecond);
    EXPECT_TRUE(ipc->same_set);
    EXPECT_EQ(ipc->event, "ppc750::INSTRUCTIONS_COMPLETED");
    // Defined in place of the built-in of the same name: one ipc.
    EXPECT_EQ(std::ranges::count(metrics, std::string("ipc"), &Metric::name), 1);
    const auto* icache = find("l1_icache_misses_pti");
    ASSERT_NE(icache, nullptr);
    EXPECT_DOUBLE_EQ(icache->value, 3e6 * 1000 / P::kDefaultInstructionsPerSecond);
    const auto* branch = find("branch_mispredicts_pti");
    ASSERT_NE(branch, nullptr);
    EXPECT_DOUBLE_EQ(branch->value, 1.5e6 * 1000 / P::kDefaultInstructionsPerSecond);
}

TEST(MetricNames, AreWordsOfLowerCaseLettersDigitsAndUnderscores) {
    EXPECT_TRUE(check_metric_name("l1_icache_misses_pti", "metric"));
    for (std::string_view bad : {"", "IPC", "1st", "a-b", "a b", "_x"}) {
        auto r = check_metric_name(bad, "group");
        ASSERT_FALSE(r) << bad;
        EXPECT_THAT(r.error().message, HasSubstr("group \"" + std::string(bad) + "\""));
    }
    EXPECT_FALSE(check_metric_name(std::string(65, 'a'), "metric"));
}

}  // namespace
}  // namespace monitor::perf
