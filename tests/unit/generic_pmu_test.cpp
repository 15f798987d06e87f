// The kernel's generic events as the built-in module names them (a libmonitor without
// libpfm4, as a board's build is): a table of names as users write them and the perf_event_attr
// each must give, checked against the module; and, where the catalog has libpfm4, every name
// libpfm4 gives its perf PMU resolved alike by both.
#include "monitor/perf/generic_pmu.hpp"

#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/event_name.hpp"
#include "monitor/perf/pmu.hpp"

namespace monitor::perf {
namespace {

struct Row {
    std::string_view name;  // as written
    std::uint32_t type;
    std::uint64_t config;
    std::string_view canonical;
    bool exclude_user = false;
    bool exclude_kernel = false;
};

constexpr std::uint64_t cache(std::uint64_t id, std::uint64_t op, std::uint64_t result) {
    return id | (op << 8) | (result << 16);
}

const Row kRows[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "perf::PERF_COUNT_HW_CPU_CYCLES"},
    {"perf::CPU-CYCLES", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES,
     "perf::PERF_COUNT_HW_CPU_CYCLES"},
    {"perf::PERF_COUNT_HW_INSTRUCTIONS:u", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS,
     "perf::PERF_COUNT_HW_INSTRUCTIONS", false, true},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
     "perf::PERF_COUNT_HW_BRANCH_INSTRUCTIONS"},
    {"BRANCH-MISSES:k", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES,
     "perf::PERF_COUNT_HW_BRANCH_MISSES", true, false},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES,
     "perf::PERF_COUNT_HW_REF_CPU_CYCLES"},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "perf::PERF_COUNT_SW_TASK_CLOCK"},
    {"perf::TASK-CLOCK", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK,
     "perf::PERF_COUNT_SW_TASK_CLOCK"},
    {"perf::cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK,
     "perf::PERF_COUNT_SW_CPU_CLOCK"},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES,
     "perf::PERF_COUNT_SW_CONTEXT_SWITCHES"},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "perf::PERF_COUNT_SW_PAGE_FAULTS"},
    {"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS,
     "perf::PERF_COUNT_SW_CPU_MIGRATIONS"},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ,
     "perf::PERF_COUNT_SW_PAGE_FAULTS_MAJ"},
    {"L1-DCACHE-LOAD-MISSES", PERF_TYPE_HW_CACHE,
     cache(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS),
     "perf::L1-DCACHE-LOAD-MISSES"},
    {"perf::l1-icache-loads", PERF_TYPE_HW_CACHE,
     cache(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS),
     "perf::L1-ICACHE-LOADS"},
    {"dTLB-store-misses", PERF_TYPE_HW_CACHE,
     cache(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_WRITE, PERF_COUNT_HW_CACHE_RESULT_MISS),
     "perf::DTLB-STORE-MISSES"},
    {"LLC-PREFETCHES", PERF_TYPE_HW_CACHE,
     cache(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_PREFETCH,
           PERF_COUNT_HW_CACHE_RESULT_ACCESS),
     "perf::LLC-PREFETCHES"},
};

std::unique_ptr<PmuModule> generic() {
    auto m = make_generic_pmu();
    EXPECT_TRUE(m.has_value());
    return std::move(*m);
}

TEST(GenericPmu, NamesGiveTheKernelsEncodings) {
    auto module = generic();
    for (const auto& row : kRows) {
        auto spec = module->resolve(split_event_name(row.name));
        ASSERT_TRUE(spec) << row.name << ": " << spec.error().to_string();
        EXPECT_EQ(spec->type, row.type) << row.name;
        EXPECT_EQ(spec->config, row.config) << row.name;
        EXPECT_EQ(spec->canonical, row.canonical) << row.name;
        EXPECT_EQ(spec->name, row.name);
        EXPECT_EQ(spec->exclude_user, row.exclude_user) << row.name;
        EXPECT_EQ(spec->exclude_kernel, row.exclude_kernel) << row.name;
        // Software events take no counter; the others one of the processor's.
        EXPECT_EQ(spec->counters == 0, row.type == PERF_TYPE_SOFTWARE) << row.name;
    }
}

