#include "manager.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "logging.hpp"
#include "monitor/protocol/socket_path.hpp"
#include "monitor/status.hpp"
#include "monitord-config.h"
#include "probe_scope.hpp"

namespace monitord {

using monitor::Result;

namespace {

// The timer's accuracy: the loading tick, a rotation or a period's end may come this late.
constexpr std::uint64_t kTimerAccuracyUsec = 1'000;
constexpr const char* kDefaultSocketGroup = "monitor";
// The cgroup the spinning probes' process is placed in without systemd, right below the root
// of the cpu controller's hierarchy; and how often (in ticks) its place is checked.
constexpr const char* kProbeCgroup = "monitord.probes";
constexpr std::uint64_t kCheckSpinnersEvery = 5;

// sd-event's CLOCK_MONOTONIC and std::chrono::steady_clock are one clock.
std::chrono::steady_clock::time_point steady_from_usec(std::uint64_t usec) {
    return std::chrono::steady_clock::time_point{std::chrono::microseconds{usec}};
}

std::uint64_t usec_from_steady(std::chrono::steady_clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

const char* state_name(int s) {
    static const char* const names[] = {"starting", "running", "reloading", "stopping"};
    return names[s];
}

}  // namespace

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {}

Manager::~Manager() {
    release_watchdog();
    if (server_) server_->set_close_handler({});
    profiles_.reset();  // its rings and sources, before the loop goes
    counters_.reset();  // its runs, before the runtime goes
    loading_.reset();
    server_.reset();  // before the socket it serves
    socket_.reset();
    timer_.reset();
    runtime_.reset();
    spinners_.reset();  // the process stops: its cgroup is empty
    if (made_probe_cgroup_) {
        monitor::remove_idle_cgroup(monitor::find_cgroup_roots("/proc/self/mountinfo"),
                                    kProbeCgroup);
    }
}

Result<std::unique_ptr<Manager>> Manager::create(ManagerOptions options) {
    std::unique_ptr<Manager> m{new Manager(std::move(options))};
    if (auto r = m->setup(); !r) return std::unexpected(r.error());
    return m;
}

Result<void> Manager::setup() {
    sd_event* e = nullptr;
    if (int r = sd_event_new(&e); r < 0) return monitor::fail_errno(-r, "create the event loop");
    event_.reset(e);

    // The signals are blocked in main() before any thread starts.
    for (auto [sig, slot] : {std::pair{SIGTERM, &sigterm_}, std::pair{SIGINT, &sigint_},
                             std::pair{SIGHUP, &sighup_}}) {
        sd_event_source* s = nullptr;
        if (int r = sd_event_add_signal(e, &s, sig, on_signal, this); r < 0) {
            return monitor::fail_errno(-r, fmt::format("watch signal {}", sigabbrev_np(sig)));
        }
        slot->reset(s);
    }

    // The socket first: a bad path fails at once, before the probes calibrate. Clients
    // that connect meanwhile wait in the backlog until the server starts.
    const auto place = monitor::protocol::daemon_socket_place(
        monitor::protocol::SocketEnvironment::current(), options_.user_socket);
    const bool default_path = options_.config.socket.empty();
    const std::string path = default_path ? place.path : options_.config.socket.string();
    const bool create_dir =
        default_path && place.kind != monitor::protocol::SocketPlaceKind::Environment;
    auto socket_group = this->socket_group();
    if (!socket_group) return std::unexpected(socket_group.error());
    auto sock = ControlSocket::open(path, create_dir, *socket_group);
    if (!sock) return std::unexpected(sock.error());
    socket_.emplace(std::move(*sock));

    monitor::EngineOptions eo;
    eo.proc_root = options_.proc_root;
    eo.sys_root = options_.sys_root;
    eo.history_seconds = options_.config.history_seconds;
    eo.probe = options_.config.probe;
    // Where the spinning probes compete decides what they take and read: they run in a
    // process of their own, placed where they yield to everything. Sleeping ones take and
    // read nothing.
    if (eo.probe == monitor::ProbeMode::Spin) {
        spinners_ = start_spinners();
        eo.spinners = spinners_;
        if (!spinners_) eo.probe = monitor::ProbeMode::Sleep;
    }
    auto watchdog = std::make_shared<monitor::watchdog::Watchdog>(options_.config.watchdog_policy);
    // std::chrono::steady_clock is CLOCK_MONOTONIC, the clock of the loop's timer.
    auto runtime = monitor::Runtime::create(eo, std::move(watchdog),
                                            [] { return std::chrono::steady_clock::now(); });
    if (!runtime) return std::unexpected(runtime.error());
    runtime_ = std::move(*runtime);
    log_probes();
    // Armed once the probes are calibrated and can pet it; before READY=1.
    if (auto r = arm_watchdog(); !r) return r;

    // Leave descriptors for the sampling files and the probes: connections get the rest.
    ServerLimits limits;
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
        limits.max_connections = std::clamp<std::size_t>(nofile.rlim_cur, 128, 1 << 20) - 64;
        limits.max_connections = std::min<std::size_t>(limits.max_connections, 4096);
    }
    limits.idle_timeout = options_.config.idle_timeout;
    limits.max_pending_per_user = options_.config.reply_memory_per_user << 20;
    server_ = std::make_unique<VarlinkServer>(
        e, socket_->fd(),
        VarlinkServer::Info{"monitord", "monitord", MONITORD_VERSION, "man:monitord(8)"}, access_,
        limits);
    loading_ = std::make_unique<LoadingService>(*server_, *runtime_);
    loading_->setup();
    loading_->set_watchdog_on_stop(options_.config.watchdog_on_stop);
    loading_->set_probe_group(probe_group_);
    loading_->set_probe_fallback(probe_fallback_);
    auto counter_options = options_.counters;
    counter_options.proc_root = options_.proc_root;
    counter_options.sys_root = options_.sys_root;
    const monitor::perf::FileBudget files{.most = options_.config.perf_files_per_session,
                                          .source = kPerfFilesSource};
    counter_options.files_per_session = files;
    counters_ = std::make_unique<CounterService>(
        *server_, *runtime_, [this] { schedule(); }, std::move(counter_options));
    counters_->setup();
    counters_->configure_standing(options_.config.counters, std::chrono::steady_clock::now());
    profiles_ = std::make_unique<ProfileService>(
        e, *server_, counters_->catalog(), counters_->catalog_error(),
        [this] { return runtime_->engine().online_cpus(); },
        ProfileServiceOptions{.cgroup_root = options_.counters.cgroup_root,
                              .kallsyms = options_.proc_root / "kallsyms",
                              .modules = options_.proc_root / "modules",
                              .max_profiles = kMaxProfiles,
                              .max_profiles_per_user = options_.config.profiles_per_user,
                              .max_duration_per_user = options_.config.profile_duration,
                              .files_per_session = files});
    profiles_->setup();
    apply_control_group();
    server_->set_close_handler([this](std::uint64_t connection) {
        counters_->connection_closed(connection);
        profiles_->connection_closed(connection);
    });
    if (auto r = server_->start(); !r) return r;

