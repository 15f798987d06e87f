// How monctl shows replies to people. Scripts use --json instead.
#pragma once

#include <chrono>
#include <string>

#include "monitor/loading/loading_report.hpp"
#include "monitor/protocol/method_outputs.hpp"
#include "monitor/protocol/monitor_messages.hpp"

namespace monctl {

// "0-3,5" from {0,1,2,3,5}.
std::string format_cpu_list(const std::vector<int>& cpus);
// "1d 02:03:04", "02:03:04", "42.0 s".
std::string format_duration(double seconds);
// "cpu3", or "cpu3*" for a CPU that went offline within the window.
std::string format_cpu_label(const monitor::CpuLoading& cpu);

std::string format_status(const monitor::protocol::DaemonStatus& status, const std::string& socket);
// The watchdog part of GetStatus; "no watchdog" and why when there is none.
std::string format_watchdog(const std::optional<monitor::protocol::WatchdogInfo>& w);

// A table: one row for the machine (and one per CPU when present), and for each source the
// load over the last second, the window's average, minimum and maximum.
std::string format_loading(const monitor::LoadingReport& report);
// The line that says which stretch of the history a ranged report (--since/--until) is of:
// "History from 03:00:00 to 04:00:00 (3,600 s): 3,540 s kept, the last at 03:59:59", dates
// added when they are not today's; "History up to ..." when since is the epoch (no --since).
std::string format_range(const monitor::LoadingReport& report,
                         std::chrono::system_clock::time_point since,
                         std::chrono::system_clock::time_point until);

// The daemon's runs the history keeps (GetHistoryRuns), the newest last: when each ran, how it
// ended, the watchdog it armed, and for an end that was not a stop the machine's load in its
// last seconds, a line each.
std::string format_history_runs(const monitor::protocol::HistoryRunsOut& out);

// The per-second values, newest last: one row per second, one column per CPU and source.
std::string format_history(const monitor::LoadingReport& report);

// Where the time went, as mpstat shows it: a column per state, a row for the machine (and one
// per CPU when present); the last second, then the window's average.
std::string format_states(const monitor::LoadingReport& report);

// The busiest units (GetLoading's units): CPU time in percent of one CPU over the last second,
// in user mode and in the kernel, the window's average and its busiest second; or why there
// are none.
std::string format_units(const monitor::LoadingReport& report);
// The CPUs' context (GetLoading's context): runnable and waiting tasks, CPU pressure, the
// clock, interrupts and softirqs, per CPU when the report has them; what the machine lacks.
std::string format_context(const monitor::LoadingReport& report);
// Each CPU's busiest tasks (GetLoading's tasks): a row per thread, by CPU, with its process,
// name and unit, and its CPU time over the interval; or why there are none.
std::string format_tasks(const monitor::LoadingReport& report);

// The time column of every CSV monctl writes: UTC, RFC 3339 with milliseconds
// ("2026-11-24T16:55:01.123Z").
std::string csv_time(std::chrono::system_clock::time_point t);

// The same figures as comma-separated values, a line per row and source, after a header line
// when `header`. The time is the sample's: for the history, each second's own, and only the
// newest second with `newest_only` (the rows a watch adds each tick).
std::string format_loading_csv(const monitor::LoadingReport& report, bool header);
std::string format_history_csv(const monitor::LoadingReport& report, bool header,
                               bool newest_only = false);
std::string format_states_csv(const monitor::LoadingReport& report, bool header);

}  // namespace monctl
