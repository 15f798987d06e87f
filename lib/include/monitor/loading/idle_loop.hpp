// The idle probe's unit of work, as in the MON package's IDLE task: an outer loop of 10,000
// register copies. A probe thread counts outer loops; each one stands for a known amount of
// CPU time on an otherwise idle CPU (the baseline), so loops x baseline is idle time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace monitor {

inline constexpr int kInnerIterations = 10'000;

// Runs one outer loop: 10,000 copies through a register that the compiler must keep and may
// not remove. Returns the register's value so that nothing is dead code.
std::uint64_t idle_outer_loop(std::uint64_t seed) noexcept;

// Time of one outer loop on an unloaded CPU.
struct Baseline {
    std::chrono::duration<double, std::nano> per_loop{0};
    int passes = 0;  // timed passes that went into it (the first, discarded, not counted)
};

// Calibration as MON does it: time several passes, discard the first (it warms the caches),
// keep the fastest. `timed_pass` runs one pass and returns its duration and the number of
// outer loops it ran. Passes are timed until `passes` are kept or `budget` has elapsed on
// `clock`; nullopt when fewer than `min_passes` completed within the budget (the CPU was too
// busy to run the probe).
struct CalibrationPlan {
    int passes = 50;
    int min_passes = 5;
    std::chrono::nanoseconds budget = std::chrono::seconds(2);
    std::function<bool()> cancelled;  // checked between passes; stops calibration early
};
using TimedPass = std::function<std::pair<std::chrono::nanoseconds, int>()>;
std::optional<Baseline> calibrate(const TimedPass& timed_pass, const CalibrationPlan& plan,
                                  const std::function<std::chrono::steady_clock::time_point()>&
                                      clock = std::chrono::steady_clock::now);

// A pass of `loops` real outer loops timed with CLOCK_MONOTONIC.
std::pair<std::chrono::nanoseconds, int> timed_outer_loops(int loops);

}  // namespace monitor
