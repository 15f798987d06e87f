#include "manager.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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

constexpr const char* kDefaultSocketGroup = "monitor";
// The cgroup the spinning probes' process is placed in without systemd, right below the root
// of the cpu controller's hierarchy; and how often (in ticks) its place is checked.
constexpr const char* kProbeCgroup = "monitord.probes";
constexpr std::uint64_t kCheckSpinnersEvery = 5;

const char* state_name(int s) {
    static const char* const names[] = {"starting", "running", "reloading", "stopping"};
    return names[s];
}

}  // namespace

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {}

Manager::~Manager() {
    release_watchdog();
    daemon_.reset();  // before the socket it serves and the loop it runs on
    socket_.reset();
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

    // Where the spinning probes compete decides what they take and read: they run in a
    // process of their own, placed where they yield to everything. Sleeping ones take and
    // read nothing.
    DaemonParts parts;
    parts.event = e;
    parts.listen_fd = socket_->fd();
    parts.version = MONITORD_VERSION;
    parts.proc_root = options_.proc_root;
    parts.sys_root = options_.sys_root;
    if (options_.config.probe == monitor::ProbeMode::Spin) {
        spinners_ = start_spinners();
        parts.spinners = spinners_;
        if (!spinners_) parts.probe = monitor::ProbeMode::Sleep;
    }
    // Leave descriptors for the sampling files and the probes: connections get the rest.
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
        parts.limits.max_connections = std::min<std::size_t>(
            std::clamp<std::size_t>(nofile.rlim_cur, 128, 1 << 20) - 64, 4096);
    }
    parts.default_state_directory = default_state_directory(
        default_path ? place.kind : monitor::protocol::SocketPlaceKind::Given,
        [](const char* name) {
            // The daemon never sets its environment: nothing races this read.
            const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): see above
            return std::string{v != nullptr ? v : ""};
        });
    parts.counters = options_.counters;
    parts.on_tick = [this] { ticked(); };
    auto daemon = Daemon::create(std::move(parts), options_.config);
    if (!daemon) return std::unexpected(daemon.error());
    daemon_ = std::move(*daemon);
    daemon_->loading().set_probe_group(probe_group_);
    daemon_->loading().set_probe_fallback(probe_fallback_);
    log_probes();
    // Armed once the probes are calibrated and can pet it; before READY=1.
    if (auto r = arm_watchdog(); !r) return r;
    if (auto r = daemon_->start(); !r) return r;

    // Feeds systemd's service watchdog (WatchdogSec=) from this loop; a no-op without it.
    sd_event_set_watchdog(e, 1);
    return {};
}

void Manager::set_state(State state) {
    state_ = state;
    daemon_->loading().set_state(state_name(static_cast<int>(state)));
}

int Manager::run() {
    set_state(State::Running);
    spdlog::info("monitord {} listening on {}{}; sampling {} CPUs every second (sources: {})",
                 MONITORD_VERSION, socket_->path(),
                 socket_->activated() ? " (socket activation)" : "",
                 daemon_->runtime().engine().online_cpus().size(),
                 fmt::join(daemon_->runtime().engine().source_names(), ", "));
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
    daemon_->loading().set_probe_group(probe_group_);
}

void Manager::fall_back(const std::string& why) {
    probe_fallback_ = why;
    spdlog::warn(
        "Spinning probes were asked for, but {}: the probes sleep instead (the loading comes "
        "from /proc/stat alone, the watchdog's credits from the kernel's idle time)",
        why);
    if (daemon_) daemon_->loading().set_probe_fallback(probe_fallback_);
}

void Manager::log_probes() const {
    const auto* probes = daemon_->runtime().engine().probes();
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
    auto& runtime = daemon_->runtime();
    auto r = runtime.arm_watchdog(device, c.watchdog_timeout);
    if (!r) {
        if (r.error().status == monitor::Status::BadArg) {
            return monitor::fail(monitor::Status::BadArg, "watchdog: " + r.error().message);
        }
        return std::unexpected(r.error());
    }
    const auto s = runtime.watchdog()->status();
    daemon_->note_watchdog_armed(device, s.last_reset_by_watchdog);
    spdlog::info(
        "Watchdog {} armed{}: timeout {}, petted from the idle probes once a second when {} "
        "CPUs have had idle time (the kernel's{}){}{}",
        device, s.identity ? " (" + s.identity->identity + ")" : std::string{},
        s.timeout_s ? fmt::format("{} s", *s.timeout_s) : std::string{"unknown"},
        monitor::watchdog::pet_policy_name(s.policy),
        runtime.engine().probe_mode() == monitor::ProbeMode::Spin
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
    auto* watchdog = daemon_ ? daemon_->runtime().watchdog() : nullptr;
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
               daemon_->runtime().engine().online_cpus().size(), socket_->path().c_str());
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

void Manager::ticked() {
    if (++ticks_ % kCheckSpinnersEvery == 0) check_spinners();
    if (options_.show_loading) {
        std::puts(daemon_->loading().loading_line().c_str());
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
        daemon_->apply(options_.config);
        spdlog::info("Reloaded {}", have_file ? file.string() : std::string{"the defaults"});
    }
    set_state(State::Running);
    sd_notify(0, "READY=1");
    notify_status();
}

}  // namespace monitord
