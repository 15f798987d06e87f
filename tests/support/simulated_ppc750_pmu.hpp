// A SIMULATED PowerPC 750 performance monitor, for tests: a CounterDevice that stands in at the
// perf_event_open boundary, because no machine here has a 750 (and mainline Linux has no 750 PMU
// driver to open one with). Nothing here touches hardware or the kernel.
//
// What it models, after the MPC750 User's Manual ch. 11 and Linux's mpc7450-pmu.c /
// core-book3s.c (see /work/shared/ppc750-pmu.md):
//  - Events: PERF_TYPE_RAW only, with configs in the mpc7450 raw layout (select in bits 0-6,
//    PMC number in bits 8-10, threshold in bits 12-17), validated with decode_ppc750_raw.
//    Anything else is refused at open() with BADARG naming the event, as the kernel would refuse
//    it with EINVAL.
//  - One PMU per CPU (targets with cpu >= 0, cgroup targets included), each with 4 physical
//    32-bit counters PMC1-PMC4: read() returns values modulo 2^32 and width() is 32. Process
//    targets (cpu -1) count in a PMU context of their own, as if the process always ran, on a
//    CPU the simulation does not model otherwise. Handles are independent of each other except
//    for the groups they form and the counters they compete for on one PMU.
//  - Groups: a member must share its leader's target and exclude_user/exclude_kernel settings
//    (MMCR0's freeze bits are global), and a group must fit on the 4 counters at once (a
//    bipartite matching of its events onto counters that can hold them); otherwise opening the
//    member fails with BADARG, as power_pmu_event_init fails with EINVAL. enable(), disable()
//    and reset() act on the whole group of the handle given (PERF_IOC_FLAG_GROUP).
//  - Over-commit (more enabled groups on one PMU than its counters hold): the kernel's way, not
//    an error. enable() succeeds; groups are scheduled in the order they were enabled, each
//    placed (all events reassigned by matching, as the powerpc driver does) while it fits, and
//    scheduling stops at the first group that does not fit. A group that is enabled but not
//    scheduled accumulates enabled time and no running time and no counts. While some group
//    waits, the PMU rotates every mux interval of simulated time (4 ms by default, the kernel's
//    perf_event_mux_interval_ms at HZ=250): the first running group moves to the end of the
//    order and the PMU is scheduled again.
//  - Time: a simulated clock the test drives with advance(dt); wall time plays no part. Every
//    scheduled event counts rate x dt (see set_rate()) onto its 32-bit counter, wrapping like a
//    real PMC; enabled events get dt of enabled time, scheduled ones dt of running time too.
//    Counts are kept exactly (long double), so integral rates x times give exact counts.
//  - exclude_kernel sets MMCR0[FCS] and exclude_user MMCR0[FCP]; such events count the
//    user-mode share (set_user_share(), 0.75 by default) or the rest of the rate.
//  - reset() zeroes the group's counts but not its times (PERF_EVENT_IOC_RESET).
//  - Closing a leader turns the members still open into groups of their own, keeping their
//    enabled state (perf_group_detach).
//  - enable_on_exec leaders start at simulate_exec().
// Not modelled: sampling and the performance-monitor interrupt, overflow bits, the time base
// (TBL_TRANSITIONS counts at its rate like any other event), software events. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_spec.hpp"
#include "monitor/perf/ppc750_events.hpp"
#include "monitor/status.hpp"

namespace monitor::perf::testing {

class SimulatedPpc750Pmu final : public CounterDevice {
  public:
    // Default rates, in events per second of simulated time.
    static constexpr double kDefaultCyclesPerSecond = 200e6;        // a 200 MHz RAD750
    static constexpr double kDefaultInstructionsPerSecond = 150e6;  // INSTRUCTIONS_COMPLETED
    static constexpr double kDefaultRate = 1e6;                     // every other event
    static constexpr std::chrono::nanoseconds kDefaultMuxInterval = std::chrono::milliseconds(4);

    // MMCR0 / MMCR1 fields (LSB-0 masks), as in ppc750-pmu.md.
    static constexpr std::uint32_t kMmcr0Fc = 0x80000000;   // freeze all counters
    static constexpr std::uint32_t kMmcr0Fcs = 0x40000000;  // freeze in supervisor state
    static constexpr std::uint32_t kMmcr0Fcp = 0x20000000;  // freeze in problem (user) state
    static constexpr int kMmcr0ThresholdShift = 16;         // 6 bits
    static constexpr int kMmcr0Pmc1SelectShift = 6;         // 7 bits
    static constexpr int kMmcr0Pmc2SelectShift = 0;         // 6 bits
    static constexpr int kMmcr1Pmc3SelectShift = 27;        // 5 bits
    static constexpr int kMmcr1Pmc4SelectShift = 22;        // 5 bits

