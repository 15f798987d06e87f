// Tests of the PMU module interface with a second built-in table that exists only here (a TEST
// FAKE: no such PMU or processor exists): a catalog made of it alone resolves, lists, names
// counters, plans, refuses to count on another processor and derives metrics through the
// interface, with nothing in the catalog, the planner or the metrics knowing its name; and no
// module of libpfm4 is needed for any of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/pmu.hpp"

namespace monitor::perf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kFakePmu = "testpmu";
constexpr std::string_view kFakeProcessor = "Test Core 1 (a test fake)";
constexpr int kFakeCounters = 4;
constexpr int kFakeWidth = 16;
constexpr unsigned kMaxWindow = 7;

// A row of the test fake's table, in the spirit of ppc750_events.
struct FakeEvent {
    std::string_view name;
    std::uint8_t select;
    CounterMask counters;
    bool pinned = false;
    Measure measure = Measure::Other;
    bool uses_window = false;  // takes `:window=N`, bits 8-10 of the code
};

constexpr CounterMask kAny = 0xF;
constexpr CounterMask kTc2 = 1U << 1;
constexpr CounterMask kTc3 = 1U << 2;

constexpr std::array kFakeEvents = {
    FakeEvent{"TICKS", 0x01, kAny, true, Measure::Cycles},
    FakeEvent{"RETIRED", 0x02, kAny, false, Measure::Instructions},
    FakeEvent{"FETCHES", 0x03, kTc2, false, Measure::InstructionFetches},
    FakeEvent{"IMISS", 0x04, kTc3, false, Measure::L1IcacheMisses},
    FakeEvent{"STALLS", 0x05, kTc3, false, Measure::Other, true},
};

// The test fake: one PMU of four 16-bit counters TC1-TC4, each with selects of its own, that
// counts only on the processor kFakeProcessor.
class TestFakePmu final : public PmuModule {
  public:
    std::vector<PmuInfo> pmus() const override {
        PmuInfo p;
        p.name = kFakePmu;
        p.description = "a test fake's table";
        p.counters = kFakeCounters;
        p.counter_width = kFakeWidth;
        p.events = kFakeEvents.size();
        p.source = kBuiltInSource;
        return {p};
    }

    Result<EventSpec> resolve(const EventName& name) const override {
        const FakeEvent* e = find(name.event);
        if (e == nullptr) return fail(Status::NoEvent, "no such event in the test fake");
        std::optional<NumberModifier> window;
        if (e->uses_window) window = NumberModifier{"window", kMaxWindow};
        auto m = parse_modifiers(name.modifiers, name.full, window);
        if (!m) return std::unexpected(m.error());
        EventSpec spec;
        spec.name = name.full;
        spec.canonical = std::string(kFakePmu) + "::" + std::string(e->name);
        spec.pmu = kFakePmu;
        spec.counter_pmu = kFakePmu;
        spec.type = PERF_TYPE_RAW;
        spec.config = e->select | std::uint64_t{m->number.value_or(0)} << 8;
        spec.counters = e->counters;
        spec.pinned = e->pinned;
        spec.counter_width = kFakeWidth;
        spec.measure = e->measure;
        spec.per_counter_selects = true;
        m->apply_to(spec);
        return spec;
    }

    void list(std::string_view, std::vector<EventInfo>& out) const override {
        for (const auto& e : kFakeEvents) {
            EventInfo info;
            info.name = std::string(kFakePmu) + "::" + std::string(e.name);
            info.pmu = kFakePmu;
            info.counters = e.counters;
            info.pinned = e.pinned;
            out.push_back(std::move(info));
        }
    }

    std::string counter_name(std::string_view, int counter) const override {
        return "TC" + std::to_string(counter + 1);
    }

    Result<void> counts_on(const Processor& p) const override {
        if (p.name == kFakeProcessor) return {};
        return fail(Status::NoPmu, "counts only on the " + std::string(kFakeProcessor) +
                                       "; this machine has " + p.describe());
    }

