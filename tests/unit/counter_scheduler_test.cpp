// Tests of the counter scheduler, with PowerPC 750-like counters: the common events (cycles,
// instructions) can be counted on any of PMC1-PMC4, the others on one PMC each.
#include "monitor/perf/counter_scheduler.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace monitor::perf {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPmcs = 4;
const std::vector<std::string> kPmcNames = {"PMC1", "PMC2", "PMC3", "PMC4"};

constexpr CounterMask kAnyPmc = 0xF;
constexpr CounterMask pmc(int n) {
    return CounterMask{1} << (n - 1);
}  // PMC1 = bit 0

SchedulerEvent event(std::string name, CounterMask counters, int group = kNoGroup) {
    return SchedulerEvent{"ppc750::" + std::move(name), counters, false, group};
}

SchedulerEvent pinned(std::string name, CounterMask counters) {
    return SchedulerEvent{"ppc750::" + std::move(name), counters, true, kNoGroup};
}

// Two events of each PMC's own list, PMC1 first.
std::vector<SchedulerEvent> two_per_pmc() {
    return {event("PMC1_A", pmc(1)), event("PMC1_B", pmc(1)), event("PMC2_A", pmc(2)),
            event("PMC2_B", pmc(2)), event("PMC3_A", pmc(3)), event("PMC3_B", pmc(3)),
            event("PMC4_A", pmc(4)), event("PMC4_B", pmc(4))};
}

CounterMask usable(int counters) {
    return counters >= 32 ? ~CounterMask{0} : (CounterMask{1} << counters) - 1;
}

// Everything a schedule must be, whatever the packing: the events that take no counter run
// free in request order; in each set the pinned events come first in request order, then the
// others in request order; every counter is one that can hold its event and is used once per
// set; pinned events are in every set, the others in exactly one, a group's in the same one.
::testing::AssertionResult valid(const std::vector<SchedulerEvent>& events, int counters,
                                 const Schedule& schedule) {
    std::vector<std::size_t> free_running;
    std::vector<std::size_t> pinned_events;
    std::size_t counter_events = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (events[i].counters == 0) {
            free_running.push_back(i);
        } else {
            ++counter_events;
            if (events[i].pinned) pinned_events.push_back(i);
        }
    }
    if (schedule.free_running != free_running) {
        return ::testing::AssertionFailure() << "free_running is not the events of mask 0";
    }
    if (counter_events == 0 && !schedule.sets.empty()) {
        return ::testing::AssertionFailure() << "sets without any event that takes a counter";
    }
    if (counter_events > 0 && schedule.sets.empty()) {
        return ::testing::AssertionFailure() << "no set for " << counter_events << " events";
    }

    std::vector<int> times_placed(events.size(), 0);
    std::vector<std::size_t> set_of(events.size(), 0);
    for (std::size_t s = 0; s < schedule.sets.size(); ++s) {
        const auto& placements = schedule.sets[s].events;
        if (placements.size() < pinned_events.size()) {
            return ::testing::AssertionFailure() << "set " << s << " lacks pinned events";
        }
        CounterMask used = 0;
        for (std::size_t k = 0; k < placements.size(); ++k) {
            const auto& p = placements[k];
            if (p.event >= events.size()) {
                return ::testing::AssertionFailure() << "set " << s << ": no event " << p.event;
            }
            const auto& ev = events[p.event];
            if (k < pinned_events.size() && p.event != pinned_events[k]) {
                return ::testing::AssertionFailure() << "set " << s << " place " << k
                                                     << " is not pinned event " << pinned_events[k];
            }
            if (k >= pinned_events.size() && (ev.pinned || ev.counters == 0)) {
                return ::testing::AssertionFailure()
                       << "set " << s << ": " << ev.name << " out of place";
            }
            if (k > pinned_events.size() && p.event <= placements[k - 1].event) {
                return ::testing::AssertionFailure()
                       << "set " << s << " is not in request order at " << ev.name;
            }
            if (p.counter < 0 || p.counter >= counters) {
                return ::testing::AssertionFailure()
                       << ev.name << " on counter " << p.counter << " of " << counters;
            }
            CounterMask bit = CounterMask{1} << p.counter;
            if ((ev.counters & usable(counters) & bit) == 0) {
                return ::testing::AssertionFailure()
                       << ev.name << " on counter " << p.counter << " that cannot hold it";
            }
            if ((used & bit) != 0) {
                return ::testing::AssertionFailure()
                       << "set " << s << " uses counter " << p.counter << " twice";
            }
            used |= bit;
            ++times_placed[p.event];
            set_of[p.event] = s;
        }
    }
    for (std::size_t i = 0; i < events.size(); ++i) {
        int expected = events[i].counters == 0
                           ? 0
                           : (events[i].pinned ? static_cast<int>(schedule.sets.size()) : 1);
        if (times_placed[i] != expected) {
            return ::testing::AssertionFailure() << events[i].name << " placed " << times_placed[i]
                                                 << " times instead of " << expected;
        }
    }
    for (std::size_t i = 0; i < events.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            const auto& a = events[i];
            const auto& b = events[j];
            if (a.group != kNoGroup && a.group == b.group && !a.pinned && !b.pinned &&
                a.counters != 0 && b.counters != 0 && set_of[i] != set_of[j]) {
                return ::testing::AssertionFailure()
                       << a.name << " and " << b.name << " of one group in different sets";
            }
        }
    }
    return ::testing::AssertionSuccess();
}