TEST(GenericPmu, WhatEventsMeasureIsSaidForTheMetrics) {
    auto module = generic();
    EXPECT_EQ(module->resolve(split_event_name("cycles"))->measure, Measure::Cycles);
    EXPECT_TRUE(module->resolve(split_event_name("cycles"))->pinned);
    EXPECT_EQ(module->resolve(split_event_name("instructions"))->measure, Measure::Instructions);
    EXPECT_EQ(module->resolve(split_event_name("task-clock"))->measure, Measure::TaskClock);
    EXPECT_FALSE(module->resolve(split_event_name("task-clock"))->pinned);
}

TEST(GenericPmu, UnknownNamesAndModifiersAreRefusedSayingWhy) {
    auto module = generic();
    auto unknown = module->resolve(split_event_name("perf::NO-SUCH-EVENT"));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().status, Status::NoEvent);
    EXPECT_NE(unknown.error().message.find("NO-SUCH-EVENT"), std::string::npos);
    auto half = module->resolve(split_event_name("L1-DCACHE-LOAD"));
    ASSERT_FALSE(half);
    EXPECT_EQ(half.error().status, Status::NoEvent);
    auto other_pmu = module->resolve(split_event_name("amd64_fam19h_zen3::RETIRED_UOPS"));
    ASSERT_FALSE(other_pmu);
    EXPECT_NE(other_pmu.error().message.find("built without libpfm4"), std::string::npos)
        << other_pmu.error().message;
    auto modifier = module->resolve(split_event_name("task-clock:x"));
    ASSERT_FALSE(modifier);
    EXPECT_EQ(modifier.error().status, Status::BadArg);
}

TEST(GenericPmu, ListsEveryNameItResolves) {
    auto module = generic();
    const auto pmus = module->pmus();
    ASSERT_EQ(pmus.size(), 1u);
    EXPECT_EQ(pmus[0].name, kGenericPmu);
    EXPECT_EQ(pmus[0].source, kBuiltInSource);
    EXPECT_NE(pmus[0].description.find("without libpfm4"), std::string::npos);
    std::vector<EventInfo> events;
    module->list(kGenericPmu, events);
    EXPECT_EQ(events.size(), pmus[0].events);
    for (const auto& e : events) {
        auto spec = module->resolve(split_event_name(e.name));
        ASSERT_TRUE(spec) << e.name;
        EXPECT_EQ(spec->counters, e.counters) << e.name;
    }
}

// Where the catalog is libpfm4's (the x86 builds), both give every name of libpfm4's perf PMU
// the same event; in a build without libpfm4 the catalog is the module itself. Left out:
// libpfm4's cache groups with unit masks (PERF_COUNT_HW_CACHE_L1D:READ:MISS), which the module
// names as perf does (L1-DCACHE-LOAD-MISSES).
TEST(GenericPmu, ResolvesEveryNameAsTheCatalogDoes) {
    auto catalog = EventCatalog::create();
    ASSERT_TRUE(catalog) << catalog.error().to_string();
    auto module = generic();
    auto same = [&](std::string_view name, const EventSpec& ours, const EventSpec& theirs) {
        EXPECT_EQ(ours.type, theirs.type) << name;
        EXPECT_EQ(ours.config, theirs.config) << name;
        EXPECT_EQ(ours.measure, theirs.measure) << name;
        EXPECT_EQ(ours.pinned, theirs.pinned) << name;
    };
    // Every name the catalog lists for its perf PMU, the module resolves alike.
    std::size_t compared = 0;
    for (const auto& pmu : catalog->pmus()) {
        if (pmu.name != "perf") continue;
        auto listed = catalog->list(pmu.name);
        ASSERT_TRUE(listed) << listed.error().to_string();
        for (const auto& e : *listed) {
            if (e.name.starts_with("perf::PERF_COUNT_HW_CACHE_")) continue;
            auto theirs = catalog->resolve(e.name);
            auto ours = module->resolve(split_event_name(e.name));
            ASSERT_TRUE(theirs) << e.name << ": " << theirs.error().to_string();
            ASSERT_TRUE(ours) << e.name << ": " << ours.error().to_string();
            same(e.name, *ours, *theirs);
            ++compared;
        }
    }
    EXPECT_GT(compared, 40u);
    // The module's own names, where the catalog knows them too (libpfm4 lacks a few of the
    // kernel's, such as alignment faults).
    std::vector<EventInfo> ours;
    module->list(kGenericPmu, ours);
    for (const auto& e : ours) {
        auto theirs = catalog->resolve(e.name);
        if (!theirs) continue;
        same(e.name, *module->resolve(split_event_name(e.name)), *theirs);
    }
}

}  // namespace
}  // namespace monitor::perf
