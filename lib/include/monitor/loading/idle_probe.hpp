// One CPU's idle probe: a thread pinned to the CPU at the lowest priority (SCHED_IDLE).
//   spin   runs idle_outer_loop() and counts the loops: the MON method of measuring loading
//   sleep  wakes ten times a second and counts the wake-ups: measures nothing, but shows that
//          the CPU still has idle time (for the watchdog)
// The thread reports its state and counters through atomics; the owner samples them.
#pragma once

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
// SCHED_OTHER or SCHED_BATCH with a nice value are accepted for systems without it.
struct ProbeThreadAttr {
    int policy = 5;  // SCHED_IDLE
    int nice = 0;    // for SCHED_OTHER and SCHED_BATCH
};

// Idle credits, the watchdog's evidence that a CPU is not starved (MON: the board resets when
// the IDLE task cannot run for 100 ms within the watchdog's 10 s). A spinning probe earns a
// credit for every kIdleCredit of CPU time its SCHED_IDLE thread gets, i.e. of time nothing
// else wanted the CPU; that idle time counts toward a credit until it is older than the
// watchdog's timeout (the sink's credit_expiry()). So a CPU earns credits at any load that
// leaves it 100 ms of idle time per timeout: up to 99 % with a 10 s timeout (1 - 0.1 s / T in
// general), one every 100 ms / idle share (2 s at 95 %, 5 s at 98 %); a CPU starved down to
// the sliver the kernel gives SCHED_IDLE (~0.4 % under a nice-0 hog: 40 ms per 10 s) earns
// none, once a credit it had under way has completed or expired (within one timeout). A
// sleeping probe earns one per wake-up.
inline constexpr std::chrono::milliseconds kIdleCredit{100};
inline constexpr std::chrono::seconds kDefaultCreditExpiry{10};

// Turns a spinning probe's CPU time into credits: update() says whether a credit is due.
// Allocation-free, for the probe's own thread.
class IdleCreditMeter {
  public:
    using Clock = std::chrono::steady_clock;
    // Idle time is kept in at most kChunks chunks: updates within expiry / kChunks of the
    // chunk they would join are added to it and take its (earlier) time, so idle time counts
    // for the expiry less at most 1/kChunks of it, never longer.
    static constexpr std::size_t kChunks = 128;

    // `cpu_ns`: the probe thread's CPU time so far (idle time: its SCHED_IDLE thread only
    // runs when nothing else wants the CPU); `now`: when it was read; `expiry`: how long idle
    // time counts toward a credit (the watchdog's timeout). True when a credit is due.
    // The idle time beyond a credit starts the next one, up to one credit's worth: a backlog
    // (a long calibration on a busy CPU, counted at the first update) pays for one more
    // credit at most, not for a credit at every update long after the CPU was starved.
    bool update(std::uint64_t cpu_ns, Clock::time_point now, std::chrono::nanoseconds expiry);

    // The idle time that counts toward the next credit (as of the last update).
    std::chrono::nanoseconds pending() const { return std::chrono::nanoseconds(sum_ns_); }

  private:
    struct Chunk {
        Clock::time_point at;  // when the first of its idle time was seen
        std::uint64_t ns = 0;
    };
    Chunk& chunk(std::size_t i) { return chunks_[(first_ + i) % kChunks]; }
    void push(Clock::time_point at, std::uint64_t ns);
    void pop();

    std::array<Chunk, kChunks> chunks_{};
    std::size_t first_ = 0;
    std::size_t size_ = 0;
    std::uint64_t sum_ns_ = 0;
    std::uint64_t last_cpu_ns_ = 0;
};

// Gets the probes' credits, from the probes' own threads (the watchdog).
class IdleCreditSink {
  public:
    virtual ~IdleCreditSink() = default;
    virtual void credit(int cpu) noexcept = 0;
    // How long idle time counts toward a credit: the watchdog's timeout. Read by the probes
    // at every update, so it may change (when the watchdog is armed and its timeout granted).
    virtual std::chrono::nanoseconds credit_expiry() const noexcept { return kDefaultCreditExpiry; }
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
    static void run(std::shared_ptr<Shared> s) noexcept;
    static void probe(Shared& s);  // run()'s work

    int cpu_;
    ProbeMode mode_;
    std::shared_ptr<Shared> shared_;
};

}  // namespace monitor
