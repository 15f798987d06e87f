// The MON_* C API (mon.h) over the Runtime: the IDLE task is its engine's spinning probes, the
// POLL task a thread that wakes when the runtime says (its tick, the counters' care, the end of
// a collection) and runs what is due.
//
// The rest of it lives beside this file: how a call fails (mon/mon_status), the tasks'
// attributes (mon/mon_tasks), a MON_perf_config made into a session and its counts into
// MON_perf_stats (mon/mon_counting).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mon.h"
#include "mon/mon_counting.hpp"
#include "mon/mon_status.hpp"
#include "mon/mon_tasks.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/runtime/runtime.hpp"
#include "monitor/status.hpp"
#include "monitor/watchdog/watchdog.hpp"

namespace {

using monitor::mon::fail;
using monitor::mon::fail_state;
using monitor::mon::fail_task;
using monitor::mon::guarded;
using monitor::mon::Step;

enum class State { Uninitialized, Initialized, Running, Stopping };
using Clock = std::chrono::steady_clock;

const char* state_name(State s) {
    switch (s) {
        case State::Uninitialized:
            return "uninitialized";
        case State::Initialized:
            return "initialized";
        case State::Running:
            return "running";
        case State::Stopping:
            return "stopping";
    }
    return "?";
}

unsigned bit(State s) {
    switch (s) {
        case State::Uninitialized:
            return MON_STATE_UNINITIALIZED;
        case State::Initialized:
            return MON_STATE_INITIALIZED;
        case State::Running:
            return MON_STATE_RUNNING;
        case State::Stopping:
            return MON_STATE_STOPPING;
    }
    return 0;
}

// How long MON_stop waits for each task to end.
constexpr auto kTaskStopWait = std::chrono::milliseconds(MON_TASK_STOP_MS);

// A MON_collect_perf_stats in progress: whom it tells when its run ends.
struct Collection {
    std::chrono::milliseconds duration{0};
    MON_perf_stats* out = nullptr;
    MON_perf_callback callback = nullptr;
    void* user = nullptr;
};

// A set's overflow handler (MON_set_perf_overflow).
struct Overflow {
    std::uint64_t period = 0;
    MON_perf_overflow_handler handler = nullptr;
    void* user = nullptr;
};

// An overflow to be told of, on the POLL task outside every lock.
struct OverflowCall {
    MON_perf_overflow_handler handler = nullptr;
    int set = 0;
    unsigned long long count = 0;
    void* user = nullptr;
};

// A running session's overflows of one set: its event sampled every `period` events on the
// session's target, by a sample run in the runtime.
struct OverflowWatch {
    int set = 0;
    Overflow overflow;
    monitor::Runtime::RunId run = 0;
    std::uint64_t seen = 0;
};

// How often the POLL task looks for overflows while a session has handlers: the watches' sample
// runs read their rings this often.
constexpr auto kOverflowLook = std::chrono::milliseconds(10);

struct PerfState {
    std::optional<monitor::perf::EventCatalog> catalog;  // made by the first perf call
    std::optional<monitor::Runtime::RunId> run;          // the session counting, in the runtime
    monitor::mon::EventOfSet event_of_set{};             // the session's event per set, -1 for none
    std::optional<Collection> collection;
    std::optional<MON_perf_stats> last;  // the counts of the last session that ended
    std::chrono::nanoseconds last_paused{0};  // the time the last session spent paused
    // Each set's event as the running or last session counts it (canonical); "" when unused.
    std::array<std::string, MON_PERF_SETS> counted;
    std::array<Overflow, MON_PERF_SETS> overflow{};  // the handlers, per set
    // The running session's; each read by its sample run, which adds the overflows to
    // `overflows` (under the data lock) for the POLL task to tell of.
    std::vector<std::unique_ptr<OverflowWatch>> watches;
    std::vector<OverflowCall> overflows;
};

struct Mon {
    std::mutex api;  // one MON call at a time
    State state = State::Uninitialized;

    std::mutex data;  // the runtime and the counters, shared with the POLL thread
    std::condition_variable wake;
    bool stop_poll = false;
    bool schedule_changed = false;  // the POLL thread must ask the runtime when to wake again
    std::unique_ptr<monitor::Runtime> runtime;
    std::optional<monitor::LoadingReport> stopped;  // what MON_stop left
    std::vector<int> monitored;                     // the CPUs with a probe, as of MON_start
    PerfState perf;
    std::thread poll;
    bool poll_ended = false;  // the POLL thread has left its loop (under data)
    // A MON_stop gave up waiting for the POLL task (MON_TSKJOIN): the next one waits again.
    bool poll_unjoined = false;