  private:
    static const FakeEvent* find(std::string_view name) {
        for (const auto& e : kFakeEvents) {
            if (iequals(e.name, name)) return &e;
        }
        return nullptr;
    }
};

Processor processor(std::string_view name) {
    Processor p;
    p.name = name;
    return p;
}

EventCatalog fake_catalog(std::string_view on = kFakeProcessor) {
    return EventCatalog::of_modules({std::make_shared<TestFakePmu>()}, processor(on));
}

// A counter device that must not be reached: the processor check comes before any open.
class TestFakeUnreachableDevice final : public CounterDevice {
  public:
    Result<int> open(const EventSpec& event, const OpenTarget&, int) override {
        ADD_FAILURE() << "opened " << event.name;
        return fail(Status::BadArg, "the test fake device opens nothing");
    }
    Result<void> enable(int) override { return {}; }
    Result<void> disable(int) override { return {}; }
    Result<void> reset(int) override { return {}; }
    Result<CounterReading> read(int) override { return CounterReading{}; }
    void close(int) override {}
    int width(int) const override { return kFakeWidth; }
};

SessionOptions on_cpu0(std::vector<EventRequest> events) {
    SessionOptions o;
    o.events = std::move(events);
    o.target.kind = TargetKind::OneCpu;
    o.target.cpu = 0;
    o.cpus = {0};
    return o;
}

TEST(PmuModule, ItsPmuIsListedWithItsCountersAndSource) {
    auto c = fake_catalog();
    ASSERT_EQ(c.pmus().size(), 1u);
    const PmuInfo* p = c.find_pmu("TESTPMU");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->name, kFakePmu);
    EXPECT_EQ(p->counters, kFakeCounters);
    EXPECT_EQ(p->counter_width, kFakeWidth);
    EXPECT_EQ(p->events, kFakeEvents.size());
    EXPECT_EQ(p->source, kBuiltInSource);
    EXPECT_EQ(p->unavailable, "");
}

TEST(PmuModule, ResolvesItsNamesWithModifiersAndWhatTheyMeasure) {
    auto c = fake_catalog();
    auto imiss = c.resolve("testpmu::IMISS:u");
    ASSERT_TRUE(imiss) << imiss.error().to_string();
    EXPECT_EQ(imiss->name, "testpmu::IMISS:u");
    EXPECT_EQ(imiss->canonical, "testpmu::IMISS");
    EXPECT_EQ(imiss->pmu, kFakePmu);
    EXPECT_EQ(imiss->counter_pmu, kFakePmu);
    EXPECT_EQ(imiss->counters, kTc3);
    EXPECT_EQ(imiss->counter_width, kFakeWidth);
    EXPECT_FALSE(imiss->exclude_user);
    EXPECT_TRUE(imiss->exclude_kernel);
    EXPECT_EQ(imiss->measure, Measure::L1IcacheMisses);
    EXPECT_TRUE(imiss->per_counter_selects);

    // Any case, as for every PMU.
    auto ticks = c.resolve("TESTPMU::ticks");
    ASSERT_TRUE(ticks) << ticks.error().to_string();
    EXPECT_EQ(ticks->canonical, "testpmu::TICKS");
    EXPECT_TRUE(ticks->pinned);
    EXPECT_EQ(ticks->measure, Measure::Cycles);

    // A number modifier of the module's own, on the events that take it.
    auto stalls = c.resolve("testpmu::STALLS:window=5:k");
    ASSERT_TRUE(stalls) << stalls.error().to_string();
    EXPECT_EQ(stalls->config, 0x505u);
    EXPECT_TRUE(stalls->exclude_user);
    auto too_wide = c.resolve("testpmu::STALLS:window=8");
    ASSERT_FALSE(too_wide);
    EXPECT_EQ(too_wide.error().status, Status::BadArg);
    EXPECT_THAT(too_wide.error().message,
                HasSubstr("testpmu::STALLS:window=8: window must be a number from 0 to 7"));
    auto not_here = c.resolve("testpmu::IMISS:window=1");
    ASSERT_FALSE(not_here);
    EXPECT_THAT(not_here.error().message,
                HasSubstr("unknown modifier ':window=1' (accepted: :u user mode only, :k kernel "
                          "mode only, :h hypervisor only (together: :uk))"));
    auto unknown = c.resolve("testpmu::STALLS:x");
    ASSERT_FALSE(unknown);
    EXPECT_THAT(unknown.error().message,
                HasSubstr(":h hypervisor only (together: :uk), :window=0-7)"));
}