// Whether the events of these masks can all be counted at once, by trying every assignment
// (independent of the scheduler's matching).
bool brute_fits(const std::vector<CounterMask>& masks, std::size_t next = 0, CounterMask used = 0) {
    if (next == masks.size()) return true;
    for (int c = 0; c < 32; ++c) {
        CounterMask bit = CounterMask{1} << c;
        if ((masks[next] & bit) != 0 && (used & bit) == 0 &&
            brute_fits(masks, next + 1, used | bit)) {
            return true;
        }
    }
    return false;
}

std::vector<std::size_t> events_of(const CounterSet& set) {
    std::vector<std::size_t> out;
    for (const auto& p : set.events) out.push_back(p.event);
    return out;
}

int counter_of(const CounterSet& set, std::size_t event) {
    for (const auto& p : set.events) {
        if (p.event == event) return p.counter;
    }
    return -1;
}

TEST(CounterScheduler, TwoEventsOfEachPmcNeedTwoSetsEachOnItsOwnCounter) {
    auto events = two_per_pmc();
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    ASSERT_EQ(schedule->sets.size(), 2u);
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{0, 2, 4, 6}));
    EXPECT_EQ(events_of(schedule->sets[1]), (std::vector<std::size_t>{1, 3, 5, 7}));
    for (const auto& set : schedule->sets) {
        for (const auto& p : set.events) {
            EXPECT_EQ(p.counter, std::countr_zero(events[p.event].counters))
                << events[p.event].name;
        }
    }
}

TEST(CounterScheduler, PinnedCyclesAndInstructionsAreInEverySet) {
    std::vector<SchedulerEvent> events = {pinned("CYCLES", kAnyPmc),
                                          pinned("INSTRUCTIONS_COMPLETED", kAnyPmc)};
    for (auto& e : two_per_pmc()) events.push_back(e);
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    // Two counters left per set for eight events.
    ASSERT_EQ(schedule->sets.size(), 4u);
    for (const auto& set : schedule->sets) {
        ASSERT_EQ(set.events.size(), 4u);
        EXPECT_EQ(set.events[0].event, 0u);
        EXPECT_EQ(set.events[1].event, 1u);
    }
    // First fit: PMC1_A and PMC2_A share the first set, PMC1_B and PMC2_B the second.
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{0, 1, 2, 4}));
    EXPECT_EQ(events_of(schedule->sets[1]), (std::vector<std::size_t>{0, 1, 3, 5}));
}

TEST(CounterScheduler, PinnedEventsAloneMakeOneSet) {
    std::vector<SchedulerEvent> events = {pinned("CYCLES", kAnyPmc),
                                          SchedulerEvent{"perf::TASK-CLOCK", 0, false, kNoGroup},
                                          pinned("INSTRUCTIONS_COMPLETED", kAnyPmc)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    ASSERT_EQ(schedule->sets.size(), 1u);
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{0, 2}));
    EXPECT_EQ(schedule->free_running, (std::vector<std::size_t>{1}));
}

