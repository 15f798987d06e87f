// The MON_* C API (mon.h) over the Engine: the IDLE task is the engine's spinning probes, the
// POLL task a thread that ticks the engine once a second.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "mon.h"
#include "monitor/engine.hpp"
#include "monitor/status.hpp"

namespace {

using monitor::Status;

#define MON_SAME(mon, cpp) static_assert(mon == static_cast<unsigned>(Status::cpp))
MON_SAME(MON_SUCCESS, Success);
MON_SAME(MON_ALLOCMEM, AllocMem);
MON_SAME(MON_ALLOCMTX, AllocMtx);
MON_SAME(MON_ALLOCWUT, AllocWut);
MON_SAME(MON_BADSTATE, BadState);
MON_SAME(MON_FREEMEM, FreeMem);
MON_SAME(MON_FREEMTX, FreeMtx);
MON_SAME(MON_FREEWUT, FreeWut);
MON_SAME(MON_LOCKMTX, LockMtx);
MON_SAME(MON_NOTRDY, NotRdy);
MON_SAME(MON_NULLPTR, NullPtr);
MON_SAME(MON_POLSLEEP, PolSleep);
MON_SAME(MON_PRFRUN, PrfRun);
MON_SAME(MON_TSKJOIN, TskJoin);
MON_SAME(MON_TSKSPAWN, TskSpawn);
MON_SAME(MON_NOPMU, NoPmu);
MON_SAME(MON_PERM, Perm);
MON_SAME(MON_NOEVENT, NoEvent);
MON_SAME(MON_NODEV, NoDev);
MON_SAME(MON_BUSY, Busy);
MON_SAME(MON_IOERR, IoErr);
MON_SAME(MON_BADARG, BadArg);
MON_SAME(MON_BADDATA, BadData);
static_assert(monitor::kStatusCount == MON_BADDATA + 1, "mon.h lists every status");
#undef MON_SAME

enum class State { Uninitialized, Initialized, Running };

const char* state_name(State s) {
    switch (s) {
        case State::Uninitialized:
            return "uninitialized";
        case State::Initialized:
            return "initialized";
        case State::Running:
            return "running";
    }
    return "?";
}

struct Mon {
    std::mutex api;  // one MON call at a time
    State state = State::Uninitialized;

    std::mutex data;  // the engine, shared with the POLL thread
    std::condition_variable wake;
    bool stop_poll = false;
    std::unique_ptr<monitor::Engine> engine;
    std::optional<monitor::LoadingReport> stopped;  // what MON_stop left
    std::vector<int> monitored;                     // the CPUs with a probe, as of MON_start
    std::thread poll;
};

// Never destroyed: a program may exit with MON running, and its threads must not find the
// state gone.
Mon& mon() {
    static Mon* m = new Mon;
    return *m;
}

thread_local std::string last_error;

MON_status fail(MON_status s, std::string why) {
    last_error = std::move(why);
    return s;
}

MON_status bad_state(const char* call, State now, const char* needed) {
    return fail(MON_BADSTATE,
                std::string{call} + ": MON is " + state_name(now) + "; it must be " + needed);
}

bool is_nice_policy(int policy) {
    return policy == SCHED_OTHER || policy == SCHED_BATCH;
}

MON_status check_attr(const char* task, const MON_task_attr& a, bool idle) {
    const bool rt = a.policy == SCHED_FIFO || a.policy == SCHED_RR;
    if (idle && rt) {
        return fail(MON_BADARG, std::string{task} +
                                    ": a real-time policy would let the spinning IDLE task take "
                                    "the CPU from everything else; use SCHED_IDLE");
    }
    if (!rt && !is_nice_policy(a.policy) && a.policy != SCHED_IDLE) {
        return fail(MON_BADARG,
                    std::string{task} + ": unknown scheduling policy " + std::to_string(a.policy));
    }
    if (rt && (a.priority < sched_get_priority_min(a.policy) ||
               a.priority > sched_get_priority_max(a.policy))) {
        return fail(MON_BADARG, std::string{task} + ": priority " + std::to_string(a.priority) +
                                    " is out of range for a real-time policy (1 to 99)");
    }
    if (is_nice_policy(a.policy) && (a.priority < -20 || a.priority > 19)) {
        return fail(MON_BADARG, std::string{task} + ": nice value " + std::to_string(a.priority) +
                                    " is out of range (-20 to 19)");
    }
    if (a.ncpus > 0 && a.cpus == nullptr) {
        return fail(MON_NULLPTR, std::string{task} + ": ncpus is " + std::to_string(a.ncpus) +
                                     " but cpus is NULL");
    }
    for (unsigned i = 0; i < a.ncpus; ++i) {
        if (a.cpus[i] < 0 || a.cpus[i] >= CPU_SETSIZE) {
            return fail(MON_BADARG, std::string{task} + ": no CPU " + std::to_string(a.cpus[i]));
        }
    }
    return MON_SUCCESS;
}

std::optional<std::vector<int>> cpu_list(const MON_task_attr& a) {
    if (a.ncpus == 0) return std::nullopt;
    return std::vector<int>(a.cpus, a.cpus + a.ncpus);
}

// Applies the POLL task's attributes to the calling thread; "" on success, else why not.
std::string apply_poll_attr(const MON_task_attr& a) {
    if (a.ncpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (unsigned i = 0; i < a.ncpus; ++i) CPU_SET(static_cast<std::size_t>(a.cpus[i]), &set);
        if (int r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); r != 0) {
            return std::string{"cannot set the POLL task's CPUs: "} + std::strerror(r);
        }
    }
    sched_param p{};
    p.sched_priority = is_nice_policy(a.policy) || a.policy == SCHED_IDLE ? 0 : a.priority;
    if (int r = pthread_setschedparam(pthread_self(), a.policy, &p); r != 0) {
        return std::string{"cannot set the POLL task's policy: "} + std::strerror(r) +
               (r == EPERM ? " (a real-time policy needs CAP_SYS_NICE)" : "");
    }
    if (is_nice_policy(a.policy)) {
        if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), a.priority) != 0) {
            return std::string{"cannot set the POLL task's nice value: "} + std::strerror(errno);
        }
    }
    return {};
}