    // The hardware watchdog: chosen by MON_set_watchdog, armed by MON_start, left armed by
    // MON_stop (the device stays open; nothing pets it).
    std::string watchdog_device;
    std::chrono::seconds watchdog_timeout = monitor::kDefaultWatchdogTimeout;
    std::shared_ptr<monitor::watchdog::Watchdog> watchdog;
};

// Never destroyed: a program may exit with MON running, and its threads must not find the
// state gone.
Mon& mon() {
    static Mon* m = new Mon;
    return *m;
}

// `valid`: the states the call is valid in (MON_STATE_* bits); `needed` says them in words.
MON_status bad_state(const char* call, State now, unsigned valid, const char* needed) {
    return fail_state(valid, bit(now),
                      std::string{call} + ": MON is " + state_name(now) + "; it must be " + needed);
}
constexpr unsigned kInitializedOrLater =
    MON_STATE_INITIALIZED | MON_STATE_RUNNING | MON_STATE_STOPPING;

// What remains of a counting session that ended: calling its collection's callback, done
// outside every lock so that the callback may call MON. The collection's structure is filled
// before, by end_session() under the data lock, so that a caller who sees the session over
// (MON_start_perf_mon no longer MON_PRFRUN) finds the counts in it.
struct Ending {
    std::vector<OverflowCall> overflows;  // those still unseen, handed over first
    MON_status status = MON_SUCCESS;
    MON_perf_stats stats{};
    MON_perf_stats* out = nullptr;  // filled when status is MON_SUCCESS
    MON_perf_callback callback = nullptr;
    void* user = nullptr;

