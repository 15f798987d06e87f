// Packs events into counter sets: each set is a group of events that the PMU can count at the
// same time, each on a counter that can hold it (a bipartite matching of events to counters).
// Pinned events (cycles, instructions) go into every set; events that take no counter
// (software events) count all the time, outside the sets. When there is more than one set the
// sets take turns on the counters (multiplexing).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "monitor/perf/event_spec.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// The group of an event requested on its own, in no group with others.
inline constexpr int kNoGroup = -1;
// The counter of an event that takes none (a software event, counting all the time).
inline constexpr int kNoCounter = -1;

// One requested event as the scheduler sees it.
struct SchedulerEvent {
    std::string name;          // for error messages
    CounterMask counters = 0;  // 0: takes no counter
    bool pinned = false;
    int group = kNoGroup;  // events with the same group (not kNoGroup) must share a set
};

struct Placement {
    std::size_t event = 0;     // index into the request
    int counter = kNoCounter;  // the counter it is on in this set (0-based)
};

struct CounterSet {
    std::vector<Placement> events;  // pinned events first, then in request order
};

struct Schedule {
    std::vector<CounterSet> sets;           // empty when every event takes no counter
    std::vector<std::size_t> free_running;  // events that take no counter, in request order
};

// `counters` is the number of counters of the PMU (bits of a mask above it are ignored).
// Events are placed first-fit in request order (a group as a whole), so the result is
// deterministic. Errors (BADARG), each naming the events:
//  - an event that no counter can hold;
//  - pinned events that do not fit together;
//  - a group (with the pinned events) that does not fit in one set: the message names a
//    smallest set of its events that compete for too few counters (a minimal one when more
//    than 20 counters are involved), and those counters.
// `counter_names` names the counters in messages ("PMC2"); "counter 2" (1-based) without.
Result<Schedule> schedule_events(std::span<const SchedulerEvent> events, int counters,
                                 std::span<const std::string> counter_names = {});

}  // namespace monitor::perf
