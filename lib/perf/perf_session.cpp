#include "monitor/perf/perf_session.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t wrap_delta(std::uint64_t now, std::uint64_t before, int width) {
    std::uint64_t d = now - before;
    return width >= 64 ? d : d & ((std::uint64_t{1} << width) - 1);
}

}  // namespace

PerfSession::PerfSession(std::unique_ptr<CounterDevice> device, SessionOptions options, Plan plan)
    : device_(std::move(device)), options_(std::move(options)), plan_(std::move(plan)) {}

PerfSession::~PerfSession() {
    for (auto& inst : instances_) close_instance(inst);
}

std::size_t PerfSession::files() const {
    std::size_t n = 0;
    for (const auto& inst : instances_) {
        for (const auto& g : inst.groups) n += g.handles.size();
    }
    return n;
}

void PerfSession::close_instance(Instance& inst) {
    for (auto& g : inst.groups) {
        for (auto it = g.handles.rbegin(); it != g.handles.rend(); ++it) device_->close(*it);
        g.handles.clear();
    }
}

Result<std::unique_ptr<PerfSession>> PerfSession::start(const EventCatalog& catalog,
                                                        std::unique_ptr<CounterDevice> device,
                                                        SessionOptions options) {
    auto plan = make_plan(catalog, options);
    if (!plan) return std::unexpected(plan.error());
    for (auto& event : plan->events) {
        if (auto r = catalog.countable(event); !r) return std::unexpected(r.error());
        if (event.module != nullptr) {
            if (auto r = event.module->place(event, options.target); !r) {
                return std::unexpected(r.error());
            }
        }
    }
    if (options.slice <= std::chrono::nanoseconds::zero()) {
        return fail(Status::BadArg, "the multiplexing slice must be longer than zero");
    }
    std::unique_ptr<PerfSession> s{
        new PerfSession(std::move(device), std::move(options), std::move(*plan))};
    if (auto r = s->open_all(); !r) return std::unexpected(r.error());
    return s;
}

Result<void> PerfSession::open_all() {
    const auto& t = options_.target;
    std::vector<OpenTarget> targets;
    switch (t.kind) {
        case TargetKind::AllCpus:
        case TargetKind::EachCpu:
        case TargetKind::OneCpu: {
            auto cpus = target_cpus(t, options_.cpus);
            if (!cpus) return std::unexpected(cpus.error());
            for (int cpu : *cpus) targets.push_back({.cpu = cpu});
            break;
        }
        case TargetKind::Process:
            if (t.pid <= 0) return fail(Status::BadArg, fmt::format("no process {}", t.pid));
            // A command launched to be counted waits for its exec with one thread; an
            // existing process has its threads opened below.
            if (t.enable_on_exec) {
                targets.push_back({.pid = t.pid, .inherit = true, .enable_on_exec = true});
            }
            break;
        case TargetKind::Thread:
            if (t.pid <= 0) return fail(Status::BadArg, fmt::format("no thread {}", t.pid));
            targets.push_back({.pid = t.pid, .inherit = true});
            break;
        case TargetKind::Cgroup: {
            auto fd = open_cgroup(options_.cgroup_root, t.cgroup);
            if (!fd) return std::unexpected(fd.error());
            cgroup_fd_ = std::move(*fd);
            for (int cpu : options_.cpus) {
                targets.push_back({.cpu = cpu, .cgroup_fd = cgroup_fd_.get()});
            }
            break;
        }
    }

    // A process and a thread are one instance of the report, whatever their threads.
    const bool task = t.kind == TargetKind::Process || t.kind == TargetKind::Thread;
    if (task) report_instances_ = {-1};
    if (t.kind == TargetKind::Process && !t.enable_on_exec) {
        const auto pids = target_processes(t);
        for (pid_t pid : pids) {
            if (pid <= 0) return fail(Status::BadArg, fmt::format("no process {}", pid));
        }
        auto tids = process_threads(pids);
        if (!tids) return std::unexpected(tids.error());
        if (auto r = open_threads(processes_text(pids), *tids); !r) return r;
    } else {
        if (targets.empty()) return fail(Status::BadArg, "no CPUs to count on");
        const std::size_t events = plan_.events.size();
        if (auto ok = options_.files.check(
                events * targets.size(),
                task ? fmt::format("counting {} event{}", events, events == 1 ? "" : "s")
                     : fmt::format("counting {} event{} on each of {} CPUs", events,
                                   events == 1 ? "" : "s", targets.size()));
            !ok) {
            return ok;
        }
        instances_.reserve(targets.size());
        for (std::size_t i = 0; i < targets.size(); ++i) {
            if (!task) report_instances_.push_back(targets[i].cpu);
            if (auto r = open_instance(targets[i], task ? 0 : i); !r) return r;
        }
        if (task) threads_ = 1;
    }

    const bool daemon_mux = options_.mux == MuxMode::Daemon;
    started_ = Clock::now();
    if (options_.target.enable_on_exec) return {};  // the kernel starts them at exec
    for (auto& inst : instances_) {
        for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
            const auto& pg = plan_.kernel_groups[g];
            if (daemon_mux && !pg.free_running() && pg.set != 0) continue;
            if (auto r = device_->enable(inst.groups[g].handles.front()); !r) return r;
        }
    }
    return {};
}

