#include "monitor/perf/profile_session.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/utsname.h>

#include <algorithm>
#include <utility>

#include "monitor/perf/cgroup_target.hpp"
#include "monitor/perf/dwarf_unwinder.hpp"
#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

std::string dwarf_unwinding_refusal() {
    if constexpr (kUnwindRegisters == 0) {
        utsname u{};
        const std::string machine = ::uname(&u) == 0 ? u.machine : "another processor";
        return fmt::format("this library unwinds x86-64's registers only, and this is {}", machine);
    }
#if !MONITOR_HAVE_LIBDW
    return "this library was built without elfutils' libdw, which reads the call frame "
           "information";
#else
    return {};
#endif
}

Result<std::unique_ptr<ProfileSession>> ProfileSession::start(const EventCatalog& catalog,
                                                              ProfileOptions options) {
    auto event = catalog.resolve(options.event);
    if (!event) return std::unexpected(event.error());
    if (auto ok = catalog.countable(*event); !ok) return std::unexpected(ok.error());
    if (!options.no_kernel_addresses.empty() && event->module != nullptr) {
        if (auto ok = event->module->refuse_unprivileged(*event, options.no_kernel_addresses);
            !ok) {
            return std::unexpected(ok.error());
        }
    }
    const auto& t = options.target;
    if (!options.user && !options.kernel) {
        return fail(Status::BadArg, fmt::format("{}: sample user mode, kernel mode or both, not "
                                                "neither",
                                                options.event));
    }
    const bool dwarf = options.callchain && options.call_graph == CallGraph::Dwarf;
    if (dwarf) {
        if (auto why = dwarf_unwinding_refusal(); !why.empty()) {
            return fail(Status::BadArg,
                        fmt::format("call chains unwound from the sampled stack (dwarf): {}; "
                                    "frame pointers (fp) make them here",
                                    why));
        }
        if (options.user_stack == 0 || options.user_stack % 8 != 0 ||
            options.user_stack > kMaxUserStack) {
            return fail(Status::BadArg,
                        fmt::format("a user stack of {} bytes per sample: give a multiple of 8 "
                                    "from 8 to {} (default {})",
                                    options.user_stack, kMaxUserStack, kDefaultUserStack));
        }
        options.ring_pages = std::max(options.ring_pages, kDwarfRingPages);
    }
    std::unique_ptr<ProfileSession> s{new ProfileSession};
    s->event_ = std::move(*event);
    s->event_.exclude_user = s->event_.exclude_user || !options.user;
    s->event_.exclude_kernel = s->event_.exclude_kernel || !options.kernel;
    s->builder_ = std::make_unique<ProfileBuilder>(
        ProfileBuilderOptions{.by_cpu = t.kind == TargetKind::EachCpu,
                              .kept_addresses = options.kept_addresses,
                              .profile = options.profile,
                              .callchain = options.callchain,
                              .dwarf = dwarf,
                              .kernel = options.kernel,
                              .kallsyms = options.kallsyms,
                              .kernel_symbols = std::move(options.kernel_symbols)});
    const bool callchain = options.callchain && options.profile;

    auto listed = target_cpus(t, options.cpus);
    if (!listed) return std::unexpected(listed.error());
    const std::vector<int> cpus = std::move(*listed);
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
                auto tids = process_threads(target_processes(t));
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
                ? fmt::format("sampling the {} threads of {} on each of {} CPUs", per_cpu.size(),
                              processes_text(target_processes(t)), cpus.size())
                : fmt::format("sampling on {} CPU{}", cpus.size(), cpus.size() == 1 ? "" : "s"));
        !ok) {
        return std::unexpected(ok.error());
    }

    for (int cpu : cpus) {
        OpenTarget first = per_cpu.front();
        first.cpu = cpu;
        // A profile is told of the tasks' mappings, so that processes gone before their
        // samples are read are still named.
        // With dwarf chains, the kernel's chain holds its own part, and the user part is
        // unwound from the user registers and stack, as perf record --call-graph dwarf asks.
        const bool unwound = dwarf && options.profile;
        auto ring = SampleRing::open(s->event_, first, options.rate, options.ring_pages,
                                     {.callchain = callchain,
                                      .kernel_chain_only = unwound,
                                      .user_regs = unwound ? kUnwindRegisters : 0,
                                      .user_stack = unwound ? options.user_stack : 0,
                                      .tasks = options.profile});
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
    read(batch_, observer);
    builder_->add(batch_);
}

void ProfileSession::read(SampleBatch& batch, const std::function<void(const Sample&)>& observer) {
    batch.clear();
    for (std::size_t i = 0; i < rings_.size(); ++i) {
        const auto stats = rings_[i]->drain(
            [&](const Sample& sample) {
                batch.entries.push_back({sample.time_ns, true, batch.samples.size()});
                batch.keep(sample);
            },
            [&](const TaskRecord& record) {
                batch.entries.push_back({record.time_ns, false, batch.tasks.size()});
                batch.tasks.emplace_back(record, std::string(record.name));
            });
        batch.drains.emplace_back(ring_cpus_[i], stats);
    }
    // Each ring is in time order already; the rings are merged (a process's code may be
    // mapped on one CPU and sampled on another).
    if (rings_.size() > 1)
        std::ranges::stable_sort(batch.entries, {}, &SampleBatch::Entry::time_ns);
    if (!observer) return;
    for (const auto& e : batch.entries) {
        if (!e.is_sample) continue;
        auto& s = batch.samples[e.index];
        s.restore(batch);
        observer(s.sample);
    }
}

Result<void> ProfileSession::disable() {
    Result<void> result;
    if (!stopped_) {
        for (auto& ring : rings_) {
            if (auto r = ring->disable(); !r && result) result = r;
        }
        stopped_ = true;
    }
    return result;
}

Result<void> ProfileSession::pause() {
    Result<void> result;
    if (stopped_) return result;
    for (auto& ring : rings_) {
        if (auto r = ring->disable(); !r && result) result = r;
    }
    return result;
}

Result<void> ProfileSession::resume() {
    if (stopped_) return {};
    for (auto& ring : rings_) {
        if (auto r = ring->enable(); !r) return r;
    }
    return {};
}

Result<void> ProfileSession::stop(const std::function<void(const Sample&)>& observer) {
    auto result = disable();
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