TEST(CounterScheduler, GroupOfTwoPmc2OnlyEventsNamesBothAndPmc2) {
    std::vector<SchedulerEvent> events = {pinned("CYCLES", kAnyPmc), event("PMC1_A", pmc(1)),
                                          event("PMC2_A", pmc(2), 3), event("PMC3_A", pmc(3), 3),
                                          event("PMC2_B", pmc(2), 3)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("ppc750::PMC2_A and ppc750::PMC2_B can only be counted on PMC2, "
                               "one counter for two events"));
    EXPECT_THAT(msg, HasSubstr("cannot be in one group"));
    EXPECT_THAT(msg, Not(HasSubstr("CYCLES")));
    EXPECT_THAT(msg, Not(HasSubstr("PMC3_A")));
}

TEST(CounterScheduler, GroupErrorNamesASmallestSetOfCompetingEvents) {
    // A, B and C are three events for PMC1-PMC2, but D and E, two events for PMC4 alone, are
    // the smaller explanation.
    std::vector<SchedulerEvent> events = {
        event("A", pmc(1) | pmc(2), 1), event("B", pmc(1) | pmc(2), 1),
        event("C", pmc(1) | pmc(2), 1), event("D", pmc(4), 1), event("E", pmc(4), 1)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("ppc750::D and ppc750::E can only be counted on PMC4"));
    EXPECT_THAT(msg, Not(HasSubstr("ppc750::A")));
}

TEST(CounterScheduler, GroupThatCannotFitBesideThePinnedEventsNamesThem) {
    std::vector<SchedulerEvent> events = {pinned("CYCLES", pmc(1)), pinned("INSTR", pmc(3)),
                                          event("A", pmc(1) | pmc(2), 0),
                                          event("B", pmc(1) | pmc(2), 0)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("ppc750::A, ppc750::B and the pinned event ppc750::CYCLES can "
                               "only be counted on PMC1 and PMC2, two counters for three events"));
    EXPECT_THAT(msg, HasSubstr("the group cannot be counted with the pinned events"));
    EXPECT_THAT(msg, Not(HasSubstr("INSTR")));
}

TEST(CounterScheduler, TwoPinnedEventsThatOnlyPmc1CanHold) {
    std::vector<SchedulerEvent> events = {pinned("CYCLES", kAnyPmc), pinned("P1_X", pmc(1)),
                                          event("PMC2_A", pmc(2)), pinned("P1_Y", pmc(1))};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("the pinned events ppc750::P1_X and ppc750::P1_Y can only be "
                               "counted on PMC1, one counter for two events"));
    EXPECT_THAT(msg, Not(HasSubstr("CYCLES")));
}

TEST(CounterScheduler, EventThatCannotFitBesideThePinnedEventsNamesThem) {
    std::vector<SchedulerEvent> events = {pinned("P1", pmc(1)), pinned("P2", pmc(2)),
                                          pinned("P34", pmc(3) | pmc(4)),
                                          event("X", pmc(1) | pmc(2))};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("ppc750::X and the pinned events ppc750::P1 and ppc750::P2 can "
                               "only be counted on PMC1 and PMC2, two counters for three events"));
    EXPECT_THAT(msg, HasSubstr("ppc750::X cannot be counted with the pinned events"));
    EXPECT_THAT(msg, Not(HasSubstr("P34")));
}

TEST(CounterScheduler, CountersWithoutNamesAreNumberedFromOne) {
    std::vector<SchedulerEvent> events = {event("A", pmc(2), 5), event("B", pmc(2), 5)};
    auto schedule = schedule_events(events, kPmcs);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_THAT(schedule.error().message, HasSubstr("can only be counted on counter 2,"));
}

TEST(CounterScheduler, GroupErrorOnAWidePmuNamesAMinimalSetOfCompetingEvents) {
    // 22 counters in play: too many sets of counters to try every one, so the scheduler drops
    // events until only competing ones are left.
    std::vector<SchedulerEvent> events;
    for (int i = 0; i < 21; ++i) events.push_back(event("G" + std::to_string(i), 0x1FFFFF, 9));
    events.push_back(event("D", CounterMask{1} << 21, 9));
    events.push_back(event("E", CounterMask{1} << 21, 9));
    auto schedule = schedule_events(events, 24);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    const auto& msg = schedule.error().message;
    EXPECT_THAT(msg, HasSubstr("ppc750::D and ppc750::E can only be counted on counter 22, one "
                               "counter for two events; they cannot be in one group"));
    EXPECT_THAT(msg, Not(HasSubstr("ppc750::G")));
}