void poll_loop(Mon& m) {
    using Clock = std::chrono::steady_clock;
    auto next = Clock::now() + std::chrono::seconds(1);
    std::unique_lock lock(m.data);
    while (!m.wake.wait_until(lock, next, [&] { return m.stop_poll; })) {
        auto now = Clock::now();
        (void)m.engine->tick(now);  // a failed sample is a gap in the history
        next += std::chrono::seconds(1);
        if (next <= now) next = now + std::chrono::seconds(1);  // after a stall, no burst
    }
}

MON_status fill(const char* call, const std::vector<monitor::SourceLoad>& loads, MON_loading* out) {
    const auto* probe = monitor::find_source(loads, "probe");
    if (probe == nullptr || !probe->stats) {
        return fail(MON_NOTRDY, std::string{call} +
                                    ": no loading sample yet (the first comes one second after "
                                    "MON_start)");
    }
    const auto& s = *probe->stats;
    out->avg_prev_sec = s.avg_prev_sec ? *s.avg_prev_sec : std::nan("");
    out->avg_prev_min = s.avg_prev_min;
    out->min_prev_min = s.min_prev_min;
    out->max_prev_min = s.max_prev_min;
    return MON_SUCCESS;
}

// The report MON_get_loading reads: live while running, as left by MON_stop otherwise.
std::optional<monitor::LoadingReport> current_report(Mon& m) {
    std::lock_guard lock(m.data);
    if (m.engine) return m.engine->loading({.per_cpu = true, .history = false});
    return m.stopped;
}

}  // namespace

extern "C" {

MON_status MON_initialize(void) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Uninitialized) {
        return bad_state("MON_initialize", m.state, "uninitialized (call MON_shutdown first)");
    }
    m.stopped.reset();
    m.state = State::Initialized;
    return MON_SUCCESS;
}

MON_status MON_start(const MON_task_attr* idle_attr, const MON_task_attr* poll_attr) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Initialized) {
        return bad_state("MON_start", m.state, "initialized (MON_initialize, or MON_stop)");
    }
    // NULL attributes: the IDLE task at SCHED_IDLE on every online CPU; the POLL task as the
    // caller runs (its policy and nice value are inherited, and need no privilege).
    const MON_task_attr idle = idle_attr ? *idle_attr : MON_task_attr{SCHED_IDLE, 0, nullptr, 0};
    if (auto s = check_attr("MON_start: IDLE task", idle, true); s != MON_SUCCESS) return s;
    if (poll_attr != nullptr) {
        if (auto s = check_attr("MON_start: POLL task", *poll_attr, false); s != MON_SUCCESS) {
            return s;
        }
    }

    monitor::EngineOptions options;
    options.probe = monitor::ProbeMode::Spin;
    options.probe_attr = {idle.policy, is_nice_policy(idle.policy) ? idle.priority : 0};
    options.probe_cpus = cpu_list(idle);
    auto engine = monitor::Engine::create(options, [] { return std::chrono::steady_clock::now(); });
    if (!engine) {
        return fail(static_cast<MON_status>(engine.error().status),
                    "MON_start: " + engine.error().message);
    }

    // Every requested CPU must be online, and every probe running: the IDLE task is started.
    const auto& online = (*engine)->online_cpus();
    auto require_online = [&](const char* task, const MON_task_attr& a) -> MON_status {
        for (unsigned i = 0; i < a.ncpus; ++i) {
            if (std::find(online.begin(), online.end(), a.cpus[i]) == online.end()) {
                return fail(MON_BADARG, std::string{"MON_start: "} + task + ": cpu" +
                                            std::to_string(a.cpus[i]) + " is not online");
            }
        }
        return MON_SUCCESS;
    };
    if (auto s = require_online("IDLE task", idle); s != MON_SUCCESS) return s;
    if (poll_attr != nullptr) {
        if (auto s = require_online("POLL task", *poll_attr); s != MON_SUCCESS) return s;
    }
    std::vector<int> monitored;
    for (const auto& r : (*engine)->probes()->read()) {
        if (r.state == monitor::ProbeState::Failed) {
            return fail(MON_TSKSPAWN,
                        "MON_start: IDLE task on cpu" + std::to_string(r.cpu) + ": " + r.error);
        }
        monitored.push_back(r.cpu);
    }

    {
        std::lock_guard data(m.data);
        m.engine = std::move(*engine);
        m.stop_poll = false;
    }
    auto undo = [&m](std::string why) {
        std::lock_guard data(m.data);
        m.engine.reset();
        return fail(MON_TSKSPAWN, "MON_start: " + why);
    };
    std::promise<std::string> started;
    auto ready = started.get_future();
    const std::optional<MON_task_attr> poll =
        poll_attr ? std::optional<MON_task_attr>{*poll_attr} : std::nullopt;
    try {
        m.poll = std::thread([&m, poll, &started] {
            std::string why = poll ? apply_poll_attr(*poll) : std::string{};
            const bool ok = why.empty();
            started.set_value(std::move(why));
            if (ok) poll_loop(m);
        });
    } catch (const std::system_error& e) {
        return undo(std::string{"cannot start the POLL task: "} + e.what());
    }
    if (std::string why = ready.get(); !why.empty()) {
        m.poll.join();
        return undo(why);
    }
    {
        std::lock_guard data(m.data);
        m.monitored = std::move(monitored);
    }
    m.state = State::Running;
    return MON_SUCCESS;
}