Result<void> PerfSession::open_instance(const OpenTarget& target, std::size_t report) {
    const bool daemon_mux = options_.mux == MuxMode::Daemon;
    Instance inst;
    inst.target = target;
    inst.report = report;
    inst.groups.reserve(plan_.kernel_groups.size());
    for (const auto& g : plan_.kernel_groups) {
        // Which groups count from the start: the free-running ones, and the first set of
        // each PMU (every set when the kernel multiplexes).
        const bool starts = g.free_running() || g.set == 0 || !daemon_mux;
        OpenTarget ot = target;
        ot.enable_on_exec = target.enable_on_exec && starts;
        GroupHandles& gh = inst.groups.emplace_back();
        for (const auto& m : g.members) {
            int leader = gh.handles.empty() ? -1 : gh.handles.front();
            auto h = device_->open(plan_.events[m.event], ot, leader);
            if (!h) {
                close_instance(inst);
                return std::unexpected(h.error());
            }
            gh.handles.push_back(*h);
            if (device_->width(*h) < 64) narrow_ = true;
        }
        gh.last.resize(g.members.size());
        gh.count.resize(g.members.size());
        gh.running.resize(g.members.size());
    }
    instances_.push_back(std::move(inst));
    return {};
}

// Every thread gets counters of its own, with inherit: the threads and children it starts
// afterwards count into them (the kernel adds their counts and times to its counters when
// they exit, and a read includes the ones still running).
//
// The race: a thread that a thread of the process starts during the walk, after the list was
// read and before its creator's counters are open, is counted by neither (perf stat -p has
// the same window: the time from reading /proc/PID/task to the last open, microseconds per
// thread). Walking again would find it, but could not tell it from a thread started after its
// creator's counters were open, which has inherited counters already: opening more on it
// would count it twice. So the list is read once, and the window is kept short.
Result<void> PerfSession::open_threads(const std::string& what, const std::vector<pid_t>& tids) {
    const std::size_t per_thread = plan_.events.size();
    const std::size_t needed = tids.size() * per_thread;
    if (auto ok = options_.files.check(
            needed, fmt::format("counting {} event{} on each of the {} threads of {}", per_thread,
                                per_thread == 1 ? "" : "s", tids.size(), what));
        !ok) {
        return ok;
    }
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
        needed > nofile.rlim_cur) {
        return fail(Status::IoErr,
                    fmt::format("{}: counting their {} threads takes {} file descriptors "
                                "(one per event and thread), more than this process may open "
                                "({}); raise the limit (ulimit -n, LimitNOFILE= in a unit) or "
                                "count fewer events",
                                what, tids.size(), needed, descriptor_limit()));
    }
    instances_.reserve(tids.size());
    std::size_t exited = 0;
    for (pid_t tid : tids) {
        auto r = open_instance({.pid = tid, .inherit = true}, 0);
        if (r) continue;
        // ESRCH (NODEV, as a counter on any CPU has no CPU to be missing): the thread exited
        // after the walk listed it, and has nothing left to count.
        if (r.error().status == Status::NoDev) {
            ++exited;
            continue;
        }
        return fail(r.error().status, fmt::format("{} ({} thread{}): {}", what, tids.size(),
                                                  tids.size() == 1 ? "" : "s", r.error().message));
    }
    if (instances_.empty()) {
        return fail(Status::NoDev, fmt::format("{}: no such process (the {} thread{} listed "
                                               "exited as their counters were opened)",
                                               what, exited, exited == 1 ? "" : "s"));
    }
    threads_ = static_cast<int>(instances_.size());
    return {};
}

