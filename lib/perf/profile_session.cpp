#include "monitor/perf/profile_session.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <utility>

#include "monitor/perf/breakpoint_pmu.hpp"
#include "monitor/perf/cgroup_target.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {

Result<std::unique_ptr<ProfileSession>> ProfileSession::start(const EventCatalog& catalog,
                                                              ProfileOptions options) {
    auto event = catalog.resolve(options.event);
    if (!event) return std::unexpected(event.error());
    if (auto ok = catalog.countable(*event); !ok) return std::unexpected(ok.error());
    if (!options.no_kernel_breakpoints.empty()) {
        if (auto ok = refuse_kernel_breakpoint(*event, options.no_kernel_breakpoints); !ok) {
            return std::unexpected(ok.error());
        }
    }
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
    s->callchain_ = options.callchain && options.profile;
    s->profile_ = s->interval_ = Profile(t.kind == TargetKind::EachCpu, options.kept_addresses);
    if (options.kernel_symbols) {
        s->names_->use_kernel(std::move(options.kernel_symbols));
    } else if (options.kernel && options.profile) {
        s->names_->load_kernel();  // before sampling starts
    }

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
    if (auto ok = options.files.check(
            cpus.size() * per_cpu.size(),
            per_cpu.size() > 1
                ? fmt::format("sampling the {} threads of process {} on each of {} CPUs",
                              per_cpu.size(), t.pid, cpus.size())
                : fmt::format("sampling on {} CPU{}", cpus.size(), cpus.size() == 1 ? "" : "s"));
        !ok) {
        return std::unexpected(ok.error());
    }

    for (int cpu : cpus) {
        OpenTarget first = per_cpu.front();
        first.cpu = cpu;
        // A profile is told of the tasks' mappings, so that processes gone before their
        // samples are read are still named.
        auto ring = SampleRing::open(s->event_, first, options.rate, options.ring_pages,
                                     {.callchain = s->callchain_, .tasks = s->profiling_});
        if (!ring) return std::unexpected(ring.error());
        for (std::size_t i = 1; i < per_cpu.size(); ++i) {
            OpenTarget other = per_cpu[i];
            other.cpu = cpu;
            auto r = (*ring)->attach(s->event_, other, options.rate);
            // A thread that ended since the list was read is not sampled; any other failure is.
            if (!r && r.error().status != Status::NoDev) return std::unexpected(r.error());
        }
        s->rings_.push_back(std::move(*ring));
        s->ring_cpus_.push_back(cpu);
    }
    if (!t.enable_on_exec) {
        for (auto& ring : s->rings_) {
            if (auto r = ring->enable(); !r) return std::unexpected(r.error());
        }
    }
    return s;
}

void ProfileSession::drain(const std::function<void(const Sample&)>& observer) {
    pending_.clear();
    samples_.clear();
    chains_.clear();
    tasks_.clear();
    for (std::size_t i = 0; i < rings_.size(); ++i) {
        const auto stats = rings_[i]->drain(
            [&](const Sample& sample) {
                pending_.push_back({sample.time_ns, true, samples_.size()});
                samples_.push_back({sample, chains_.size()});
                chains_.insert(chains_.end(), sample.callchain.begin(), sample.callchain.end());
            },
            [&](const TaskRecord& record) {
                pending_.push_back({record.time_ns, false, tasks_.size()});
                tasks_.emplace_back(record, std::string(record.name));
            });
        profile_.add(stats, ring_cpus_[i]);
        interval_.add(stats, ring_cpus_[i]);
    }
    forget();
    // Each ring is in time order already; the rings are merged.
    if (rings_.size() > 1) std::ranges::stable_sort(pending_, {}, &Pending::time_ns);
    for (const auto& p : pending_) {
        if (!p.is_sample) {
            auto& [record, name] = tasks_[p.index];
            record.name = name;
            on_task(record);
            continue;
        }
        auto& s = samples_[p.index];
        s.sample.callchain = std::span(chains_).subspan(s.chain_at, s.sample.callchain.size());
        if (observer) observer(s.sample);
        add(s.sample);
    }
}

void ProfileSession::forget() {
    // What is named is kept within bounds: the names of addresses (each process's own) and of
    // frames are dropped when they grow past kMaxNamesKept, and named again as they come.
    if (labels_.size() + frames_.size() > kMaxNamesKept) {
        labels_.clear();
        frames_.clear();
    }
    // Processes gone: once a second, what was known of them goes (AddressNames::forget_gone).
    const auto now = std::chrono::steady_clock::now();
    if (now - forgot_at_ < std::chrono::seconds(1)) return;
    forgot_at_ = now;
    names_->forget_gone();
    if (generations_.size() > kMaxNamesKept || commands_.size() > kMaxNamesKept) {
        // Every name is keyed by a pid's generation: they go together.
        labels_.clear();
        frames_.clear();
        generations_.clear();
        commands_.clear();
    }
}