    void finish() {
        for (const auto& o : overflows) o.handler(o.set, o.count, o.user);
        const bool filled = status == MON_SUCCESS && out != nullptr;
        if (callback != nullptr) callback(status, filled ? out : &stats, user);
    }
};

// The overflows the running session's watches read since the last look, as calls to make;
// with `stop`, all that are left, the watches' runs ended. Under m.data.
std::vector<OverflowCall> take_overflows(Mon& m, bool stop) {
    if (stop) {
        for (const auto& w : m.perf.watches) {
            if (auto* run = m.runtime->sampling(w->run)) (void)run->finish(Clock::now());
            m.runtime->remove_sampling(w->run);
        }
    }
    return std::exchange(m.perf.overflows, {});
}

// Ends the session: stops it unless its run finished by itself (`failure`: the reason its run
// failed), reads its final counts and stores them in its collection's structure. Under m.data.
// Whatever happens, the session is gone afterwards; a failure (also for want of memory) is the
// ending's status.
Ending end_session(Mon& m, const monitor::Error* failure = nullptr) noexcept {
    auto& p = m.perf;
    Ending e;
    if (p.collection) {
        e.out = p.collection->out;
        e.callback = p.collection->callback;
        e.user = p.collection->user;
        p.collection.reset();
    }
    const auto id = *p.run;
    p.run.reset();
    m.schedule_changed = true;
    (void)guarded("the last overflows", [&] {
        e.overflows = take_overflows(m, true);
        return MON_SUCCESS;
    });
    p.watches.clear();
    p.last.reset();  // never the counts of an older session in place of these
    e.status = guarded("reading the counters", [&]() -> MON_status {
        auto* run = m.runtime->run(id);
        auto finished =
            failure != nullptr ? monitor::Result<void>{std::unexpected(*failure)} : run->finish();
        if (!finished) {
            return fail(finished.error(), "reading the counters: " + finished.error().message);
        }
        e.stats = monitor::mon::to_stats(run->totals(), p.event_of_set);
        p.last = e.stats;
        p.last_paused = run->totals().paused;
        if (e.out != nullptr) *e.out = e.stats;
        return MON_SUCCESS;
    });
    m.runtime->remove_run(id);
    return e;
}

// The POLL task: wakes when the runtime has something due (the loading tick, the counters'
// care, the end of a collection) and runs it. Nothing it runs may end the caller's program: a
// sample that fails (also for want of memory) is a gap in the history, a session whose
// counters cannot be read ends with that status in its callback.
void poll_loop(Mon& m) noexcept {
    std::unique_lock lock(m.data);
    while (!m.stop_poll) {
        m.schedule_changed = false;
        const auto wake_at = m.runtime->next_due();
        m.wake.wait_until(lock, wake_at, [&] { return m.stop_poll || m.schedule_changed; });
        if (m.stop_poll) break;
        std::optional<Ending> ending;
        std::vector<OverflowCall> overflows;
        (void)guarded("the POLL task", [&] {
            // A failed sample is a gap in the history; the watches' runs only read their rings
            // (they have neither a duration nor intervals).
            auto due = m.runtime->run_due(Clock::now());
            overflows = take_overflows(m, false);
            for (const auto& r : due.runs) {
                if (r.id != m.perf.run) continue;
                if (!r.step) {
                    ending = end_session(m, &r.step.error());
                } else if (r.step->finished) {
                    ending = end_session(m);
                }
            }
            return MON_SUCCESS;
        });
        if (ending || !overflows.empty()) {
            lock.unlock();
            for (const auto& o : overflows) o.handler(o.set, o.count, o.user);
            if (ending) ending->finish();
            lock.lock();
        }
    }
}

MON_status begin_perf(const char* call, const MON_perf_config* config,
                      std::optional<Collection> collection) {
    if (config == nullptr) return fail(MON_NULLPTR, std::string{call} + ": config is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Running) {
        return bad_state(call, m.state, MON_STATE_RUNNING,
                         "running (MON_start): the POLL task does the counting");
    }
    std::vector<int> online;
    {
        std::lock_guard data(m.data);
        if (m.perf.run) {
            return fail(MON_PRFRUN,
                        std::string{call} + ": already counting; MON_stop_perf_mon ends it");
        }
        online = m.runtime->engine().online_cpus();
    }
    if (!m.perf.catalog) {
        Step step("the event catalog");
        auto catalog = monitor::perf::EventCatalog::create();
        if (!catalog) {
            return fail(catalog.error(), std::string{call} + ": " + catalog.error().message);
        }
        m.perf.catalog.emplace(std::move(*catalog));
    }
    Step step("the counters");
    monitor::mon::EventOfSet event_of_set{};
    auto options = monitor::mon::perf_options(*m.perf.catalog, *config, online, event_of_set);
    if (!options) {
        return fail(options.error(), std::string{call} + ": " + options.error().message);
    }
    // The sets' overflow handlers: each set's event sampled on the same target.
    std::vector<std::unique_ptr<OverflowWatch>> watches;
    std::vector<std::unique_ptr<monitor::SampleRun>> runs;
    for (int set = 0; set < MON_PERF_SETS; ++set) {
        const Overflow& o = m.perf.overflow[static_cast<std::size_t>(set)];
        if (o.handler == nullptr) continue;
        Step rings("the overflow handler's ring buffers");
        const char* event = config->events[set];
        if (event == nullptr || *event == '\0') {
            return fail(MON_BADARG, std::string{call} + ": set " + std::to_string(set + 1) +
                                        " has an overflow handler and no event");
        }
        monitor::perf::ProfileOptions po{.event = event,
                                         .rate = {.period = o.period},
                                         .target = options->target,
                                         .cpus = online,
                                         .ring_pages = 16,  // read every 10 ms
                                         .profile = false};
        auto sampling = monitor::perf::ProfileSession::start(*m.perf.catalog, std::move(po));
        auto watch = std::make_unique<OverflowWatch>(OverflowWatch{set + 1, o, 0, 0});
        // Called by the run under the data lock, on the POLL task.
        auto seen = [&m, w = watch.get()](const monitor::perf::Sample&) {
            ++w->seen;
            m.perf.overflows.push_back(
                {w->overflow.handler, w->set,
                 static_cast<unsigned long long>(w->seen * w->overflow.period), w->overflow.user});
        };
        auto run = sampling
                       ? monitor::SampleRun::start(std::move(*sampling), {.drain = kOverflowLook},
                                                   Clock::now(), {}, std::move(seen))
                       : std::unexpected(sampling.error());
        if (!run) {
            return fail(run.error(), std::string{call} + ": the overflows of set " +
                                         std::to_string(set + 1) + ": " + run.error().message);
        }
        runs.push_back(std::move(*run));
        watches.push_back(std::move(watch));
    }
    auto session = monitor::perf::PerfSession::start(
        *m.perf.catalog, std::make_unique<monitor::perf::PerfEventDevice>(), std::move(*options));
    if (!session) {
        return fail(session.error(), std::string{call} + ": " + session.error().message);
    }
    std::array<std::string, MON_PERF_SETS> counted;
    for (std::size_t set = 0; set < counted.size(); ++set) {
        if (event_of_set[set] >= 0) {
            counted[set] =
                (*session)->plan().events[static_cast<std::size_t>(event_of_set[set])].canonical;
        }
    }
    monitor::CounterRunOptions run;
    if (collection) run.duration = collection->duration;
    {
        std::lock_guard data(m.data);
        m.perf.run = m.runtime->add_run(std::move(*session), run, Clock::now());
        m.perf.event_of_set = event_of_set;
        m.perf.counted = std::move(counted);
        m.perf.collection = collection;
        for (std::size_t i = 0; i < watches.size(); ++i) {
            watches[i]->run = m.runtime->add_sampling(std::move(runs[i]));
        }
        m.perf.watches = std::move(watches);
        m.perf.overflows.clear();
        m.schedule_changed = true;
    }
    m.wake.notify_all();
    return MON_SUCCESS;
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
    if (m.runtime) return m.runtime->engine().loading({.per_cpu = true, .history = false});
    return m.stopped;
}

// The bodies of the MON calls; the calls themselves, below, run them guarded.

MON_status do_initialize() {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Uninitialized) {
        return bad_state("MON_initialize", m.state, MON_STATE_UNINITIALIZED,
                         "uninitialized (call MON_shutdown first)");
    }
    m.stopped.reset();
    m.state = State::Initialized;
    return MON_SUCCESS;
}

