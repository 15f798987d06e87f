#include "monitor/loading/cpu_states.hpp"

#include <algorithm>
#include <cmath>

namespace monitor {

namespace {

constexpr std::array<std::string_view, kTimeStateCount> kNames = {
    "user", "nice", "system", "irq", "softirq", "iowait", "steal", "guest", "guest_nice", "idle"};

// The busy states, in the order the probes' time is taken out of them after the first one.
constexpr TimeState kBusy[] = {TimeState::User,  TimeState::Nice,     TimeState::System,
                               TimeState::Irq,   TimeState::SoftIrq,  TimeState::Steal,
                               TimeState::Guest, TimeState::GuestNice};

// A column's ticks over the interval; a column that went back counts as none.
double delta(const CpuTimes& before, const CpuTimes& after, CpuState s) {
    return after[s] >= before[s] ? static_cast<double>(after[s] - before[s]) : 0.0;
}

}  // namespace

std::span<const std::string_view> time_state_names() {
    return kNames;
}

std::string_view time_state_name(TimeState s) {
    return kNames[static_cast<std::size_t>(s)];
}

double StateTimes::total() const {
    double sum = 0;
    for (double t : ticks) sum += t;
    return sum;
}

double StateTimes::busy() const {
    return total() - (*this)[TimeState::Idle] - (*this)[TimeState::IoWait];
}

StateTimes& StateTimes::operator+=(const StateTimes& o) {
    for (std::size_t i = 0; i < kTimeStateCount; ++i) ticks[i] += o.ticks[i];
    return *this;
}

StateSeconds StateSeconds::of(const StateTimes& times, double user_hz) {
    StateSeconds s;
    if (!(user_hz > 0)) return s;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) {
        s.seconds[i] = std::max(times.ticks[i], 0.0) / user_hz;
    }
    return s;
}

StateSeconds& StateSeconds::operator+=(const StateSeconds& o) {
    for (std::size_t i = 0; i < kTimeStateCount; ++i) seconds[i] += o.seconds[i];
    return *this;
}

std::optional<StateShares> StateTimes::shares() const {
    const double sum = total();
    if (!(sum > 0)) return std::nullopt;
    StateShares s;
    for (std::size_t i = 0; i < kTimeStateCount; ++i) s.percent[i] = 100.0 * ticks[i] / sum;
    return s;
}

std::optional<double> StateTimes::load() const {
    const double sum = total();
    if (!(sum > 0)) return std::nullopt;
    return std::clamp(100.0 * busy() / sum, 0.0, 100.0);
}

void StateTimes::give_back_to_idle(double excluded, TimeState first) {
    double left = std::clamp(excluded, 0.0, busy());
    auto take = [&](TimeState s) {
        const double t = std::min(left, (*this)[s]);
        (*this)[s] -= t;
        (*this)[TimeState::Idle] += t;
        left -= t;
    };
    take(first);
    for (TimeState s : kBusy) {
        if (left <= 0) break;
        if (s != first) take(s);
    }
}

std::optional<StateTimes> state_times_between(const CpuTimes& before, const CpuTimes& after) {
    if (after.busy() < before.busy() || after.idle() < before.idle()) return std::nullopt;
    StateTimes t;
    // The kernel counts guest time in user (and guest_nice in nice) as well: taken out, so
    // that the states add up; a guest column read a moment after its user column can run
    // ahead of it, which it must not here.
    const double user = delta(before, after, CpuState::User);
    const double nice = delta(before, after, CpuState::Nice);
    t[TimeState::Guest] = std::min(delta(before, after, CpuState::Guest), user);
    t[TimeState::GuestNice] = std::min(delta(before, after, CpuState::GuestNice), nice);
    t[TimeState::User] = user - t[TimeState::Guest];
    t[TimeState::Nice] = nice - t[TimeState::GuestNice];
    t[TimeState::System] = delta(before, after, CpuState::System);
    t[TimeState::Irq] = delta(before, after, CpuState::Irq);
    t[TimeState::SoftIrq] = delta(before, after, CpuState::SoftIrq);
    t[TimeState::IoWait] = delta(before, after, CpuState::IoWait);
    t[TimeState::Steal] = delta(before, after, CpuState::Steal);
    t[TimeState::Idle] = delta(before, after, CpuState::Idle);
    if (!(t.total() > 0)) return std::nullopt;
    return t;
}

StateHistory::StateHistory(std::size_t capacity) : ring_(capacity) {}

void StateHistory::push(const std::optional<StateShares>& shares, double seconds) {
    Sample s;
    if (shares) {
        s.valid = true;
        for (std::size_t i = 0; i < kTimeStateCount; ++i) {
            const double p = shares->percent[i];
            if (!std::isfinite(p)) s.valid = false;
            s.percent[i] = static_cast<float>(std::clamp(p, 0.0, 100.0));
        }
    }
    s.seconds = std::isfinite(seconds) && seconds > 0 ? static_cast<float>(seconds) : 0.0F;
    ring_.push(s);
}

void StateHistory::resize(std::size_t capacity) {
    ring_.resize(capacity);
}

std::optional<StateStats> StateHistory::stats() const {
    StateStats st;
    std::array<double, kTimeStateCount> weighted{};
    std::array<double, kTimeStateCount> plain{};
    double weight = 0;
    for (std::size_t i = 0; i < ring_.size(); ++i) {
        const Sample& s = ring_[i];
        if (!s.valid) continue;
        for (std::size_t k = 0; k < kTimeStateCount; ++k) {
            weighted[k] += static_cast<double>(s.percent[k]) * static_cast<double>(s.seconds);
            plain[k] += static_cast<double>(s.percent[k]);
        }
        weight += static_cast<double>(s.seconds);
        ++st.samples;
    }
    if (st.samples == 0) return std::nullopt;
    // Zero-length intervals carry no weight; if all are, the plain mean.
    for (std::size_t k = 0; k < kTimeStateCount; ++k) {
        st.avg.percent[k] =
            weight > 0 ? weighted[k] / weight : plain[k] / static_cast<double>(st.samples);
    }
    st.last = newest();
    return st;
}

std::optional<StateShares> StateHistory::newest() const {
    if (ring_.size() == 0 || !ring_.newest().valid) return std::nullopt;
    StateShares last;
    for (std::size_t k = 0; k < kTimeStateCount; ++k) {
        last.percent[k] = static_cast<double>(ring_.newest().percent[k]);
    }
    return last;
}

bool StateHistory::empty_of_data() const {
    for (std::size_t i = 0; i < ring_.size(); ++i) {
        if (ring_[i].valid) return false;
    }
    return true;
}

}  // namespace monitor
