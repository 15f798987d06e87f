#include "monitor/loading/probe_set.hpp"

#include <algorithm>
#include <thread>

namespace monitor {

ProbeSet::ProbeSet(ProbeMode mode, ProbeThreadAttr attr, std::optional<std::vector<int>> only,
                   CalibrationPlan plan, std::shared_ptr<IdleCreditSink> sink)
    : mode_(mode),
      attr_(attr),
      only_(std::move(only)),
      plan_(std::move(plan)),
      sink_(std::move(sink)) {
    if (only_) std::sort(only_->begin(), only_->end());
}

ProbeSet::~ProbeSet() {
    if (!stopped_) (void)stop(std::chrono::seconds(2));
}

std::vector<int> ProbeSet::stop(std::chrono::milliseconds grace) {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    // Ask every probe to stop first, so they wind down together.
    for (auto& [cpu, slot] : probes_) (void)slot.probe->stop(std::chrono::milliseconds(0));
    const auto deadline = std::chrono::steady_clock::now() + grace;
    std::vector<int> running;
    for (auto& [cpu, slot] : probes_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (!slot.probe->stop(std::max(left, std::chrono::milliseconds(0)))) {
            running.push_back(cpu);
        }
    }
    return running;
}

void ProbeSet::set_online(const std::vector<int>& cpus) {
    if (mode_ == ProbeMode::Off) return;
    std::vector<int> wanted;
    for (int c : cpus) {
        if (!only_ || std::binary_search(only_->begin(), only_->end(), c)) wanted.push_back(c);
    }
    std::lock_guard lock(mutex_);
    for (auto it = probes_.begin(); it != probes_.end();) {
        if (std::find(wanted.begin(), wanted.end(), it->first) != wanted.end()) {
            ++it;
            continue;
        }
        it->second.probe->stop();
        retired_cpu_ns_[it->first] += it->second.probe->cpu_time_ns();
        it = probes_.erase(it);
    }
    for (int c : wanted) {
        if (probes_.contains(c)) continue;
        probes_[c] =
            Slot{std::make_unique<IdleProbe>(c, mode_, attr_, plan_, sink_), next_generation_++};
    }
}

bool ProbeSet::wait_calibrated(std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        bool pending = false;
        {
            std::lock_guard lock(mutex_);
            for (const auto& [cpu, slot] : probes_) {
                auto st = slot.probe->state();
                pending = pending || st == ProbeState::Starting || st == ProbeState::Calibrating;
            }
        }
        if (!pending) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

std::vector<ProbeReading> ProbeSet::read() const {
    std::lock_guard lock(mutex_);
    std::vector<ProbeReading> out;
    out.reserve(probes_.size());
    for (const auto& [cpu, slot] : probes_) {
        ProbeReading r;
        r.cpu = cpu;
        r.generation = slot.generation;
        r.state = slot.probe->state();
        r.count = slot.probe->count();
        r.cpu_ns = slot.probe->cpu_time_ns();
        r.baseline = slot.probe->baseline();
        if (r.state == ProbeState::Failed) r.error = slot.probe->error();
        out.push_back(std::move(r));
    }
    return out;
}

void ProbeSet::publish_idle(int cpu, std::uint64_t idle_ns,
                            std::chrono::steady_clock::time_point at) {
    std::lock_guard lock(mutex_);
    if (auto it = probes_.find(cpu); it != probes_.end())
        it->second.probe->publish_idle(idle_ns, at);
}

std::vector<std::pair<int, pid_t>> ProbeSet::thread_ids() const {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<int, pid_t>> out;
    out.reserve(probes_.size());
    for (const auto& [cpu, slot] : probes_) out.emplace_back(cpu, slot.probe->tid());
    return out;
}

std::uint64_t ProbeSet::retired_cpu_ns(int cpu) const {
    std::lock_guard lock(mutex_);
    auto it = retired_cpu_ns_.find(cpu);
    return it == retired_cpu_ns_.end() ? 0 : it->second;
}

std::uint64_t ProbeSet::excluded_cpu_ns(int cpu) const {
    std::lock_guard lock(mutex_);
    std::uint64_t ns = 0;
    if (auto it = retired_cpu_ns_.find(cpu); it != retired_cpu_ns_.end()) ns = it->second;
    if (auto it = probes_.find(cpu); it != probes_.end()) ns += it->second.probe->cpu_time_ns();
    // Never less than before: a probe's thread read while it exits may be a few microseconds
    // past the time it then records as its last.
    auto& reported = reported_cpu_ns_[cpu];
    reported = std::max(reported, ns);
    return reported;
}

}  // namespace monitor
