// Test support for the watchdog under load: a FIFO in place of /dev/watchdog that records each
// pet and when it came, normal-priority loops that starve CPUs, and bench-duty-cycle as a
// busy but healthy machine.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace itest {

using Clock = std::chrono::steady_clock;

class CpuCgroup;  // cgroups.hpp

// The reading end of a FIFO that monitord (or the MON API) takes for its watchdog device: it
// records what is written (a NUL per pet, 'V' for the magic close), when each pet came, and
// when the writer closed it.
class FifoWatchdog {
  public:
    explicit FifoWatchdog(const std::filesystem::path& dir);
    ~FifoWatchdog();
    FifoWatchdog(const FifoWatchdog&) = delete;
    FifoWatchdog& operator=(const FifoWatchdog&) = delete;

    const std::string& path() const { return path_; }
    std::size_t pets() const;
    // When each pet was read (within the reader's 20 ms poll).
    std::vector<Clock::time_point> pet_times() const;
    std::string data() const;
    // The writer closed: read() returned 0 after it had opened.
    bool closed() const { return closed_; }
    bool wait_closed(std::chrono::milliseconds within) const;

  private:
    void read_loop();

    std::string path_;
    int fd_ = -1;
    std::thread reader_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> closed_{false};
    mutable std::mutex mutex_;
    std::string data_;
    std::vector<Clock::time_point> pet_times_;
};

// Waits until `w` has seen `n` pets.
bool wait_pets(const FifoWatchdog& w, std::size_t n, std::chrono::milliseconds within);

double seconds(Clock::duration d);

// What `w` saw over a window: how many pets and the longest time without one.
struct PetsSeen {
    std::size_t pets = 0;
    Clock::duration longest_gap{0};
    Clock::duration window{0};
};
// Waits `window` and says what came; prints it after `what`.
PetsSeen watch_pets(const FifoWatchdog& w, std::chrono::milliseconds window, const char* what);

// Where a busy process runs, beside a daemon started by the test: in the test's own session
// (and so its autogroup), in a session of its own (setsid: an autogroup of its own), or in a
// cgroup of its own under the cpu controller, with cpu.idle = 1 or without.
enum class Placement { SameSession, OtherSession, OtherCgroup, IdleCgroup };
const char* placement_name(Placement p);

// Busy processes of normal priority on `cpus` (pinned, one each) for as long as the object
// lives: a probe on such a CPU gets only the sliver the kernel leaves SCHED_IDLE.
class BusyCpus {
  public:
    // `cgroup`: for the cgroup placements (the caller makes it and keeps it).
    explicit BusyCpus(const std::vector<int>& cpus, Placement where = Placement::SameSession,
                      const CpuCgroup* cgroup = nullptr);
    ~BusyCpus();
    BusyCpus(const BusyCpus&) = delete;
    BusyCpus& operator=(const BusyCpus&) = delete;

  private:
    std::vector<pid_t> pids_;
};

// bench-duty-cycle on every online CPU: busy for `load` percent of every period (100 ms on
// average: shorter ones lose more of their busy time to late wake-ups), for as long as the
// object lives.
class DutyCycle {
  public:
    explicit DutyCycle(int load);
    ~DutyCycle();
    DutyCycle(const DutyCycle&) = delete;
    DutyCycle& operator=(const DutyCycle&) = delete;

  private:
    pid_t pid_ = -1;
};

}  // namespace itest
