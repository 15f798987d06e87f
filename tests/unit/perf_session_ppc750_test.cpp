// Tests of PerfSession with PowerPC 750 events, counted on the SIMULATED 750 PMU of
// tests/support (no machine here has a 750): planning onto PMC1-PMC4, daemon and kernel
// multiplexing, folding of the 32-bit counters, raw codes, per-CPU counts, the MMCR0/MMCR1
// values a set programs, and derived metrics. Simulated time drives every count.
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/simulated_ppc750_pmu.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/ppc750_events.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

using namespace std::chrono_literals;
using testing::SimulatedPpc750Pmu;

constexpr std::uint64_t k2To32 = std::uint64_t{1} << 32;

// Two events of each counter's own list, as in the MON manual's sets 1-4.
constexpr std::string_view kEightEvents =
    "ppc750::EIEIO_COMPLETED,ppc750::INSTR_EA_DELIVERED,"
    "ppc750::L1_ICACHE_MISSES,ppc750::ITLB_MISSES,"
    "ppc750::L1_DCACHE_MISSES,ppc750::DTLB_MISSES,"
    "ppc750::L2_CASTOUTS,ppc750::BRANCHES_MISPREDICTED";

class PerfSessionPpc750 : public ::testing::Test {
  protected:
    void SetUp() override {
        // A 750 whose kernel has a PMU driver for it: what the simulated PMU stands for.
        auto c = EventCatalog::create(machine_.proc(), machine_.sys());
        ASSERT_TRUE(c) << c.error().to_string();
        catalog_.emplace(std::move(*c));
    }

    static SessionOptions options(std::string_view list, TargetKind kind = TargetKind::OneCpu,
                                  std::vector<int> cpus = {0}) {
        SessionOptions o;
        auto events = parse_event_list(list);
        EXPECT_TRUE(events) << events.error().to_string();
        if (events) o.events = std::move(*events);
        o.target.kind = kind;
        o.target.cpu = kind == TargetKind::OneCpu ? cpus.front() : -1;
        o.cpus = std::move(cpus);
        return o;
    }

    // Starts a session on a fresh simulated PMU, kept in pmu_ to drive the clock.
    Result<std::unique_ptr<PerfSession>> start(SessionOptions o) {
        auto device = std::make_unique<SimulatedPpc750Pmu>();
        pmu_ = device.get();
        configure(*pmu_);
        return PerfSession::start(*catalog_, std::move(device), std::move(o));
    }

    // Distinct, integral rates, so that counts over whole slices are exact.
    static void configure(SimulatedPpc750Pmu& pmu) {
        const std::pair<std::string_view, double> rates[] = {
            {"EIEIO_COMPLETED", 1e6},       {"INSTR_EA_DELIVERED", 60e6},
            {"L1_ICACHE_MISSES", 3e6},      {"ITLB_MISSES", 4e6},
            {"L1_DCACHE_MISSES", 5e6},      {"DTLB_MISSES", 6e6},
            {"L2_CASTOUTS", 7e6},           {"BRANCHES_MISPREDICTED", 8e6},
            {"L2_INSTRUCTION_MISSES", 9e6}, {"BRANCHES_NOT_TAKEN", 10e6},
        };
        for (const auto& [name, rate] : rates) ASSERT_TRUE(pmu.set_rate(name, rate));
    }

    static double rate_of(const SimulatedPpc750Pmu& pmu, std::string_view canonical) {
        const Ppc750Event* e = find_ppc750_event(canonical.substr(canonical.find("::") + 2));
        EXPECT_NE(e, nullptr) << canonical;
        return e == nullptr ? 0 : pmu.rate(*e);
    }

    static const EventCount& event(const PerfReport& rep, std::string_view name) {
        for (const auto& e : rep.events) {
            if (e.name == name) return e;
        }
        ADD_FAILURE() << "no event " << name << " in the report";
        static const EventCount kNone;
        return kNone;
    }

    static std::optional<Metric> metric(const std::vector<Metric>& metrics, std::string_view name) {
        for (const auto& m : metrics) {
            if (m.name == name) return m;
        }
        return std::nullopt;
    }

    // The set (plan group's `set`) each event is in; kFreeRunningSet for none. Only for events
    // in one set.
    static int set_of(const Plan& plan, std::size_t event) {
        for (const auto& g : plan.kernel_groups) {
            for (const auto& m : g.members) {
                if (m.event == event) return g.set;
            }
        }
        return kFreeRunningSet;
    }