MON_status MON_stop(void) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Running) return bad_state("MON_stop", m.state, "running (MON_start)");
    {
        std::lock_guard data(m.data);
        m.stop_poll = true;
    }
    m.wake.notify_all();
    try {
        m.poll.join();
    } catch (const std::system_error& e) {
        return fail(MON_TSKJOIN, std::string{"cannot stop the POLL task: "} + e.what());
    }
    std::unique_ptr<monitor::Engine> engine;
    {
        std::lock_guard data(m.data);
        m.stopped = m.engine->loading({.per_cpu = true, .history = false});
        engine = std::move(m.engine);
    }
    engine.reset();  // stops the IDLE task's threads
    m.state = State::Initialized;
    return MON_SUCCESS;
}

MON_status MON_shutdown(void) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Initialized) {
        return bad_state("MON_shutdown", m.state,
                         m.state == State::Running ? "stopped first (MON_stop)"
                                                   : "initialized (MON_initialize)");
    }
    std::lock_guard data(m.data);
    m.stopped.reset();
    m.monitored.clear();
    m.state = State::Uninitialized;
    return MON_SUCCESS;
}

MON_status MON_get_loading(MON_loading* loading) {
    if (loading == nullptr) return fail(MON_NULLPTR, "MON_get_loading: loading is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_loading", m.state, "initialized");
    }
    auto report = current_report(m);
    if (!report) return fail(MON_NOTRDY, "MON_get_loading: MON has not been started");
    return fill("MON_get_loading", report->machine, loading);
}

MON_status MON_get_cpu_loading(int cpu, MON_loading* loading) {
    if (loading == nullptr) return fail(MON_NULLPTR, "MON_get_cpu_loading: loading is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_cpu_loading", m.state, "initialized");
    }
    auto report = current_report(m);
    if (!report) return fail(MON_NOTRDY, "MON_get_cpu_loading: MON has not been started");
    if (std::find(m.monitored.begin(), m.monitored.end(), cpu) == m.monitored.end()) {
        return fail(MON_BADARG,
                    "MON_get_cpu_loading: cpu" + std::to_string(cpu) + " is not monitored");
    }
    for (const auto& c : report->cpus) {
        if (c.cpu == cpu) return fill("MON_get_cpu_loading", c.sources, loading);
    }
    return fail(MON_BADARG, "MON_get_cpu_loading: cpu" + std::to_string(cpu) + " is not monitored");
}

const char* MON_status_name(MON_status status) {
    // The C constants' names: "MON_PRFRUN". The protocol uses the bare MSG names.
    static const auto names = [] {
        std::array<std::string, monitor::kStatusCount> n;
        for (std::size_t i = 0; i < n.size(); ++i) {
            n[i] = "MON_" + std::string{monitor::status_name(static_cast<Status>(i))};
        }
        return n;
    }();
    if (status >= monitor::kStatusCount) return "UNKNOWN";
    return names[status].c_str();
}

const char* MON_status_message(MON_status status) {
    if (status >= monitor::kStatusCount) return "Unknown status code.";
    return monitor::status_message(static_cast<Status>(status)).data();
}

const char* MON_last_error(void) {
    return last_error.c_str();
}

}  // extern "C"
