// CPU time per systemd unit, from the kernel's cgroup accounting: which units loaded the
// machine over the last second and over the window. Cheap enough to run every second: the
// counters' files stay open and are re-read with one pread each, the tree is walked only
// through slices, and a unit's counters are read only when its slice's time says it may
// have run (see sample()).
//
// The accounting is cgroup v2's cpu.stat (usage_usec, user_usec, system_usec: a file of every
// cgroup, with or without the cpu controller, so also on a hybrid machine's unified tree, where
// systemd places every unit), or on a machine without a cgroup2 tree the v1 cpuacct
// controller's cpuacct.usage, cpuacct.usage_user and cpuacct.usage_sys (nanoseconds). Both
// count the total as the tasks' run time, and split it into user and system time by ticks.
//
// The units: walking from the root, a directory named for a slice is walked into; one named
// for another kind of unit (.service, .scope, .socket, .mount, .swap) is a unit, and what lies
// below it is its own (a user's manager, user@1000.service, is one unit, as for
// perf::unit_cgroup); any other directory is a cgroup that no unit names (made by hand, by a
// container runtime, by a test): one entry if it has no subdirectory, walked into otherwise.
// What runs in the root cgroup itself (kernel threads, and on a machine without systemd most
// processes) and in such inner directories belongs to no entry.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"

namespace monitor {

enum class CgroupAccounting : std::uint8_t {
    V2,         // cgroup2: cpu.stat
    V1Cpuacct,  // cgroup v1's cpuacct controller: cpuacct.usage, usage_user, usage_sys
};

// "cgroup2 cpu.stat", "cgroup v1 cpuacct".
std::string_view cgroup_accounting_name(CgroupAccounting a);

// One unit's CPU time, in percent of one CPU (a unit busy on 4 CPUs has 400).
struct UnitLoad {
    std::string unit;    // "nginx.service"; for a cgroup no unit names, its path ("/batch/job1")
    std::string cgroup;  // its path below the hierarchy's root: "/system.slice/nginx.service"
    double cpu = 0;      // over the last interval
    double user = 0;     // of which in user mode
    double system = 0;   // and in the kernel
    // Over the window (from the unit's first reading when it started within it), and the
    // highest of its intervals there.
    double window_avg = 0;
    double window_max = 0;
    // Its CPU pressure: the share of the last 10 s in which some of its runnable tasks waited
    // for a CPU, in percent (PSI's avg10 of its cgroup2 cpu.pressure), read when the list is
    // made. Absent where the kernel keeps none: cgroup v1, a kernel without PSI (or booted
    // with psi=0), the root cgroup.
    std::optional<double> pressure;
};

// The unit a cgroup (a path below the hierarchy's root: "/system.slice/nginx.service/x")
// belongs to, by the walk's rule: its first directory named for a unit ("nginx.service"); for
// a path with none, the path itself ("/batch/job1"); "" for the root and a slice.
std::string unit_of_cgroup(std::string_view cgroup);

// A process's cgroup in the hierarchy `accounting` reads, from the text of /proc/PID/cgroup:
// the path of its cgroup2 line ("0::/system.slice/nginx.service"), or of the v1 line whose
// controllers include cpuacct. nullopt when the text has no such line.
std::optional<std::string> cgroup_of_process(std::string_view proc_cgroup,
                                             CgroupAccounting accounting);

class UnitUsage {
  public:
    using Clock = std::chrono::steady_clock;

    // The accounting under `cgroup_root` (the directory where the cgroup hierarchies are
    // mounted: /sys/fs/cgroup): the cgroup2 tree (the root itself, or unified/ on a hybrid
    // machine), else a v1 cpuacct hierarchy (cpuacct/ or cpu,cpuacct/). NODEV when there is
    // neither. `window_seconds`: how many intervals the window figures cover (at least 1).
    // The units' files stay open, `max_open_files` of them at most (0: a quarter of
    // RLIMIT_NOFILE's soft limit, from 16 to 65,536): past it a unit's are opened at each
    // reading.
    static Result<UnitUsage> open(const std::filesystem::path& cgroup_root,
                                  std::size_t window_seconds, std::size_t max_open_files = 0);

    UnitUsage(UnitUsage&&) noexcept;
    UnitUsage& operator=(UnitUsage&&) noexcept;
    ~UnitUsage();

    // Walks the tree for units that came and went, and reads the units' counters as of
    // `now`, top-down: a slice's (or any directory's) total is what its children used, so
    // a slice whose total did not grow is read alone (its units did not run), and when it
    // grew its units are read busiest first (those that ran most recently) until their
    // growth accounts for the slice's to within 0.1 % of one CPU. Those left may have had
    // that much: they are read at their refresh (every 30th sample, a thirtieth of them at
    // each) or when their slice's time is not accounted for, and what they used meanwhile
    // is spread over the samples that did not read them: never lost, at most late.
    // A unit's figures start with its second reading. A unit whose cgroup is gone (its
    // files read ENODEV) is dropped; one whose counters cannot be read or parsed is dropped
    // too, and the first such error is returned after every other unit was read.
    Result<void> sample(Clock::time_point now);

    // The `n` units with the most CPU time over the last interval (then over the window; then
    // by name), leaving out those that had none in the window; with their pressure (one read
    // of each listed unit's cpu.pressure).
    std::vector<UnitLoad> top(std::size_t n) const;

    // How many units the last walk found; how many cgroups (units and the directories above
    // them) the last sample read; the files the readings keep open.
    std::size_t unit_count() const;
    std::size_t last_reads() const;
    std::size_t open_files() const;
    CgroupAccounting accounting() const;
    // The hierarchy's root directory: "/sys/fs/cgroup/cpuacct".
    const std::filesystem::path& root() const;
    // Changes the window's length, keeping the newest readings.
    void set_window(std::size_t seconds);

  private:
    struct State;
    explicit UnitUsage(std::unique_ptr<State> state);
    std::unique_ptr<State> s_;
};

}  // namespace monitor
