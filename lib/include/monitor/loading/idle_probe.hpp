// One CPU's idle probe: a thread pinned to the CPU at the lowest priority (SCHED_IDLE, nice 19).
//   spin   runs idle_outer_loop() and counts the loops: the MON method of measuring loading.
//          Its CPU time is the CPU's idle time, as long as its task group yields to every
//          other (see probe_group.hpp).
//   sleep  sleeps, and wakes when the owner publishes the CPU's idle time as the kernel counts
//          it (publish_idle(), once a second): it measures nothing and costs nothing, and
//          earns the watchdog's credits from the kernel's idle time, which no task group can
//          distort.
// The thread reports its state and counters through atomics; the owner samples them.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/enum_names.hpp"
#include "monitor/loading/idle_loop.hpp"

namespace monitor {

enum class ProbeMode : std::uint8_t { Spin, Sleep, Off };
inline constexpr std::array<EnumName<ProbeMode>, 3> kProbeModeNames{
    {{ProbeMode::Spin, "spin"}, {ProbeMode::Sleep, "sleep"}, {ProbeMode::Off, "off"}}};
std::string_view probe_mode_name(ProbeMode m) noexcept;
std::optional<ProbeMode> probe_mode_from_name(std::string_view name) noexcept;

// Scheduling of the probe threads. The default and the only sensible choice is SCHED_IDLE;
// SCHED_OTHER or SCHED_BATCH with a nice value are accepted for systems without it. The nice
// value is set for every policy: at SCHED_IDLE it changes nothing of the thread's weight, but
// the kernel books the CPU time of a task at a positive nice value as nice, not user, so that
// mpstat, top and node_exporter tell the spinning probes from real work.
struct ProbeThreadAttr {
    int policy = 5;  // SCHED_IDLE
    int nice = 19;
};

// Idle credits, the watchdog's evidence that a CPU is not starved. MON's rule: the board resets
// when the IDLE task cannot run for 100 ms within the watchdog's 10 s. A CPU earns a credit
// whenever it had at least kIdleCredit of idle time within the last timeout (the sink's
// credit_expiry()) and some idle time since the reading before (its idle task still runs).
// So a CPU keeps earning credits at any load that leaves it 100 ms of idle time per timeout:
// up to 99 % with a 10 s timeout (1 - 0.1 s / T in general). A CPU that is saturated from
// some moment on earns none from the first reading that finds no idle time since the one
// before; one whose idle share fell below 100 ms per timeout (99.6 % busy) earns none once
// the idle time it had before has left the window, within one timeout.
// The idle time is the spinning probe's CPU time (spin), or the kernel's idle and iowait time
// of the CPU (sleep).
inline constexpr std::chrono::milliseconds kIdleCredit{100};
inline constexpr std::chrono::seconds kDefaultCreditExpiry{10};

// Turns readings of a CPU's idle time into credits: update() says whether one is due.
// Allocation-free, for the probe's own thread.
class IdleCreditMeter {
  public:
    using Clock = std::chrono::steady_clock;
    // Idle time is kept in at most kChunks chunks, each the idle time between two readings,
    // taken as spread evenly over that time: so the window holds the idle time of its part of
    // a chunk. Readings within window / kChunks of the chunk they would join are added to it.
    static constexpr std::size_t kChunks = 128;

    // `idle_ns`: the CPU's idle time so far, read at `now`; `window`: how long idle time
    // counts (the watchdog's timeout). True when a credit is due. The first reading is the
    // baseline: it earns nothing.
    bool update(std::uint64_t idle_ns, Clock::time_point now, std::chrono::nanoseconds window);

    // The idle time within the window, as of the last update.
    std::chrono::nanoseconds within() const { return within_; }

  private:
    struct Chunk {
        Clock::time_point from;  // the reading before its idle time
        Clock::time_point to;    // the reading after it
        std::uint64_t ns = 0;
    };
    Chunk& chunk(std::size_t i) { return chunks_[(first_ + i) % kChunks]; }
    void push(const Chunk& c);
    void pop();

    std::array<Chunk, kChunks> chunks_{};
    std::size_t first_ = 0;
    std::size_t size_ = 0;
    std::uint64_t sum_ns_ = 0;  // of every chunk kept
    std::chrono::nanoseconds within_{0};
    std::optional<std::uint64_t> last_ns_;  // the previous reading; nullopt before the first
    Clock::time_point last_at_{};
};

// Gets the probes' credits, from the probes' own threads (the watchdog).
class IdleCreditSink {
  public:
    virtual ~IdleCreditSink() = default;
    virtual void credit(int cpu) noexcept = 0;
    // How long idle time counts toward a credit: the watchdog's timeout. Read by the probes
    // at every update, so it may change (when the watchdog is armed and its timeout granted).
    virtual std::chrono::nanoseconds credit_expiry() const noexcept { return kDefaultCreditExpiry; }
    // Whether credits are wanted now (a watchdog is armed): sleeping probes are woken with
    // the kernel's idle time only then, and otherwise cost nothing at all.
    virtual bool wants_credits() const noexcept { return true; }
};

enum class ProbeState : std::uint8_t {
    Starting,     // the thread has not set itself up yet
    Calibrating,  // timing the outer loop (spin) before counting
    Running,      // counting loops (spin), or waking at each reading of the idle time (sleep)
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
    // CPU time is what cpu_time_ns() keeps reporting. True when the thread has ended.
    bool stop(std::chrono::milliseconds grace = std::chrono::seconds(2));

    int cpu() const { return cpu_; }
    ProbeMode mode() const { return mode_; }
    ProbeState state() const;
    // Why the probe failed; empty otherwise.
    std::string error() const;

    // Outer loops counted while Running (spin) or wake-ups (sleep), since the start.
    std::uint64_t count() const;
    // Sleep mode: the CPU's idle time so far as the kernel counts it (idle and iowait), read
    // at `at`; wakes the thread, which earns its credit from it. Lock-free: a thread of any
    // priority may call it. Readings of other modes are ignored.
    void publish_idle(std::uint64_t idle_ns, std::chrono::steady_clock::time_point at);
    // Time of one outer loop on the unloaded CPU; nullopt until calibrated (spin only).
    std::optional<std::chrono::duration<double, std::nano>> baseline() const;
    // CPU time the thread has used so far, in nanoseconds.
    std::uint64_t cpu_time_ns() const;
    // The thread's kernel id; 0 before it has started and after it has exited.
    pid_t tid() const;

  private:
    struct Shared;  // lives as long as the thread, which may outlive this object
    static void run(std::shared_ptr<Shared> s) noexcept;
    static void probe(Shared& s);  // run()'s work
    static void sleep_and_credit(Shared& s);

    int cpu_;
    ProbeMode mode_;
    std::shared_ptr<Shared> shared_;
};

}  // namespace monitor