MON_status do_start(const MON_task_attr* idle_attr, const MON_task_attr* poll_attr) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Initialized) {
        return bad_state("MON_start", m.state, MON_STATE_INITIALIZED,
                         "initialized (MON_initialize, or MON_stop)");
    }
    Step args("the tasks' attributes and the watchdog");
    // NULL attributes: the IDLE task at SCHED_IDLE on every online CPU; the POLL task as the
    // caller runs (its policy and nice value are inherited, and need no privilege).
    const MON_task_attr idle = idle_attr ? *idle_attr : MON_task_attr{SCHED_IDLE, 0, nullptr, 0};
    if (auto s = monitor::mon::check_attr("MON_start: IDLE task", idle, true); s != MON_SUCCESS)
        return s;
    if (poll_attr != nullptr) {
        if (auto s = monitor::mon::check_attr("MON_start: POLL task", *poll_attr, false);
            s != MON_SUCCESS) {
            return s;
        }
    }

    monitor::EngineOptions options;
    options.probe = monitor::ProbeMode::Spin;
    // A SCHED_IDLE IDLE task at nice 19: its CPU time is then booked as nice, not user.
    options.probe_attr = {idle.policy,
                          monitor::mon::is_nice_policy(idle.policy) ? idle.priority : 19};
    options.probe_cpus = monitor::mon::cpu_list(idle);
    if (!m.watchdog_device.empty() && !m.watchdog) {
        m.watchdog =
            std::make_shared<monitor::watchdog::Watchdog>(monitor::watchdog::PetPolicyKind::All);
    }
    Step step("the IDLE task and the loading history");
    auto runtime = monitor::Runtime::create(options, m.watchdog, [] { return Clock::now(); });
    if (!runtime) {
        return fail(runtime.error(), "MON_start: " + runtime.error().message);
    }

    // Every requested CPU must be online, and every probe running: the IDLE task is started.
    const auto& online = (*runtime)->engine().online_cpus();
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
    for (const auto& r : (*runtime)->engine().probes()->read()) {
        if (r.state == monitor::ProbeState::Failed) {
            return fail_task(
                MON_TSKSPAWN, "IDLE", r.cpu,
                "MON_start: IDLE task on cpu" + std::to_string(r.cpu) + ": " + r.error);
        }
        monitored.push_back(r.cpu);
    }
    bool armed_here = false;
    // Still armed when MON_stop left it so: the runtime's probes pet it from now on.
    if (m.watchdog && !m.watchdog->status().armed) {
        if (auto r = (*runtime)->arm_watchdog(m.watchdog_device, m.watchdog_timeout); !r) {
            return fail(r.error(), "MON_start: watchdog " + r.error().message);
        }
        armed_here = true;
    }

    {
        std::lock_guard data(m.data);
        m.runtime = std::move(*runtime);
        m.stop_poll = false;
        m.poll_ended = false;
    }
    // Until the POLL task runs, any way out (a failure or an exception) undoes the start: the
    // IDLE task stops, and a watchdog this call armed is disarmed: it must not fire for a MON
    // that never ran.
    struct Undo {
        Mon& m;
        bool armed_here;
        bool kept = false;
        ~Undo() {
            if (kept) return;
            try {
                if (armed_here) (void)m.watchdog->disarm();
            } catch (...) {  // its error message could not be made: it is disarmed all the same
            }
            std::unique_ptr<monitor::Runtime> runtime;
            {
                std::lock_guard data(m.data);
                runtime = std::move(m.runtime);
            }
        }
    } undo{m, armed_here};
    std::promise<std::string> started;
    auto ready = started.get_future();
    const std::optional<MON_task_attr> poll =
        poll_attr ? std::optional<MON_task_attr>{*poll_attr} : std::nullopt;
    Step poll_step("the POLL task");
    try {
        m.poll = std::thread([&m, poll, &started] {
            std::string why;
            try {
                if (poll) why = monitor::mon::apply_poll_attr(*poll);
            } catch (...) {
                why = "out of memory";  // short enough to need no allocation
            }
            const bool ok = why.empty();
            started.set_value(std::move(why));
            if (ok) poll_loop(m);
            {
                std::lock_guard data(m.data);
                m.poll_ended = true;
            }
            m.wake.notify_all();  // MON_stop waits for it
        });
    } catch (const std::system_error& e) {
        return fail_task(MON_TSKSPAWN, "POLL", -1,
                         std::string{"MON_start: cannot start the POLL task: "} + e.what());
    }
    if (std::string why = ready.get(); !why.empty()) {
        m.poll.join();
        return fail_task(MON_TSKSPAWN, "POLL", -1, "MON_start: " + why);
    }
    {
        std::lock_guard data(m.data);
        m.monitored = std::move(monitored);
    }
    undo.kept = true;
    m.state = State::Running;
    return MON_SUCCESS;
}