    sd_event_source* t = nullptr;
    if (int r = sd_event_add_time(e, &t, CLOCK_MONOTONIC, usec_from_steady(runtime_->next_due()),
                                  kTimerAccuracyUsec, on_timer, this);
        r < 0) {
        return monitor::fail_errno(-r, "create the runtime's timer");
    }
    timer_.reset(t);
    sd_event_source_set_description(t, "runtime");

    // Feeds systemd's service watchdog (WatchdogSec=) from this loop; a no-op without it.
    sd_event_set_watchdog(e, 1);
    return {};
}

void Manager::set_state(State state) {
    state_ = state;
    loading_->set_state(state_name(static_cast<int>(state)));
}

int Manager::run() {
    set_state(State::Running);
    spdlog::info("monitord {} listening on {}{}; sampling {} CPUs every second (sources: {})",
                 MONITORD_VERSION, socket_->path(),
                 socket_->activated() ? " (socket activation)" : "",
                 runtime_->engine().online_cpus().size(),
                 fmt::join(runtime_->engine().source_names(), ", "));
    sd_notify(0, "READY=1");
    notify_status();

    int r = sd_event_loop(event_.get());

    set_state(State::Stopping);
    sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
    if (r < 0) {
        spdlog::error("Event loop failed: {}", monitor::errno_message(-r));
        return 1;
    }
    spdlog::info("Stopped");
    return 0;
}

std::shared_ptr<monitor::ProbeProcess> Manager::start_spinners() {
    // This very program, whatever became of its file since (an upgrade).
    auto started = monitor::ProbeProcess::start("/proc/self/exe");
    if (!started) {
        fall_back("the probe process could not start: " + started.error().message);
        return nullptr;
    }
    std::shared_ptr<monitor::ProbeProcess> spinners = std::move(*started);
    auto group = place_spinners(spinners->pid(), false);
    if (!group) {
        spinners->stop();
        fall_back("their group cannot be told: " + group.error().to_string());
        return nullptr;
    }
    probe_group_ = *group;
    if (!group->yields()) {
        spinners->stop();
        fall_back(monitor::describe_probe_group(*group));
        return nullptr;
    }
    spdlog::info("Spinning probes in process {}: {}", spinners->pid(),
                 monitor::describe_probe_group(*group));
    return spinners;
}

monitor::Result<monitor::ProbeGroup> Manager::place_spinners(pid_t pid, bool settled) {
    // The real /proc and cgroup tree, not the injected roots: the process is on this machine.
    const auto roots = monitor::find_cgroup_roots("/proc/self/mountinfo");
    auto group = monitor::find_process_group("/proc", pid, roots);
    // At start, the helper first makes a session of its own and lowers its autogroup.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!settled && group && !group->yields() &&
           group->kind == monitor::ProbeGroup::Kind::Autogroup &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        group = monitor::find_process_group("/proc", pid, roots);
    }
    if (!group) return group;
    if (sd_booted() > 0) {
        // systemd owns the cgroup tree: asked only when needed (its slice with
        // CPUWeight=idle turns the cpu controller on for the whole machine).
        if (group->yields()) return group;
        if (auto r = place_in_systemd_scope(pid); !r) {
            spdlog::warn("Spinning probes: {}", r.error().message);
            return group;
        }
        return monitor::find_process_group("/proc", pid, roots);
    }
    // Without systemd, a cgroup of the daemon's own with cpu.idle=1 is better than an
    // autogroup at nice 19, where making it changes nothing for other processes.
    if (group->kind == monitor::ProbeGroup::Kind::Cgroup && group->yields()) return group;
    auto placed = monitor::place_in_idle_cgroup("/proc", pid, roots, kProbeCgroup);
    if (placed) {
        made_probe_cgroup_ = true;
        return placed;
    }
    if (!group->yields()) spdlog::warn("Spinning probes: {}", placed.error().message);
    return group;
}

