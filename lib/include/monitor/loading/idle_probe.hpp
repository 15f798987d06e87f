// One CPU's idle probe: a thread pinned to the CPU at the lowest priority (SCHED_IDLE).
//   spin   runs idle_outer_loop() and counts the loops: the MON method of measuring loading
//   sleep  wakes ten times a second and counts the wake-ups: measures nothing, but shows that
//          the CPU still has idle time (for the watchdog)
// The thread reports its state and counters through atomics; the owner samples them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/loading/idle_loop.hpp"

namespace monitor {

enum class ProbeMode : std::uint8_t { Spin, Sleep, Off };
std::string_view probe_mode_name(ProbeMode m) noexcept;
std::optional<ProbeMode> probe_mode_from_name(std::string_view name) noexcept;

// Scheduling of the probe threads. The default and the only sensible choice is SCHED_IDLE;
// SCHED_OTHER or SCHED_BATCH with a nice value are accepted for systems without it.
struct ProbeThreadAttr {
    int policy = 5;  // SCHED_IDLE
    int nice = 0;    // for SCHED_OTHER and SCHED_BATCH
};

// Told by the probes, from their own threads, each time one has had kIdleCredit of idle time
// within kIdleCreditWindow (the CPU time of its SCHED_IDLE thread; a sleeping probe: one per
// wake-up). The watchdog pets from there, so that a starved CPU cannot pet it. The window
// keeps idle time from before a starvation from completing a credit long after it began: a
// CPU with less than a tenth of its time idle earns none.
inline constexpr std::chrono::milliseconds kIdleCredit{100};
inline constexpr std::chrono::milliseconds kIdleCreditWindow{1000};

// Turns a spinning probe's CPU time into credits: update() says whether a credit is due.
class IdleCreditMeter {
  public:
    explicit IdleCreditMeter(std::chrono::steady_clock::time_point start) : window_start_(start) {}
    bool update(std::uint64_t cpu_ns, std::chrono::steady_clock::time_point now);

  private:
    std::uint64_t base_ns_ = 0;  // the CPU time when the window started
    std::chrono::steady_clock::time_point window_start_;
};
class IdleCreditSink {
  public:
    virtual ~IdleCreditSink() = default;
    virtual void credit(int cpu) noexcept = 0;
};

enum class ProbeState : std::uint8_t {
    Starting,     // the thread has not set itself up yet
    Calibrating,  // timing the outer loop (spin) before counting
    Running,      // counting loops (spin) or wake-ups (sleep)
    Displaced,    // running on another CPU: the kernel moved it (CPU hotplug); not counting
    Failed,       // could not pin itself or set its priority; see error()
    Stopped,
};
std::string_view probe_state_name(ProbeState s) noexcept;

class IdleProbe {
  public:
    // Starts the thread at once. `sink`, when set, gets the probe's idle credits.
    IdleProbe(int cpu, ProbeMode mode, ProbeThreadAttr attr, CalibrationPlan plan = {},
              std::shared_ptr<IdleCreditSink> sink = nullptr);
    // Stops the thread; see stop().
    ~IdleProbe();
    IdleProbe(const IdleProbe&) = delete;
    IdleProbe& operator=(const IdleProbe&) = delete;

    // Asks the thread to stop and waits up to `grace` for it. A probe starved by a real-time
    // task may not run for a long time: it is then left to finish on its own, and its last
    // CPU time is what cpu_time_ns() keeps reporting.
    void stop(std::chrono::milliseconds grace = std::chrono::seconds(2));

    int cpu() const { return cpu_; }
    ProbeMode mode() const { return mode_; }
    ProbeState state() const;
    // Why the probe failed; empty otherwise.
    std::string error() const;

    // Outer loops counted while Running (spin) or wake-ups (sleep), since the start.
    std::uint64_t count() const;
    // Time of one outer loop on the unloaded CPU; nullopt until calibrated (spin only).
    std::optional<std::chrono::duration<double, std::nano>> baseline() const;
    // CPU time the thread has used so far, in nanoseconds.
    std::uint64_t cpu_time_ns() const;

  private:
    struct Shared;  // lives as long as the thread, which may outlive this object
    static void run(std::shared_ptr<Shared> s);

    int cpu_;
    ProbeMode mode_;
    std::shared_ptr<Shared> shared_;
};

}  // namespace monitor