TEST(PmuModule, UnknownNamesGetTheClosestOfItsEvents) {
    auto c = fake_catalog();
    auto typo = c.resolve("testpmu::IMIS");
    ASSERT_FALSE(typo);
    EXPECT_EQ(typo.error().status, Status::NoEvent);
    EXPECT_THAT(typo.error().message, HasSubstr("unknown event 'testpmu::IMIS';"));
    EXPECT_THAT(typo.error().message, HasSubstr("did you mean testpmu::IMISS"));
    // Without libpfm4's module nothing takes names of no listed PMU.
    for (const char* name : {"cycles", "perf::TASK-CLOCK", "other::IMISS"}) {
        auto r = c.resolve(name);
        ASSERT_FALSE(r) << name;
        EXPECT_EQ(r.error().status, Status::NoEvent) << name;
    }
}

// A name far longer than any event's gets no suggestions, and is not compared with them: a
// client's megabyte of name took seconds of the daemon's loop (seen while fuzzing event lists;
// the time is the fuzz benchmark's, not this test's).
TEST(PmuModule, AVeryLongUnknownNameIsRefusedWithoutComparingIt) {
    auto c = fake_catalog();
    const std::string huge = "testpmu::IMIS" + std::string(1 << 20, 'S');
    EXPECT_TRUE(c.closest(huge).empty());
    auto r = c.resolve(huge);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::NoEvent);
    EXPECT_THAT(r.error().message, Not(HasSubstr("did you mean")));
}