    // The simulated device hands out handles 0, 1, ... in open order, and PerfSession opens
    // instance by instance, plan group by plan group, member by member.
    static int handle_of(const Plan& plan, std::size_t instance, std::size_t group,
                         std::size_t member) {
        std::size_t per_instance = 0;
        std::size_t before = 0;
        for (std::size_t g = 0; g < plan.kernel_groups.size(); ++g) {
            if (g < group) before += plan.kernel_groups[g].members.size();
            per_instance += plan.kernel_groups[g].members.size();
        }
        return static_cast<int>(instance * per_instance + before + member);
    }

    // Each slice: `slice` of simulated time, then the rotation the daemon's slice timer does.
    static void run_slices(PerfSession& s, SimulatedPpc750Pmu& pmu, int slices,
                           std::chrono::nanoseconds slice = 100ms) {
        for (int i = 0; i < slices; ++i) {
            pmu.advance(slice);
            auto r = s.rotate();
            ASSERT_TRUE(r) << r.error().to_string();
        }
    }

    test_support::DescribedMachine machine_{test_support::kPpc750CxeCpuinfo, true, "ppc750"};
    std::optional<EventCatalog> catalog_;
    SimulatedPpc750Pmu* pmu_ = nullptr;  // owned by the session
};

// --- The simulation itself, at the CounterDevice boundary. ---

EventSpec raw_spec(std::string name, std::uint64_t config) {
    EventSpec e;
    e.name = std::move(name);
    e.pmu = kPpc750Pmu;
    e.counter_pmu = kPpc750Pmu;
    e.type = PERF_TYPE_RAW;
    e.config = config;
    e.counter_width = kPpc750CounterWidth;
    return e;
}

TEST(SimulatedPpc750PmuTest, RefusesWhatNo750CounterCanCount) {
    SimulatedPpc750Pmu pmu;
    const OpenTarget cpu0{.cpu = 0};
    auto reserved = pmu.open(raw_spec("bogus::PMC2_0x11", 0x211), cpu0, -1);
    ASSERT_FALSE(reserved);
    EXPECT_EQ(reserved.error().status, Status::BadArg);
    EXPECT_NE(reserved.error().message.find("bogus::PMC2_0x11"), std::string::npos)
        << reserved.error().message;
    EXPECT_NE(reserved.error().message.find("reserved"), std::string::npos);

    EventSpec hw = raw_spec("perf::CYCLES", PERF_COUNT_HW_CPU_CYCLES);
    hw.type = PERF_TYPE_HARDWARE;
    auto not_raw = pmu.open(hw, cpu0, -1);
    ASSERT_FALSE(not_raw);
    EXPECT_EQ(not_raw.error().status, Status::BadArg);
    EXPECT_NE(not_raw.error().message.find("perf::CYCLES"), std::string::npos);

    auto offline = pmu.open(raw_spec("cycles", 0x001), OpenTarget{.cpu = 4}, -1);
    ASSERT_FALSE(offline);
    EXPECT_EQ(offline.error().status, Status::NoDev);

    auto nowhere = pmu.open(raw_spec("cycles", 0x001), OpenTarget{}, -1);
    ASSERT_FALSE(nowhere);
    EXPECT_EQ(nowhere.error().status, Status::BadArg);
    EXPECT_EQ(pmu.open_events(), 0);
}

TEST(SimulatedPpc750PmuTest, AGroupMustFitOnTheFourCountersAndShareModifiers) {
    SimulatedPpc750Pmu pmu;
    const OpenTarget cpu0{.cpu = 0};
    auto leader = pmu.open(raw_spec("ppc750::L1_ICACHE_MISSES", 0x205), cpu0, -1);
    ASSERT_TRUE(leader);
    auto clash = pmu.open(raw_spec("ppc750::ITLB_MISSES", 0x206), cpu0, *leader);
    ASSERT_FALSE(clash);
    EXPECT_EQ(clash.error().status, Status::BadArg);
    for (std::string_view s : {"ppc750::L1_ICACHE_MISSES", "ppc750::ITLB_MISSES", "PMC2"}) {
        EXPECT_NE(clash.error().message.find(s), std::string::npos) << clash.error().message;
    }
    auto user_only = raw_spec("ppc750::CYCLES:u", 0x001);
    user_only.exclude_kernel = true;
    auto modifiers = pmu.open(user_only, cpu0, *leader);
    ASSERT_FALSE(modifiers);
    EXPECT_EQ(modifiers.error().status, Status::BadArg);
    auto other_cpu = pmu.open(raw_spec("ppc750::CYCLES", 0x001), OpenTarget{.cpu = 1}, *leader);
    ASSERT_FALSE(other_cpu);
    EXPECT_EQ(other_cpu.error().status, Status::BadArg);

    // Cycles can go on any counter: the group is PMC2 + one of the others.
    auto cycles = pmu.open(raw_spec("ppc750::CYCLES", 0x001), cpu0, *leader);
    ASSERT_TRUE(cycles);
    ASSERT_TRUE(pmu.enable(*leader));
    EXPECT_EQ(pmu.counter_of(*leader), 1);
    EXPECT_EQ(pmu.counter_of(*cycles), 0);
}