TEST(CounterScheduler, EventOnlyAboveTheCountersIsNamed) {
    std::vector<SchedulerEvent> events = {event("PMC1_A", pmc(1)), event("PMC5_X", 0x10)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
    EXPECT_EQ(schedule.error().message,
              "ppc750::PMC5_X cannot be counted: no counter of this PMU can hold it");
}

TEST(CounterScheduler, MaskBitsAboveTheCountersAreIgnored) {
    std::vector<SchedulerEvent> events = {event("A", 0x11), event("B", 0x13)};
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    ASSERT_EQ(schedule->sets.size(), 1u);
    EXPECT_EQ(counter_of(schedule->sets[0], 0), 0);
    EXPECT_EQ(counter_of(schedule->sets[0], 1), 1);
}

TEST(CounterScheduler, SoftwareEventsRunFreelyOutsideTheSets) {
    std::vector<SchedulerEvent> events = {
        SchedulerEvent{"perf::TASK-CLOCK", 0, false, kNoGroup},
        SchedulerEvent{"perf::CONTEXT-SWITCHES", 0, true, kNoGroup},
        SchedulerEvent{"perf::PAGE-FAULTS", 0, false, 2},
    };
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    EXPECT_TRUE(schedule->sets.empty());
    EXPECT_EQ(schedule->free_running, (std::vector<std::size_t>{0, 1, 2}));

    auto none = schedule_events({}, kPmcs);
    ASSERT_TRUE(none.has_value());
    EXPECT_TRUE(none->sets.empty());
    EXPECT_TRUE(none->free_running.empty());
}

TEST(CounterScheduler, FourGenericEventsOnTwoCountersMakeTwoSetsOfTwo) {
    std::vector<SchedulerEvent> events = {event("G1", 0x3), event("G2", 0x3), event("G3", 0x3),
                                          event("G4", 0x3)};
    auto schedule = schedule_events(events, 2);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, 2, *schedule));
    ASSERT_EQ(schedule->sets.size(), 2u);
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{0, 1}));
    EXPECT_EQ(events_of(schedule->sets[1]), (std::vector<std::size_t>{2, 3}));
}

TEST(CounterScheduler, MatchingMovesAnEarlierEventToMakeRoom) {
    // Greedily the first event takes counter 0; the second can only use counter 0.
    std::vector<SchedulerEvent> events = {event("ANY", 0x3), event("FIRST_ONLY", 0x1)};
    auto schedule = schedule_events(events, 2);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, 2, *schedule));
    ASSERT_EQ(schedule->sets.size(), 1u);
    EXPECT_EQ(counter_of(schedule->sets[0], 0), 1);
    EXPECT_EQ(counter_of(schedule->sets[0], 1), 0);
}

TEST(CounterScheduler, GroupGoesTogetherIntoALaterSet) {
    std::vector<SchedulerEvent> events = {
        event("PMC1_A", pmc(1)),    event("PMC1_B", pmc(1), 7), event("PMC3_A", pmc(3)),
        event("PMC2_B", pmc(2), 7), event("PMC2_A", pmc(2)),
    };
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    ASSERT_EQ(schedule->sets.size(), 2u);
    // The group does not fit beside PMC1_A, so both its events open the second set; the
    // first set still takes the events after it.
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{0, 2, 4}));
    EXPECT_EQ(events_of(schedule->sets[1]), (std::vector<std::size_t>{1, 3}));
}

TEST(CounterScheduler, PinnedEventInAGroupIsInEverySet) {
    std::vector<SchedulerEvent> events = {
        event("PMC1_A", pmc(1)),
        SchedulerEvent{"ppc750::CYCLES", kAnyPmc, true, 4},
        event("PMC1_B", pmc(1), 4),
        event("PMC3_A", pmc(3), 4),
    };
    auto schedule = schedule_events(events, kPmcs, kPmcNames);
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message;
    EXPECT_TRUE(valid(events, kPmcs, *schedule));
    ASSERT_EQ(schedule->sets.size(), 2u);
    EXPECT_EQ(events_of(schedule->sets[0]), (std::vector<std::size_t>{1, 0}));
    EXPECT_EQ(events_of(schedule->sets[1]), (std::vector<std::size_t>{1, 2, 3}));
}