// The suggestions are every known name within the limit of the query (its event part, without
// modifiers; max(3, half its length) edits, ignoring case), nearest first and in the catalog's
// order among equals: checked against the whole edit-distance table, over names one to six
// edits from known ones and over unrelated ones, with the catalog of this machine (the
// PowerPC 750 table and the kernel's generic events at least).
TEST(PmuModule, TheClosestNamesAreAllThoseWithinTheLimitNearestFirst) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    auto listed = c->list();
    ASSERT_TRUE(listed);
    std::vector<std::string> names;
    for (const auto& e : *listed) names.push_back(e.name);
    ASSERT_GT(names.size(), 20u);

    auto lower = [](std::string s) {
        for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return s;
    };
    auto distance = [](const std::string& a, const std::string& b) {  // the whole table
        std::vector<std::vector<std::size_t>> d(a.size() + 1,
                                                std::vector<std::size_t>(b.size() + 1));
        for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
        for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            for (std::size_t j = 1; j <= b.size(); ++j) {
                d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                                    d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            }
        }
        return d[a.size()][b.size()];
    };
    auto expected = [&](const std::string& query) {
        const bool qualified = query.find("::") != std::string::npos;
        const std::string bare =
            query.substr(0, query.find(':', qualified ? query.find("::") + 2 : 0));
        const std::size_t limit = std::max<std::size_t>(3, bare.size() / 2);
        std::vector<std::pair<std::size_t, std::string>> scored;
        for (const auto& n : names) {
            const auto sep = n.find("::");
            const std::string candidate =
                qualified || sep == std::string::npos ? n : n.substr(sep + 2);
            const auto d = distance(lower(bare), lower(candidate));
            if (d <= limit) scored.emplace_back(d, n);
        }
        std::ranges::stable_sort(scored, {}, &std::pair<std::size_t, std::string>::first);
        std::vector<std::string> out;
        for (auto& [d, n] : scored) out.push_back(n);
        return out;
    };

    std::uint32_t seed = 750;
    auto next = [&seed](std::uint32_t below) {
        seed = seed * 1664525u + 1013904223u;
        return (seed >> 8) % below;
    };
    const std::string letters = "abcdeIMSTRK_-:0123456789";
    std::size_t with_suggestions = 0;
    for (int round = 0; round < 400; ++round) {
        std::string q = names[next(static_cast<std::uint32_t>(names.size()))];
        if (round % 3 == 0) {
            const auto sep = q.find("::");
            if (sep != std::string::npos) q = q.substr(sep + 2);  // without its PMU
        }
        if (round % 5 == 0) q += ":u";
        const auto edits = round % 10 == 9 ? 20 : next(7);  // some far from any name
        for (std::uint32_t e = 0; e < edits; ++e) {
            const auto at = next(static_cast<std::uint32_t>(q.size() + 1));
            const char ch = letters[next(static_cast<std::uint32_t>(letters.size()))];
            switch (next(4)) {
                case 0:
                    q.insert(q.begin() + at, ch);
                    break;
                case 1:
                    if (at < q.size()) q.erase(at, 1);
                    break;
                case 2:
                    if (at < q.size()) q[at] = ch;
                    break;
                default:
                    if (at < q.size()) {
                        q[at] = static_cast<char>(std::toupper(static_cast<unsigned char>(q[at])));
                    }
            }
        }
        if (q.empty()) continue;
        const auto want = expected(q);
        with_suggestions += want.empty() ? 0 : 1;
        EXPECT_EQ(c->closest(q, names.size()), want) << "'" << q << "'";
        const auto three = c->closest(q);
        EXPECT_EQ(three, std::vector<std::string>(
                             want.begin(), want.begin() + std::min<std::size_t>(3, want.size())))
            << "'" << q << "'";
    }
    EXPECT_GT(with_suggestions, 100u) << "the queries should mostly be near a name";
}

TEST(PmuModule, ListsItsEventsWithTheNamesOfTheirCounters) {
    auto c = fake_catalog();
    auto events = c.list("testpmu");
    ASSERT_TRUE(events) << events.error().to_string();
    ASSERT_EQ(events->size(), kFakeEvents.size());
    EXPECT_EQ((*events)[0].name, "testpmu::TICKS");
    EXPECT_THAT((*events)[0].counter_names, ElementsAre("TC1", "TC2", "TC3", "TC4"));
    EXPECT_TRUE((*events)[0].pinned);
    EXPECT_EQ((*events)[3].name, "testpmu::IMISS");
    EXPECT_THAT((*events)[3].counter_names, ElementsAre("TC3"));
    auto all = c.list();
    ASSERT_TRUE(all);
    EXPECT_EQ(all->size(), kFakeEvents.size());
    auto none = c.list("nope");
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::NoEvent);
    EXPECT_THAT(none.error().message, HasSubstr("known here: testpmu"));
}

TEST(PmuModule, NamesItsCountersInPlansAndSchedulingErrors) {
    auto c = fake_catalog();
    EXPECT_EQ(c.counter_name("testpmu", 1), "TC2");
    EXPECT_EQ(c.counter_name("no_such_pmu", 1), "counter 2");

    auto plan =
        make_plan(c, on_cpu0({{"testpmu::TICKS"}, {"testpmu::IMISS"}, {"testpmu::FETCHES"}}));
    ASSERT_TRUE(plan) << plan.error().to_string();
    ASSERT_EQ(plan->kernel_groups.size(), 1u);
    const auto& members = plan->kernel_groups[0].members;
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members[0].counter_name, "TC1");  // TICKS: the first free counter
    EXPECT_EQ(members[1].counter_name, "TC3");  // IMISS: its only counter
    EXPECT_EQ(members[2].counter_name, "TC2");  // FETCHES: its only counter

    auto clash = make_plan(c, on_cpu0({{"testpmu::IMISS", 0}, {"testpmu::STALLS", 0}}));
    ASSERT_FALSE(clash);
    EXPECT_EQ(clash.error().status, Status::BadArg);
    EXPECT_THAT(clash.error().message,
                HasSubstr("testpmu::IMISS and testpmu::STALLS can only be counted on TC3"));
}

