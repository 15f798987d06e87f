// The SIMULATED PowerPC 750 PMU for tests (see simulated_ppc750_pmu.hpp for what it models):
// raw-code validation, groups matched onto PMC1-PMC4, kernel-style scheduling and rotation of
// over-committed groups, and 32-bit counters driven by a simulated clock.
#include "simulated_ppc750_pmu.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <string>

namespace monitor::perf::testing {
namespace {

constexpr long double kNsPerSecond = 1e9L;
constexpr std::uint64_t kCounterMask = 0xFFFFFFFFULL;
constexpr long double kCountTolerance = 1e-6L;

std::string target_text(const OpenTarget& t) {
    if (t.cgroup_fd >= 0) return fmt::format("the cgroup on cpu{}", t.cpu);
    if (t.pid >= 0) {
        return t.cpu >= 0 ? fmt::format("process {} on cpu{}", t.pid, t.cpu)
                          : fmt::format("process {}", t.pid);
    }
    return fmt::format("cpu{}", t.cpu);
}

// "PMC2", "PMC1 or PMC3", "any of PMC1-PMC4".
std::string counters_text(CounterMask mask) {
    if ((mask & 0xF) == 0xF) return "any of PMC1-PMC4";
    std::string out;
    for (int c = 0; c < kPpc750Counters; ++c) {
        if ((mask & (CounterMask{1} << c)) == 0) continue;
        if (!out.empty()) out += " or ";
        out += ppc750_counter_name(c);
    }
    return out;
}

// Kuhn's augmenting paths: tries to give event `e` a counter, moving others if need be.
bool augment(std::size_t e, const std::vector<CounterMask>& masks,
             std::array<int, kPpc750Counters>& owner, std::array<bool, kPpc750Counters>& seen) {
    for (int c = 0; c < kPpc750Counters; ++c) {
        const auto ci = static_cast<std::size_t>(c);
        if ((masks[e] & (CounterMask{1} << c)) == 0 || seen[ci]) continue;
        seen[ci] = true;
        if (owner[ci] < 0 || augment(static_cast<std::size_t>(owner[ci]), masks, owner, seen)) {
            owner[ci] = static_cast<int>(e);
            return true;
        }
    }
    return false;
}

// A counter per event, each one that can hold it, no two events on one counter; nullopt when
// there is no such assignment. Deterministic: the lowest counters first, in event order.
std::optional<std::vector<int>> match(const std::vector<CounterMask>& masks) {
    if (masks.size() > static_cast<std::size_t>(kPpc750Counters)) return std::nullopt;
    std::array<int, kPpc750Counters> owner;
    owner.fill(-1);
    for (std::size_t e = 0; e < masks.size(); ++e) {
        std::array<bool, kPpc750Counters> seen{};
        if (!augment(e, masks, owner, seen)) return std::nullopt;
    }
    std::vector<int> counter(masks.size(), -1);
    for (int c = 0; c < kPpc750Counters; ++c) {
        const int e = owner[static_cast<std::size_t>(c)];
        if (e >= 0) counter[static_cast<std::size_t>(e)] = c;
    }
    return counter;
}

std::string_view strip_prefix(std::string_view name) {
    constexpr std::string_view kPrefix = "ppc750::";
    if (name.size() >= kPrefix.size()) {
        bool same = true;
        for (std::size_t i = 0; i < kPrefix.size(); ++i) {
            char c = name[i];
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
            if (c != kPrefix[i]) same = false;
        }
        if (same) name.remove_prefix(kPrefix.size());
    }
    return name;
}

}  // namespace

SimulatedPpc750Pmu::SimulatedPpc750Pmu(int cpus) : cpus_(cpus) {
    set_rate(*find_ppc750_event("CYCLES"), kDefaultCyclesPerSecond);
    set_rate(*find_ppc750_event("INSTRUCTIONS_COMPLETED"), kDefaultInstructionsPerSecond);
}

Result<int> SimulatedPpc750Pmu::check_handle(int handle, std::string_view what) const {
    if (handle < 0 || static_cast<std::size_t>(handle) >= events_.size() ||
        !events_[static_cast<std::size_t>(handle)].open) {
        return fail(Status::BadArg, fmt::format("{}: no open counter {}", what, handle));
    }
    return handle;
}

std::vector<int> SimulatedPpc750Pmu::group_of(int leader) const {
    std::vector<int> out{leader};
    const auto& l = events_[static_cast<std::size_t>(leader)];
    out.insert(out.end(), l.members.begin(), l.members.end());
    return out;
}

Result<int> SimulatedPpc750Pmu::open(const EventSpec& event, const OpenTarget& target, int leader) {
    const std::string what = fmt::format("{} on {}", event.name, target_text(target));
    if (leader >= 0) {
        if (static_cast<std::size_t>(leader) >= events_.size() ||
            !events_[static_cast<std::size_t>(leader)].open ||
            events_[static_cast<std::size_t>(leader)].leader != leader) {
            return fail(Status::BadArg,
                        fmt::format("{}: no open group leader {}", event.name, leader));
        }
    }
    if (event.type != PERF_TYPE_RAW) {
        return fail(
            Status::BadArg,
            fmt::format("{}: the (simulated) ppc750 PMU counts only raw events "
                        "(type {}), not type {} config {:#x}",
                        what, static_cast<unsigned>(PERF_TYPE_RAW), event.type, event.config));
    }
    auto raw = decode_ppc750_raw(event.config);
    if (!raw) return fail(Status::BadArg, fmt::format("{}: {}", what, raw.error().message));
    if (target.cpu < -1 || (target.cpu < 0 && target.pid < 0) ||
        (target.cgroup_fd >= 0 && target.cpu < 0)) {
        return std::unexpected(explain_open_error(EINVAL, event, target));
    }
    if (target.cpu >= cpus_) return std::unexpected(explain_open_error(ENODEV, event, target));

    Event e;
    e.open = true;
    e.name = event.name;
    e.config = event.config;
    e.raw = *raw;
    e.exclude_user = event.exclude_user;
    e.exclude_kernel = event.exclude_kernel;
    e.target = target;
    e.pmu = target.cpu >= 0 ? target.cpu : -1;

    if (leader >= 0) {
        const Event& l = events_[static_cast<std::size_t>(leader)];
        if (l.target.cpu != target.cpu || l.target.pid != target.pid ||
            l.target.cgroup_fd != target.cgroup_fd) {
            return fail(Status::BadArg,
                        fmt::format("{}: a group member must count on its leader's target ({})",
                                    what, target_text(l.target)));
        }
        if (l.exclude_user != e.exclude_user || l.exclude_kernel != e.exclude_kernel) {
            return fail(Status::BadArg,
                        fmt::format("{}: the events of a group must share their user/kernel "
                                    "modifiers (MMCR0[FCS]/[FCP] freeze every counter), but "
                                    "its leader {} has other ones",
                                    what, l.name));
        }
        std::vector<CounterMask> masks;
        std::vector<std::string> needs;
        for (int h : group_of(leader)) {
            const auto& m = events_[static_cast<std::size_t>(h)];
            masks.push_back(m.raw.counters);
            needs.push_back(fmt::format("{} needs {}", m.name, counters_text(m.raw.counters)));
        }
        masks.push_back(e.raw.counters);
        needs.push_back(fmt::format("{} needs {}", e.name, counters_text(e.raw.counters)));
        if (!match(masks)) {
            return fail(Status::BadArg,
                        fmt::format("{}: the group cannot be counted at once on the 4 counters "
                                    "PMC1-PMC4 ({})",
                                    what, fmt::join(needs, ", ")));
        }
    }

    const int handle = static_cast<int>(events_.size());
    e.leader = leader >= 0 ? leader : handle;
    events_.push_back(std::move(e));
    if (leader >= 0) {
        auto& l = events_[static_cast<std::size_t>(leader)];
        l.members.push_back(handle);
        if (l.enabled) schedule(l.pmu);
    }
    pmus_.try_emplace(events_.back().pmu);
    return handle;
}

void SimulatedPpc750Pmu::set_enabled(int leader, bool enabled) {
    auto& l = events_[static_cast<std::size_t>(leader)];
    if (l.enabled == enabled) return;
    l.enabled = enabled;
    auto& p = pmus_[l.pmu];
    if (enabled) {
        p.order.push_back(leader);
    } else {
        std::erase(p.order, leader);
    }
    schedule(l.pmu);
}

Result<void> SimulatedPpc750Pmu::enable(int leader) {
    auto h = check_handle(leader, "enable");
    if (!h) return std::unexpected(h.error());
    ++enable_calls_;
    set_enabled(events_[static_cast<std::size_t>(leader)].leader, true);
    return {};
}

Result<void> SimulatedPpc750Pmu::disable(int leader) {
    auto h = check_handle(leader, "disable");
    if (!h) return std::unexpected(h.error());
    ++disable_calls_;
    set_enabled(events_[static_cast<std::size_t>(leader)].leader, false);
    return {};
}

Result<void> SimulatedPpc750Pmu::reset(int leader) {
    auto h = check_handle(leader, "reset");
    if (!h) return std::unexpected(h.error());
    ++reset_calls_;
    for (int m : group_of(events_[static_cast<std::size_t>(leader)].leader)) {
        events_[static_cast<std::size_t>(m)].count = 0;
    }
    return {};
}

Result<CounterReading> SimulatedPpc750Pmu::read(int handle) {
    auto h = check_handle(handle, "read");
    if (!h) return std::unexpected(h.error());
    const auto& e = events_[static_cast<std::size_t>(handle)];
    CounterReading r;
    // The whole events so far; the tolerance keeps a sum of fractions that rounds to just
    // below an integer from losing an event.
    r.value = static_cast<std::uint64_t>(std::floor(e.count + kCountTolerance)) & kCounterMask;
    r.enabled_ns = e.enabled_ns;
    r.running_ns = e.running_ns;
    return r;
}

void SimulatedPpc750Pmu::close(int handle) {
    if (!check_handle(handle, "close")) return;
    auto& e = events_[static_cast<std::size_t>(handle)];
    const int pmu = e.pmu;
    if (e.leader != handle) {
        std::erase(events_[static_cast<std::size_t>(e.leader)].members, handle);
    } else {
        // The members become groups of their own, in the leader's place.
        auto& p = pmus_[pmu];
        auto at = std::ranges::find(p.order, handle);
        std::vector<int> promoted;
        for (int m : e.members) {
            auto& me = events_[static_cast<std::size_t>(m)];
            me.leader = m;
            me.enabled = e.enabled;
            if (me.enabled) promoted.push_back(m);
        }
        if (at != p.order.end()) {
            at = p.order.erase(at);
            p.order.insert(at, promoted.begin(), promoted.end());
        }
        e.members.clear();
    }
    e.open = false;
    e.enabled = false;
    e.counter = -1;
    schedule(pmu);
}

void SimulatedPpc750Pmu::schedule(int pmu) {
    auto& p = pmus_[pmu];
    for (int l : p.running) {
        for (int m : group_of(l)) events_[static_cast<std::size_t>(m)].counter = -1;
    }
    p.running.clear();
    std::vector<int> placed;
    std::vector<CounterMask> masks;
    std::vector<int> counters;
    for (int l : p.order) {
        const auto& le = events_[static_cast<std::size_t>(l)];
        if (!placed.empty()) {
            const auto& first = events_[static_cast<std::size_t>(placed.front())];
            if (first.exclude_user != le.exclude_user ||
                first.exclude_kernel != le.exclude_kernel) {
                break;
            }
        }
        auto group = group_of(l);
        auto more = masks;
        for (int m : group) more.push_back(events_[static_cast<std::size_t>(m)].raw.counters);
        auto assignment = match(more);
        if (!assignment) break;  // the kernel stops at the first group that does not fit
        placed.insert(placed.end(), group.begin(), group.end());
        masks = std::move(more);
        counters = std::move(*assignment);
        p.running.push_back(l);
    }
    for (std::size_t i = 0; i < placed.size(); ++i) {
        events_[static_cast<std::size_t>(placed[i])].counter = counters[i];
    }
}

bool SimulatedPpc750Pmu::waiting(int pmu) const {
    auto it = pmus_.find(pmu);
    return it != pmus_.end() && it->second.running.size() < it->second.order.size();
}

void SimulatedPpc750Pmu::rotate(int pmu) {
    auto& p = pmus_[pmu];
    if (p.order.empty()) return;
    const int first = p.running.empty() ? p.order.front() : p.running.front();
    std::erase(p.order, first);
    p.order.push_back(first);
    ++p.rotations;
    schedule(pmu);
}

double SimulatedPpc750Pmu::effective_rate(const Event& e) const {
    double r = rate(*e.raw.event, e.pmu);
    if (e.exclude_user && e.exclude_kernel) return 0;
    if (e.exclude_kernel) return r * user_share_;
    if (e.exclude_user) return r * (1 - user_share_);
    return r;
}

void SimulatedPpc750Pmu::run(int pmu, std::chrono::nanoseconds dt) {
    const auto ns = static_cast<std::uint64_t>(dt.count());
    for (int l : pmus_[pmu].order) {
        for (int m : group_of(l)) {
            auto& e = events_[static_cast<std::size_t>(m)];
            e.enabled_ns += ns;
            if (e.counter < 0) continue;
            e.running_ns += ns;
            e.count += static_cast<long double>(effective_rate(e)) *
                       static_cast<long double>(dt.count()) / kNsPerSecond;
        }
    }
}

void SimulatedPpc750Pmu::advance(std::chrono::nanoseconds dt) {
    if (dt <= std::chrono::nanoseconds::zero()) return;
    now_ += dt;
    for (auto& [pmu, p] : pmus_) {
        auto remaining = dt;
        while (remaining > std::chrono::nanoseconds::zero()) {
            if (!waiting(pmu)) {
                p.since_rotation = {};
                run(pmu, remaining);
                break;
            }
            if (p.since_rotation >= mux_interval_) {  // the interval was shortened
                p.since_rotation = {};
                rotate(pmu);
                continue;
            }
            const auto step = std::min(remaining, mux_interval_ - p.since_rotation);
            run(pmu, step);
            remaining -= step;
            p.since_rotation += step;
            if (p.since_rotation >= mux_interval_) {
                p.since_rotation = {};
                rotate(pmu);
            }
        }
    }
}

void SimulatedPpc750Pmu::simulate_exec() {
    for (std::size_t h = 0; h < events_.size(); ++h) {
        const auto& e = events_[h];
        if (e.open && e.leader == static_cast<int>(h) && !e.enabled && e.target.enable_on_exec) {
            set_enabled(static_cast<int>(h), true);
        }
    }
}

Result<const Ppc750Event*> SimulatedPpc750Pmu::rate_event(std::string_view name, double rate) {
    const Ppc750Event* e = find_ppc750_event(strip_prefix(name));
    if (e == nullptr) return fail(Status::NoEvent, fmt::format("no ppc750 event '{}'", name));
    if (!std::isfinite(rate) || rate < 0) {
        return fail(Status::BadArg,
                    fmt::format("{}: a rate must be finite and >= 0, not {}", name, rate));
    }
    return e;
}

Result<void> SimulatedPpc750Pmu::set_rate(std::string_view event_name, double events_per_second) {
    auto e = rate_event(event_name, events_per_second);
    if (!e) return std::unexpected(e.error());
    set_rate(**e, events_per_second);
    return {};
}

Result<void> SimulatedPpc750Pmu::set_rate(std::string_view event_name, double events_per_second,
                                          int cpu) {
    auto e = rate_event(event_name, events_per_second);
    if (!e) return std::unexpected(e.error());
    cpu_rates_[{cpu, *e}] = events_per_second;
    return {};
}

void SimulatedPpc750Pmu::set_rate(const Ppc750Event& event, double events_per_second) {
    rates_[&event] = events_per_second;
}

double SimulatedPpc750Pmu::rate(const Ppc750Event& event) const {
    auto it = rates_.find(&event);
    return it == rates_.end() ? kDefaultRate : it->second;
}

double SimulatedPpc750Pmu::rate(const Ppc750Event& event, int cpu) const {
    auto it = cpu_rates_.find({cpu, &event});
    return it == cpu_rates_.end() ? rate(event) : it->second;
}

void SimulatedPpc750Pmu::set_user_share(double share) {
    user_share_ = std::clamp(share, 0.0, 1.0);
}

void SimulatedPpc750Pmu::set_mux_interval(std::chrono::nanoseconds interval) {
    if (interval > std::chrono::nanoseconds::zero()) mux_interval_ = interval;
}

int SimulatedPpc750Pmu::open_events() const {
    return static_cast<int>(std::ranges::count_if(events_, [](const Event& e) { return e.open; }));
}

int SimulatedPpc750Pmu::enabled_groups() const {
    int n = 0;
    for (const auto& [pmu, p] : pmus_) n += static_cast<int>(p.order.size());
    return n;
}

int SimulatedPpc750Pmu::enabled_groups(int cpu) const {
    auto it = pmus_.find(cpu);
    return it == pmus_.end() ? 0 : static_cast<int>(it->second.order.size());
}

int SimulatedPpc750Pmu::running_groups(int cpu) const {
    auto it = pmus_.find(cpu);
    return it == pmus_.end() ? 0 : static_cast<int>(it->second.running.size());
}

int SimulatedPpc750Pmu::rotations(int cpu) const {
    auto it = pmus_.find(cpu);
    return it == pmus_.end() ? 0 : it->second.rotations;
}

std::optional<int> SimulatedPpc750Pmu::counter_of(int handle) const {
    if (!check_handle(handle, "counter_of")) return std::nullopt;
    const int c = events_[static_cast<std::size_t>(handle)].counter;
    if (c < 0) return std::nullopt;
    return c;
}

std::uint32_t SimulatedPpc750Pmu::mmcr0(int cpu) const {
    auto it = pmus_.find(cpu);
    if (it == pmus_.end() || it->second.running.empty()) return kMmcr0Fc;
    std::uint32_t v = 0;
    for (int l : it->second.running) {
        for (int m : group_of(l)) {
            const auto& e = events_[static_cast<std::size_t>(m)];
            const std::uint32_t select = e.raw.event->select;
            if (e.exclude_kernel) v |= kMmcr0Fcs;
            if (e.exclude_user) v |= kMmcr0Fcp;
            if (e.raw.event->uses_threshold) {
                v |= (e.raw.threshold & 0x3FU) << kMmcr0ThresholdShift;
            }
            if (e.counter == 0) v |= (select & 0x7FU) << kMmcr0Pmc1SelectShift;
            if (e.counter == 1) v |= (select & 0x3FU) << kMmcr0Pmc2SelectShift;
        }
    }
    return v;
}

std::uint32_t SimulatedPpc750Pmu::mmcr1(int cpu) const {
    auto it = pmus_.find(cpu);
    if (it == pmus_.end()) return 0;
    std::uint32_t v = 0;
    for (int l : it->second.running) {
        for (int m : group_of(l)) {
            const auto& e = events_[static_cast<std::size_t>(m)];
            const std::uint32_t select = e.raw.event->select;
            if (e.counter == 2) v |= (select & 0x1FU) << kMmcr1Pmc3SelectShift;
            if (e.counter == 3) v |= (select & 0x1FU) << kMmcr1Pmc4SelectShift;
        }
    }
    return v;
}

}  // namespace monitor::perf::testing
