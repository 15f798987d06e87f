// Spinning idle probes in a helper process of their own.
//
// SCHED_IDLE yields only within a task group; between groups the kernel shares a CPU by the
// groups' weights (probe_group.hpp). For spinning probes to take no CPU from the busy threads
// of other groups, their group must weigh nothing at the level where it meets those: a
// session of its own (an autogroup at nice 19), or a cgroup at the top of the cpu
// controller's hierarchy with cpu.idle=1. Under cgroup v2 the threads of one process share
// its cgroup, so the probes run in a process of their own, which the daemon places there.
//
// The helper is the daemon's own program run again with kHelperFlag; its main() hands the
// two descriptors to run_probe_helper(). The helper starts a session of its own, lowers its
// autogroup, runs a ProbeSet of spinning probes on the CPUs the parent names, and publishes
// ten times a second, in a memory region both map, each probe's state, loops, baseline,
// error and thread id. The parent reads each probe thread's CPU time itself, fresh, from
// /proc/PID/task/TID/schedstat; it sends the online CPUs and the order to stop on a socket.
// The helper dies with the parent (PR_SET_PDEATHSIG) and stops when the socket closes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/loading/probes.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor {

class ProbeProcess final : public Probes {
  public:
    // The helper's command line: PROGRAM kHelperFlag SHARED_FD CONTROL_FD.
    static constexpr std::string_view kHelperFlag = "--probe-helper";

    // Starts `program` as the helper. Its probes start at the first set_online(), so that the
    // caller can place it first.
    static Result<std::unique_ptr<ProbeProcess>> start(const std::filesystem::path& program);
    ~ProbeProcess() override;
    ProbeProcess(const ProbeProcess&) = delete;
    ProbeProcess& operator=(const ProbeProcess&) = delete;

    pid_t pid() const { return pid_; }
    // Asks the helper to stop, waits up to `grace` (its probes may be starved on busy CPUs),
    // then kills it, and reaps it.
    void stop(std::chrono::milliseconds grace = std::chrono::seconds(2));
    // Why the helper ended ("exited with status 1", "killed by SIGSEGV"), once it has.
    std::optional<std::string> ended() const;

    void set_online(const std::vector<int>& cpus) override;
    bool wait_calibrated(std::chrono::milliseconds timeout) const override;
    // A helper that ended reads as failed probes, with the CPU time they had.
    std::vector<ProbeReading> read() const override;
    std::uint64_t excluded_cpu_ns(int cpu) const override;
    ProbeMode mode() const override { return ProbeMode::Spin; }

    struct Shared;  // the memory region's layout (probe_process.cpp)

  private:
    ProbeProcess(pid_t pid, UniqueFd control, Shared* shared, std::size_t size);
    // The CPU time of thread `tid` of the helper, from its schedstat; nullopt when gone.
    std::optional<std::uint64_t> thread_cpu_ns(pid_t tid) const;
    // Reaps the helper when it has ended; the reason then stays in ended_.
    void poll_ended() const;
    // The reading of `cpu`'s slot, with its thread's CPU time now; under mutex_.
    std::optional<ProbeReading> read_slot(std::size_t cpu) const;

    pid_t pid_;
    UniqueFd control_;
    Shared* shared_;
    std::size_t shared_size_;
    std::uint32_t sent_ = 0;  // online lists sent so far

    mutable std::mutex mutex_;  // what follows
    mutable std::optional<std::string> ended_;
    mutable std::map<pid_t, UniqueFd> schedstat_;  // by probe thread
    // Each CPU's probe as last read: its generation and CPU time.
    mutable std::map<int, std::pair<std::uint64_t, std::uint64_t>> last_cpu_ns_;
    mutable std::map<int, std::uint64_t> reported_;  // excluded_cpu_ns's last answers
};

// The helper's work: runs spinning probes for the parent on `shared_fd`'s region and
// `control_fd`'s socket until told to stop or the parent goes away. Returns the exit status.
int run_probe_helper(int shared_fd, int control_fd);

}  // namespace monitor
