// Loading measured by the idle probes. A probe runs at SCHED_IDLE, so it gets a CPU exactly
// when nothing else wants it: its CPU time over an interval is the CPU's idle time, and
// load = 100 - 100 x probe CPU time / interval.
//
// The MON package instead multiplied the probe's loop count by the loop's calibrated time,
// which is the same thing on a CPU whose speed never changes. On CPUs whose speed does change
// (frequency scaling, a hyperthread sibling, a virtual CPU sharing its host core) the loop
// time varies from second to second and that product does not measure idle time; the probe
// thread's CPU time, which the kernel keeps exactly, does. The loop count and the baseline
// are still kept (ProbeReading) and reported as the probes' diagnostics.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <vector>

#include "monitor/loading/load_source.hpp"
#include "monitor/loading/probe_set.hpp"

namespace monitor {

// Load in percent when a probe ran for `idle` of `interval`, clamped to 0-100; nullopt for
// an empty interval.
std::optional<double> probe_load(std::chrono::duration<double, std::nano> idle,
                                 std::chrono::duration<double, std::nano> interval);

class ProbeSource final : public LoadSource {
  public:
    using Clock = std::chrono::steady_clock;
    using Reader = std::function<std::vector<ProbeReading>()>;

    // `read` gives the probes' readings (ProbeSet::read); `clock` is read right after it.
    explicit ProbeSource(Reader read, std::function<Clock::time_point()> clock = Clock::now)
        : read_(std::move(read)), clock_(std::move(clock)) {}

    std::string_view name() const override { return "probe"; }

    // A CPU has a value when its probe was running at both ends of the interval (the same
    // thread, not restarted). The machine figure covers the CPUs whose probe did not fail,
    // and has a value when each of them has one.
    Result<LoadSample> sample() override;

  private:
    struct Previous {
        std::uint64_t generation = 0;
        std::uint64_t cpu_ns = 0;
        bool running = false;
    };

    Reader read_;
    std::function<Clock::time_point()> clock_;
    std::optional<Clock::time_point> last_;
    std::map<int, Previous> previous_;
};

}  // namespace monitor
