#include "monitor/perf/perf_session.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>

#include "monitor/perf/breakpoint_pmu.hpp"
#include "monitor/perf/process_symbols.hpp"

namespace monitor::perf {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::uint64_t wrap_delta(std::uint64_t now, std::uint64_t before, int width) {
    std::uint64_t d = now - before;
    return width >= 64 ? d : d & ((std::uint64_t{1} << width) - 1);
}

// The modes an event counts in, as one value: events of one set must agree on it.
unsigned mode_of(const EventSpec& e) {
    return (e.exclude_user ? 1U : 0U) | (e.exclude_kernel ? 2U : 0U) | (e.exclude_hv ? 4U : 0U);
}

}  // namespace

Result<std::vector<pid_t>> process_threads(pid_t pid) {
    const std::string dir = fmt::format("/proc/{}/task", pid);
    auto gone = [&] {
        return fail(Status::NoDev, fmt::format("process {}: no such process ({} does not exist); "
                                               "name a running process (ps -e lists them)",
                                               pid, dir));
    };
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        const int err = errno;
        if (err == ENOENT || err == ESRCH) return gone();
        if (err == EMFILE) {
            return fail(Status::IoErr, fmt::format("process {}: cannot list its threads in {}: "
                                                   "out of file descriptors ({}); raise the limit "
                                                   "or count fewer events",
                                                   pid, dir, descriptor_limit()));
        }
        return fail_errno(err, fmt::format("process {}: list its threads in {}", pid, dir));
    }
    std::vector<pid_t> tids;
    errno = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and d is ours
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        pid_t tid = 0;
        auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
        if (ec == std::errc{} && end == name.data() + name.size() && tid > 0) tids.push_back(tid);
        errno = 0;
    }
    const int err = errno;
    ::closedir(d);
    // A process that ends while its directory is read: the directory has gone.
    if (err == ENOENT || err == ESRCH || (err == 0 && tids.empty())) return gone();
    if (err != 0) return fail_errno(err, fmt::format("process {}: read {}", pid, dir));
    return tids;
}

Result<std::vector<EventRequest>> parse_event_list(std::string_view list) {
    std::vector<EventRequest> out;
    int group = kNoGroup;
    int next_group = 0;
    std::size_t group_start = 0;
    std::string_view rest = list;
    while (true) {
        rest = trim(rest);
        bool opens = !rest.empty() && rest.front() == '{';
        if (opens) {
            if (group >= 0) {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': groups cannot nest", list));
            }
            group = next_group++;
            group_start = out.size();
            rest = trim(rest.substr(1));
        }
        auto end = rest.find_first_of(",}");
        std::string_view name = trim(rest.substr(0, end));
        if (name.empty()) {
            return fail(Status::BadArg,
                        fmt::format("event list '{}': an empty event name (write names "
                                    "separated by commas, a group in braces: a,{{b,c}})",
                                    list));
        }
        out.push_back({std::string(name), group});
        if (end == std::string_view::npos) break;
        if (rest[end] == '}') {
            if (group < 0) {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': '}}' without '{{'", list));
            }
            if (out.size() - group_start < 1) {
                return fail(Status::BadArg, fmt::format("event list '{}': an empty group", list));
            }
            group = kNoGroup;
            rest = trim(rest.substr(end + 1));
            if (rest.empty()) break;
            if (rest.front() != ',') {
                return fail(Status::BadArg,
                            fmt::format("event list '{}': expected ',' after '}}'", list));
            }
            rest.remove_prefix(1);
            continue;
        }
        rest = rest.substr(end + 1);
    }
    if (group >= 0) {
        return fail(Status::BadArg, fmt::format("event list '{}': '{{' without '}}'", list));
    }
    return out;
}