TEST(PmuModule, CountsOnlyOnTheProcessorItsModuleAccepts) {
    auto elsewhere = fake_catalog("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
    const PmuInfo* p = elsewhere.find_pmu("testpmu");
    ASSERT_NE(p, nullptr);
    EXPECT_THAT(p->unavailable, HasSubstr("counts only on the Test Core 1"));
    // Resolved and planned anywhere ...
    auto imiss = elsewhere.resolve("testpmu::IMISS");
    ASSERT_TRUE(imiss) << imiss.error().to_string();
    const auto options = on_cpu0({{"testpmu::IMISS"}});
    EXPECT_TRUE(make_plan(elsewhere, options));
    // ... counted only where the module says they count, refused before anything opens.
    auto r = elsewhere.countable(*imiss);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::NoPmu);
    EXPECT_THAT(r.error().message,
                HasSubstr("testpmu::IMISS: counts only on the Test Core 1 (a test fake); this "
                          "machine has Intel(R) Xeon(R) Gold 6248"));
    auto s = PerfSession::start(elsewhere, std::make_unique<TestFakeUnreachableDevice>(), options);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().status, Status::NoPmu);

    auto here = fake_catalog();
    auto on_it = here.resolve("testpmu::IMISS");
    ASSERT_TRUE(on_it);
    EXPECT_TRUE(here.countable(*on_it));
}

// The metrics know what an event measures from its module, not from its PMU's name or codes.
TEST(PmuModule, ItsEventsFeedTheDerivedMetrics) {
    auto c = fake_catalog();
    auto plan = make_plan(
        c,
        on_cpu0(
            {{"testpmu::TICKS"}, {"testpmu::RETIRED"}, {"testpmu::IMISS"}, {"testpmu::FETCHES"}}));
    ASSERT_TRUE(plan) << plan.error().to_string();
    ASSERT_EQ(plan->kernel_groups.size(), 1u);
    const std::vector<std::uint64_t> counts = {2000, 1000, 30, 600};  // in request order
    PerfReport report;
    report.elapsed = std::chrono::seconds(1);
    report.instances = {0};
    for (std::size_t e = 0; e < counts.size(); ++e) {
        EventCount ec;
        ec.name = plan->events[e].name;
        ec.total = {counts[e], 1'000'000'000, 1'000'000'000};
        report.events.push_back(ec);
    }
    GroupCount g;
    g.set = plan->kernel_groups[0].set;
    for (const auto& m : plan->kernel_groups[0].members) {
        g.events.push_back(m.event);
        g.counts.push_back(counts[m.event]);
    }
    report.groups.push_back(g);

    auto metrics = derive_metrics(*plan, report);
    auto value = [&](std::string_view name) {
        for (const auto& m : metrics) {
            if (m.name != name) continue;
            EXPECT_TRUE(m.same_set) << name;
            return m.value;
        }
        ADD_FAILURE() << "no metric " << name;
        return 0.0;
    };
    EXPECT_DOUBLE_EQ(value("ipc"), 0.5);
    EXPECT_DOUBLE_EQ(value("cpi"), 2.0);
    EXPECT_DOUBLE_EQ(value("icache_miss_ratio"), 0.05);
    EXPECT_DOUBLE_EQ(value("l1_icache_misses_pti"), 30.0);
    EXPECT_FALSE(
        std::ranges::any_of(metrics, [](const Metric& m) { return m.name == "cache_miss_ratio"; }));
}

