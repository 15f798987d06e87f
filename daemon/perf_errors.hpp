// The varlink errors of the performance monitor (counting and sampling): a status as the
// io.monitord.Monitor error that names it (PRFRUN is PerfRunning, NOEVENT NoSuchEvent with the
// closest names, ...).
#pragma once

#include <string>
#include <string_view>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "monitor/status.hpp"

namespace monitord {

// The error reply for `e`. For NOEVENT, the closest names in `catalog` (if any) to the first
// name of the event list `events` that it does not know.
monitor::varlink::Reply perf_error_reply(const monitor::Error& e,
                                         const monitor::perf::EventCatalog* catalog,
                                         const std::string& events = {});

// io.monitord.Monitor.LimitExceeded: `limit` is the [limits] key of monitord.conf(5) that
// refused, `message` says by how much and what to do.
monitor::varlink::Reply limit_exceeded(std::string_view limit, std::string message);

}  // namespace monitord