namespace {

// The kernel holds a debug register for each breakpoint open on a CPU and never multiplexes
// them: a session counts at most as many at once as the machine has (the breakpoint PMU's
// counters, found when the catalog was made).
Result<void> fits_breakpoints(const EventCatalog& catalog, const std::vector<EventSpec>& events) {
    std::vector<std::string_view> names;
    for (const auto& e : events) {
        if (e.type == PERF_TYPE_BREAKPOINT) names.push_back(e.name);
    }
    const PmuInfo* pmu = catalog.find_pmu(kBreakpointPmu);
    if (names.empty() || pmu == nullptr || pmu->counters <= 0 ||
        names.size() <= static_cast<std::size_t>(pmu->counters)) {
        return {};
    }
    return fail(Status::BadArg,
                fmt::format("{} breakpoints ({}), but this machine has {} breakpoint registers "
                            "free, and a breakpoint holds one for as long as it counts (they "
                            "never take turns): count at most {} at once",
                            names.size(), fmt::join(names, ", "), pmu->counters, pmu->counters));
}

// A breakpoint named by a symbol, at the address its target has it: the running process's
// (its executable, then its shared objects), or the executable a command is about to run.
Result<void> place_symbol(EventSpec& event, const CountTarget& target) {
    if (event.bp_symbol.empty()) return {};
    Result<SymbolAddress> found = std::unexpected(Error{});
    if ((target.kind == TargetKind::Process || target.kind == TargetKind::Thread) &&
        !target.enable_on_exec) {
        found = find_process_symbol(target.pid, event.bp_symbol);
    } else if (target.enable_on_exec && !target.program.empty()) {
        found = find_program_symbol(target.program, event.bp_symbol);
    } else {
        const char* what = target.enable_on_exec               ? "a command of unknown executable"
                           : target.kind == TargetKind::Cgroup ? "a cgroup"
                                                               : "whole CPUs";
        return fail(Status::BadArg,
                    fmt::format("{}: a symbol names an address in one program, and this target "
                                "is {}: count a process (-p PID) or a command, or give the "
                                "address",
                                event.name, what));
    }
    if (!found) {
        return fail(found.error().status, fmt::format("{}: {}", event.name, found.error().message));
    }
    return place_breakpoint(event, found->address, found->object);
}

}  // namespace

bool shares_counters(const Plan& a, const Plan& b) {
    auto takes_counters = [](const Plan::Group& g) {
        return std::any_of(g.members.begin(), g.members.end(),
                           [](const Plan::Member& m) { return m.counter != kNoCounter; });
    };
    for (const auto& ga : a.kernel_groups) {
        if (!takes_counters(ga)) continue;
        for (const auto& gb : b.kernel_groups) {
            if (gb.pmu == ga.pmu && takes_counters(gb)) return true;
        }
    }
    return false;
}

