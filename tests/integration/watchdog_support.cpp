#include "watchdog_support.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cgroups.hpp"
#include "daemon_process.hpp"

namespace itest {

FifoWatchdog::FifoWatchdog(const std::filesystem::path& dir) : path_((dir / "watchdog").string()) {
    EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0) << std::strerror(errno);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    EXPECT_GE(fd_, 0);
    reader_ = std::thread([this] { read_loop(); });
}

FifoWatchdog::~FifoWatchdog() {
    stop_ = true;
    reader_.join();
    ::close(fd_);
}

std::size_t FifoWatchdog::pets() const {
    std::lock_guard lock(mutex_);
    return pet_times_.size();
}

std::vector<Clock::time_point> FifoWatchdog::pet_times() const {
    std::lock_guard lock(mutex_);
    return pet_times_;
}

std::string FifoWatchdog::data() const {
    std::lock_guard lock(mutex_);
    return data_;
}

bool FifoWatchdog::wait_closed(std::chrono::milliseconds within) const {
    const auto deadline = Clock::now() + within;
    while (!closed_ && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    return closed_;
}

void FifoWatchdog::read_loop() {
    bool opened = false;
    while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        ::poll(&p, 1, 20);
        char buf[256];
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) {
            opened = true;
            const auto now = Clock::now();
            std::lock_guard lock(mutex_);
            data_.append(buf, static_cast<std::size_t>(n));
            pet_times_.insert(pet_times_.end(),
                              static_cast<std::size_t>(std::count(buf, buf + n, '\0')), now);
        } else if (n == 0 && opened) {
            closed_ = true;  // POLLHUP: the writer is gone
            return;
        } else if (n == 0) {
            std::this_thread::sleep_for(10ms);  // no writer yet
        }
    }
}

bool wait_pets(const FifoWatchdog& w, std::size_t n, std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    while (w.pets() < n && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    return w.pets() >= n;
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

PetsSeen watch_pets(const FifoWatchdog& w, std::chrono::milliseconds window, const char* what) {
    const auto from = Clock::now();
    const std::size_t before = w.pets();
    std::this_thread::sleep_for(window);
    const auto to = Clock::now();
    PetsSeen seen;
    seen.pets = w.pets() - before;
    seen.window = to - from;
    Clock::time_point last = from;
    for (auto p : w.pet_times()) {
        if (p < from || p > to) continue;
        seen.longest_gap = std::max(seen.longest_gap, p - last);
        last = p;
    }
    seen.longest_gap = std::max(seen.longest_gap, to - last);
    std::printf("%s: %zu pets in %.1f s, at most %.2f s apart\n", what, seen.pets,
                seconds(seen.window), seconds(seen.longest_gap));
    return seen;
}

const char* placement_name(Placement p) {
    switch (p) {
        case Placement::SameSession:
            return "the test's session";
        case Placement::OtherSession:
            return "another session";
        case Placement::OtherCgroup:
            return "another cgroup";
        case Placement::IdleCgroup:
            return "a cgroup with cpu.idle=1";
    }
    return "?";
}

BusyCpus::BusyCpus(const std::vector<int>& cpus, Placement where, const CpuCgroup* cgroup) {
    const bool in_cgroup = where == Placement::OtherCgroup || where == Placement::IdleCgroup;
    EXPECT_TRUE(!in_cgroup || cgroup != nullptr) << "a cgroup placement needs the cgroup";
    const pid_t parent = ::getpid();
    for (int cpu : cpus) {
        pid_t pid = ::fork();
        if (pid == 0) {
            // It dies with the test, should the test crash before the destructor runs.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(0);
            if (where == Placement::OtherSession) ::setsid();
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(static_cast<std::size_t>(cpu), &set);
            ::sched_setaffinity(0, sizeof set, &set);
            volatile unsigned long x = 0;
            for (;;) x = x + 1;
        }
        if (pid > 0) pids_.push_back(pid);
        if (pid > 0 && in_cgroup && cgroup != nullptr) {
            EXPECT_EQ(cgroup->add(pid), "");
        }
    }
}

BusyCpus::~BusyCpus() {
    for (pid_t p : pids_) ::kill(p, SIGKILL);
    for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
}

DutyCycle::DutyCycle(int load) {
    // Everything the child needs is made before the fork: it only execs.
    const std::string bin = duty_cycle_bin();
    const std::string percent = std::to_string(load);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
        // An hour of load must not outlive a test that crashed (the setting survives exec).
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(0);
        ::execl(bin.c_str(), bin.c_str(), percent.c_str(), "3600", "100", nullptr);
        ::_exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork: " << std::strerror(errno);
}

DutyCycle::~DutyCycle() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
}

}  // namespace itest