MON_status do_stop() {
    Mon& m = mon();
    {
        std::lock_guard lock(m.api);
        const bool again = m.state == State::Stopping && m.poll_unjoined;
        if (m.state != State::Running && !again) {
            return bad_state("MON_stop", m.state, MON_STATE_RUNNING,
                             "running (MON_start), or stopping after a MON_stop that returned "
                             "MON_TSKJOIN");
        }
        if (std::this_thread::get_id() == m.poll.get_id()) {
            return fail_state(MON_STATE_RUNNING, bit(m.state),
                              "MON_stop: called from a perf callback, which runs on the POLL task "
                              "that MON_stop waits for; call it from another thread");
        }
        if (again) {
            m.poll_unjoined = false;  // this call waits now; another one is refused
        } else {
            m.state = State::Stopping;
            {
                std::lock_guard data(m.data);
                m.stop_poll = true;
            }
            m.wake.notify_all();
        }
    }
    // Without the API lock: a perf callback running on the POLL task may call MON functions
    // (they see the state "stopping"). A callback that does not return keeps the POLL task: MON
    // stays stopping, and the next MON_stop waits again.
    bool ended = false;
    {
        std::unique_lock data(m.data);
        ended = m.wake.wait_for(data, kTaskStopWait, [&] { return m.poll_ended; });
    }
    std::thread poll;
    {
        std::lock_guard lock(m.api);
        if (!ended) {
            m.poll_unjoined = true;
            return fail_task(MON_TSKJOIN, "POLL", -1,
                             "MON_stop: the POLL task has not ended within " +
                                 std::to_string(kTaskStopWait.count()) +
                                 " ms: a perf callback or overflow handler it runs has not "
                                 "returned. MON stays stopping; call MON_stop again once it has");
        }
        poll = std::move(m.poll);
    }
    // It has left its loop: join() returns at once, and cannot fail (joinable, not this thread).
    poll.join();

    Ending ending;
    bool counting = false;
    MON_status kept = MON_SUCCESS;
    std::vector<int> unstopped;
    {
        std::lock_guard lock(m.api);
        std::unique_ptr<monitor::Runtime> runtime;
        {
            std::lock_guard data(m.data);
            if (m.perf.run) {
                ending = end_session(m);
                counting = true;
            }
            // MON stops all the same when the loading cannot be kept (no memory).
            m.stopped.reset();
            kept = guarded("MON_stop: keeping the loading as it was", [&] {
                Step keep("the loading kept as it was");
                m.stopped = m.runtime->engine().loading({.per_cpu = true, .history = false});
                return MON_SUCCESS;
            });
            runtime = std::move(m.runtime);
        }
        // The IDLE task's threads: a starved one is left to end when it next runs.
        unstopped = runtime->engine().stop_probes(kTaskStopWait);
        runtime.reset();
        m.state = State::Initialized;
    }
    if (counting) ending.finish();
    if (!unstopped.empty()) {
        std::string cpus;
        for (int c : unstopped) cpus += (cpus.empty() ? "cpu" : ", cpu") + std::to_string(c);
        return fail_task(MON_TSKJOIN, "IDLE", unstopped.front(),
                         "MON_stop: MON is stopped, but the IDLE task's thread on " + cpus +
                             " has not ended within " + std::to_string(kTaskStopWait.count()) +
                             " ms: it gets no CPU time (a real-time task takes its CPU, or it "
                             "is frozen), and ends by itself when it next runs");
    }
    return kept;
}