void Manager::check_spinners() {
    if (!spinners_) return;
    if (auto ended = spinners_->ended()) {
        spdlog::error("The spinning probes' process {} {}; the probe source has gaps from now on",
                      spinners_->pid(), *ended);
        fall_back("their process " + *ended);
        spinners_.reset();  // the engine keeps the object, which reads as failed probes
        return;
    }
    const auto roots = monitor::find_cgroup_roots("/proc/self/mountinfo");
    auto group = monitor::find_process_group("/proc", spinners_->pid(), roots);
    if (!group || group->yields()) return;
    spdlog::warn("The spinning probes no longer yield: {}", monitor::describe_probe_group(*group));
    group = place_spinners(spinners_->pid(), true);
    if (group && group->yields()) {
        spdlog::info("Spinning probes placed again: {}", monitor::describe_probe_group(*group));
    } else {
        spinners_->stop();
        spinners_.reset();
        fall_back((group ? monitor::describe_probe_group(*group) : group.error().to_string()) +
                  "; they were stopped");
    }
    if (group) probe_group_ = *group;
    loading_->set_probe_group(probe_group_);
}

void Manager::fall_back(const std::string& why) {
    probe_fallback_ = why;
    spdlog::warn(
        "Spinning probes were asked for, but {}: the probes sleep instead (the loading comes "
        "from /proc/stat alone, the watchdog's credits from the kernel's idle time)",
        why);
    if (loading_) loading_->set_probe_fallback(probe_fallback_);
}

void Manager::log_probes() const {
    const auto* probes = runtime_->engine().probes();
    if (probes == nullptr) return;
    for (const auto& r : probes->read()) {
        switch (r.state) {
            case monitor::ProbeState::Running:
                if (r.baseline) {
                    spdlog::info("cpu{}: idle probe calibrated: {:.0f} ns per outer loop", r.cpu,
                                 r.baseline->count());
                }
                break;
            case monitor::ProbeState::Failed:
                spdlog::warn("cpu{}: idle probe failed: {}; no probe figures for it", r.cpu,
                             r.error);
                break;
            case monitor::ProbeState::Starting:
                spdlog::warn(
                    "cpu{}: idle probe not started yet (the CPU is busy); its probe "
                    "figures start once it runs",
                    r.cpu);
                break;
            case monitor::ProbeState::Calibrating:
                spdlog::info(
                    "cpu{}: idle probe still timing its loop (the CPU is busy); it "
                    "measures meanwhile",
                    r.cpu);
                break;
            default:
                break;
        }
    }
}