Result<Plan> make_plan(const EventCatalog& catalog, const SessionOptions& options) {
    if (options.events.empty()) return fail(Status::BadArg, "no events to count");
    Plan plan;
    for (const auto& req : options.events) {
        auto spec = catalog.resolve(req.name);
        if (!spec) return std::unexpected(spec.error());
        // A budget gives the free-running events a counter too, breakpoints excepted: they
        // hold a debug register for as long as they are open, so they never take turns.
        if (options.counter_budget > 0 && spec->type != PERF_TYPE_BREAKPOINT) {
            if (spec->counters == 0) {
                spec->counters = first_counters(options.counter_budget);
                spec->counter_pmu = spec->pmu;
            } else if ((spec->counters & first_counters(options.counter_budget)) == 0) {
                return fail(Status::BadArg,
                            fmt::format("{} cannot be counted with a budget of {} counter{}: "
                                        "the counters that can hold it are outside it",
                                        spec->name, options.counter_budget,
                                        options.counter_budget == 1 ? "" : "s"));
            } else {
                spec->counters &= first_counters(options.counter_budget);
            }
        }
        if (!options.no_kernel_breakpoints.empty()) {
            if (auto ok = refuse_kernel_breakpoint(*spec, options.no_kernel_breakpoints); !ok) {
                return std::unexpected(ok.error());
            }
        }
        if (!options.user_only.empty() && !spec->exclude_kernel) {
            if (spec->exclude_user) {
                return fail(Status::Perm,
                            fmt::format("{} counts kernel mode only, and {}: count user mode "
                                        "(:u), or ask root",
                                        spec->name, options.user_only));
            }
            spec->exclude_kernel = spec->exclude_hv = true;
            spec->name += ":u";
        }
        plan.events.push_back(std::move(*spec));
        plan.requested_groups.push_back(req.group);
    }
    if (auto r = fits_breakpoints(catalog, plan.events); !r) return std::unexpected(r.error());

    // A group must live on one PMU: the kernel groups events of one PMU only (software
    // events, which count all the time anyway, excepted).
    std::map<int, std::string> group_pmu;
    std::map<int, std::size_t> group_modes;  // group -> its first counter event
    for (std::size_t i = 0; i < plan.events.size(); ++i) {
        const auto& e = plan.events[i];
        if (plan.requested_groups[i] == kNoGroup || e.counters == 0) continue;
        auto [it, fresh] = group_pmu.emplace(plan.requested_groups[i], e.counter_pmu);
        if (!fresh && it->second != e.counter_pmu) {
            return fail(Status::BadArg,
                        fmt::format("{} ({}) cannot be in one group with events of {}: a group "
                                    "counts on one PMU",
                                    e.name, e.counter_pmu, it->second));
        }
        auto [mods, first] = group_modes.emplace(plan.requested_groups[i], i);
        if (!first && mode_of(plan.events[mods->second]) != mode_of(e)) {
            return fail(Status::BadArg,
                        fmt::format("{} and {} cannot be in one group: the events of a group "
                                    "count in the same modes (give both the same :u or :k)",
                                    plan.events[mods->second].name, e.name));
        }
    }

    // Free-running events: the kernel's software events share one group, which one read
    // returns whole (they count all the time, so grouping them changes no count); any other
    // free-running event is a group of its own.
    std::optional<std::size_t> software_group;
    for (std::size_t i = 0; i < plan.events.size(); ++i) {
        if (plan.events[i].counters != 0) continue;
        const bool software = plan.events[i].type == PERF_TYPE_SOFTWARE;
        if (software && software_group) {
            plan.kernel_groups[*software_group].members.push_back({i, kNoCounter, {}});
            continue;
        }
        if (software) software_group = plan.kernel_groups.size();
        Plan::Group g;
        g.pmu = plan.events[i].pmu;
        g.members.push_back({i, kNoCounter, {}});
        plan.kernel_groups.push_back(std::move(g));
    }

    // The other events, scheduled PMU by PMU in order of first appearance.
    std::vector<std::string> pmus;
    for (const auto& e : plan.events) {
        if (e.counters != 0 && std::ranges::find(pmus, e.counter_pmu) == pmus.end()) {
            pmus.push_back(e.counter_pmu);
        }
    }
    for (const auto& pmu : pmus) {
        // The counters freeze per mode (the 750's FCS/FCP apply to all of them), so events that
        // count in different modes never share a set: each mode gets sets of its own, and
        // all the sets of the PMU take turns.
        std::vector<unsigned> modes;
        for (const auto& e : plan.events) {
            if (e.counters != 0 && e.counter_pmu == pmu &&
                std::ranges::find(modes, mode_of(e)) == modes.end()) {
                modes.push_back(mode_of(e));
            }
        }
        const std::size_t pmu_first_group = plan.kernel_groups.size();
        int pmu_sets = 0;
        for (unsigned mode : modes) {
            std::vector<std::size_t> index;
            std::vector<SchedulerEvent> request;
            for (std::size_t i = 0; i < plan.events.size(); ++i) {
                const auto& e = plan.events[i];
                if (e.counters == 0 || e.counter_pmu != pmu || mode_of(e) != mode) continue;
                index.push_back(i);
                request.push_back({e.name, e.counters, e.pinned, plan.requested_groups[i]});
            }
            int counters = 0;
            if (const PmuInfo* info = catalog.find_pmu(pmu);
                info != nullptr && info->counters > 0) {
                counters = info->counters;
            } else {
                for (const auto& r : request) {
                    counters = std::max(counters, static_cast<int>(std::bit_width(r.counters)));
                }
            }
            if (options.counter_budget > 0) counters = std::min(counters, options.counter_budget);
            if (options.counter_budget > 0 && counters == 0) counters = options.counter_budget;
            std::vector<std::string> names;
            names.reserve(static_cast<std::size_t>(counters));
            for (int c = 0; c < counters; ++c) {
                names.push_back(catalog.counter_name(pmu, c));
            }
            auto schedule = schedule_events(request, counters, names);
            if (!schedule) return std::unexpected(schedule.error());
            const int sets = static_cast<int>(schedule->sets.size());
            for (int s = 0; s < sets; ++s) {
                Plan::Group g;
                g.set = pmu_sets + s;
                g.pmu = pmu;
                for (const auto& p : schedule->sets[static_cast<std::size_t>(s)].events) {
                    g.members.push_back(
                        {index[p.event], p.counter, names[static_cast<std::size_t>(p.counter)]});
                }
                plan.kernel_groups.push_back(std::move(g));
            }
            pmu_sets += sets;
        }
        for (std::size_t g = pmu_first_group; g < plan.kernel_groups.size(); ++g) {
            plan.kernel_groups[g].pmu_sets = pmu_sets;
        }
        plan.slots = std::max(plan.slots, pmu_sets);
    }
    return plan;
}

double CountValue::scaled() const {
    if (running_ns == 0) return 0;
    if (running_ns >= enabled_ns) return static_cast<double>(count);
    return static_cast<double>(count) * static_cast<double>(enabled_ns) /
           static_cast<double>(running_ns);
}

double CountValue::running_ratio() const {
    if (enabled_ns == 0) return 1;
    return std::min(1.0, static_cast<double>(running_ns) / static_cast<double>(enabled_ns));
}

CountValue& CountValue::operator+=(const CountValue& o) {
    count += o.count;
    enabled_ns += o.enabled_ns;
    running_ns += o.running_ns;
    return *this;
}