MON_status do_shutdown() {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Initialized) {
        return bad_state("MON_shutdown", m.state, MON_STATE_INITIALIZED,
                         m.state == State::Running ? "stopped first (MON_stop)"
                                                   : "initialized (MON_initialize)");
    }
    std::lock_guard data(m.data);
    m.stopped.reset();
    m.monitored.clear();
    m.perf.last.reset();
    m.perf.counted = {};
    m.perf.overflow = {};
    m.state = State::Uninitialized;
    return MON_SUCCESS;
}

MON_status do_set_watchdog(const char* device, unsigned int timeout_s) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state != State::Initialized) {
        return bad_state("MON_set_watchdog", m.state, MON_STATE_INITIALIZED,
                         "initialized (before MON_start)");
    }
    if (timeout_s > monitor::kMaxWatchdogTimeout.count()) {
        return fail(MON_BADARG, "MON_set_watchdog: a timeout of " + std::to_string(timeout_s) +
                                    " s: choose from 1 to " +
                                    std::to_string(monitor::kMaxWatchdogTimeout.count()) +
                                    ", or 0 for " +
                                    std::to_string(monitor::kDefaultWatchdogTimeout.count()));
    }
    if (device != nullptr && device[0] != '/') {
        return fail(MON_BADARG, std::string{"MON_set_watchdog: '"} + device +
                                    "' is not an absolute path, such as /dev/watchdog");
    }
    std::string chosen = device != nullptr ? device : "";  // made before anything changes
    // Whatever was armed is disarmed: a new device or timeout, or none.
    if (m.watchdog) {
        auto r = m.watchdog->disarm();
        m.watchdog.reset();
        if (!r) {
            return fail(r.error(), "MON_set_watchdog: " + r.error().message);
        }
    }
    m.watchdog_device = std::move(chosen);
    m.watchdog_timeout =
        timeout_s == 0 ? monitor::kDefaultWatchdogTimeout : std::chrono::seconds(timeout_s);
    return MON_SUCCESS;
}

MON_status do_pet_watchdog() {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Running || m.state == State::Stopping) {
        return bad_state("MON_pet_watchdog", m.state,
                         MON_STATE_UNINITIALIZED | MON_STATE_INITIALIZED,
                         "stopped (MON_stop): while MON runs, the IDLE task pets the watchdog, "
                         "and only when every CPU has idle time");
    }
    if (!m.watchdog || !m.watchdog->status().armed) {
        return fail_state(MON_STATE_UNINITIALIZED | MON_STATE_INITIALIZED, bit(m.state),
                          "MON_pet_watchdog: no watchdog is armed (MON_set_watchdog, "
                          "then MON_start, arms one)");
    }
    if (auto r = m.watchdog->pet(); !r) {
        return fail(r.error(), "MON_pet_watchdog: " + r.error().message);
    }
    return MON_SUCCESS;
}

MON_status do_get_loading(MON_loading* loading) {
    if (loading == nullptr) return fail(MON_NULLPTR, "MON_get_loading: loading is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_loading", m.state, kInitializedOrLater, "initialized");
    }
    auto report = current_report(m);
    if (!report) return fail(MON_NOTRDY, "MON_get_loading: MON has not been started");
    return fill("MON_get_loading", report->machine, loading);
}