Result<void> Manager::arm_watchdog() {
    const auto& c = options_.config;
    if (c.watchdog_device.empty()) return {};
    const std::string device = c.watchdog_device.string();
    // Who can reset the machine from now on, said before it can happen.
    const bool all = c.watchdog_policy == monitor::watchdog::PetPolicyKind::All;
    spdlog::warn(
        "Arming watchdog {}: the machine resets when {} less than 100 ms of idle time in {} s "
        "(policy {}): {} that long can reset it",
        device, all ? "one CPU has" : "every CPU has", c.watchdog_timeout.count(),
        monitor::watchdog::pet_policy_name(c.watchdog_policy),
        all ? "any process of any user that keeps one CPU busy"
            : "only a load that keeps every CPU busy");
    auto r = runtime_->arm_watchdog(device, c.watchdog_timeout);
    if (!r) {
        if (r.error().status == monitor::Status::BadArg) {
            return monitor::fail(monitor::Status::BadArg, "watchdog: " + r.error().message);
        }
        return std::unexpected(r.error());
    }
    const auto s = runtime_->watchdog()->status();
    spdlog::info(
        "Watchdog {} armed{}: timeout {}, petted from the idle probes once a second when {} "
        "CPUs have had idle time (the kernel's{}){}{}",
        device, s.identity ? " (" + s.identity->identity + ")" : std::string{},
        s.timeout_s ? fmt::format("{} s", *s.timeout_s) : std::string{"unknown"},
        monitor::watchdog::pet_policy_name(s.policy),
        runtime_->engine().probe_mode() == monitor::ProbeMode::Spin
            ? ", with the spinning probes' time given back to idle"
            : "",
        s.nowayout ? "; the driver has nowayout: it stays armed when monitord stops" : "",
        s.last_reset_by_watchdog ? "; the last reset was caused by the watchdog" : "");
    if (s.timeout_s && *s.timeout_s != c.watchdog_timeout.count()) {
        spdlog::warn("Watchdog {}: asked for a timeout of {} s, the driver granted {} s", device,
                     c.watchdog_timeout.count(), *s.timeout_s);
    }
    return {};
}

// At the end, as [watchdog] on-stop says: the magic close, or left armed.
void Manager::release_watchdog() {
    auto* watchdog = runtime_ ? runtime_->watchdog() : nullptr;
    if (watchdog == nullptr) return;
    const auto s = watchdog->status();
    if (s.armed) {
        if (s.nowayout) {
            watchdog->close_armed();
            spdlog::warn(
                "Watchdog {} stays armed: its driver has nowayout and cannot be stopped; the "
                "machine resets in {} unless it is petted again",
                s.device,
                s.time_left_s ? fmt::format("{} s", *s.time_left_s) : std::string{"its timeout"});
        } else if (options_.config.watchdog_on_stop == monitor::watchdog::OnStop::KeepArmed) {
            watchdog->close_armed();
            spdlog::warn(
                "Watchdog {} left armed (on-stop = {}): the machine resets in {} unless it is "
                "petted again",
                s.device, monitor::watchdog::on_stop_name(options_.config.watchdog_on_stop),
                s.time_left_s ? fmt::format("{} s", *s.time_left_s) : std::string{"its timeout"});
        } else if (auto r = watchdog->disarm(); !r) {
            spdlog::error("Watchdog: {}", r.error().message);
        } else {
            spdlog::info("Watchdog {} disarmed", s.device);
        }
    }
}

void Manager::notify_status() const {
    sd_notifyf(0, "STATUS=Sampling %zu CPUs every second; listening on %s",
               runtime_->engine().online_cpus().size(), socket_->path().c_str());
}

int Manager::on_signal(sd_event_source*, const signalfd_siginfo* si, void* userdata) {
    auto* self = static_cast<Manager*>(userdata);
    if (si->ssi_signo == SIGHUP) {
        self->reload();
        return 0;
    }
    spdlog::info("Received SIG{}, stopping", sigabbrev_np(static_cast<int>(si->ssi_signo)));
    sd_event_exit(self->event_.get(), 0);
    return 0;
}

int Manager::on_timer(sd_event_source*, uint64_t, void* userdata) {
    // The argument is the time the timer was due, not the time now.
    auto* self = static_cast<Manager*>(userdata);
    std::uint64_t now = 0;
    sd_event_now(self->event_.get(), CLOCK_MONOTONIC, &now);
    self->run_due(now);
    self->schedule();
    return 0;
}

