#include "monitor/perf/profile_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "monitor/perf/cgroup_target.hpp"

namespace monitor::perf {

Result<std::unique_ptr<ProfileSession>> ProfileSession::start(const EventCatalog& catalog,
                                                              ProfileOptions options) {
    auto event = catalog.resolve(options.event);
    if (!event) return std::unexpected(event.error());
    if (auto ok = catalog.countable(*event); !ok) return std::unexpected(ok.error());
    const auto& t = options.target;
    if (!options.user && !options.kernel) {
        return fail(Status::BadArg, fmt::format("{}: sample user mode, kernel mode or both, not "
                                                "neither",
                                                options.event));
    }
    std::unique_ptr<ProfileSession> s{new ProfileSession};
    s->event_ = std::move(*event);
    s->event_.exclude_user = s->event_.exclude_user || !options.user;
    s->event_.exclude_kernel = s->event_.exclude_kernel || !options.kernel;
    s->names_ = std::make_unique<AddressNames>(options.kallsyms);
    s->profiling_ = options.profile;
    if (options.kernel && options.profile) s->names_->load_kernel();  // before sampling starts

    std::vector<int> cpus = options.cpus;
    if (t.kind == TargetKind::OneCpu) {
        if (std::ranges::find(cpus, t.cpu) == cpus.end()) {
            return fail(Status::NoDev, fmt::format("cpu{} is not online (online: {})", t.cpu,
                                                   fmt::join(options.cpus, ", ")));
        }
        cpus = {t.cpu};
    }
    if (cpus.empty()) return fail(Status::BadArg, "no CPUs to sample on");

    // What each CPU's ring samples: its first target owns the ring, the others write into it.
    std::vector<OpenTarget> per_cpu;
    switch (t.kind) {
        case TargetKind::AllCpus:
        case TargetKind::EachCpu:
        case TargetKind::OneCpu:
            per_cpu.push_back({});
            break;
        case TargetKind::Process:
            if (t.pid <= 0) return fail(Status::BadArg, fmt::format("no process {}", t.pid));
            if (t.enable_on_exec) {
                per_cpu.push_back({.pid = t.pid, .inherit = true, .enable_on_exec = true});
            } else {
                auto tids = process_threads(t.pid);
                if (!tids) return std::unexpected(tids.error());
                for (pid_t tid : *tids) per_cpu.push_back({.pid = tid, .inherit = true});
            }
            break;
        case TargetKind::Thread:
            if (t.pid <= 0) return fail(Status::BadArg, fmt::format("no thread {}", t.pid));
            per_cpu.push_back({.pid = t.pid, .inherit = true});
            break;
        case TargetKind::Cgroup: {
            auto fd = open_cgroup(options.cgroup_root, t.cgroup);
            if (!fd) return std::unexpected(fd.error());
            s->cgroup_fd_ = std::move(*fd);
            per_cpu.push_back({.cgroup_fd = s->cgroup_fd_.get()});
            break;
        }
    }
    const bool task = t.kind == TargetKind::Process || t.kind == TargetKind::Thread;
    s->threads_ = task ? per_cpu.size() : 0;

    for (int cpu : cpus) {
        OpenTarget first = per_cpu.front();
        first.cpu = cpu;
        auto ring = SampleRing::open(s->event_, first, options.rate, options.ring_pages);
        if (!ring) return std::unexpected(ring.error());
        for (std::size_t i = 1; i < per_cpu.size(); ++i) {
            OpenTarget other = per_cpu[i];
            other.cpu = cpu;
            auto r = (*ring)->attach(s->event_, other, options.rate);
            // A thread that ended since the list was read is not sampled; any other failure is.
            if (!r && r.error().status != Status::NoDev) return std::unexpected(r.error());
        }
        s->rings_.push_back(std::move(*ring));
    }
    if (!t.enable_on_exec) {
        for (auto& ring : s->rings_) {
            if (auto r = ring->enable(); !r) return std::unexpected(r.error());
        }
    }
    return s;
}

void ProfileSession::drain(const std::function<void(const Sample&)>& observer) {
    for (auto& ring : rings_) {
        const auto stats = ring->drain([&](const Sample& sample) {
            if (observer) observer(sample);
            if (!profiling_) {
                profile_.count(sample);
                interval_.count(sample);
                return;
            }
            // Kernel code is the same in every process; user code is each process's own.
            const pid_t who = sample.pid == 0                     ? 0
                              : sample.mode == SampleMode::Kernel ? -1
                              : sample.mode == SampleMode::User   ? sample.pid
                                                                  : -2;
            auto [it, added] = labels_.try_emplace(LabelKey{who, sample.ip});
            if (added) it->second = Profile::label(sample, *names_);
            profile_.add(sample, it->second);
            interval_.add(sample, it->second);
            // Code mapped after the map was read is named once it is read again.
            if (it->second.object == "[unknown]") labels_.erase(it);
        });
        profile_.add(stats);
        interval_.add(stats);
    }
}

Profile ProfileSession::take_interval() {
    return std::exchange(interval_, Profile{});
}

Result<void> ProfileSession::stop(const std::function<void(const Sample&)>& observer) {
    Result<void> result;
    if (!stopped_) {
        for (auto& ring : rings_) {
            if (auto r = ring->disable(); !r && result) result = r;
        }
        stopped_ = true;
    }
    drain(observer);
    return result;
}

std::vector<int> ProfileSession::fds() const {
    std::vector<int> out;
    for (const auto& ring : rings_) out.push_back(ring->fd());
    return out;
}

}  // namespace monitor::perf