// A second test fake, in the breakpoint PMU's manner: each event ("held::SLOT" or
// "held::SLOT@SYMBOL") holds one of two slots for as long as it is open and never takes turns;
// an event named by a symbol is placed at the target's pid (as a breakpoint at the address its
// target has the symbol); a refusal with EBUSY has an explanation of its own; the listing has
// a note; "held::KERNEL" is refused to an unprivileged caller. Nothing outside this module
// knows any of it.
constexpr std::string_view kHeldPmu = "held";
constexpr int kHeldSlots = 2;

class TestFakeHeldPmu final : public PmuModule {
  public:
    std::vector<PmuInfo> pmus() const override {
        PmuInfo p;
        p.name = kHeldPmu;
        p.description = "a test fake whose events hold a slot each";
        p.counters = kHeldSlots;
        p.events = 1;
        p.source = kBuiltInSource;
        return {p};
    }
    Result<EventSpec> resolve(const EventName& name) const override {
        EventSpec spec;
        spec.name = name.full;
        spec.canonical = name.full;
        spec.pmu = kHeldPmu;
        spec.counter_pmu = kHeldPmu;
        spec.type = PERF_TYPE_SOFTWARE;
        spec.config = PERF_COUNT_SW_DUMMY;
        if (name.event.starts_with("SLOT@")) {
            spec.bp_symbol = name.event.substr(5);
        } else if (name.event == "KERNEL") {
            spec.config1 = 1;  // "watches the kernel"
        } else if (name.event != "SLOT") {
            return fail(Status::NoEvent, "no such event in the held test fake");
        }
        return spec;
    }
    void list(std::string_view, std::vector<EventInfo>& out) const override {
        out.push_back({.name = "held::SLOT", .pmu = std::string(kHeldPmu)});
    }
    std::string note(const PmuInfo& pmu) const override {
        return std::to_string(pmu.counters) + " slots; each event holds one";
    }
    bool holds_while_open() const override { return true; }
    Result<void> fits(std::span<const EventSpec* const> events) const override {
        if (events.size() <= static_cast<std::size_t>(kHeldSlots)) return {};
        return fail(Status::BadArg, std::to_string(events.size()) + " held events, " +
                                        std::to_string(kHeldSlots) + " slots");
    }
    Result<void> refuse_unprivileged(const EventSpec& event, std::string_view why) const override {
        if (event.config1 != 1) return {};
        return fail(Status::Perm, event.name + ": " + std::string(why));
    }
    Result<void> place(EventSpec& event, const CountTarget& target) const override {
        if (event.bp_symbol.empty()) return {};
        if (target.kind != TargetKind::Process) {
            return fail(Status::BadArg, event.name + ": placed in processes only");
        }
        event.config1 = static_cast<std::uint64_t>(target.pid);
        return {};
    }
    std::optional<Error> explain_open_error(int err, const EventSpec&,
                                            std::string_view what) const override {
        if (err != EBUSY) return std::nullopt;
        return Error{Status::Busy, std::string(what) + ": every slot is held"};
    }
};

// A counter device that opens anything and remembers what it opened (a TEST FAKE).
class TestFakeRecordingDevice final : public CounterDevice {
  public:
    explicit TestFakeRecordingDevice(std::vector<EventSpec>& opened) : opened_(opened) {}
    Result<int> open(const EventSpec& event, const OpenTarget&, int) override {
        opened_.push_back(event);
        return static_cast<int>(opened_.size() - 1);
    }
    Result<void> enable(int) override { return {}; }
    Result<void> disable(int) override { return {}; }
    Result<void> reset(int) override { return {}; }
    Result<CounterReading> read(int) override { return CounterReading{}; }
    void close(int) override {}
    int width(int) const override { return 64; }

  private:
    std::vector<EventSpec>& opened_;
};

EventCatalog held_catalog() {
    return EventCatalog::of_modules(
        {std::make_shared<TestFakePmu>(), std::make_shared<TestFakeHeldPmu>()},
        processor(kFakeProcessor));
}

