// What a caller without privilege may measure through a daemon that holds the privilege: the
// kernel's own rules for an unprivileged perf_event_open(2) user, applied per caller, so that
// reaching the daemon gives no more than the caller's own perf would.
//
// The rules, as kernel/events/core.c and kernel/kallsyms.c apply them to a task without
// CAP_PERFMON, CAP_SYS_PTRACE or CAP_SYSLOG:
// - a process (or thread) only if the caller could ptrace it for reading: the caller's user
//   and group are the target's real, effective and saved ones, and the target is dumpable
//   (ptrace_may_access with PTRACE_MODE_READ_REALCREDS);
// - a CPU, every CPU or a cgroup (a unit is a cgroup) only at kernel.perf_event_paranoid 0 or
//   below;
// - kernel mode only at perf_event_paranoid 1 or below;
// - kernel addresses only when kallsyms would show them: kernel.kptr_restrict 0 and
//   perf_event_paranoid 1 or below.
// perf_event_paranoid 3 and above is a patch of Debian's and Android's kernels that forbids an
// unprivileged user any use of perf_event_open; to a caller the daemon already lets measure,
// it gives level 2's rights (its own processes, user mode).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "monitor/perf/perf_session.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// The kernel's settings behind those rules.
struct PerfSysctls {
    int paranoid = 2;       // kernel.perf_event_paranoid (2 is the kernel's default)
    int kptr_restrict = 0;  // kernel.kptr_restrict
};

// Read from PROC_ROOT/sys/kernel. A value that cannot be read counts as the strictest one
// (paranoid 3, kptr_restrict 2), so that a missing file never grants anything.
PerfSysctls read_perf_sysctls(const std::filesystem::path& proc_root = "/proc");

class CallerRights {
  public:
    // A caller that may measure everything (root, the daemon's own user).
    static CallerRights everything();
    // A caller of user `uid` and group `gid` (its credentials on the socket), without
    // privilege, on a kernel set as `sysctls`; processes are looked up below `proc_root`.
    static CallerRights unprivileged(uid_t uid, gid_t gid, PerfSysctls sysctls,
                                     std::filesystem::path proc_root = "/proc");

    bool privileged() const { return privileged_; }
    // CPUs, every CPU and cgroups.
    bool cpu_wide() const { return privileged_ || sysctls_.paranoid <= 0; }
    // Kernel-mode counting and sampling, and the kernel's part of call chains.
    bool kernel() const { return privileged_ || sysctls_.paranoid <= 1; }
    // Kernel addresses in replies.
    bool kernel_addresses() const {
        return privileged_ || (sysctls_.kptr_restrict == 0 && sysctls_.paranoid <= 1);
    }

    // Whether the caller may measure `target`: PERM with the reason and what would work
    // (`what` names the measurement: "counting", "profiling"); NODEV for a process that is gone.
    // Each process of a target of several.
    Result<void> may_measure(const CountTarget& target, std::string_view what) const;
    // Whether the caller may measure in kernel mode: PERM saying why, naming `what` ("cycles",
    // "the profile") and how to measure user mode only (`user_only`: ":u", "--mode user").
    Result<void> may_measure_kernel(std::string_view what, std::string_view user_only) const;

    // Why kernel mode is refused: "kernel mode needs kernel.perf_event_paranoid 1 or below for
    // a user other than root, as perf_event_open(2) does, and it is 2".
    std::string kernel_refusal() const;
    // Why a breakpoint on a kernel address is refused (perf::refuse_kernel_breakpoint), or
    // empty for a privileged caller: what SessionOptions::no_kernel_addresses takes.
    std::string kernel_breakpoint_refusal() const;

  private:
    // may_measure for one process or thread: the caller's, and dumpable.
    Result<void> may_measure_task(pid_t pid, std::string_view what) const;

    bool privileged_ = true;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    PerfSysctls sysctls_;
    std::filesystem::path proc_root_ = "/proc";
};

// A process held by a pidfd from before its rights are checked until its counters or rings
// are open. A pid is not reused while its process lives: if the process is still running once
// they are open, they are on the process that was checked; if it has exited, they may be on
// another that took its pid since, and must be closed.
class PinnedProcess {
  public:
    // NODEV "process N: no such process; ..." when there is none.
    static Result<PinnedProcess> pin(pid_t pid);

    // Whether the process has exited (its pidfd is readable).
    bool exited() const;
    // The pidfd, readable once the process has exited: for an event loop to watch.
    UniqueFd release() { return std::move(fd_); }

  private:
    explicit PinnedProcess(UniqueFd fd) : fd_(std::move(fd)) {}
    UniqueFd fd_;
};

}  // namespace monitor::perf