namespace {

// Puts the calling thread on one CPU after another; at the end its affinity is what it was,
// and it stays on the CPU it reached (going back would be one more move). A CPU the thread
// may not run on is skipped: the calls then interrupt it, as without visiting.
class CpuVisit {
  public:
    CpuVisit() = default;
    ~CpuVisit() {
        if (saved_) ::sched_setaffinity(0, sizeof *saved_, &*saved_);
    }
    CpuVisit(const CpuVisit&) = delete;
    CpuVisit& operator=(const CpuVisit&) = delete;

    void go(int cpu) {
        if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == here_) return;
        if (!saved_) {
            saved_.emplace();
            if (::sched_getaffinity(0, sizeof *saved_, &*saved_) != 0) {
                saved_.reset();
                return;
            }
        }
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(static_cast<std::size_t>(cpu), &one);
        here_ = ::sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
    }

  private:
    int here_ = -1;
    std::optional<cpu_set_t> saved_;
};

}  // namespace

Result<void> PerfSession::for_each_instance(const std::function<Result<void>(Instance&)>& fn) {
    if (!options_.visit_cpus) {
        for (auto& inst : instances_) {
            if (auto r = fn(inst); !r) return r;
        }
        return {};
    }
    // The instances of the CPU the thread is on need no move: they come first. (When
    // sched_getcpu fails, none is "here": a process target's CPU is -1 too.)
    const int here = ::sched_getcpu();
    auto is_here = [here](const Instance& inst) { return here >= 0 && inst.target.cpu == here; };
    for (auto& inst : instances_) {
        if (!is_here(inst)) continue;
        if (auto r = fn(inst); !r) return r;
    }
    CpuVisit visit;
    for (auto& inst : instances_) {
        if (is_here(inst)) continue;
        visit.go(inst.target.cpu);
        if (auto r = fn(inst); !r) return r;
    }
    return {};
}

Result<void> PerfSession::set_slot_enabled(Instance& inst, int slot, bool enabled) {
    for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
        const auto& pg = plan_.kernel_groups[g];
        if (pg.free_running() || slot % pg.pmu_sets != pg.set) continue;
        // A PMU with a single set keeps counting through every slot.
        if (pg.pmu_sets == 1) continue;
        int leader = inst.groups[g].handles.front();
        auto r = enabled ? device_->enable(leader) : device_->disable(leader);
        if (!r) return r;
    }
    return {};
}

bool PerfSession::reads_group(const Plan::Group& pg, int slot) const {
    const bool daemon_mux = options_.mux == MuxMode::Daemon;
    if (slot == kAlwaysEnabled) return pg.free_running() || !daemon_mux;
    return !pg.free_running() && slot % pg.pmu_sets == pg.set;
}

