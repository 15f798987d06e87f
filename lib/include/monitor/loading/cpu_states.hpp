// Where a CPU's time went: the states /proc/stat accounts, as mpstat and sar show them (and
// what OSF/1's pfm kept as its IPL histogram). guest and guest_nice are states of their own,
// taken out of user and nice where the kernel also counts them, so that the shares of one
// interval add up to 100.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "monitor/loading/proc_stat.hpp"
#include "monitor/loading/window_ring.hpp"

namespace monitor {

enum class TimeState : std::uint8_t {
    User,       // user mode, nice <= 0 (without guest)
    Nice,       // user mode, nice > 0 (without guest_nice)
    System,     // kernel mode, not serving an interrupt
    Irq,        // serving hardware interrupts
    SoftIrq,    // serving softirqs
    IoWait,     // idle with a task waiting for I/O
    Steal,      // taken by the hypervisor for another guest
    Guest,      // running a virtual CPU of a guest
    GuestNice,  // running a virtual CPU of a guest at nice > 0
    Idle,       // idle (and the idle probes' own spinning)
};
inline constexpr std::size_t kTimeStateCount = 10;

// "user", "nice", "system", "irq", "softirq", "iowait", "steal", "guest", "guest_nice", "idle":
// the keys on the wire, in TimeState order.
std::span<const std::string_view> time_state_names();
std::string_view time_state_name(TimeState s);

// Each state's share of an interval, in percent; they add up to 100.
struct StateShares {
    std::array<double, kTimeStateCount> percent{};
    double operator[](TimeState s) const { return percent[static_cast<std::size_t>(s)]; }
    double& operator[](TimeState s) { return percent[static_cast<std::size_t>(s)]; }
};

// Time per state over an interval, in USER_HZ ticks (fractions once the idle probes' time has
// moved).
struct StateTimes {
    std::array<double, kTimeStateCount> ticks{};

    double operator[](TimeState s) const { return ticks[static_cast<std::size_t>(s)]; }
    double& operator[](TimeState s) { return ticks[static_cast<std::size_t>(s)]; }
    double total() const;
    // Everything but idle and iowait: the load.
    double busy() const;
    StateTimes& operator+=(const StateTimes& o);

    // The shares; nullopt when no time passed.
    std::optional<StateShares> shares() const;
    // 100 x busy / total; nullopt when no time passed.
    std::optional<double> load() const;

    // Moves `ticks` of CPU time (the idle probes') out of the busy state the kernel accounted
    // it to, `first` (user for a probe at nice 0, nice above it), into idle. Tick accounting
    // is coarse: what `first` lacks comes out of the other busy states, and never more than
    // the busy time.
    void give_back_to_idle(double ticks, TimeState first = TimeState::User);
};

// The times between two readings of one CPU's counters, or nullopt when the interval cannot
// be measured: no time passed, or the busy or idle time went backwards (CPU hotplug resets
// the counters). A single column that went back a little (the NO_HZ iowait accounting of some
// kernels) counts as no time in that state, as sysstat does.
std::optional<StateTimes> state_times_between(const CpuTimes& before, const CpuTimes& after);

// CPU time per state accumulated over many intervals, in seconds (the Prometheus exporter's
// counters).
struct StateSeconds {
    std::array<double, kTimeStateCount> seconds{};

    double operator[](TimeState s) const { return seconds[static_cast<std::size_t>(s)]; }
    // The times of an interval, counted in ticks of `user_hz` a second.
    static StateSeconds of(const StateTimes& times, double user_hz);
    StateSeconds& operator+=(const StateSeconds& o);
};

// Per-state statistics over the history window.
struct StateStats {
    std::optional<StateShares> last;  // the newest interval; nullopt when it was a gap
    StateShares avg;                  // time-weighted mean of the valid intervals in the window
    std::size_t samples = 0;          // valid intervals in the window
};

// A ring of per-second state shares and their statistics. A sample is 48 bytes (floats: doubles
// would take 88), so a window of an hour on 256 CPUs and the machine takes 44 MB.
class StateHistory {
  public:
    explicit StateHistory(std::size_t capacity);

    // Appends the shares of an interval lasting `seconds`; nullopt records a gap.
    void push(const std::optional<StateShares>& shares, double seconds);
    void resize(std::size_t capacity);
    // nullopt when the window holds no valid interval.
    std::optional<StateStats> stats() const;
    // The newest interval's shares; nullopt when it is a gap or there is none.
    std::optional<StateShares> newest() const;
    bool empty_of_data() const;

  private:
    struct Sample {
        std::array<float, kTimeStateCount> percent{};
        float seconds = 0;
        bool valid = false;
    };
    WindowRing<Sample> ring_;
};

}  // namespace monitor
