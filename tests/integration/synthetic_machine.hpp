// Test support: a made-up machine of any number of CPUs for monitord's --proc-root and
// --sys-root: a /proc/stat whose counters a thread advances (USER_HZ 100, ten times a second)
// and the CPU lists of /sys/devices/system/cpu, which a test may change (a CPU taken offline).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "monitor/unique_fd.hpp"
#include "test_support.hpp"

namespace itest {

class SyntheticMachine {
  public:
    // CPU c is busy c % 50 percent of the time, but CPU 200 all the time; busy time is split
    // three to one between user and system (as test_support::stat_text does).
    explicit SyntheticMachine(int cpus);
    ~SyntheticMachine();
    SyntheticMachine(const SyntheticMachine&) = delete;
    SyntheticMachine& operator=(const SyntheticMachine&) = delete;

    std::string proc() const { return (dir_.path() / "proc").string(); }
    std::string sys() const { return (dir_.path() / "sys").string(); }
    int cpus() const { return cpus_; }
    // monitord's arguments to read this machine, without idle probes (its CPUs are made up).
    std::vector<std::string> daemon_args() const {
        return {"--proc-root", proc(), "--sys-root", sys(), "--probe", "off"};
    }

    // Writes /sys/devices/system/cpu/online (e.g. "0", "0-1"); /proc/stat leaves out the CPUs
    // not in it, as the kernel's does.
    void set_online(const std::string& list);

  private:
    std::string stat() const;

    int cpus_;
    test_support::ScratchDir dir_{test_support::ScratchDir::Everyone};
    std::uint64_t elapsed_ = 1'000'000;  // ticks of each CPU; the thread's, once it runs
    mutable std::mutex mutex_;           // guards online_
    std::string online_;
    monitor::UniqueFd stat_fd_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace itest
