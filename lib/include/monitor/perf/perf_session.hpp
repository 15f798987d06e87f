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

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/cgroup_target.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/counter_scheduler.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// One requested event; events with the same group (not kNoGroup) are counted together,
// always: the braces of "a,{b,c}".
struct EventRequest {
    std::string name;
    int group = kNoGroup;
};

// "a,b,{c,d}" -> a, b, and c+d as group 0. BADARG for unbalanced braces or an empty name.
Result<std::vector<EventRequest>> parse_event_list(std::string_view list);

enum class TargetKind {
    AllCpus,  // every online CPU, counts added up
    EachCpu,  // every online CPU, counts kept per CPU
    OneCpu,   // one CPU
    // Every thread of a process, and the threads and children they start afterwards, on any
    // CPU. The threads are those of /proc/PID/task when the session starts (a thread's id
    // counts its whole process, as perf stat -p does); the ones started later are counted
    // by inheritance. The counts of all of them are added up into one instance.
    Process,
    Thread,  // one thread, and the threads and children it starts afterwards, on any CPU
    Cgroup,  // the tasks of a cgroup, on every online CPU
};

struct CountTarget {
    TargetKind kind = TargetKind::AllCpus;
    int cpu = -1;    // OneCpu
    pid_t pid = -1;  // Process: the process; Thread: the thread's id
    // Process: start counting at its next exec (a command launched to be counted, stopped
    // before its exec: it has one thread, which is all that is opened).
    bool enable_on_exec = false;
    // enable_on_exec: the executable it will run, where breakpoints named by symbol are
    // looked up (the process is not running it yet).
    std::filesystem::path program;
    std::string cgroup;  // Cgroup: a path below the cgroup2 root, or absolute
};

enum class MuxMode { Daemon, Kernel };

// The most perf_event files a session or a profile may open at once, for a daemon that opens
// them for callers: one file per event and CPU, or per event and thread of a process; a
// profile, one per CPU and thread. Checked before the first is opened. 0: only this
// process's RLIMIT_NOFILE bounds them.
struct FileBudget {
    std::size_t most = 0;
    // Where the limit comes from, for the refusal: "[limits] perf-files-per-session in
    // monitord.conf(5), for a user other than root".
    std::string source;

    // BADARG when `needed` files (for `what`: "counting 4 events on each of the 300 threads
    // of process 42") are more than `most`, saying how many and what to do.
    Result<void> check(std::size_t needed, std::string_view what) const;
    // Whether `e` is this budget's refusal, check()'s error.
    bool refused(const Error& e) const;
};

struct SessionOptions {
    std::vector<EventRequest> events;
    CountTarget target;
    MuxMode mux = MuxMode::Daemon;
    std::chrono::nanoseconds slice = std::chrono::milliseconds(100);
    // > 0: each PMU gets at most this many counters, and events that take no counter take
    // one too, so that multiplexing can be exercised (and compared) with software events.
    int counter_budget = 0;
    // Not empty: count user mode only, for a caller whom the kernel's rules allow no more
    // (CallerRights::kernel()), and why (CallerRights::kernel_refusal()). An event that
    // counts both modes is counted in user mode and named with ":u" added, as perf does then;
    // one that counts kernel mode only is PERM, saying this.
    std::string user_only;
    // Not empty: a breakpoint on a kernel address is PERM, saying this, for a caller without
    // privilege (CallerRights::kernel_breakpoint_refusal()), as the kernel refuses one.
    std::string no_kernel_breakpoints;
    std::vector<int> cpus;  // the online CPUs, for CPU and cgroup targets
    std::string cgroup_root = "/sys/fs/cgroup";
    // Move the calling thread onto each CPU in turn to read, enable and disable that CPU's
    // counters (as perf stat does), the CPU it is on first; its affinity is restored at the
    // end, where it stands. Done from another CPU, each of those calls interrupts the
    // counter's CPU and waits for it (an IPI): an idle CPU has to wake up first, 80-150 us
    // in a VM, more than a move (one group read from afar a period, two CPUs: 115 against
    // 80 us). For a thread of its own (the daemon's loop), not for a caller's thread.
    bool visit_cpus = false;
    FileBudget files;
};

// The set of a kernel group that takes no turn on the counters: its events need none (software
// events), and it counts all the time.
inline constexpr int kFreeRunningSet = -1;

