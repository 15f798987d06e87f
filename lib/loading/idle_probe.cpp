#include "monitor/loading/idle_probe.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <thread>

#include "monitor/lock_free_u64.hpp"
#include "monitor/status.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kStopCheckLoops = 1024;  // a few ms of spinning between checks
constexpr auto kRecheckEvery = 100ms;            // CPU placement and a faster baseline
constexpr int kLoopsPerPass = 8;                 // outer loops per timed pass

// The CPU-time clock of a thread of this process, named by its kernel thread id. This is the
// encoding glibc's pthread_getcpuclockid uses (CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD); it stays
// usable for a detached thread, whose pthread_t may not be touched.
clockid_t thread_cpu_clock(pid_t tid) {
    return (~static_cast<clockid_t>(tid) << 3) | 6;
}

std::uint64_t thread_cpu_ns(clockid_t clock) {
    timespec ts{};
    if (::clock_gettime(clock, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

std::string_view probe_mode_name(ProbeMode m) noexcept {
    return name_of(kProbeModeNames, m);
}

std::optional<ProbeMode> probe_mode_from_name(std::string_view name) noexcept {
    return value_named(kProbeModeNames, name);
}

std::string_view probe_state_name(ProbeState s) noexcept {
    static constexpr std::array<std::string_view, 6> names{"starting",  "calibrating", "running",
                                                           "displaced", "failed",      "stopped"};
    return names[static_cast<std::size_t>(s)];
}

// The padding is the point: `count`, which the probe writes in its loop, starts a cache line
// of its own, away from the fields the owner writes.
// NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding): see above
struct IdleProbe::Shared {
    int cpu = 0;
    ProbeMode mode = ProbeMode::Spin;
    ProbeThreadAttr attr;
    CalibrationPlan plan;
    std::shared_ptr<IdleCreditSink> sink;

    std::atomic<ProbeState> state{ProbeState::Starting};
    // Written by the probe, read by the owner: never behind a lock (lock_free_u64.hpp).
    alignas(64) LockFreeU64 count{0};
    LockFreeU64 baseline_bits{0};  // a double (ns per loop); 0 = none
    LockFreeU64 final_cpu_ns{0};
    // Sleep mode: the last reading of the CPU's idle time and its time (steady clock, ns),
    // under a sequence that is odd while they change (written by one thread: the owner's).
    // The probe waits on it: publish_idle() and stop() move it on.
    LockFreeU64 idle_ns{0};
    LockFreeU64 idle_at_ns{0};
    std::atomic<std::uint32_t> published{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> exited{false};
    std::atomic<pid_t> tid{0};

    // Written once, before the state becomes Failed, by the probe's thread (or the owner's
    // when the thread could not start), and read only after: no lock, which the owner could
    // have to wait for.
    std::string error;

    void fail(std::string why) {
        if (state.load() == ProbeState::Failed) return;
        error = std::move(why);
        state.store(ProbeState::Failed, std::memory_order_release);
    }
    void set_baseline(double ns) { baseline_bits.store(std::bit_cast<std::uint64_t>(ns)); }
    double baseline_ns() const { return std::bit_cast<double>(baseline_bits.load()); }
};

void IdleCreditMeter::push(const Chunk& c) {
    if (size_ == kChunks) {  // only after the window grew: the quantum keeps them fewer
        const auto& oldest = chunk(0);
        chunk(1).from = oldest.from;
        chunk(1).ns += oldest.ns;
        first_ = (first_ + 1) % kChunks;
        --size_;
    }
    chunk(size_++) = c;
    sum_ns_ += c.ns;
}

void IdleCreditMeter::pop() {
    sum_ns_ -= chunk(0).ns;
    first_ = (first_ + 1) % kChunks;
    --size_;
}

bool IdleCreditMeter::update(std::uint64_t idle_ns, Clock::time_point now,
                             std::chrono::nanoseconds window) {
    const auto credit = std::chrono::duration_cast<std::chrono::nanoseconds>(kIdleCredit);
    if (!last_ns_) {
        last_ns_ = idle_ns;
        last_at_ = now;
        return false;
    }
    // A counter that went back (it should not) gives no idle time, and the next reading is
    // measured from the highest value seen.
    const std::uint64_t delta = idle_ns > *last_ns_ ? idle_ns - *last_ns_ : 0;
    const Clock::time_point since = last_at_;
    now = std::max(now, since);  // a reading dated before the one before: taken as with it
    last_ns_ = std::max(*last_ns_, idle_ns);
    last_at_ = now;
    if (delta > 0) {
        constexpr auto kN = static_cast<std::int64_t>(kChunks);
        const auto quantum = (window + std::chrono::nanoseconds(kN - 1)) / kN;
        if (size_ > 0 && since - chunk(size_ - 1).from < quantum) {
            chunk(size_ - 1).to = now;
            chunk(size_ - 1).ns += delta;
            sum_ns_ += delta;
        } else {
            push(Chunk{since, now, delta});
        }
    }
    const Clock::time_point edge = now - window;
    while (size_ > 0 && chunk(0).to <= edge) pop();
    std::uint64_t within = sum_ns_;
    if (size_ > 0 && chunk(0).from < edge) {
        // The part of the oldest chunk's idle time that falls before the window.
        const Chunk& c = chunk(0);
        const double before = std::chrono::duration<double>(edge - c.from) /
                              std::chrono::duration<double>(c.to - c.from);
        within -= static_cast<std::uint64_t>(static_cast<double>(c.ns) * before);
    }
    within_ = std::chrono::nanoseconds(static_cast<std::int64_t>(within));
    return delta > 0 && within_ >= credit;
}

IdleProbe::IdleProbe(int cpu, ProbeMode mode, ProbeThreadAttr attr, CalibrationPlan plan,
                     std::shared_ptr<IdleCreditSink> sink)
    : cpu_(cpu), mode_(mode), shared_(std::make_shared<Shared>()) {
    shared_->cpu = cpu;
    shared_->mode = mode;
    shared_->attr = attr;
    shared_->sink = std::move(sink);
    auto* s = shared_.get();
    plan.cancelled = [s] { return s->stop.load(std::memory_order_relaxed); };
    shared_->plan = plan;
    try {
        std::thread(run, shared_).detach();
    } catch (const std::system_error& e) {
        shared_->fail(std::string{"cannot start the probe thread: "} + e.what());
        shared_->exited = true;
    }
}

IdleProbe::~IdleProbe() {
    stop();
}

bool IdleProbe::stop(std::chrono::milliseconds grace) {
    auto& s = *shared_;
    if (s.exited.load()) return true;
    s.stop = true;
    s.published.fetch_add(2);  // stays even: no reading is being written
    s.published.notify_all();
    // Let a starved SCHED_IDLE thread compete normally so it can notice the request.
    if (pid_t tid = s.tid.load(); tid > 0) {
        sched_param p{};
        ::sched_setscheduler(tid, SCHED_OTHER, &p);
    }
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (!s.exited.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
    }
    return s.exited.load();
}

ProbeState IdleProbe::state() const {
    return shared_->state.load();
}

std::string IdleProbe::error() const {
    if (shared_->state.load(std::memory_order_acquire) != ProbeState::Failed) return {};
    return shared_->error;
}

std::uint64_t IdleProbe::count() const {
    return shared_->count.load();
}

std::optional<std::chrono::duration<double, std::nano>> IdleProbe::baseline() const {
    double ns = shared_->baseline_ns();
    if (ns <= 0) return std::nullopt;
    return std::chrono::duration<double, std::nano>{ns};
}

void IdleProbe::publish_idle(std::uint64_t idle_ns, std::chrono::steady_clock::time_point at) {
    auto& s = *shared_;
    if (s.mode != ProbeMode::Sleep) return;
    const auto at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch());
    s.published.fetch_add(1);  // odd: changing
    s.idle_ns.store(idle_ns);
    s.idle_at_ns.store(static_cast<std::uint64_t>(at_ns.count()));
    s.published.fetch_add(1);
    s.published.notify_one();
}

pid_t IdleProbe::tid() const {
    return shared_->exited.load() ? 0 : shared_->tid.load();
}

std::uint64_t IdleProbe::cpu_time_ns() const {
    const auto& s = *shared_;
    if (!s.exited.load()) {
        if (pid_t tid = s.tid.load(); tid > 0) {
            if (std::uint64_t ns = thread_cpu_ns(thread_cpu_clock(tid)); ns > 0) return ns;
        }
    }
    return s.final_cpu_ns.load();
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the detached thread's own reference
void IdleProbe::run(std::shared_ptr<Shared> sp) noexcept {
    Shared& s = *sp;
    s.tid = static_cast<pid_t>(::syscall(SYS_gettid));
    struct Exit {
        Shared& s;
        ~Exit() {
            s.final_cpu_ns.store(thread_cpu_ns(CLOCK_THREAD_CPUTIME_ID));
            if (s.state.load() != ProbeState::Failed) s.state = ProbeState::Stopped;
            s.exited = true;
        }
    } on_exit{s};
    // Nothing thrown here may end the program (a library's caller, through std::terminate):
    // the probe fails instead, saying why in words that need no memory.
    try {
        probe(s);
    } catch (const std::bad_alloc&) {
        s.fail("out of memory");
    } catch (...) {
        s.fail("an exception");
    }
}

// Sleep mode: wakes at each reading of the CPU's idle time that the owner publishes, and
// earns a credit from it. Waking at all says that the thread can still run; the kernel's idle
// time says that the CPU had time to spare.
void IdleProbe::sleep_and_credit(Shared& s) {
    s.state = ProbeState::Running;
    IdleCreditMeter credits;
    std::uint32_t seen = s.published.load();
    while (!s.stop.load()) {
        s.published.wait(seen);
        if (s.stop.load()) break;
        // The two values as one reading: the sequence is even, and the same before and after
        // them. The owner writes them once a second, at normal priority: a wake-up that finds
        // it at it reads again, and gives up on a reading it never finishes.
        std::uint64_t idle = 0;
        std::uint64_t at = 0;
        bool whole = false;
        for (int attempt = 0; attempt < 100 && !whole; ++attempt) {
            const std::uint32_t before = s.published.load();
            idle = s.idle_ns.load();
            at = s.idle_at_ns.load();
            seen = s.published.load();
            whole = before == seen && (seen & 1u) == 0;
            if (!whole) std::this_thread::yield();
        }
        if (!whole) continue;
        if (s.sink != nullptr && ::sched_getcpu() == s.cpu) {
            const std::chrono::steady_clock::time_point when{
                std::chrono::nanoseconds(static_cast<std::int64_t>(at))};
            if (credits.update(idle, when, s.sink->credit_expiry())) s.sink->credit(s.cpu);
        }
        // Counted once handled: an owner that sees the count grow sees the credit it earned.
        s.count.add(1);
    }
}

void IdleProbe::probe(Shared& s) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (s.cpu < 0 || s.cpu >= CPU_SETSIZE) {
        s.fail("cpu" + std::to_string(s.cpu) + " is out of range");
        return;
    }
    // The lowest priority first, and only then the move to the CPU: a thread that arrived
    // there at normal priority would take time from the CPU's work until it got here, and
    // one started in a group that runs only on an idle CPU (cpu.idle) might never get here
    // on a busy one.
    sched_param param{};
    if (::sched_setscheduler(0, s.attr.policy, &param) != 0) {
        s.fail("cannot set the probe's scheduling policy " + std::to_string(s.attr.policy) + ": " +
               errno_message(errno));
        return;
    }
    // On Linux the calling thread alone (PRIO_PROCESS of thread id 0).
    if (::setpriority(PRIO_PROCESS, 0, s.attr.nice) != 0) {
        s.fail("cannot set the probe's nice value " + std::to_string(s.attr.nice) + ": " +
               errno_message(errno));
        return;
    }
    const std::string name = "idle-probe/" + std::to_string(s.cpu);
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
    // From here on its CPU time is its CPU's idle time: measured while it calibrates (on a
    // CPU busy from the start it may calibrate for ever).
    if (s.mode == ProbeMode::Spin) s.state = ProbeState::Calibrating;
    CPU_SET(static_cast<std::size_t>(s.cpu), &set);
    if (int r = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set); r != 0) {
        s.fail("cannot pin the probe to cpu" + std::to_string(s.cpu) + ": " + errno_message(r));
        return;
    }

    if (s.mode == ProbeMode::Sleep) {
        sleep_and_credit(s);
        return;
    }

    // Spin: calibrate until it succeeds (a busy CPU may give the probe too little time at
    // first), then count loops.
    std::optional<Baseline> baseline;
    while (!baseline && !s.stop.load()) {
        baseline = calibrate([] { return timed_outer_loops(kLoopsPerPass); }, s.plan);
    }
    if (!baseline) return;
    s.set_baseline(baseline->per_loop.count());
    s.state = ProbeState::Running;

    std::uint64_t v = 0;
    std::uint64_t n = 0;
    auto next_check = std::chrono::steady_clock::now() + kRecheckEvery;
    // Idle credits: the thread's CPU time is the CPU's idle time.
    IdleCreditMeter credits;
    while (true) {
        v = idle_outer_loop(v + n);
        s.count.store(++n);
        if (n % kStopCheckLoops != 0) continue;
        if (s.stop.load(std::memory_order_relaxed)) break;
        // The CPU time first, then the clock: the system call is where a busy thread that
        // has just arrived preempts the probe, maybe for a second, and a clock read before it
        // would date that second's credit decision to before the busy thread came.
        const std::uint64_t cpu_ns = s.sink ? thread_cpu_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
        auto now = std::chrono::steady_clock::now();
        if (s.sink && s.state.load(std::memory_order_relaxed) == ProbeState::Running &&
            credits.update(cpu_ns, now, s.sink->credit_expiry())) {
            s.sink->credit(s.cpu);
        }
        if (now < next_check) continue;
        next_check = now + kRecheckEvery;
        if (::sched_getcpu() != s.cpu) {
            // Hotplug took the CPU away and the kernel moved us: counting here would measure
            // another CPU. Wait, not counting, until the owner stops this probe.
            s.state = ProbeState::Displaced;
            while (!s.stop.load() && ::sched_getcpu() != s.cpu) std::this_thread::sleep_for(10ms);
            if (s.stop.load()) break;
            s.state = ProbeState::Running;
            continue;
        }
        // Turbo or a thermal change can make the loop faster than at start: a faster pass
        // lowers the baseline, so idle time is never over-counted.
        auto [elapsed, loops] = timed_outer_loops(kLoopsPerPass);
        n += static_cast<std::uint64_t>(loops);
        s.count.store(n);
        double per_loop = static_cast<double>(elapsed.count()) / loops;
        if (per_loop > 0 && per_loop < s.baseline_ns()) s.set_baseline(per_loop);
    }
    asm volatile("" : : "r"(v));
}

}  // namespace monitor
