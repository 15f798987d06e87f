// One second's figures as the history on disk keeps them: the load of the machine and of each
// CPU from every source, and where the time went (the sources that know it), packed into bytes
// that a later daemon, on another machine's byte order too, reads back.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "monitor/loading/cpu_states.hpp"
#include "monitor/status.hpp"

namespace monitor {

struct HistoryCpu {
    int cpu = 0;
    std::optional<double> load;         // percent; nullopt: a gap
    std::optional<StateShares> states;  // sources that know where the time went
};

struct HistorySource {
    std::string name;  // one of kLoadSources
    std::optional<double> machine;
    bool has_states = false;  // the states below are kept (procstat)
    std::optional<StateShares> machine_states;
    std::vector<HistoryCpu> cpus;  // sorted by CPU
};

struct HistorySecond {
    double seconds = 0;  // the interval's length
    std::vector<HistorySource> sources;
};

// A minute of seconds folded into one: the time-weighted mean of each load and state (its
// seconds the sum of theirs), and the lowest and highest per-second load of each (no states).
struct HistoryFold {
    HistorySecond mean;
    HistorySecond low;
    HistorySecond high;
};
// Sources and CPUs are those of any of the seconds; one that no second measured is a gap.
HistoryFold fold_history_seconds(std::span<const HistorySecond> seconds);

// Values are kept in hundredths of a percent (the precision monctl shows), so a decoded second
// differs from the encoded one by at most 0.005.
inline constexpr double kHistoryResolution = 0.01;

// The bytes of a second (little-endian, versioned). A CPU number or count beyond 65,535 is
// BADARG.
Result<std::vector<std::uint8_t>> encode_history_second(const HistorySecond& second);
// BADDATA naming what is wrong when the bytes are not a second encode_history_second wrote.
Result<HistorySecond> decode_history_second(std::span<const std::uint8_t> bytes);

}  // namespace monitor