// The events and where each one counts, without counting.
//
// Words: a kernel group is the events opened as one perf_event group (a leader and its
// members), read together. A set is a kernel group of counter events that fits a PMU's
// counters; when a PMU's events need more than one set, its sets take turns. A slot is one
// turn of the rotation (one slice of time, in daemon multiplexing): in slot s, set
// s % pmu_sets of every PMU counts.
struct Plan {
    std::vector<EventSpec> events;
    // Per event, the group it was requested in (EventRequest::group): kNoGroup for none.
    std::vector<int> requested_groups;
    struct Member {
        std::size_t event = 0;     // index into events
        int counter = kNoCounter;  // the counter it is on, 0-based; kNoCounter when it takes none
        std::string counter_name;  // "PMC2", "counter 3"; empty for kNoCounter
    };
    struct Group {
        // Which of its PMU's sets this group is, 0 to pmu_sets - 1; kFreeRunningSet for a
        // group of events that take no counter.
        int set = kFreeRunningSet;
        int pmu_sets = 1;  // how many sets its PMU has (1 for a free-running group)
        std::string pmu;
        std::vector<Member> members;  // the leader first

        bool free_running() const { return set == kFreeRunningSet; }
    };
    std::vector<Group> kernel_groups;
    // The slots of one rotation: the most sets any PMU has. 0 (no counter events) or 1: the
    // sets never take turns.
    int slots = 0;
};

Result<Plan> make_plan(const EventCatalog& catalog, const SessionOptions& options);

// The threads of process `pid` now: the entries of /proc/PID/task, as perf stat -p reads them
// (for the id of a thread that is not the main one, the threads of its whole process). NODEV
// for a process that is gone.
Result<std::vector<pid_t>> process_threads(pid_t pid);

// Whether two plans take counters of a same PMU: opened together, the kernel multiplexes
// them (their running times then fall below their enabled times). Events that take no
// counter share nothing. CPUs are not compared: a process or cgroup may run on any.
bool shares_counters(const Plan& a, const Plan& b);

struct CountValue {
    std::uint64_t count = 0;
    std::uint64_t enabled_ns = 0;
    std::uint64_t running_ns = 0;

    // count x enabled / running; the count itself when it always ran, 0 when it never did.
    double scaled() const;
    // running / enabled, 1 when nothing was enabled yet.
    double running_ratio() const;
    CountValue& operator+=(const CountValue& o);
    CountValue operator-(const CountValue& o) const;
};

struct EventCount {
    std::string name;  // as requested
    std::string canonical;
    std::string pmu;
    CountValue total;                      // over every instance
    std::vector<CountValue> per_instance;  // one per instance of the report
};

// The counts of one kernel group (a counter set of one PMU), for ratios of events measured
// over the very same time.
struct GroupCount {
    int set = kFreeRunningSet;  // as in Plan::Group
    std::vector<std::size_t> events;
    std::vector<std::uint64_t> counts;
    std::uint64_t running_ns = 0;
};

struct PerfReport {
    std::chrono::nanoseconds elapsed{0};  // wall time since the session started
    std::vector<int> instances;           // CPU numbers (a cgroup's too), or {-1} for a process
    // Process and Thread targets: the threads counted from the start (the threads and
    // children started later are counted too, by inheritance, but not in this number); 0 for
    // the other targets.
    int threads = 0;
    std::vector<EventCount> events;  // in request order
    std::vector<GroupCount> groups;  // per Plan::kernel_groups
    int slots = 0;
    int rotations = 0;

    // The counts of the period between `earlier` and this report (same session).
    PerfReport since(const PerfReport& earlier) const;
    // The same in place: this report becomes the counts since `earlier`.
    void subtract(const PerfReport& earlier);
};

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
    // Opens the threads of a process (`tids`, listed in /proc/PID/task), skipping those that
    // exited since.
    Result<void> open_threads(pid_t pid, const std::vector<pid_t>& tids);
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
    bool exec_seen_ = false;  // enable_on_exec: the kernel has started the first set
    bool narrow_ = false;
    std::vector<CounterReading> readings_;  // scratch for group reads
    std::optional<PerfReport> baseline_;    // the raw counts at the last reset
};

}  // namespace monitor::perf
