// Test support: keeps one CPU busy from a normal-priority thread pinned to it.
#pragma once

#include <atomic>
#include <thread>

namespace itest {

// Spins on `cpu` from construction to destruction: in user space, or with system calls that
// spend their time in the kernel (reads of /dev/zero, which the kernel fills).
class Spinner {
  public:
    enum class Mode { User, SystemCalls };
    explicit Spinner(int cpu, Mode mode = Mode::User)
        : mode_(mode), thread_([this, cpu] { spin(cpu); }) {}
    ~Spinner() {
        stop_ = true;
        thread_.join();
    }
    Spinner(const Spinner&) = delete;
    Spinner& operator=(const Spinner&) = delete;
    // Whether the thread got onto its CPU.
    bool pinned() const { return pinned_; }

  private:
    void spin(int cpu);

    const Mode mode_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> pinned_{false};
    std::thread thread_;
};

}  // namespace itest