void ProfileSession::on_task(const TaskRecord& r) {
    switch (r.kind) {
        case TaskRecord::Kind::Mapped:
            names_->mapped(r);
            return;
        case TaskRecord::Kind::Exec:
            names_->exec(r.pid);
            commands_[r.pid] = std::string(r.name);
            break;
        case TaskRecord::Kind::Fork:
            names_->forked(r.pid, r.parent);
            if (auto parent = commands_.find(r.parent); parent != commands_.end()) {
                commands_[r.pid] = parent->second;
            } else {
                commands_.erase(r.pid);
            }
            break;
    }
    ++generations_[r.pid];  // what was named under this pid is another program's
}

ProfileSession::LabelKey ProfileSession::key(pid_t who, std::uint64_t ip) const {
    const auto g = generations_.find(who);
    return {who, g == generations_.end() ? 0 : g->second, ip};
}

void ProfileSession::add(const Sample& sample) {
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
    auto [it, added] = labels_.try_emplace(key(who, sample.ip));
    if (added) it->second = Profile::label(sample, *names_);
    const std::string stack = callchain_ ? fold(sample) : std::string{};
    profile_.add(sample, it->second, stack);
    interval_.add(sample, it->second, stack);
    // Code mapped after the map was read is named once it is read again.
    if (it->second.object == "[unknown]") labels_.erase(it);
}

const std::string& ProfileSession::frame(const Sample& sample, SampleMode mode, std::uint64_t ip) {
    const pid_t who = mode == SampleMode::Kernel ? -1 : sample.pid;
    auto [it, added] = frames_.try_emplace(key(who, ip));
    if (!added) return it->second;
    auto label = Profile::label(sample.pid, mode, ip, *names_);
    // As add(): code not yet known is named again once it is.
    if (label.object == "[unknown]") {
        frames_.erase(it);
        unknown_frame_ = std::move(label.frame);
        return unknown_frame_;
    }
    it->second = std::move(label.frame);
    return it->second;
}

std::string ProfileSession::fold(const Sample& sample) {
    // The process's name first, as perf script and stackcollapse-perf.pl put it.
    auto [command, added] = commands_.try_emplace(sample.pid);
    if (added) {
        if (sample.pid == 0) {
            command->second = "[idle]";
        } else if (auto comm = read_text_file(fmt::format("/proc/{}/comm", sample.pid));
                   comm && !comm->empty()) {
            command->second = comm->substr(0, comm->find('\n'));
        } else {
            command->second = fmt::format("[pid {}]", sample.pid);
        }
    }
    // The chain is innermost first, in parts headed by their mode (the kernel's part, then
    // the user part that made the system call); each part's first address is where that mode
    // was, the others are return addresses, named by the call before them.
    struct Frame {
        SampleMode mode;
        std::uint64_t ip;
    };
    std::vector<Frame> frames;
    SampleMode mode = sample.mode;
    bool first = true;
    for (std::uint64_t ip : sample.callchain) {
        if (ip >= PERF_CONTEXT_MAX) {
            mode = ip == PERF_CONTEXT_KERNEL ? SampleMode::Kernel
                   : ip == PERF_CONTEXT_USER ? SampleMode::User
                                             : SampleMode::Unknown;
            first = true;
            continue;
        }
        if (mode == SampleMode::Unknown) continue;  // a guest's or hypervisor's frames
        frames.push_back({mode, first ? ip : ip - 1});
        first = false;
    }
    // A chain the kernel could not make is the sample's own address.
    if (frames.empty()) frames.push_back({sample.mode, sample.ip});
    std::string out = command->second;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
        out += ';';
        out += frame(sample, f->mode, f->ip);
    }
    return out;
}

Profile ProfileSession::take_interval() {
    return std::exchange(interval_, Profile(profile_.by_cpu(), profile_.kept_addresses()));
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

std::size_t ProfileSession::files() const {
    std::size_t n = 0;
    for (const auto& ring : rings_) n += ring->files();
    return n;
}

std::vector<int> ProfileSession::fds() const {
    std::vector<int> out;
    out.reserve(rings_.size());
    for (const auto& ring : rings_) out.push_back(ring->fd());
    return out;
}

}  // namespace monitor::perf