TEST(CounterScheduler, NegativeCounterCountIsBadArg) {
    std::vector<SchedulerEvent> events = {event("A", pmc(1))};
    auto schedule = schedule_events(events, -1);
    ASSERT_FALSE(schedule.has_value());
    EXPECT_EQ(schedule.error().status, Status::BadArg);
}

std::vector<SchedulerEvent> random_request(std::mt19937& rng, bool with_pinned) {
    std::uniform_int_distribution<int> count(1, 14);
    std::uniform_int_distribution<int> mask(0, 15);
    std::bernoulli_distribution pin(0.1);
    std::vector<SchedulerEvent> events;
    int n = count(rng);
    for (int i = 0; i < n; ++i) {
        events.push_back(SchedulerEvent{"E" + std::to_string(i),
                                        static_cast<CounterMask>(mask(rng)),
                                        with_pinned && pin(rng), kNoGroup});
    }
    return events;
}

bool same(const Schedule& a, const Schedule& b) {
    if (a.free_running != b.free_running || a.sets.size() != b.sets.size()) return false;
    for (std::size_t s = 0; s < a.sets.size(); ++s) {
        const auto& x = a.sets[s].events;
        const auto& y = b.sets[s].events;
        if (x.size() != y.size()) return false;
        for (std::size_t k = 0; k < x.size(); ++k) {
            if (x[k].event != y[k].event || x[k].counter != y[k].counter) return false;
        }
    }
    return true;
}

TEST(CounterScheduler, SameRequestSameSchedule) {
    std::mt19937 rng(1234);
    for (int round = 0; round < 50; ++round) {
        auto events = random_request(rng, true);
        auto first = schedule_events(events, kPmcs, kPmcNames);
        auto second = schedule_events(events, kPmcs, kPmcNames);
        ASSERT_EQ(first.has_value(), second.has_value());
        if (first) {
            EXPECT_TRUE(same(*first, *second)) << "round " << round;
        } else {
            EXPECT_EQ(first.error().message, second.error().message);
        }
    }
}

TEST(CounterScheduler, RandomRequestsArePackedValidlyAndFirstFit) {
    std::mt19937 rng(20240607);
    int scheduled = 0;
    for (int round = 0; round < 400; ++round) {
        auto events = random_request(rng, round % 2 == 1);
        SCOPED_TRACE("round " + std::to_string(round));

        std::vector<CounterMask> pinned_masks;
        std::vector<std::size_t> others;
        for (std::size_t i = 0; i < events.size(); ++i) {
            if (events[i].counters == 0) continue;
            if (events[i].pinned) {
                pinned_masks.push_back(events[i].counters);
            } else {
                others.push_back(i);
            }
        }
        bool possible = brute_fits(pinned_masks);
        for (std::size_t i : others) {
            auto masks = pinned_masks;
            masks.push_back(events[i].counters);
            possible = possible && brute_fits(masks);
        }

        auto schedule = schedule_events(events, kPmcs, kPmcNames);
        ASSERT_EQ(schedule.has_value(), possible)
            << (schedule ? std::string{} : schedule.error().message);
        if (!schedule) {
            EXPECT_EQ(schedule.error().status, Status::BadArg);
            continue;
        }
        ++scheduled;
        ASSERT_TRUE(valid(events, kPmcs, *schedule));

        if (!others.empty()) {
            std::size_t room = kPmcs - pinned_masks.size();
            EXPECT_GE(schedule->sets.size(), (others.size() + room - 1) / room);
        } else if (!pinned_masks.empty()) {
            EXPECT_EQ(schedule->sets.size(), 1u);
        }

        // First fit: no event could have gone into an earlier set, even as it ended up.
        const auto& sets = schedule->sets;
        for (std::size_t later = 1; later < sets.size(); ++later) {
            for (const auto& p : sets[later].events) {
                if (events[p.event].pinned) continue;
                for (std::size_t earlier = 0; earlier < later; ++earlier) {
                    std::vector<CounterMask> masks;
                    for (const auto& q : sets[earlier].events) {
                        masks.push_back(events[q.event].counters);
                    }
                    masks.push_back(events[p.event].counters);
                    EXPECT_FALSE(brute_fits(masks))
                        << events[p.event].name << " fits in set " << earlier;
                }
            }
        }
    }
    EXPECT_GT(scheduled, 300);  // most requests are possible: the checks above did run
}

}  // namespace
}  // namespace monitor::perf