Result<void> PerfSession::poll_slot(Instance& inst, int slot) {
    std::uint64_t slice_enabled = 0;
    for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
        const auto& pg = plan_.kernel_groups[g];
        if (!reads_group(pg, slot)) continue;
        auto& gh = inst.groups[g];
        readings_.resize(gh.handles.size());
        if (auto r = device_->read_group(gh.handles, readings_); !r) return r;
        for (std::size_t m = 0; m < gh.handles.size(); ++m) {
            const CounterReading& r = readings_[m];
            const int width = device_->width(gh.handles[m]);
            gh.count[m] += wrap_delta(r.value, gh.last[m].value, width);
            gh.running[m] += r.running_ns - gh.last[m].running_ns;
            if (m == 0) {
                const std::uint64_t d = r.enabled_ns - gh.last[m].enabled_ns;
                gh.enabled_ns += d;
                slice_enabled = std::max(slice_enabled, d);
            }
            gh.last[m] = r;
        }
    }
    if (slot != kAlwaysEnabled) inst.slot_enabled_ns += slice_enabled;
    return {};
}

Result<void> PerfSession::poll() {
    return for_each_instance([this](Instance& inst) { return poll_instance(inst); });
}

Result<void> PerfSession::poll_instance(Instance& inst) {
    if (auto r = poll_slot(inst, kAlwaysEnabled); !r) return r;
    if (options_.mux == MuxMode::Daemon && plan_.slots > 0) return poll_slot(inst, slot_);
    return {};
}

Result<void> PerfSession::rotate() {
    if (stopped_ || paused_ || !rotates()) return {};
    if (options_.target.enable_on_exec && !exec_seen_) {
        // Until the exec the first set waits for the kernel to start it; switching sets now
        // would count the process before its exec and leave two sets on after it.
        for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
            if (plan_.kernel_groups[g].set != 0) continue;
            auto r = device_->read(instances_.front().groups[g].handles.front());
            if (!r) return std::unexpected(r.error());
            if (r->enabled_ns == 0) return {};
            break;
        }
        exec_seen_ = true;
    }
    const int next = (slot_ + 1) % plan_.slots;
    auto r = for_each_instance([&](Instance& inst) -> Result<void> {
        if (auto s = set_slot_enabled(inst, slot_, false); !s) return s;
        if (auto s = poll_slot(inst, slot_); !s) return s;
        return set_slot_enabled(inst, next, true);
    });
    slot_ = next;
    ++rotations_;
    return r;
}

Result<void> PerfSession::pause() {
    if (stopped_ || paused_) return {};
    if (options_.target.enable_on_exec) {
        return fail(Status::BadState,
                    "a session started at an exec is not paused (the kernel enables it then)");
    }
    // Every leader off (disabling one that is off already does nothing), then what each
    // counted up to now.
    auto r = for_each_instance([this](Instance& inst) -> Result<void> {
        for (auto& gh : inst.groups) {
            if (!gh.handles.empty()) {
                if (auto d = device_->disable(gh.handles.front()); !d) return d;
            }
        }
        return poll_instance(inst);
    });
    paused_at_ = Clock::now();
    paused_ = true;
    return r;
}

Result<void> PerfSession::resume() {
    if (!paused_ || stopped_) return {};
    const bool daemon_mux = options_.mux == MuxMode::Daemon;
    auto r = for_each_instance([&](Instance& inst) -> Result<void> {
        for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
            const auto& pg = plan_.kernel_groups[g];
            // What counted before the pause: the set whose turn it is, and a PMU's only set.
            const bool on = !daemon_mux || pg.free_running() || pg.pmu_sets == 1 ||
                            slot_ % pg.pmu_sets == pg.set;
            const auto& gh = inst.groups[g];
            if (!on || gh.handles.empty()) continue;
            if (auto e = device_->enable(gh.handles.front()); !e) return e;
        }
        return {};
    });
    paused_before_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - paused_at_);
    paused_ = false;
    return r;
}

Result<void> PerfSession::stop() {
    if (stopped_) return {};
    auto r = for_each_instance([this](Instance& inst) -> Result<void> {
        for (auto& gh : inst.groups) {
            if (!gh.handles.empty()) (void)device_->disable(gh.handles.front());
        }
        return poll_instance(inst);
    });
    // After the last counter stopped: the session's time covers all of their counting, also
    // when stopping them took long (moving to a busy CPU).
    stopped_at_ = Clock::now();
    if (paused_) {
        paused_before_ +=
            std::chrono::duration_cast<std::chrono::nanoseconds>(stopped_at_ - paused_at_);
        paused_ = false;
    }
    stopped_ = true;
    return r;
}

