// A process to count by pid: a child whose main thread sleeps while other threads spin, as a
// worker pool does. Its threads' CPU time comes from /proc/PID/task/*/schedstat (the time
// each one ran, in nanoseconds: what the task clock counts).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace test_support {

class SpinningProcess {
  public:
    // Starts the child with `spinners` spinning threads; `leader_exits`: its main thread then
    // exits, leaving a zombie main thread in /proc/PID/task and the others
    // spinning. pid() is -1 when it could not be started.
    explicit SpinningProcess(int spinners, bool leader_exits = false) {
        int ready[2];
        if (::pipe(ready) < 0) return;
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ < 0) {
            ::close(ready[0]);
            ::close(ready[1]);
            return;
        }
        if (pid_ == 0) {
            ::close(ready[0]);
            if (::getppid() != parent) ::_exit(0);
            for (int i = 0; i < spinners; ++i) {
                pthread_t t;
                if (::pthread_create(&t, nullptr, &spin, nullptr) != 0) ::_exit(1);
            }
            (void)::write(ready[1], "r", 1);
            ::close(ready[1]);
            // The main thread alone (not exit_group); pthread_exit would unwind through the
            // test's frames, copied by fork.
            if (leader_exits) ::syscall(SYS_exit, 0);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char byte = 0;
        ssize_t n;
        while ((n = ::read(ready[0], &byte, 1)) < 0 && errno == EINTR) {
        }
        ::close(ready[0]);
        if (n != 1) {
            stop();
            return;
        }
        settle(static_cast<std::size_t>(spinners) + 1);
    }
    ~SpinningProcess() { stop(); }
    SpinningProcess(const SpinningProcess&) = delete;
    SpinningProcess& operator=(const SpinningProcess&) = delete;

    pid_t pid() const { return pid_; }
    // How many threads it has once started: its main thread and the spinners, and those a
    // sanitizer's runtime may add in it (the thread sanitizer starts two); 0 when it did not
    // settle.
    std::size_t thread_count() const { return thread_count_; }

    // Its threads now.
    std::vector<pid_t> threads() const {
        std::vector<pid_t> tids;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(task_dir(), ec)) {
            tids.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
        }
        return tids;
    }

    // The CPU time one thread ran so far, in nanoseconds; nullopt when unknown.
    std::optional<std::uint64_t> thread_cpu_ns(pid_t tid) const {
        std::ifstream in(task_dir() / std::to_string(tid) / "schedstat");
        std::uint64_t ns = 0;
        if (!(in >> ns)) return std::nullopt;
        return ns;
    }

    // How far behind the truth cpu_ns() may be: the kernel brings a running thread's
    // schedstat time up to date at its scheduler tick, so each thread's figure may lag by one
    // tick (10 ms at the lowest HZ, 100). A difference of two readings is off by as much
    // either way.
    static constexpr double kTickLagNs = 10e6;
    double lag_ns() const { return kTickLagNs * static_cast<double>(thread_count_); }

    // The CPU time all its threads ran so far; nullopt when unknown (no schedstat).
    std::optional<std::uint64_t> cpu_ns() const {
        std::uint64_t sum = 0;
        for (pid_t tid : threads()) {
            auto ns = thread_cpu_ns(tid);
            if (!ns) return std::nullopt;
            sum += *ns;
        }
        return sum;
    }

    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }

  private:
    // Waits (up to 5 s) until it has at least `least` threads and their number has not changed
    // for 200 ms.
    void settle(std::size_t least) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        std::size_t last = 0;
        auto since = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() < deadline) {
            const std::size_t n = threads().size();
            const auto now = std::chrono::steady_clock::now();
            if (n != last) {
                last = n;
                since = now;
            } else if (n >= least && now - since >= std::chrono::milliseconds(200)) {
                thread_count_ = n;
                return;
            }
            ::usleep(10'000);
        }
    }

    static void* spin(void*) {
        volatile std::uint64_t sink = 0;
        for (;;) sink = sink + 1;
        return nullptr;
    }
    std::filesystem::path task_dir() const {
        return std::filesystem::path("/proc") / std::to_string(pid_) / "task";
    }

    pid_t pid_ = -1;
    std::size_t thread_count_ = 0;
};

}  // namespace test_support