MON_status do_get_cpu_loading(int cpu, MON_loading* loading) {
    if (loading == nullptr) return fail(MON_NULLPTR, "MON_get_cpu_loading: loading is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_cpu_loading", m.state, kInitializedOrLater, "initialized");
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

MON_status do_start_perf_mon(const MON_perf_config* config) {
    return begin_perf("MON_start_perf_mon", config, std::nullopt);
}

MON_status do_collect_perf_stats(const MON_perf_config* config, unsigned int duration_ms,
                                 MON_perf_stats* stats, MON_perf_callback callback, void* user) {
    const monitor::CounterRunOptions run{.duration = std::chrono::milliseconds(duration_ms),
                                         .interval = std::nullopt};
    if (auto ok = run.check(); config != nullptr && !ok) {
        return fail(MON_BADARG, "MON_collect_perf_stats: " + ok.error().message);
    }
    return begin_perf("MON_collect_perf_stats", config,
                      Collection{.duration = std::chrono::milliseconds(duration_ms),
                                 .out = stats,
                                 .callback = callback,
                                 .user = user});
}

MON_status do_set_perf_overflow(int set, unsigned long long period,
                                MON_perf_overflow_handler handler, void* user) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_set_perf_overflow", m.state, kInitializedOrLater, "initialized");
    }
    if (set < 1 || set > MON_PERF_SETS) {
        return fail(MON_BADARG, "MON_set_perf_overflow: set " + std::to_string(set) +
                                    ": choose from 1 to " + std::to_string(MON_PERF_SETS));
    }
    if (handler != nullptr && period == 0) {
        return fail(MON_BADARG, "MON_set_perf_overflow: a period of 0 events: give 1 or more");
    }
    std::lock_guard data(m.data);
    if (m.perf.run) {
        return fail(MON_PRFRUN,
                    "MON_set_perf_overflow: counting; handlers apply to the sessions started "
                    "after the call (MON_stop_perf_mon ends this one)");
    }
    m.perf.overflow[static_cast<std::size_t>(set - 1)] =
        handler != nullptr ? Overflow{period, handler, user} : Overflow{};
    return MON_SUCCESS;
}

MON_status do_pause_perf_mon(bool pause) {
    const std::string call = pause ? "MON_pause_perf_mon" : "MON_resume_perf_mon";
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state(call.c_str(), m.state, kInitializedOrLater, "initialized");
    }
    std::lock_guard data(m.data);
    if (!m.perf.run) {
        return fail(MON_NOTRDY, call + ": nothing is counting (MON_start_perf_mon starts it)");
    }
    auto* run = m.runtime->run(*m.perf.run);
    if (auto r = pause ? run->pause() : run->resume(); !r) {
        return fail(r.error(), call + ": " + r.error().message);
    }
    // The overflow handlers' events with them: no overflow while nothing counts.
    for (const auto& w : m.perf.watches) {
        auto* sampling = m.runtime->sampling(w->run);
        if (sampling == nullptr) continue;
        if (auto r = pause ? sampling->pause() : sampling->resume(); !r) {
            return fail(r.error(), call + ": the overflow handlers' events: " + r.error().message);
        }
    }
    return MON_SUCCESS;
}

MON_status do_get_perf_paused(int* paused, unsigned long long* paused_ns) {
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_perf_paused", m.state, kInitializedOrLater, "initialized");
    }
    std::lock_guard data(m.data);
    bool now = false;
    std::chrono::nanoseconds total{0};
    if (m.perf.run) {
        auto& session = m.runtime->run(*m.perf.run)->session();
        auto report = session.read();
        if (!report) {
            return fail(report.error(), "MON_get_perf_paused: " + report.error().message);
        }
        now = session.paused();
        total = report->paused;
    } else if (m.perf.last) {
        total = m.perf.last_paused;
    } else {
        return fail(MON_NOTRDY, "MON_get_perf_paused: nothing has been counted yet");
    }
    if (paused != nullptr) *paused = now ? 1 : 0;
    if (paused_ns != nullptr) *paused_ns = static_cast<unsigned long long>(total.count());
    return MON_SUCCESS;
}

MON_status do_get_perf_event(int set, char* name, unsigned int size) {
    if (name == nullptr) return fail(MON_NULLPTR, "MON_get_perf_event: name is NULL");
    Mon& m = mon();
    std::lock_guard lock(m.api);
    if (m.state == State::Uninitialized) {
        return bad_state("MON_get_perf_event", m.state, kInitializedOrLater, "initialized");
    }
    if (set < 1 || set > MON_PERF_SETS) {
        return fail(MON_BADARG, "MON_get_perf_event: set " + std::to_string(set) +
                                    ": choose from 1 to " + std::to_string(MON_PERF_SETS));
    }
    std::lock_guard data(m.data);
    const auto& counted = m.perf.counted;
    if (std::all_of(counted.begin(), counted.end(), [](const auto& e) { return e.empty(); })) {
        return fail(MON_NOTRDY, "MON_get_perf_event: nothing has been counted yet");
    }
    const std::string& event = m.perf.counted[static_cast<std::size_t>(set - 1)];
    if (event.size() >= size) {
        return fail(MON_BADARG, "MON_get_perf_event: set " + std::to_string(set) + "'s event, '" +
                                    event + "', needs " + std::to_string(event.size() + 1) +
                                    " bytes; the buffer has " + std::to_string(size));
    }
    event.copy(name, event.size());
    name[event.size()] = '\0';
    return MON_SUCCESS;
}