void Manager::schedule() {
    if (!timer_) return;
    sd_event_source_set_time(timer_.get(), usec_from_steady(runtime_->next_due()));
    sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
}

void Manager::run_due(std::uint64_t now) {
    const auto at = steady_from_usec(now);
    auto due = runtime_->run_due(at);
    for (const auto& step : due.runs) counters_->run_stepped(step, at);
    if (due.failed_pets > 0) {
        spdlog::error("Watchdog {}: {} pet(s) failed, last: {}",
                      runtime_->watchdog()->status().device, due.failed_pets, due.last_pet_error);
    }
    if (!due.ticked) return;
    if (++ticks_ % kCheckSpinnersEvery == 0) check_spinners();
    loading_->loading_changed();
    counters_->ticked(at);
    // A failure that persists is logged once, and its end once.
    std::string error = due.tick ? std::string{} : due.tick.error().to_string();
    if (error != last_tick_error_) {
        if (!error.empty()) {
            spdlog::warn("Sampling: {}", error);
        } else {
            spdlog::info("Sampling works again");
        }
        last_tick_error_ = error;
    }
    if (options_.show_loading) {
        std::puts(loading_->loading_line().c_str());
        std::fflush(stdout);
    }
}

monitor::Result<std::optional<gid_t>> Manager::socket_group() const {
    if (const auto& name = options_.config.socket_group) {
        auto gid = group_id(*name);
        if (!gid) return std::unexpected(gid.error());
        return *gid;
    }
    auto gid = group_id(kDefaultSocketGroup);
    if (!gid) return std::optional<gid_t>{};
    if (::geteuid() == 0) return *gid;
    // Not root: chown only works for one of the daemon's own groups.
    std::vector<gid_t> own(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
    const int n = ::getgroups(static_cast<int>(own.size()), own.data());
    own.resize(static_cast<std::size_t>(std::max(n, 0)));
    if (*gid == ::getegid() || std::find(own.begin(), own.end(), *gid) != own.end()) return *gid;
    return std::optional<gid_t>{};
}

void Manager::apply_control_group() {
    const auto& name = options_.config.control_group;
    std::optional<gid_t> gid;
    if (!name.empty()) {
        // Checked when the file was read; the group may have gone away since.
        if (auto g = group_id(name)) {
            gid = *g;
        } else {
            spdlog::warn("[access] control-group: {}; only root may count", g.error().message);
        }
    }
    access_.set_control_group(gid, gid ? name : std::string{});
}

void Manager::reload() {
    set_state(State::Reloading);
    sd_notify(0, "RELOADING=1\nSTATUS=Reloading the configuration");
    std::filesystem::path file = options_.config_file.value_or(default_config_path());
    Config next;
    bool have_file = options_.config_file.has_value() || default_config_present(file);
    Result<Config> loaded = have_file ? load_config(file, Config{}) : Result<Config>{Config{}};
    if (!loaded) {
        spdlog::error("Reload failed, keeping the running settings: {}", loaded.error().message);
    } else {
        next = *loaded;
        options_.overrides.apply(next);
        // The keys a reload cannot apply keep their running values.
        auto plan = plan_reload(options_.config, next);
        if (!plan.at_restart.empty()) spdlog::warn("{}", plan.restart_message());
        options_.config = std::move(plan.config);
        set_log_level(options_.config.log_level);
        runtime_->engine().set_history_seconds(options_.config.history_seconds);
        loading_->forget_replies();
        loading_->set_watchdog_on_stop(options_.config.watchdog_on_stop);
        apply_control_group();
        server_->set_idle_timeout(options_.config.idle_timeout);
        server_->set_max_pending_per_user(options_.config.reply_memory_per_user << 20);
        profiles_->set_max_profiles_per_user(options_.config.profiles_per_user);
        profiles_->set_max_duration_per_user(options_.config.profile_duration);
        profiles_->set_max_files_per_session(options_.config.perf_files_per_session);
        counters_->set_max_files_per_session(options_.config.perf_files_per_session);
        counters_->configure_standing(options_.config.counters, std::chrono::steady_clock::now());
        spdlog::info("Reloaded {}", have_file ? file.string() : std::string{"the defaults"});
    }
    set_state(State::Running);
    sd_notify(0, "READY=1");
    notify_status();
}

}  // namespace monitord