TEST(PmuModule, AListingCarriesItsNote) {
    auto c = held_catalog();
    const PmuInfo* held = c.find_pmu(kHeldPmu);
    ASSERT_NE(held, nullptr);
    EXPECT_EQ(held->note, "2 slots; each event holds one");
    const PmuInfo* other = c.find_pmu(kFakePmu);
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->note, "");
}

TEST(PmuModule, ThePlanAsksTheModuleWhetherItsEventsFit) {
    auto c = held_catalog();
    auto two = make_plan(c, on_cpu0({{"held::SLOT"}, {"held::SLOT"}, {"testpmu::TICKS"}}));
    ASSERT_TRUE(two) << two.error().to_string();
    auto three = make_plan(c, on_cpu0({{"held::SLOT"}, {"held::SLOT"}, {"held::SLOT"}}));
    ASSERT_FALSE(three);
    EXPECT_EQ(three.error().status, Status::BadArg);
    EXPECT_EQ(three.error().message, "3 held events, 2 slots");

    // A budget gives the free-running events a counter each, but not those that hold a slot.
    auto budget = on_cpu0({{"held::SLOT"}});
    budget.counter_budget = 1;
    auto planned = make_plan(c, budget);
    ASSERT_TRUE(planned) << planned.error().to_string();
    EXPECT_EQ(planned->events[0].counters, 0u);
    EXPECT_EQ(planned->slots, 0);
}

TEST(PmuModule, AnUnprivilegedCallerIsRefusedWhatTheModuleRefuses) {
    auto c = held_catalog();
    auto o = on_cpu0({{"held::KERNEL"}});
    EXPECT_TRUE(make_plan(c, o));
    o.no_kernel_addresses = "the caller may not";
    auto r = make_plan(c, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::Perm);
    EXPECT_EQ(r.error().message, "held::KERNEL: the caller may not");
}

TEST(PmuModule, TheSessionHasTheModulePlaceItsEventsForTheTarget) {
    auto c = held_catalog();
    std::vector<EventSpec> opened;
    SessionOptions o;
    o.events = {{"held::SLOT@counter"}};
    o.target.kind = TargetKind::Process;
    o.target.pid = ::getpid();
    auto s = PerfSession::start(c, std::make_unique<TestFakeRecordingDevice>(opened), o);
    ASSERT_TRUE(s) << s.error().to_string();
    ASSERT_FALSE(opened.empty());
    EXPECT_EQ(opened.front().config1, static_cast<std::uint64_t>(::getpid()));

    o.target = {};
    o.cpus = {0};
    auto cpus = PerfSession::start(c, std::make_unique<TestFakeRecordingDevice>(opened), o);
    ASSERT_FALSE(cpus);
    EXPECT_EQ(cpus.error().message, "held::SLOT@counter: placed in processes only");
}

TEST(PmuModule, TheDeviceExplainsARefusalAsTheModuleDoes) {
    auto c = held_catalog();
    auto held = c.resolve("held::SLOT");
    ASSERT_TRUE(held) << held.error().to_string();
    ASSERT_NE(held->module, nullptr);
    const OpenTarget cpu0{.cpu = 0};
    const Error own = explain_open_error(EBUSY, *held, cpu0);
    EXPECT_EQ(own.status, Status::Busy);
    EXPECT_EQ(own.message, "held::SLOT on cpu0: every slot is held");
    // Errors the module leaves alone, and events of no module, get the general explanation.
    EXPECT_THAT(explain_open_error(ESRCH, *held, cpu0).message, HasSubstr("no such process"));
    EventSpec by_hand = *held;
    by_hand.module.reset();
    EXPECT_THAT(explain_open_error(EBUSY, by_hand, cpu0).message,
                HasSubstr("held exclusively by another user"));
}

}  // namespace
}  // namespace monitor::perf