TEST(SimulatedPpc750PmuTest, CountsWrapAt32BitsAndResetKeepsTheTimes) {
    SimulatedPpc750Pmu pmu;
    auto h = pmu.open(raw_spec("ppc750::CYCLES", 0x001), OpenTarget{.cpu = 0}, -1);
    ASSERT_TRUE(h);
    pmu.advance(1s);  // disabled: nothing
    auto r = pmu.read(*h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->value, 0u);
    EXPECT_EQ(r->enabled_ns, 0u);

    ASSERT_TRUE(pmu.enable(*h));
    pmu.advance(30s);  // 6e9 cycles at 200 MHz
    r = pmu.read(*h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->value, 6'000'000'000 - k2To32);
    EXPECT_EQ(r->enabled_ns, 30'000'000'000u);
    EXPECT_EQ(r->running_ns, 30'000'000'000u);
    EXPECT_EQ(pmu.width(*h), 32);

    ASSERT_TRUE(pmu.reset(*h));
    pmu.advance(1s);
    r = pmu.read(*h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->value, 200'000'000u);
    EXPECT_EQ(r->enabled_ns, 31'000'000'000u);
}

TEST(SimulatedPpc750PmuTest, OvercommittedGroupsWaitAndRotateLikeTheKernel) {
    SimulatedPpc750Pmu pmu;
    const OpenTarget cpu0{.cpu = 0};
    auto a = pmu.open(raw_spec("ppc750::L1_ICACHE_MISSES", 0x205), cpu0, -1);
    auto b = pmu.open(raw_spec("ppc750::ITLB_MISSES", 0x206), cpu0, -1);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(pmu.enable(*a));
    ASSERT_TRUE(pmu.enable(*b));  // succeeds, but PMC2 is taken
    EXPECT_EQ(pmu.enabled_groups(0), 2);
    EXPECT_EQ(pmu.running_groups(0), 1);
    EXPECT_EQ(pmu.counter_of(*a), 1);
    EXPECT_EQ(pmu.counter_of(*b), std::nullopt);

    pmu.advance(4ms);  // one mux interval: b's turn
    EXPECT_EQ(pmu.rotations(0), 1);
    EXPECT_EQ(pmu.counter_of(*a), std::nullopt);
    EXPECT_EQ(pmu.counter_of(*b), 1);

    pmu.advance(96ms);
    auto ra = pmu.read(*a);
    auto rb = pmu.read(*b);
    ASSERT_TRUE(ra && rb);
    EXPECT_EQ(ra->enabled_ns, 100'000'000u);
    EXPECT_EQ(ra->running_ns, 52'000'000u);  // 13 of the 25 intervals
    EXPECT_EQ(rb->running_ns, 48'000'000u);
    EXPECT_EQ(ra->value, 52'000u);  // 1e6/s default rate
    EXPECT_EQ(pmu.enable_calls(), 2);
    EXPECT_EQ(pmu.disable_calls(), 0);

    // Disabling the running group lets the other one run for good.
    ASSERT_TRUE(pmu.disable(*a));
    EXPECT_EQ(pmu.counter_of(*b), 1);
    EXPECT_EQ(pmu.disable_calls(), 1);
}

// --- PerfSession on the simulation. ---

TEST_F(PerfSessionPpc750, EightEventsTakeTwoSetsAndHalfTheTimeEach) {
    auto s = start(options(kEightEvents));
    ASSERT_TRUE(s) << s.error().to_string();
    const Plan& plan = (*s)->plan();
    EXPECT_EQ(plan.slots, 2);
    ASSERT_EQ(plan.kernel_groups.size(), 2u);
    EXPECT_TRUE((*s)->rotates());
    for (std::size_t g = 0; g < plan.kernel_groups.size(); ++g) {
        const auto& group = plan.kernel_groups[g];
        EXPECT_EQ(group.set, static_cast<int>(g));
        EXPECT_EQ(group.pmu, kPpc750Pmu);
        ASSERT_EQ(group.members.size(), 4u);
        for (std::size_t m = 0; m < group.members.size(); ++m) {
            const auto& member = group.members[m];
            const auto& spec = plan.events[member.event];
            // Every event of this list can be counted on exactly one PMC: its own.
            const int required = std::countr_zero(spec.counters);
            EXPECT_EQ(spec.counters, CounterMask{1} << required) << spec.name;
            EXPECT_EQ(member.counter, required) << spec.name;
            EXPECT_EQ(member.counter_name, ppc750_counter_name(required)) << spec.name;
            // The first set has the first event of each PMC's pair.
            EXPECT_EQ(member.event % 2, g) << spec.name;
        }
    }
    // Daemon multiplexing: one set on the counters at a time, where the plan put them.
    EXPECT_EQ(pmu_->enabled_groups(0), 1);
    for (std::size_t m = 0; m < 4; ++m) {
        EXPECT_EQ(pmu_->counter_of(handle_of(plan, 0, 0, m)),
                  plan.kernel_groups[0].members[m].counter);
        EXPECT_EQ(pmu_->counter_of(handle_of(plan, 0, 1, m)), std::nullopt);
    }

    run_slices(**s, *pmu_, 10);
    EXPECT_EQ(pmu_->enabled_groups(0), 1);
    EXPECT_EQ(pmu_->enable_calls(), 11);  // the first set at start, then one per rotation
    EXPECT_EQ(pmu_->disable_calls(), 10);

    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    EXPECT_EQ(rep->slots, 2);
    EXPECT_EQ(rep->rotations, 10);
    ASSERT_EQ(rep->events.size(), 8u);
    for (const auto& e : rep->events) {
        const double rate = rate_of(*pmu_, e.canonical);
        EXPECT_EQ(e.total.enabled_ns, 1'000'000'000u) << e.name;
        EXPECT_EQ(e.total.running_ns, 500'000'000u) << e.name;
        EXPECT_NEAR(e.total.running_ratio(), 0.5, 1e-9) << e.name;
        EXPECT_EQ(static_cast<double>(e.total.count), rate * 0.5) << e.name;
        EXPECT_NEAR(e.total.scaled(), rate, rate * 0.01) << e.name;
    }
}

TEST_F(PerfSessionPpc750, PinnedCyclesAndInstructionsCountAllTheTime) {
    auto s = start(
        options("ppc750::CYCLES,ppc750::INSTRUCTIONS_COMPLETED,ppc750::L1_ICACHE_MISSES,"
                "ppc750::ITLB_MISSES,ppc750::L2_INSTRUCTION_MISSES,ppc750::BRANCHES_NOT_TAKEN"));
    ASSERT_TRUE(s) << s.error().to_string();
    const Plan& plan = (*s)->plan();
    // Four PMC2-only events: four sets, each with the pinned pair on two other counters.
    EXPECT_EQ(plan.slots, 4);
    ASSERT_EQ(plan.kernel_groups.size(), 4u);
    for (const auto& g : plan.kernel_groups) {
        ASSERT_EQ(g.members.size(), 3u);
        EXPECT_EQ(g.members[0].event, 0u);
        EXPECT_EQ(g.members[1].event, 1u);
        EXPECT_EQ(g.members[2].counter_name, "PMC2");
        EXPECT_NE(g.members[0].counter, 1);
        EXPECT_NE(g.members[1].counter, 1);
    }

    run_slices(**s, *pmu_, 8);  // 0.8 s: every set twice
    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    const auto& cycles = event(*rep, "ppc750::CYCLES").total;
    const auto& instructions = event(*rep, "ppc750::INSTRUCTIONS_COMPLETED").total;
    EXPECT_EQ(cycles.running_ratio(), 1.0);
    EXPECT_EQ(cycles.enabled_ns, 800'000'000u);
    EXPECT_EQ(cycles.count, 160'000'000u);  // 200 MHz x 0.8 s
    EXPECT_EQ(instructions.running_ratio(), 1.0);
    EXPECT_EQ(instructions.count, 120'000'000u);  // 150e6/s x 0.8 s
    for (std::string_view name : {"ppc750::L1_ICACHE_MISSES", "ppc750::ITLB_MISSES",
                                  "ppc750::L2_INSTRUCTION_MISSES", "ppc750::BRANCHES_NOT_TAKEN"}) {
        const auto& v = event(*rep, name).total;
        const double rate = rate_of(*pmu_, name);
        EXPECT_NEAR(v.running_ratio(), 0.25, 1e-9) << name;
        EXPECT_EQ(static_cast<double>(v.count), rate * 0.2) << name;
        EXPECT_NEAR(v.scaled(), rate * 0.8, rate * 0.8 * 0.01) << name;
    }
    auto metrics = derive_metrics(plan, *rep);
    auto ipc = metric(metrics, "ipc");
    ASSERT_TRUE(ipc);
    EXPECT_DOUBLE_EQ(ipc->value, 0.75);
    EXPECT_TRUE(ipc->same_set);

    // Derived into a vector that holds other metrics (more of them, stale fields), as a
    // stream does every period: the same metrics, none of the old left.
    ASSERT_GE(metrics.size(), 3u);
    std::vector<Metric> kept(metrics.size() + 2, Metric{"stale", "a stale description", 9.5, true});
    derive_metrics(plan, *rep, kept);
    ASSERT_EQ(kept.size(), metrics.size());
    for (std::size_t i = 0; i < metrics.size(); ++i) {
        EXPECT_EQ(kept[i].name, metrics[i].name);
        EXPECT_EQ(kept[i].description, metrics[i].description);
        EXPECT_EQ(kept[i].value, metrics[i].value) << metrics[i].name;
        EXPECT_EQ(kept[i].same_set, metrics[i].same_set) << metrics[i].name;
    }
}

TEST_F(PerfSessionPpc750, ReadsFoldThe32BitCountersInto64Bits) {
    auto s = start(options("ppc750::CYCLES"));
    ASSERT_TRUE(s) << s.error().to_string();
    for (int second = 1; second <= 60; ++second) {
        pmu_->advance(1s);
        auto rep = (*s)->read();
        ASSERT_TRUE(rep) << rep.error().to_string();
        ASSERT_EQ(rep->events[0].total.count,
                  std::uint64_t{200'000'000} * static_cast<std::uint64_t>(second));
    }
    auto rep = (*s)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->events[0].total.count, 12'000'000'000u);
    EXPECT_GT(rep->events[0].total.count, k2To32);
    EXPECT_EQ(rep->events[0].total.enabled_ns, 60'000'000'000u);
}

// A 32-bit PMC at 200 MHz wraps every 2^32 / 200e6 = 21.47 s, and a fold can only see one
// wrap between two reads: a session must be read (or rotated, which reads the set it takes
// off) more often than that. Daemon multiplexing reads each set at every rotation; a session
// with a single set (or kernel multiplexing) is read only by read(), i.e. by the daemon's
// period timer or a client's Read — see the report for what happens without either.
TEST_F(PerfSessionPpc750, AWrapIsLostWithoutAReadWithin21Seconds) {
    auto s = start(options("ppc750::CYCLES"));
    ASSERT_TRUE(s) << s.error().to_string();
    pmu_->advance(21s);  // 4.2e9 < 2^32: still exact
    auto rep = (*s)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->events[0].total.count, 4'200'000'000u);

    auto lost = start(options("ppc750::CYCLES"));
    ASSERT_TRUE(lost) << lost.error().to_string();
    pmu_->advance(30s);  // 6e9 cycles, one wrap the session never sees
    rep = (*lost)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->events[0].total.count, 6'000'000'000u - k2To32);
}

TEST_F(PerfSessionPpc750, RotationsReadEachSetSoLongRunsKeepEveryWrap) {
    auto s = start(options("ppc750::CYCLES,ppc750::L1_ICACHE_MISSES,ppc750::ITLB_MISSES"));
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_EQ((*s)->plan().slots, 2);
    run_slices(**s, *pmu_, 300);  // 30 s, no read() in between
    auto rep = (*s)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(event(*rep, "ppc750::CYCLES").total.count, 6'000'000'000u);
}

TEST_F(PerfSessionPpc750, RawCodesAndImpossibleGroups) {
    auto s = start(options("ppc750::r205"));
    ASSERT_TRUE(s) << s.error().to_string();
    const Plan& plan = (*s)->plan();
    ASSERT_EQ(plan.events.size(), 1u);
    EXPECT_EQ(plan.events[0].canonical, "ppc750::r205");
    EXPECT_EQ(plan.events[0].counters, CounterMask{0x2});
    ASSERT_EQ(plan.kernel_groups.size(), 1u);
    EXPECT_EQ(plan.kernel_groups[0].members[0].counter_name, "PMC2");
    EXPECT_EQ(pmu_->counter_of(0), 1);

    pmu_->advance(1s);
    auto rep = (*s)->read();
    ASSERT_TRUE(rep);
    // Counted as L1_ICACHE_MISSES (3e6/s here), and the metrics know it as such.
    EXPECT_EQ(rep->events[0].total.count, 3'000'000u);
    EXPECT_EQ(pmu_->mmcr0(0) & 0x3F, 0x05u);

    const std::string group = "{ppc750::L1_ICACHE_MISSES,ppc750::ITLB_MISSES}";
    auto planned = make_plan(*catalog_, options(group));
    ASSERT_FALSE(planned);
    auto started = start(options(group));
    ASSERT_FALSE(started);
    for (const Error& err : {planned.error(), started.error()}) {
        EXPECT_EQ(err.status, Status::BadArg);
        for (std::string_view word : {"ppc750::L1_ICACHE_MISSES", "ppc750::ITLB_MISSES", "PMC2"}) {
            EXPECT_NE(err.message.find(word), std::string::npos) << err.message;
        }
    }

    // A raw code no counter can hold is refused by the catalog already.
    auto reserved = start(options("ppc750::r211"));
    ASSERT_FALSE(reserved);
    EXPECT_EQ(reserved.error().status, Status::BadArg);
    EXPECT_NE(reserved.error().message.find("ppc750::r211"), std::string::npos);
}

// MuxMode::Kernel opens every set enabled at once. The simulation does what the kernel does:
// the sets are scheduled in the order they were enabled until one does not fit, the waiting
// ones get enabled time but no running time, and every mux interval (4 ms) the first running
// set goes to the back. PerfSession does not rotate (rotate() is a no-op), and the running
// times come from the device.
TEST_F(PerfSessionPpc750, KernelMultiplexingRotatesInTheSimulatedPmu) {
    auto o = options(kEightEvents);
    o.mux = MuxMode::Kernel;
    auto s = start(std::move(o));
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ((*s)->plan().slots, 2);
    EXPECT_FALSE((*s)->rotates());
    EXPECT_EQ(pmu_->enabled_groups(0), 2);
    EXPECT_EQ(pmu_->running_groups(0), 1);

    run_slices(**s, *pmu_, 10);  // rotate() calls change nothing here
    EXPECT_EQ(pmu_->enable_calls(), 2);
    EXPECT_EQ(pmu_->disable_calls(), 0);
    EXPECT_EQ(pmu_->rotations(0), 250);  // 1 s / 4 ms

    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    EXPECT_EQ(rep->rotations, 0);
    for (const auto& e : rep->events) {
        const double rate = rate_of(*pmu_, e.canonical);
        EXPECT_EQ(e.total.enabled_ns, 1'000'000'000u) << e.name;
        EXPECT_EQ(e.total.running_ns, 500'000'000u) << e.name;
        EXPECT_NEAR(e.total.scaled(), rate, rate * 0.01) << e.name;
    }
}

// With pinned events in kernel mode, each set carries its own cycles event that runs only
// with its set; summed over the sets they cover the whole time.
TEST_F(PerfSessionPpc750, KernelMultiplexingSumsThePinnedEventsOverTheSets) {
    auto o = options(
        "ppc750::CYCLES,ppc750::L1_ICACHE_MISSES,ppc750::ITLB_MISSES,"
        "ppc750::L2_INSTRUCTION_MISSES,ppc750::BRANCHES_NOT_TAKEN");
    o.mux = MuxMode::Kernel;
    auto s = start(std::move(o));
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(pmu_->enabled_groups(0), 4);
    EXPECT_EQ(pmu_->running_groups(0), 1);
    pmu_->advance(800ms);  // 200 intervals: 50 for each set
    auto rep = (*s)->read();
    ASSERT_TRUE(rep);
    const auto& cycles = event(*rep, "ppc750::CYCLES").total;
    EXPECT_EQ(cycles.count, 160'000'000u);
    EXPECT_EQ(cycles.running_ratio(), 1.0);
    const auto& misses = event(*rep, "ppc750::L1_ICACHE_MISSES").total;
    EXPECT_NEAR(misses.running_ratio(), 0.25, 1e-9);
    EXPECT_EQ(misses.count, 600'000u);  // 3e6/s x 0.2 s
}

TEST_F(PerfSessionPpc750, EachCpuKeepsOneCountPerCpuAndTheirSum) {
    auto s = start(options("ppc750::CYCLES,ppc750::L1_ICACHE_MISSES", TargetKind::EachCpu, {0, 1}));
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_TRUE(pmu_->set_rate("ppc750::CYCLES", 100e6, 1));  // cpu1 runs at half the clock
    EXPECT_EQ(pmu_->enabled_groups(0), 1);
    EXPECT_EQ(pmu_->enabled_groups(1), 1);
    pmu_->advance(1s);
    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    EXPECT_EQ(rep->instances, (std::vector<int>{0, 1}));
    for (const auto& e : rep->events) {
        ASSERT_EQ(e.per_instance.size(), 2u) << e.name;
        EXPECT_EQ(e.total.count, e.per_instance[0].count + e.per_instance[1].count) << e.name;
        EXPECT_EQ(e.total.enabled_ns, e.per_instance[0].enabled_ns + e.per_instance[1].enabled_ns);
        EXPECT_EQ(e.total.running_ns, e.per_instance[0].running_ns + e.per_instance[1].running_ns);
    }
    const auto& cycles = event(*rep, "ppc750::CYCLES");
    EXPECT_EQ(cycles.per_instance[0].count, 200'000'000u);
    EXPECT_EQ(cycles.per_instance[1].count, 100'000'000u);
    EXPECT_EQ(cycles.total.count, 300'000'000u);
    EXPECT_EQ(event(*rep, "ppc750::L1_ICACHE_MISSES").total.count, 6'000'000u);
}

TEST_F(PerfSessionPpc750, EachCpuMultiplexesEveryCpuOnItsOwnPmu) {
    auto s = start(options(kEightEvents, TargetKind::EachCpu, {0, 1}));
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(pmu_->enabled_groups(0), 1);
    EXPECT_EQ(pmu_->enabled_groups(1), 1);
    run_slices(**s, *pmu_, 10);
    auto rep = (*s)->read();
    ASSERT_TRUE(rep) << rep.error().to_string();
    for (const auto& e : rep->events) {
        ASSERT_EQ(e.per_instance.size(), 2u);
        for (const auto& v : e.per_instance) {
            EXPECT_EQ(v.enabled_ns, 1'000'000'000u) << e.name;
            EXPECT_NEAR(v.running_ratio(), 0.5, 1e-9) << e.name;
        }
        EXPECT_EQ(e.total.count, e.per_instance[0].count + e.per_instance[1].count);
        EXPECT_NEAR(e.total.scaled(), 2 * rate_of(*pmu_, e.canonical),
                    2 * rate_of(*pmu_, e.canonical) * 0.01)
            << e.name;
    }
}

TEST_F(PerfSessionPpc750, EachSetProgramsTheDocumentedMmcrLayout) {
    auto s = start(options(kEightEvents));
    ASSERT_TRUE(s) << s.error().to_string();
    // Set 0: EIEIO_COMPLETED (PMC1 0x05), L1_ICACHE_MISSES (PMC2 0x05), L1_DCACHE_MISSES
    // (PMC3 0x05), L2_CASTOUTS (PMC4 0x05).
    EXPECT_EQ(pmu_->mmcr0(0), (0x05u << 6) | 0x05u);
    EXPECT_EQ(pmu_->mmcr0(0) & 0x3F, 0x05u);  // PMC2SELECT, bits 0-5
    EXPECT_EQ(pmu_->mmcr1(0), (0x05u << 27) | (0x05u << 22));
    ASSERT_TRUE((*s)->rotate());
    // Set 1: INSTR_EA_DELIVERED (PMC1 0x08), ITLB_MISSES (PMC2 0x06), DTLB_MISSES (PMC3 0x06),
    // BRANCHES_MISPREDICTED (PMC4 0x08).
    EXPECT_EQ(pmu_->mmcr0(0), 0x206u);
    EXPECT_EQ(pmu_->mmcr1(0), 0x32000000u);
    ASSERT_TRUE((*s)->stop());
    EXPECT_EQ(pmu_->mmcr0(0), SimulatedPpc750Pmu::kMmcr0Fc);  // frozen: nothing enabled
    EXPECT_EQ(pmu_->enabled_groups(), 0);
}

TEST_F(PerfSessionPpc750, ModifiersSetTheFreezeBitsAndThresholdInMmcr0) {
    auto user = start(options("{ppc750::CYCLES:u,ppc750::L1_ICACHE_MISSES:u}"));
    ASSERT_TRUE(user) << user.error().to_string();
    EXPECT_EQ(pmu_->mmcr0(0) & SimulatedPpc750Pmu::kMmcr0Fcs, SimulatedPpc750Pmu::kMmcr0Fcs);
    EXPECT_EQ(pmu_->mmcr0(0) & SimulatedPpc750Pmu::kMmcr0Fcp, 0u);
    pmu_->advance(1s);
    auto rep = (*user)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->events[0].total.count, 150'000'000u);  // the 75% user share of 200e6

    auto kernel = start(options("ppc750::CYCLES:k"));
    ASSERT_TRUE(kernel) << kernel.error().to_string();
    EXPECT_EQ(pmu_->mmcr0(0) & (SimulatedPpc750Pmu::kMmcr0Fcs | SimulatedPpc750Pmu::kMmcr0Fcp),
              SimulatedPpc750Pmu::kMmcr0Fcp);
    pmu_->advance(1s);
    rep = (*kernel)->read();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->events[0].total.count, 50'000'000u);  // the other 25%

    auto threshold = start(options("ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=20"));
    ASSERT_TRUE(threshold) << threshold.error().to_string();
    EXPECT_EQ((*threshold)->plan().events[0].config, (20u << 12) | 0x10Au);
    EXPECT_EQ(pmu_->mmcr0(0), (20u << 16) | (0x0Au << 6));
    // The name as counted says the threshold granted, also the default one.
    EXPECT_EQ((*threshold)->plan().events[0].canonical,
              "ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=20");
    threshold = start(options("ppc750::L1_LOAD_MISSES_OVER_THRESHOLD"));
    ASSERT_TRUE(threshold) << threshold.error().to_string();
    EXPECT_EQ((*threshold)->plan().events[0].canonical,
              "ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=0");
    EXPECT_EQ(pmu_->mmcr0(0), 0x0Au << 6);
}

TEST_F(PerfSessionPpc750, IcacheMissRatioFromOneSetOrFromEstimates) {
    // One group: one set, the exact ratio of the raw counts.
    auto grouped = start(options("{ppc750::L1_ICACHE_MISSES,ppc750::INSTR_EA_DELIVERED}"));
    ASSERT_TRUE(grouped) << grouped.error().to_string();
    pmu_->advance(1s);
    auto rep = (*grouped)->read();
    ASSERT_TRUE(rep);
    auto ratio = metric(derive_metrics((*grouped)->plan(), *rep), "icache_miss_ratio");
    ASSERT_TRUE(ratio);
    EXPECT_DOUBLE_EQ(ratio->value, 3e6 / 60e6);
    EXPECT_TRUE(ratio->same_set);

    // EIEIO_COMPLETED takes PMC1 in the first set, so INSTR_EA_DELIVERED (PMC1 too) goes into
    // the second: the ratio comes from the scaled estimates.
    auto split = start(
        options("ppc750::EIEIO_COMPLETED,ppc750::L1_ICACHE_MISSES,ppc750::INSTR_EA_DELIVERED"));
    ASSERT_TRUE(split) << split.error().to_string();
    const Plan& plan = (*split)->plan();
    ASSERT_EQ(plan.slots, 2);
    EXPECT_EQ(set_of(plan, 1), 0);
    EXPECT_EQ(set_of(plan, 2), 1);
    run_slices(**split, *pmu_, 10);
    rep = (*split)->read();
    ASSERT_TRUE(rep);
    ratio = metric(derive_metrics(plan, *rep), "icache_miss_ratio");
    ASSERT_TRUE(ratio);
    EXPECT_NEAR(ratio->value, 3e6 / 60e6, 3e6 / 60e6 * 0.01);
    EXPECT_FALSE(ratio->same_set);
}

// --- Cases the simulation found wrong once ---

// An event whose only counter is above the budget must be refused, not planned as free
// running outside the budget.
TEST_F(PerfSessionPpc750, AnEventOnlyAboveTheCounterBudgetIsRefused) {
    auto o = options("ppc750::L2_CASTOUTS,ppc750::EIEIO_COMPLETED");
    o.counter_budget = 2;
    auto plan = make_plan(*catalog_, o);
    ASSERT_FALSE(plan) << "planned as set " << plan->kernel_groups[0].set;
    EXPECT_EQ(plan.error().status, Status::BadArg);
    EXPECT_NE(plan.error().message.find("ppc750::L2_CASTOUTS"), std::string::npos);
}

// MMCR0's freeze bits (FCS for :u, FCP for :k) hold for every counter, so a 750 driver refuses
// a group whose events differ in their modifiers (ppc750-pmu.md): the plan keeps them apart.
TEST_F(PerfSessionPpc750, EventsWithOtherModifiersAreNotInOneSet) {
    const auto o = options("ppc750::CYCLES:u,ppc750::L1_ICACHE_MISSES");
    auto plan = make_plan(*catalog_, o);
    if (!plan) {
        EXPECT_EQ(plan.error().status, Status::BadArg);
        EXPECT_NE(plan.error().message.find("ppc750::CYCLES:u"), std::string::npos);
        return;
    }
    for (const auto& g : plan->kernel_groups) {
        for (const auto& m : g.members) {
            const auto& first = plan->events[g.members.front().event];
            EXPECT_EQ(plan->events[m.event].exclude_kernel, first.exclude_kernel);
            EXPECT_EQ(plan->events[m.event].exclude_user, first.exclude_user);
        }
    }
    auto s = start(o);
    EXPECT_TRUE(s) << s.error().to_string();
}

// With enable_on_exec, only the first set is opened to start at the exec; a rotation before
// the exec must not enable another set by hand (it would count the process before its exec,
// and two sets would be on the counters after it).
TEST_F(PerfSessionPpc750, NoSetCountsBeforeTheExecAndOneSetAfterIt) {
    auto o = options("ppc750::EIEIO_COMPLETED,ppc750::INSTR_EA_DELIVERED");
    o.target.kind = TargetKind::Process;
    o.target.pid = 4242;
    o.target.enable_on_exec = true;
    auto s = start(std::move(o));
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_EQ((*s)->plan().slots, 2);
    EXPECT_EQ(pmu_->enabled_groups(-1), 0);
    pmu_->advance(100ms);
    ASSERT_TRUE((*s)->rotate());
    EXPECT_EQ(pmu_->enabled_groups(-1), 0) << "a set counts before the exec";
    pmu_->advance(50ms);
    pmu_->simulate_exec();
    EXPECT_EQ(pmu_->enabled_groups(-1), 1) << "sets enabled at once after the exec";
}

}  // namespace
}  // namespace monitor::perf