MON_status do_stop_perf_mon(MON_perf_stats* stats) {
    Mon& m = mon();
    Ending ending;
    {
        std::lock_guard lock(m.api);
        if (m.state == State::Uninitialized) {
            return bad_state("MON_stop_perf_mon", m.state, kInitializedOrLater, "initialized");
        }
        std::lock_guard data(m.data);
        if (!m.perf.run) {
            // Not counting: the counts of the last session, as the MON package did.
            if (stats == nullptr) return MON_SUCCESS;
            if (!m.perf.last) {
                return fail(MON_NOTRDY, "MON_stop_perf_mon: nothing has been counted yet");
            }
            *stats = *m.perf.last;
            return MON_SUCCESS;
        }
        ending = end_session(m);
    }
    m.wake.notify_all();
    ending.finish();
    if (ending.status != MON_SUCCESS) return ending.status;
    if (stats != nullptr) *stats = ending.stats;
    return MON_SUCCESS;
}

}  // namespace

extern "C" {

MON_status MON_initialize(void) {
    return guarded("MON_initialize", [] { return do_initialize(); });
}

MON_status MON_start(const MON_task_attr* idle_attr, const MON_task_attr* poll_attr) {
    return guarded("MON_start", [&] { return do_start(idle_attr, poll_attr); });
}

MON_status MON_stop(void) {
    return guarded("MON_stop", [] { return do_stop(); });
}

MON_status MON_shutdown(void) {
    return guarded("MON_shutdown", [] { return do_shutdown(); });
}

MON_status MON_set_watchdog(const char* device, unsigned int timeout_s) {
    return guarded("MON_set_watchdog", [&] { return do_set_watchdog(device, timeout_s); });
}

MON_status MON_pet_watchdog(void) {
    return guarded("MON_pet_watchdog", [] { return do_pet_watchdog(); });
}

MON_status MON_get_loading(MON_loading* loading) {
    return guarded("MON_get_loading", [&] { return do_get_loading(loading); });
}

MON_status MON_get_cpu_loading(int cpu, MON_loading* loading) {
    return guarded("MON_get_cpu_loading", [&] { return do_get_cpu_loading(cpu, loading); });
}

MON_status MON_start_perf_mon(const MON_perf_config* config) {
    return guarded("MON_start_perf_mon", [&] { return do_start_perf_mon(config); });
}

MON_status MON_collect_perf_stats(const MON_perf_config* config, unsigned int duration_ms,
                                  MON_perf_stats* stats, MON_perf_callback callback, void* user) {
    return guarded("MON_collect_perf_stats", [&] {
        return do_collect_perf_stats(config, duration_ms, stats, callback, user);
    });
}

MON_status MON_set_perf_overflow(int set, unsigned long long period,
                                 MON_perf_overflow_handler handler, void* user) {
    return guarded("MON_set_perf_overflow",
                   [&] { return do_set_perf_overflow(set, period, handler, user); });
}

MON_status MON_stop_perf_mon(MON_perf_stats* stats) {
    return guarded("MON_stop_perf_mon", [&] { return do_stop_perf_mon(stats); });
}

MON_status MON_pause_perf_mon(void) {
    return guarded("MON_pause_perf_mon", [] { return do_pause_perf_mon(true); });
}

MON_status MON_resume_perf_mon(void) {
    return guarded("MON_resume_perf_mon", [] { return do_pause_perf_mon(false); });
}

MON_status MON_get_perf_paused(int* paused, unsigned long long* paused_ns) {
    return guarded("MON_get_perf_paused", [&] { return do_get_perf_paused(paused, paused_ns); });
}

MON_status MON_get_perf_event(int set, char* name, unsigned int size) {
    return guarded("MON_get_perf_event", [&] { return do_get_perf_event(set, name, size); });
}

const char* MON_status_name(MON_status status) {
    // The C constants' names: "MON_PRFRUN". The protocol uses the bare MSG names.
    const char* name = monitor::mon::status_name(status);
    return name != nullptr ? name : "UNKNOWN";
}

const char* MON_status_message(MON_status status) {
    if (status >= monitor::kStatusCount) return "Unknown status code.";
    return monitor::status_message(static_cast<monitor::Status>(status)).data();
}

const char* MON_last_error(void) {
    return monitor::mon::last_error();
}

MON_status MON_last_error_info(MON_error_info* info) {
    // Not guarded: it records no failure of its own, so that it can be called again.
    if (info == nullptr) return MON_NULLPTR;
    monitor::mon::last_error_info(*info);
    return MON_SUCCESS;
}

}  // extern "C"
