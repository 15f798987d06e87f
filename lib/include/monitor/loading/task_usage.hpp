// Which task loaded each CPU: every thread's CPU time over the last interval, from the kernel's
// per-task accounting (proc(5)): utime and stime of /proc/PID/stat and /proc/PID/task/TID/stat,
// and the CPU the task ran on last (the processor field).
//
// What it costs: one stat file per process and sample, and a process's threads only when it
// has more than one and its CPU time (its stat's, the sum over its threads) grew since the
// last sample: the threads of a process that did not run are not read. top -b reads two files
// per process (stat and statm), top -H a file per thread.
//
// What the figures can say:
// - Resolution: the kernel gives the times in clock ticks (USER_HZ, 100 a second), each
//   thread's exact run time rounded down: a figure is within one tick (1 % of a CPU over a
//   second) of the truth, and a tick not seen in one interval is seen in the next.
// - Where: a task's time over the interval is counted on the CPU it was on at the end of it
//   (the kernel keeps no per-CPU time per task). A task pinned to a CPU, or busy enough to stay
//   on one, is exact; one that moved has its time on its last CPU.
// - A task's figures start with its second reading, unless it started after the last sample
//   (its start time, in ticks since boot, against /proc/uptime then): all its time is then
//   of this interval. A task that ran and exited between two samples is not seen.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/loading/unit_usage.hpp"
#include "monitor/status.hpp"

namespace monitor {

// One thread's CPU time over the last interval, in percent of one CPU.
struct TaskLoad {
    pid_t pid = 0;     // its process (thread group)
    pid_t tid = 0;     // the thread: pid for a process's main thread
    std::string comm;  // the thread's name
    int cpu = 0;       // the CPU it ran on last, where its time is counted
    double load = 0;   // user + system
    double user = 0;
    double system = 0;
    // Its process's cgroup in the hierarchy of the units' accounting, read when its time
    // was (so that a process that ran and ended is named too), and the unit that is
    // (unit_of_cgroup); empty without a hierarchy, in a process's first reading, or when it
    // was gone by then.
    std::string cgroup;
    std::string unit;
};

// The fields of a /proc/PID/stat line that TaskUsage reads.
struct TaskStat {
    std::string_view comm;  // between the first '(' and the last ')': a name may hold either
    std::uint64_t utime = 0, stime = 0;  // clock ticks
    std::int64_t threads = 0;            // num_threads
    std::uint64_t start = 0;             // starttime: clock ticks after boot
    int processor = 0;                   // the CPU it ran on last
};

// The fields of one stat line; nullopt when the text is not one (too few fields, a number
// that is not one).
std::optional<TaskStat> parse_task_stat(std::string_view text);

class TaskUsage {
  public:
    using Clock = std::chrono::steady_clock;

    // Reads the tasks below `proc_root` ("/proc"). BADARG when it is not a directory that
    // lists processes. `hierarchy`: the cgroup hierarchy whose cgroups the busy tasks are
    // named by (the units'); none: not named. `ticks_per_second`: the unit of utime and
    // stime (0: the machine's, sysconf(_SC_CLK_TCK)).
    static Result<TaskUsage> open(const std::filesystem::path& proc_root,
                                  std::optional<CgroupAccounting> hierarchy = std::nullopt,
                                  long ticks_per_second = 0);

    TaskUsage(TaskUsage&&) noexcept;
    TaskUsage& operator=(TaskUsage&&) noexcept;
    ~TaskUsage();

    // Reads every process's stat, and the threads of those whose time grew, as of `now`;
    // then the cgroup of each process that had time (one read each). A task gone meanwhile
    // is skipped; a stat file whose text is not the kernel's is skipped too, and BADDATA
    // naming the first is returned after every other was read.
    Result<void> sample(Clock::time_point now);
    // Forgets the readings: the next sample is a first one again (no figures).
    void forget();

    // The `per_cpu` busiest tasks of each CPU over the last interval, by CPU and busiest
    // first (then by thread id); tasks that had no time are left out.
    std::vector<TaskLoad> top(std::size_t per_cpu) const;

    // The last interval's length in seconds: 0 until the second sample after open or forget.
    double seconds() const;
    // The threads and processes the last sample found; the stat files it read.
    std::size_t task_count() const;
    std::size_t process_count() const;
    std::size_t last_reads() const;

  private:
    struct State;
    explicit TaskUsage(std::unique_ptr<State> state);
    std::unique_ptr<State> s_;
};

}  // namespace monitor
