// Seconds of the history as the tests of its store and writer make them: every CPU and the
// machine at one load, from the /proc/stat source, at a start time that is a whole minute.
#pragma once

#include <chrono>
#include <optional>

#include "history_store.hpp"

namespace test_support {

// 1,800,000,000 s after the epoch: a whole minute (30,000,000 of them), in 2027.
inline const monitord::HistoryStore::Time kHistoryStart =
    monitord::HistoryStore::Time{} + std::chrono::seconds{1'800'000'000};

// One second of `cpus` CPUs and the machine at `load` percent.
inline monitor::HistorySecond history_second(double load, int cpus = 2) {
    monitor::HistorySecond s;
    s.seconds = 1;
    monitor::HistorySource src{.name = "procstat",
                               .machine = load,
                               .has_states = false,
                               .machine_states = std::nullopt,
                               .cpus = {}};
    for (int c = 0; c < cpus; ++c) src.cpus.push_back(monitor::HistoryCpu{c, load, std::nullopt});
    s.sources.push_back(src);
    return s;
}

}  // namespace test_support
