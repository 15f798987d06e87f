// monctl top's model: what each interval fetched from the daemon (status, loading with the
// history and the states, the counter session's report) and the choices of the view: which
// loading source it shows, the order of the CPUs, how far it is scrolled, and the moment of the
// past it shows instead of the live figures (from the history on disk). No terminal here:
// top_frame lays the model out, top_screen draws it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/loading_report.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/monitor_messages.hpp"

namespace monctl::top {

// How many of the busiest units an interval asks for; of each CPU's busiest tasks, while the
// task pane is shown.
inline constexpr std::int64_t kTopUnits = 10;
inline constexpr std::int64_t kTopTasksPerCpu = 3;

// Stepping back: [ and ] move the moment shown by a minute, { and } by an hour; a moment of
// the past shows the minute of the history that ends there, as the live view shows the
// window's last minute.
inline constexpr std::chrono::seconds kStep{60};
inline constexpr std::chrono::seconds kLongStep{3600};
inline constexpr std::chrono::seconds kPastWindow{60};
using WallTime = std::chrono::system_clock::time_point;

// What the daemon said in one interval.
struct Snapshot {
    monitor::protocol::DaemonStatus status;
    // With per_cpu, history, states, the kTopUnits busiest units, the context, and each CPU's
    // kTopTasksPerCpu busiest tasks while the task pane is shown. At a moment of the past, the
    // history's minute up to it: per_cpu, history and states (the history keeps no more).
    monitor::LoadingReport loading;
    // nullopt when no counter session runs (ReadCounters said PerfNotRunning).
    std::optional<monitor::protocol::CounterReport> counters;
};

enum class SortOrder { Cpu, Load };
std::string_view sort_name(SortOrder s);  // "cpu", "load"

// The task pane's order, as htop's columns: the load (busiest first), then by CPU, pid, name
// (comm) or unit; each with the load, then the thread id, breaking ties.
enum class TaskSort { Load, Cpu, Pid, Name, Unit };
inline constexpr int kTaskSorts = 5;
std::string_view task_sort_name(TaskSort s);  // "load", "cpu", "pid", "name", "unit"

// What a key asks for.
enum class Action {
    Quit,
    NextSource,     // s
    ToggleSort,     // o
    ToggleUnits,    // u
    ToggleContext,  // c
    ToggleTasks,    // t: the task pane in place of the units'
    NextTaskSort,   // >
    PrevTaskSort,   // <
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Help,         // h, ?, F1: the help shows, and any key but those that quit takes it away
    Earlier,      // [ or Left: a minute back
    Later,        // ] or Right: a minute on, up to the live view
    MuchEarlier,  // {: an hour back
    MuchLater,    // }: an hour on
    Now,          // n: the live view
};

// A row of the view: the machine or a CPU, with the figures of the chosen source (nullptr
// when the daemon reports none for it).
struct Row {
    std::string label;  // "all", "cpu3", "cpu3*" (offline)
    bool online = true;
    int cpu = -1;  // -1 for the machine
    const monitor::SourceLoad* load = nullptr;
    // Its context (waiting tasks, clock, interrupts); nullptr for the machine, and while the
    // daemon has none for it.
    const monitor::CpuContextFigures* context = nullptr;
};

// An event of the counter session: its count so far and its rate over the last interval.
struct EventRate {
    std::string name;
    std::uint64_t count = 0;  // raw, while on a counter
    double scaled = 0;        // the estimate for the whole time
    double running = 1;       // the share of the time it was on a counter
    // Of the estimate, per second: between the last two reads of the same session, or since
    // the session started at its first read.
    double per_second = 0;
};

class TopModel {
  public:
    // The figures of a new interval; the daemon is there.
    void update(Snapshot snapshot);
    // The daemon went away or could not be asked: the last figures stay, marked stale.
    void lost(std::string why);

    // nullptr before the first snapshot.
    const Snapshot* snapshot() const { return snapshot_ ? &*snapshot_ : nullptr; }
    bool stale() const { return !lost_reason_.empty(); }
    // Why the daemon is gone; empty while it answers.
    const std::string& lost_reason() const { return lost_reason_; }

    // The loading sources the daemon reports, in its order ("probe", "procstat").
    std::vector<std::string> sources() const;
    // The one shown: procstat (it knows the states) until switched, or the first reported.
    std::string source() const;
    SortOrder sort() const { return sort_; }
    // Whether the busiest systemd units are shown above the CPUs (when the daemon has them).
    bool units() const { return units_; }
    // Whether the task pane (each CPU's busiest tasks) is shown, in place of the units; the
    // tasks are asked for only then (the daemon samples them only while asked).
    bool tasks() const { return tasks_; }
    TaskSort task_sort() const { return task_sort_; }
    // The tasks of the last interval in the pane's order; empty without them.
    std::vector<const monitor::TaskLoad*> task_rows() const;
    // Whether each CPU's context (waiting tasks, clock, interrupts) is shown in its row.
    bool context() const { return context_; }
    // The CPUs' context of the last interval: nullptr until the daemon has read it once.
    const monitor::CpuContextSample* context_sample() const;
    // Whether the help is shown instead of the CPUs.
    bool help() const { return help_; }

    // The machine's row.
    Row machine() const;
    // A row per CPU, in the chosen order: by CPU number, or by the last second's load,
    // highest first (CPUs without a figure last, equal loads by CPU number).
    std::vector<Row> rows() const;

    // The index in rows() of the first row shown. The frame keeps it within what can be
    // shown (clamp_scroll); `page` is how many rows it shows.
    int scroll() const { return scroll_; }
    void clamp_scroll(int rows, int page);
    // Applies a key's action; false for Quit, which is the caller's. While the help is shown,
    // any other key only takes it away, as in htop. A step back from the live view starts at
    // `now`; a step on that reaches it returns to the live view.
    bool apply(Action a, int page, WallTime now = std::chrono::system_clock::now());

    // The moment of the past shown (whole seconds); nullopt: the live view.
    std::optional<WallTime> at() const { return at_; }
    void set_at(std::optional<WallTime> at);
    // A moment that could not be shown: the daemon's reason (it keeps no history, the range
    // is too long); back to the live view, the reason shown until the next key.
    void history_failed(std::string why);
    const std::string& history_error() const { return history_error_; }

    // The counter session's events with their rates; empty without a session.
    const std::vector<EventRate>& rates() const { return rates_; }

  private:
    std::optional<Snapshot> snapshot_;
    std::string lost_reason_;
    std::string chosen_source_;  // empty: the default
    SortOrder sort_ = SortOrder::Cpu;
    bool units_ = true;
    bool context_ = false;
    bool tasks_ = false;
    TaskSort task_sort_ = TaskSort::Load;
    bool help_ = false;
    int scroll_ = 0;
    std::optional<WallTime> at_;
    std::string history_error_;
    std::vector<EventRate> rates_;
};

}  // namespace monctl::top