    // CPUs 0 .. cpus-1 exist; opening on another one fails with NODEV like an offline CPU.
    explicit SimulatedPpc750Pmu(int cpus = 4);
    ~SimulatedPpc750Pmu() override = default;

    // CounterDevice.
    Result<int> open(const EventSpec& event, const OpenTarget& target, int leader) override;
    Result<void> enable(int leader) override;
    Result<void> disable(int leader) override;
    Result<void> reset(int leader) override;
    Result<CounterReading> read(int handle) override;
    void close(int handle) override;
    int width(int) const override { return kPpc750CounterWidth; }

    // The simulated clock: counts and times move only here.
    void advance(std::chrono::nanoseconds dt);
    std::chrono::nanoseconds now() const { return now_; }
    // Starts every disabled group whose leader was opened with enable_on_exec.
    void simulate_exec();

    // Events per second for an event of the table, by name ("CYCLES" or "ppc750::CYCLES",
    // case-insensitive); it applies on whichever counter the event sits. NOEVENT for an unknown
    // name, BADARG for a negative or non-finite rate. Takes effect from the next advance().
    Result<void> set_rate(std::string_view event_name, double events_per_second);
    void set_rate(const Ppc750Event& event, double events_per_second);
    double rate(const Ppc750Event& event) const;
    // The same for one PMU only (a CPU, or -1 for process targets): it overrides the rate
    // above there.
    Result<void> set_rate(std::string_view event_name, double events_per_second, int cpu);
    double rate(const Ppc750Event& event, int cpu) const;
    // The share of the time spent in user mode, for events with exclude_kernel (they count
    // share x rate) or exclude_user ((1 - share) x rate); clamped to [0, 1].
    void set_user_share(double share);
    // How often an over-committed PMU rotates its groups; > 0.
    void set_mux_interval(std::chrono::nanoseconds interval);

    // Inspection.
    int open_events() const;                          // handles open now
    int enabled_groups() const;                       // enabled groups, every PMU
    int enabled_groups(int cpu) const;                // on one PMU (cpu -1: process targets)
    int running_groups(int cpu) const;                // scheduled on one PMU's counters now
    std::optional<int> counter_of(int handle) const;  // 0 = PMC1 ..; nullopt when not counting
    std::uint32_t mmcr0(int cpu) const;               // as the PMU is programmed now; FC when idle
    std::uint32_t mmcr1(int cpu) const;
    int enable_calls() const { return enable_calls_; }
    int disable_calls() const { return disable_calls_; }
    int reset_calls() const { return reset_calls_; }
    int rotations(int cpu) const;  // times the PMU rotated its groups (kernel multiplexing)

  private:
    struct Event {
        bool open = false;
        std::string name;
        std::uint64_t config = 0;
        Ppc750Raw raw;
        bool exclude_user = false;
        bool exclude_kernel = false;
        OpenTarget target;
        int pmu = -1;              // key of its PMU: the CPU, -1 for process targets
        int leader = -1;           // its group's leader (itself for a leader)
        std::vector<int> members;  // a leader's members, in open order
        bool enabled = false;      // a leader's: the group's state
        int counter = -1;          // while scheduled
        long double count = 0;     // exact, since open or reset
        std::uint64_t enabled_ns = 0;
        std::uint64_t running_ns = 0;
    };
    struct Pmu {
        std::vector<int> order;    // enabled leaders, in scheduling order
        std::vector<int> running;  // scheduled leaders
        std::chrono::nanoseconds since_rotation{0};
        int rotations = 0;
    };

    Result<int> check_handle(int handle, std::string_view what) const;
    std::vector<int> group_of(int leader) const;  // the leader, then its open members
    void schedule(int pmu);
    void run(int pmu, std::chrono::nanoseconds dt);
    void rotate(int pmu);
    bool waiting(int pmu) const;  // some enabled group is not scheduled
    double effective_rate(const Event& e) const;
    static Result<const Ppc750Event*> rate_event(std::string_view name, double rate);
    void set_enabled(int leader, bool enabled);

    int cpus_;
    std::vector<Event> events_;  // by handle
    std::map<int, Pmu> pmus_;
    std::map<const Ppc750Event*, double> rates_;
    std::map<std::pair<int, const Ppc750Event*>, double> cpu_rates_;
    double user_share_ = 0.75;
    std::chrono::nanoseconds mux_interval_ = kDefaultMuxInterval;
    std::chrono::nanoseconds now_{0};
    int enable_calls_ = 0;
    int disable_calls_ = 0;
    int reset_calls_ = 0;
};

}  // namespace monitor::perf::testing
