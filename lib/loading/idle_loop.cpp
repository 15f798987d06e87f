#include "monitor/loading/idle_loop.hpp"

#include <algorithm>

namespace monitor {

std::uint64_t idle_outer_loop(std::uint64_t seed) noexcept {
    std::uint64_t a = seed;
    for (int i = 0; i < kInnerIterations; ++i) {
        std::uint64_t b = a;
        // The empty asm claims to read and change b in a register: the copy must happen in
        // every iteration and the loop cannot be folded away or vectorised.
        asm volatile("" : "+r"(b));
        a = b;
    }
    return a;
}

std::pair<std::chrono::nanoseconds, int> timed_outer_loops(int loops) {
    std::uint64_t v = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < loops; ++i) v = idle_outer_loop(v + static_cast<std::uint64_t>(i));
    auto t1 = std::chrono::steady_clock::now();
    asm volatile("" : : "r"(v));
    return {std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0), loops};
}

std::optional<Baseline> calibrate(
    const TimedPass& timed_pass, const CalibrationPlan& plan,
    const std::function<std::chrono::steady_clock::time_point()>& clock) {
    const auto deadline = clock() + plan.budget;
    (void)timed_pass();  // the first pass loads the caches: ignored, as MON does
    Baseline best;
    while (best.passes < plan.passes && clock() < deadline) {
        if (plan.cancelled && plan.cancelled()) return std::nullopt;
        auto [elapsed, loops] = timed_pass();
        if (loops <= 0 || elapsed.count() <= 0) continue;
        std::chrono::duration<double, std::nano> per_loop = elapsed / static_cast<double>(loops);
        if (best.passes == 0 || per_loop < best.per_loop) best.per_loop = per_loop;
        ++best.passes;
    }
    if (best.passes < plan.min_passes) return std::nullopt;
    return best;
}

}  // namespace monitor
