// Counter reports laid out as perf stat lays them out, so that people and scripts used to perf
// read them without a second thought: the scaled estimate first, then the unit (msec for the
// clocks, which count nanoseconds), the event, "#" and a metric (CPUs utilized, a rate per
// second of task clock, or the ratio whose numerator it is), the spread of repeated runs as
// "( +- x% )" and the share of the time an event was counted as "(xx.xx%)" when it was not
// counted all the time. `-x SEP` gives perf's separated fields; `-I` a time column.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/protocol/counter_messages.hpp"

namespace monctl {

// The spread of repeated runs (perf stat -r): for each event, and for the elapsed time, the
// standard deviation of the mean over the runs relative to the mean, in percent, as perf
// prints it.
struct RunSpread {
    int runs = 1;
    std::vector<double> events;  // by the events' order in the report
    double elapsed = 0;
    double elapsed_stddev = 0;  // seconds, of the mean
};

// The mean of reports of the same events (repeated runs of one command): the counts, times
// and metrics averaged, and their spread. Reports whose events differ from the first are
// skipped (nothing else can make them differ than a bug); nullopt for none.
struct AveragedRuns {
    monitor::protocol::CounterReport mean;
    RunSpread spread;
};
std::optional<AveragedRuns> average_runs(std::span<const monitor::protocol::CounterReport> runs);

struct StatLayout {
    // perf stat -I: each line starts with the seconds since counting started; without it the
    // report is a block with a title and the elapsed time.
    std::optional<double> time;
    // The column header of -I's lines (its first period).
    bool time_header = false;
    // perf stat -r: the spread of each event and of the elapsed time.
    const RunSpread* spread = nullptr;
};

// The block of perf stat: " Performance counter stats for WHAT:", a line per event (per CPU
// with "each", as perf stat -A), the metrics no event carries, the elapsed time, and the
// counter sets that took turns and the offline CPUs when there were any. `what` is perf's own
// wording: "'sleep 1'", "'system wide'", "'CPU(s) 0'", "process id '42'".
std::string format_counter_report(const monitor::protocol::CounterReport& report,
                                  const std::string& what, const StatLayout& layout = {});

// perf stat -x SEP: a line per event (per CPU with "each", the CPU first, as -A): the count
// (msec for the clocks), the unit, the event, with -r its spread ("1.23%"), the time counted
// in nanoseconds, the share counted in percent, the metric and its unit (empty when none);
// with `layout.time`, the time first. "<not counted>" for an event that never counted.
std::string format_counter_separated(const monitor::protocol::CounterReport& report,
                                     std::string_view separator, const StatLayout& layout = {});

// perf's wording of a counting target, for the title.
std::string stat_target_words(const monitor::protocol::TargetRequest& target);

}  // namespace monctl