Result<PerfReport> PerfSession::read() {
    PerfReport rep;
    if (auto r = read(rep); !r) return std::unexpected(r.error());
    return rep;
}

Result<void> PerfSession::read(PerfReport& rep) {
    if (auto r = read_raw(rep); !r) return r;
    if (baseline_) rep.subtract(*baseline_);
    return {};
}

Result<PerfReport> PerfSession::reset() {
    PerfReport raw;
    if (auto r = read_raw(raw); !r) return std::unexpected(r.error());
    PerfReport before = baseline_ ? raw.since(*baseline_) : raw;
    baseline_ = std::move(raw);
    return before;
}

Result<void> PerfSession::read_raw(PerfReport& rep) {
    if (!stopped_) {
        if (auto r = poll(); !r) return r;
    }
    // Every field is assigned; the vectors and strings keep their capacity, so reading into
    // the same report again allocates nothing.
    const bool daemon_mux = options_.mux == MuxMode::Daemon;
    const auto now = stopped_ ? stopped_at_ : Clock::now();
    rep.elapsed = now - started_;
    rep.paused = paused_before_ +
                 (paused_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(now - paused_at_)
                          : std::chrono::nanoseconds{0});
    rep.paused_at_read = paused_;
    rep.slots = plan_.slots;
    rep.rotations = rotations_;
    rep.instances.assign(report_instances_.begin(), report_instances_.end());
    rep.threads = threads_;
    rep.events.resize(plan_.events.size());
    for (std::size_t e = 0; e < plan_.events.size(); ++e) {
        EventCount& ec = rep.events[e];
        ec.name = plan_.events[e].name;
        ec.canonical = plan_.events[e].canonical;
        ec.pmu = plan_.events[e].pmu;
        ec.total = {};
        ec.per_instance.assign(report_instances_.size(), CountValue{});
        // Each instance's times are its own; adding them up (a process's threads into one
        // entry, every entry into the total) keeps running / enabled the share of the time
        // the event was counted, as the kernel does for the threads a counter inherited.
        for (const auto& inst : instances_) {
            CountValue v;
            bool counter_event = false;
            for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
                const auto& pg = plan_.kernel_groups[g];
                for (std::size_t m = 0; m < pg.members.size(); ++m) {
                    if (pg.members[m].event != e) continue;
                    const auto& gh = inst.groups[g];
                    v.count += gh.count[m];
                    v.running_ns += gh.running[m];
                    v.enabled_ns = std::max(v.enabled_ns, gh.enabled_ns);
                    counter_event = !pg.free_running();
                }
            }
            // Daemon multiplexing: enabled whenever the session counted, whichever set.
            if (counter_event && daemon_mux) v.enabled_ns = inst.slot_enabled_ns;
            v.running_ns = std::min(v.running_ns, v.enabled_ns);
            ec.per_instance[inst.report] += v;
            ec.total += v;
        }
    }
    rep.groups.resize(plan_.kernel_groups.size());
    for (std::size_t g = 0; g < plan_.kernel_groups.size(); ++g) {
        const auto& pg = plan_.kernel_groups[g];
        GroupCount& gc = rep.groups[g];
        gc.set = pg.set;
        gc.counts.assign(pg.members.size(), 0);
        gc.events.clear();
        for (const auto& m : pg.members) gc.events.push_back(m.event);
        gc.running_ns = 0;
        for (const auto& inst : instances_) {
            const auto& gh = inst.groups[g];
            for (std::size_t m = 0; m < gh.count.size(); ++m) gc.counts[m] += gh.count[m];
            if (!gh.running.empty()) gc.running_ns += gh.running.front();
        }
    }
    return {};
}

}  // namespace monitor::perf