CountValue CountValue::operator-(const CountValue& o) const {
    return {count - o.count, enabled_ns - o.enabled_ns, running_ns - o.running_ns};
}

PerfReport PerfReport::since(const PerfReport& earlier) const {
    PerfReport d = *this;
    d.subtract(earlier);
    return d;
}

void PerfReport::subtract(const PerfReport& earlier) {
    elapsed -= earlier.elapsed;
    rotations -= earlier.rotations;
    if (earlier.events.size() != events.size() || earlier.groups.size() != groups.size()) {
        return;
    }
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i].total = events[i].total - earlier.events[i].total;
        for (std::size_t k = 0;
             k < events[i].per_instance.size() && k < earlier.events[i].per_instance.size(); ++k) {
            events[i].per_instance[k] =
                events[i].per_instance[k] - earlier.events[i].per_instance[k];
        }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
        for (std::size_t k = 0; k < groups[g].counts.size() && k < earlier.groups[g].counts.size();
             ++k) {
            groups[g].counts[k] -= earlier.groups[g].counts[k];
        }
        groups[g].running_ns -= earlier.groups[g].running_ns;
    }
}

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
        if (auto r = place_symbol(event, options.target); !r) return std::unexpected(r.error());
    }
    if (options.slice <= std::chrono::nanoseconds::zero()) {
        return fail(Status::BadArg, "the multiplexing slice must be longer than zero");
    }
    std::unique_ptr<PerfSession> s{
        new PerfSession(std::move(device), std::move(options), std::move(*plan))};
    if (auto r = s->open_all(); !r) return std::unexpected(r.error());
    return s;
}

namespace {

std::string over_budget(std::size_t most, std::string_view source) {
    return fmt::format("perf_event files, more than the {} allowed ({})", most, source);
}

}  // namespace

Result<void> FileBudget::check(std::size_t needed, std::string_view what) const {
    if (most == 0 || needed <= most) return {};
    return fail(Status::BadArg, fmt::format("{} opens {} {}: measure fewer events, CPUs or threads",
                                            what, needed, over_budget(most, source)));
}

bool FileBudget::refused(const Error& e) const {
    return most > 0 && e.status == Status::BadArg &&
           e.message.find(over_budget(most, source)) != std::string::npos;
}

Result<void> PerfSession::open_all() {
    const auto& t = options_.target;
    std::vector<OpenTarget> targets;
    auto online = [&](int cpu) {
        return std::ranges::find(options_.cpus, cpu) != options_.cpus.end();
    };
    switch (t.kind) {
        case TargetKind::AllCpus:
        case TargetKind::EachCpu:
            for (int cpu : options_.cpus) targets.push_back({.cpu = cpu});
            break;
        case TargetKind::OneCpu:
            if (!online(t.cpu)) {
                return fail(Status::NoDev, fmt::format("cpu{} is not online (online: {})", t.cpu,
                                                       fmt::join(options_.cpus, ", ")));
            }
            targets.push_back({.cpu = t.cpu});
            break;
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
        auto tids = process_threads(t.pid);
        if (!tids) return std::unexpected(tids.error());
        if (auto r = open_threads(t.pid, *tids); !r) return r;
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
Result<void> PerfSession::open_threads(pid_t pid, const std::vector<pid_t>& tids) {
    const std::size_t per_thread = plan_.events.size();
    const std::size_t needed = tids.size() * per_thread;
    if (auto ok = options_.files.check(
            needed, fmt::format("counting {} event{} on each of the {} threads of process {}",
                                per_thread, per_thread == 1 ? "" : "s", tids.size(), pid));
        !ok) {
        return ok;
    }
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
        needed > nofile.rlim_cur) {
        return fail(Status::IoErr,
                    fmt::format("process {}: counting its {} threads takes {} file descriptors "
                                "(one per event and thread), more than this process may open "
                                "({}); raise the limit (ulimit -n, LimitNOFILE= in a unit) or "
                                "count fewer events",
                                pid, tids.size(), needed, descriptor_limit()));
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
        return fail(r.error().status, fmt::format("process {} ({} thread{}): {}", pid, tids.size(),
                                                  tids.size() == 1 ? "" : "s", r.error().message));
    }
    if (instances_.empty()) {
        return fail(Status::NoDev, fmt::format("process {}: no such process (its {} thread{} "
                                               "exited as its counters were opened)",
                                               pid, exited, exited == 1 ? "" : "s"));
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
    if (stopped_ || !rotates()) return {};
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
    rep.elapsed = (stopped_ ? stopped_at_ : Clock::now()) - started_;
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
