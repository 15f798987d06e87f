// A counting session: the requested events resolved and packed into counter sets (the plan),
// opened on their targets, rotated every slice when there are more sets than the counters can
// hold at once, and read as 64-bit virtual counts with enabled and running times.
//
// Multiplexing, daemon side (MuxMode::Daemon): one set (a "slot") is enabled at a time, in
// turn; an event's enabled time is the session's time, its running time the time its set was
// on the counters, and the scaled estimate count x enabled / running. MuxMode::Kernel opens
// every set enabled and lets the kernel rotate them; the times are then the kernel's. Events
// that take no counter (software) count all the time in both modes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "monitor/perf/cgroup_target.hpp"
#include "monitor/perf/count_plan.hpp"
#include "monitor/perf/count_report.hpp"
#include "monitor/perf/count_target.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

class PerfSession {
  public:
    // Resolves and plans the events, opens every counter on every instance of the target and
    // starts counting (unless the target waits for exec). Errors name the event and the cause.
    static Result<std::unique_ptr<PerfSession>> start(const EventCatalog& catalog,
                                                      std::unique_ptr<CounterDevice> device,
                                                      SessionOptions options);
    ~PerfSession();
    PerfSession(const PerfSession&) = delete;
    PerfSession& operator=(const PerfSession&) = delete;

    const Plan& plan() const { return plan_; }
    const SessionOptions& options() const { return options_; }
    // What its reports' counts are of (PerfReport::instances): the CPUs, or {-1} for a task.
    const std::vector<int>& instances() const { return report_instances_; }
    // True when the counter sets take turns and rotate() must be called every slice.
    bool rotates() const { return options_.mux == MuxMode::Daemon && plan_.slots > 1; }
    // True when a counter is narrower than 64 bits (a raw PMU counter; the kernel's counts
    // are 64-bit): read() must then be called often enough that it never wraps twice between
    // two reads.
    bool narrow() const { return narrow_; }

    // Moves to the next counter set (daemon multiplexing); a no-op otherwise, and until the
    // exec for a target that starts at its exec.
    Result<void> rotate();
    // Process and Thread targets: the threads counted from the start (see PerfReport).
    int threads() const { return threads_; }
    // The perf_event files it holds (FileBudget).
    std::size_t files() const;

    // Reads every counter that is counting now and returns the totals so far.
    Result<PerfReport> read();
    // The same into `into`, whose vectors and strings are reused: a caller that reads every
    // period into the same report allocates nothing.
    Result<void> read(PerfReport& into);
    // Counts from zero again (pfm's PCNTCLEARCNT): returns the counts so far (since the start
    // or the last reset), and later reads count from here, their elapsed time too. The
    // counters keep counting: nothing falls between the counts returned and the next read.
    Result<PerfReport> reset();
    // Pauses counting (pfm's PCNTRDISABLE, the AmigaOS FreezeCounters): every counter is
    // disabled until resume(), and with it the counts, enabled and running times; the counter
    // sets do not rotate meanwhile. Reports say how long it was paused (PerfReport::paused).
    // BADSTATE for a session started at an exec (the kernel enables it then). A no-op when
    // paused or stopped.
    Result<void> pause();
    // Counting again what pause() stopped: the free-running groups, every group under the
    // kernel's multiplexing, the counter set whose turn it is under the daemon's. A no-op when
    // not paused.
    Result<void> resume();
    bool paused() const { return paused_; }
    // Stops counting: later reads return the final totals.
    Result<void> stop();
    bool stopped() const { return stopped_; }

  private:
    PerfSession(std::unique_ptr<CounterDevice> device, SessionOptions options, Plan plan);
    Result<void> open_all();
    struct Instance;
    // Opens every group of the plan on `target` as a new instance adding to report entry
    // `report`; on failure closes what it opened and adds nothing.
    Result<void> open_instance(const OpenTarget& target, std::size_t report);
    // Opens the threads of the target's processes (`tids`, listed in /proc/PID/task), skipping
    // those that exited since; `what` names the processes in messages.
    Result<void> open_threads(const std::string& what, const std::vector<pid_t>& tids);
    void close_instance(Instance& inst);
    // Calls fn for every instance, on the instance's CPU when visit_cpus is set.
    Result<void> for_each_instance(const std::function<Result<void>(Instance&)>& fn);
    Result<void> set_slot_enabled(Instance& inst, int slot, bool enabled);
    // The "slot" of the groups that are always enabled: the free-running ones, and every
    // group when the kernel multiplexes.
    static constexpr int kAlwaysEnabled = -1;
    // Whether a read of `slot` (or kAlwaysEnabled) reads the group.
    bool reads_group(const Plan::Group& pg, int slot) const;
    Result<void> poll_slot(Instance& inst, int slot);
    Result<void> poll_instance(Instance& inst);  // the free-running groups and the slot's
    Result<void> poll();
    // read() before the reset's baseline comes off.
    Result<void> read_raw(PerfReport& rep);

    struct GroupHandles {
        std::vector<int> handles;            // per member
        std::vector<CounterReading> last;    // per member
        std::vector<std::uint64_t> count;    // per member, accumulated
        std::vector<std::uint64_t> running;  // per member, accumulated
        std::uint64_t enabled_ns = 0;        // free-running groups: their own
    };
    // One CPU, cgroup on a CPU, or thread that counters are open on. The threads of a
    // process are instances of their own (each enables, rotates and reads its own groups,
    // with its own times), added up into one entry of the report.
    struct Instance {
        OpenTarget target;
        std::size_t report = 0;             // its entry in PerfReport::instances
        std::vector<GroupHandles> groups;   // per Plan::kernel_groups
        std::uint64_t slot_enabled_ns = 0;  // daemon mux: time of all slices so far
    };

    std::unique_ptr<CounterDevice> device_;
    SessionOptions options_;
    Plan plan_;
    UniqueFd cgroup_fd_;
    std::vector<Instance> instances_;
    std::vector<int> report_instances_;  // PerfReport::instances
    int threads_ = 0;
    std::chrono::steady_clock::time_point started_;
    std::chrono::steady_clock::time_point stopped_at_;
    int slot_ = 0;  // the slot counting now (daemon multiplexing)
    int rotations_ = 0;
    bool stopped_ = false;
    bool paused_ = false;
    std::chrono::steady_clock::time_point paused_at_;  // the pause under way began
    std::chrono::nanoseconds paused_before_{0};        // the pauses that ended
    bool exec_seen_ = false;  // enable_on_exec: the kernel has started the first set
    bool narrow_ = false;
    std::vector<CounterReading> readings_;  // scratch for group reads
    std::optional<PerfReport> baseline_;    // the raw counts at the last reset
};

}  // namespace monitor::perf
