// The task group the idle probes compete in.
//
// SCHED_IDLE makes a thread yield to the other threads of its own task group only. Between
// groups the kernel shares a CPU by the groups' weights, and a group that holds nothing but a
// probe on a CPU still gets its share there: about 1/N of the group's weight on each of the N
// CPUs it has probes on. The groups are the autogroups the kernel makes per session (when
// kernel.sched_autogroup_enabled=1, the default of Debian's kernels) for the processes not
// placed in a cgroup under the cpu controller, and those cgroups. A process spinning in
// another session of a 2-CPU machine got 61-69 % of its CPU beside monitord's probes, and the
// probes read its CPU as a third idle; the watchdog was petted from a CPU that was never idle.
//
// An autogroup's weight follows its nice value: at 19 it weighs 15 against the 1024 of a
// group at 0 (1.4 % of a CPU on a machine of one CPU, about 1.4 % / N on N CPUs), and that
// busy process keeps 99.1-99.5 % of its CPU. A process that leads its
// session (a systemd service, or a process started with setsid) has an autogroup of its own
// and can lower it; one started from a shell shares the shell's, which it must not lower.
//
// A cgroup meets the others at every level of the hierarchy, each sharing its parent's time
// by weight: a cgroup that weighs nothing within its parent still gets its parent's share
// there. What decides is the cgroup at the top, right below the root: with cpu.idle=1
// (kernel 5.15 and later; systemd's CPUWeight=idle) its tasks run only when no other group
// has work, as SCHED_IDLE threads do within a group; with the lowest weight (cpu.weight 1,
// v1's cpu.shares 2) they get at most about 0.2 % of a busy CPU.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "monitor/status.hpp"

namespace monitor {

struct ProbeGroup {
    enum class Kind {
        Root,       // the root task group: SCHED_IDLE yields to every thread of the machine
        Autogroup,  // the session's autogroup
        Cgroup,     // a cgroup under the cpu controller
    };
    Kind kind = Kind::Root;
    std::string name;         // "/autogroup-42", or the cgroup's path; empty for Root
    std::optional<int> nice;  // an autogroup's nice value
    bool own = false;         // an autogroup this process leads (its session's leader)
    // A cgroup's ancestor right below the root (the cgroup itself when it is there), and
    // whether that one has cpu.idle=1, or the lowest weight. False when not known.
    std::string top;
    bool top_idle = false;
    bool top_lowest_weight = false;

    // Whether the probes yield to the busy threads of other groups too: in the root group,
    // in an autogroup at nice 19 (but for at most 1.5 % of a CPU), or in a cgroup whose top
    // is idle (or weighs the least: at most 0.2 %).
    bool yields() const;
};

// Where the cgroup hierarchies are mounted: the v1 one with the cpu controller, and the
// unified one (v2); empty when not mounted.
struct CgroupRoots {
    std::filesystem::path cpu_v1;
    std::filesystem::path v2;
};
// From a /proc/PID/mountinfo.
CgroupRoots find_cgroup_roots(const std::filesystem::path& mountinfo);

std::string_view probe_group_kind_name(ProbeGroup::Kind kind) noexcept;

// Finds the group of this process from `proc_root`/self/cgroup (a cgroup v1 hierarchy with
// the cpu controller, or the v2 cgroup when `cgroup2_root`/PATH/cpu.weight exists),
// `proc_root`/sys/kernel/sched_autogroup_enabled and `proc_root`/self/autogroup.
// `leads_session`: whether this process is its session's leader (getsid(0) == getpid()).
Result<ProbeGroup> find_probe_group(const std::filesystem::path& proc_root,
                                    const std::filesystem::path& cgroup2_root, bool leads_session);

// The group of process `pid` (`proc_root`/PID; 0 for this process, as "self"): as
// find_probe_group, and of a cgroup also its top and what that weighs, from the hierarchies of
// `roots`. A process that leads its session is told from `proc_root`/PID/stat.
Result<ProbeGroup> find_process_group(const std::filesystem::path& proc_root, pid_t pid,
                                      const CgroupRoots& roots);

// Moves process `pid` into the cgroup `name` right below the root of the hierarchy that has
// the cpu controller, made when missing, with cpu.idle=1 (or, where the kernel has no
// cpu.idle, the lowest weight), and returns its group as it then is. Only where that changes
// nothing for any other process: in a cgroup v1 hierarchy, or in v2 whose root gives its
// children the cpu controller already (enabling it would put every process of the machine
// under it). Needs the right to write the cgroup tree (root); BADSTATE where neither holds.
Result<ProbeGroup> place_in_idle_cgroup(const std::filesystem::path& proc_root, pid_t pid,
                                        const CgroupRoots& roots, const std::string& name);
// Removes a cgroup made by place_in_idle_cgroup once it is empty; errors are ignored (a
// cgroup that still holds a process stays).
void remove_idle_cgroup(const CgroupRoots& roots, const std::string& name);

// Sets an autogroup this process leads to nice 19 (writing `proc_root`/self/autogroup) and
// returns the group as it then is. Any other group is returned as it is: a shared autogroup
// would lower the rest of the session with it, and a cgroup's weight is its manager's
// (systemd: CPUWeight=).
Result<ProbeGroup> lower_probe_group(const std::filesystem::path& proc_root,
                                     const std::filesystem::path& cgroup2_root, bool leads_session);

// One sentence for the log and `monctl status`: the group, and what it means for the
// loading and the watchdog.
std::string describe_probe_group(const ProbeGroup& group);

}  // namespace monitor
