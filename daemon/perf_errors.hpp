// The varlink errors of the performance monitor (counting and sampling): a status as the
// io.monitord.Monitor error that names it (PRFRUN is PerfRunning, NOEVENT NoSuchEvent with the
// closest names, ...).
#pragma once

#include <string>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "monitor/status.hpp"

namespace monitord {

// The error reply for `e`. For NOEVENT, the closest names in `catalog` (if any) to the first
// name of the event list `events` that it does not know.
monitor::varlink::Reply perf_error_reply(const monitor::Error& e,
                                         const monitor::perf::EventCatalog* catalog,
                                         const std::string& events = {});

}  // namespace monitord
