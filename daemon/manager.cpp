#include "manager.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "logging.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/protocol/socket_path.hpp"
#include "monitord-config.h"

namespace monitord {

using monitor::Result;
using monitor::varlink::Call;
using monitor::varlink::Reply;

namespace {

constexpr std::uint64_t kTickUsec = 1'000'000;
constexpr std::uint64_t kTickAccuracyUsec = 1'000;
constexpr const char* kDefaultSocketGroup = "monitor";

std::chrono::steady_clock::time_point steady_from_usec(std::uint64_t usec) {
    return std::chrono::steady_clock::time_point{std::chrono::microseconds{usec}};
}

const char* state_name(int s) {
    static const char* const names[] = {"starting", "running", "reloading", "stopping"};
    return names[s];
}

}  // namespace

Manager::Manager(ManagerOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {}

Manager::~Manager() {
    release_watchdog();
    if (server_) server_->set_close_handler({});
    counters_.reset();  // its sessions' timers, before the loop goes
    server_.reset();    // before the socket it serves
    socket_.reset();
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
    watchdog_ = std::make_shared<monitor::watchdog::Watchdog>(options_.config.watchdog_policy);
    eo.idle_sink = watchdog_;
    // std::chrono::steady_clock is CLOCK_MONOTONIC, the clock of the loop's timer.
    auto engine = monitor::Engine::create(eo, [] { return std::chrono::steady_clock::now(); });
    if (!engine) return std::unexpected(engine.error());
    engine_ = std::move(*engine);
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
    server_ = std::make_unique<VarlinkServer>(
        e, socket_->fd(),
        VarlinkServer::Info{"monitord", "monitord", MONITORD_VERSION, "man:monitord(8)"}, limits);
    register_methods();
    auto counter_options = options_.counters;
    counter_options.proc_root = options_.proc_root;
    counter_options.sys_root = options_.sys_root;
    counter_options.next_tick_usec = [this] { return next_tick_usec_; };
    counters_ = std::make_unique<CounterService>(
        e, *server_, [this] { return engine_->online_cpus(); }, std::move(counter_options));
    counters_->setup();
    apply_control_group();
    server_->set_close_handler(
        [this](std::uint64_t connection) { counters_->connection_closed(connection); });
    if (auto r = server_->start(); !r) return r;

    std::uint64_t now = 0;
    sd_event_now(e, CLOCK_MONOTONIC, &now);  // the loop has not run: this is the time now
    next_tick_usec_ = now + kTickUsec;
    sd_event_source* t = nullptr;
    if (int r = sd_event_add_time(e, &t, CLOCK_MONOTONIC, next_tick_usec_, kTickAccuracyUsec,
                                  on_timer, this);
        r < 0) {
        return monitor::fail_errno(-r, "create the sampling timer");
    }
    timer_.reset(t);
    sd_event_source_set_description(t, "loading-tick");

    // Feeds systemd's service watchdog (WatchdogSec=) from this loop; a no-op without it.
    sd_event_set_watchdog(e, 1);
    return {};
}

void Manager::register_methods() {
    server_->add_interface(
        *monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface));
    const std::string p = std::string{monitor::varlink::kMonitorInterface} + ".";

    server_->add_method(
        p + "GetStatus", [this](const Call&, const Peer&) -> VarlinkServer::Response {
            monitor::protocol::DaemonStatus s;
            s.version = MONITORD_VERSION;
            s.uptime =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
            s.state = state_name(static_cast<int>(state_));
            s.pid = ::getpid();
            s.cpus = engine_->online_cpus();
            for (auto n : engine_->source_names()) s.sources.emplace_back(n);
            s.probe_mode = monitor::probe_mode_name(engine_->probe_mode());
            if (const auto* probes = engine_->probes()) {
                for (const auto& r : probes->read()) {
                    monitor::protocol::ProbeStatus ps;
                    ps.cpu = r.cpu;
                    ps.state = monitor::probe_state_name(r.state);
                    if (r.baseline) ps.baseline_ns = r.baseline->count();
                    ps.count = r.count;
                    ps.cpu_seconds = static_cast<double>(r.cpu_ns) / 1e9;
                    ps.error = r.error;
                    s.probes.push_back(std::move(ps));
                }
            }
            s.history_seconds = static_cast<std::int64_t>(engine_->history_seconds());
            s.watchdog = watchdog_info();
            Reply r;
            r.parameters = monitor::protocol::to_json(s);
            return r;
        });

    // The loading changes once a tick, so every caller between two ticks gets the same
    // encoded reply. With "more", the caller gets a reply after every tick (monctl --watch).
    server_->add_method(
        p + "GetLoading", [this](const Call& call, const Peer& peer) -> VarlinkServer::Response {
            auto query = monitor::protocol::loading_query_from_json(call.parameters);
            if (call.more) watchers_.push_back({peer.connection, query});
            return loading_reply(query, call.more);
        });
}

VarlinkServer::Response Manager::loading_reply(const monitor::LoadingQuery& query, bool more) {
    auto& cached =
        loading_replies_[(query.per_cpu ? 1 : 0) + (query.history ? 2 : 0) + (more ? 4 : 0)];
    if (!cached) {
        Reply r;
        r.parameters = monitor::protocol::to_json(engine_->loading(query));
        r.continues = more;
        cached = std::make_shared<const std::string>(monitor::varlink::encode(r));
    }
    return VarlinkServer::Response{cached, more};
}

int Manager::run() {
    state_ = State::Running;
    spdlog::info("monitord {} listening on {}{}; sampling {} CPUs every second (sources: {})",
                 MONITORD_VERSION, socket_->path(),
                 socket_->activated() ? " (socket activation)" : "", engine_->online_cpus().size(),
                 fmt::join(engine_->source_names(), ", "));
    sd_notify(0, "READY=1");
    notify_status();

    int r = sd_event_loop(event_.get());

    state_ = State::Stopping;
    sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
    if (r < 0) {
        spdlog::error("Event loop failed: {}", std::strerror(-r));
        return 1;
    }
    spdlog::info("Stopped");
    return 0;
}

void Manager::log_probes() const {
    const auto* probes = engine_->probes();
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
            case monitor::ProbeState::Calibrating:
                spdlog::warn(
                    "cpu{}: idle probe still calibrating (the CPU is busy); its probe "
                    "figures start once it is done",
                    r.cpu);
                break;
            default:
                break;
        }
    }
}

// The CPUs whose probes can earn credits: a failed probe must not hold every pet back.
std::vector<int> Manager::probing_cpus() const {
    std::vector<int> cpus;
    if (const auto* probes = engine_->probes()) {
        for (const auto& r : probes->read()) {
            if (r.state != monitor::ProbeState::Failed && r.state != monitor::ProbeState::Stopped) {
                cpus.push_back(r.cpu);
            }
        }
    }
    return cpus;
}

Result<void> Manager::arm_watchdog() {
    const auto& c = options_.config;
    const bool automatic = !c.watchdog_device.has_value();
    const std::string device = c.watchdog_device.value_or("/dev/watchdog").string();
    if (device.empty()) return {};
    if (automatic && !std::filesystem::exists(device)) {
        spdlog::info("No watchdog: {} does not exist", device);
        return {};
    }
    auto refuse = [&](std::string why) -> Result<void> {
        if (automatic) {
            spdlog::warn("No watchdog: {} (set [watchdog] device = \"\" to silence this)", why);
            return {};
        }
        return monitor::fail(monitor::Status::BadArg, "watchdog: " + why);
    };
    if (engine_->probe_mode() == monitor::ProbeMode::Off) {
        return refuse(device +
                      " is petted by the idle probes, and --probe off runs none; use "
                      "spin or sleep");
    }
    watchdog_cpus_ = probing_cpus();
    watchdog_->set_cpus(watchdog_cpus_);
    auto r = watchdog_->arm(device, c.watchdog_timeout);
    if (!r) {
        if (automatic) return refuse(r.error().message);
        return std::unexpected(r.error());
    }
    const auto s = watchdog_->status();
    spdlog::info(
        "Watchdog {} armed{}: timeout {}, petted from the idle probes when {} CPUs "
        "have idle time{}",
        device, s.identity ? " (" + s.identity->identity + ")" : std::string{},
        s.timeout_s ? fmt::format("{} s", *s.timeout_s) : std::string{"unknown"},
        monitor::watchdog::pet_policy_name(s.policy),
        s.last_reset_by_watchdog ? "; the last reset was caused by the watchdog" : "");
    if (s.timeout_s && *s.timeout_s != c.watchdog_timeout.count()) {
        spdlog::warn("Watchdog {}: asked for a timeout of {} s, the driver granted {} s", device,
                     c.watchdog_timeout.count(), *s.timeout_s);
    }
    return {};
}

std::optional<monitor::protocol::WatchdogInfo> Manager::watchdog_info() const {
    if (!watchdog_) return std::nullopt;
    const auto s = watchdog_->status();
    if (s.device.empty()) return std::nullopt;  // never armed
    monitor::protocol::WatchdogInfo w;
    w.device = s.device;
    if (s.identity) w.identity = s.identity->identity;
    w.armed = s.armed;
    w.timeout = s.timeout_s;
    w.time_left = s.time_left_s;
    if (s.since_last_pet)
        w.since_last_pet = std::chrono::duration<double>(*s.since_last_pet).count();
    w.pets = s.pets;
    w.pet_errors = s.pet_errors;
    if (!s.last_error.empty()) w.last_error = s.last_error;
    w.last_reset_by_watchdog = s.last_reset_by_watchdog;
    w.policy = monitor::watchdog::pet_policy_name(s.policy);
    w.waiting_for = s.waiting_for;
    w.on_stop = monitor::protocol::enum_value(
        monitor::watchdog::on_stop_name(options_.config.watchdog_on_stop));
    return w;
}

// Each tick: the CPUs that must earn credits, and pet failures (logged when they change).
void Manager::watch_watchdog() {
    if (!watchdog_) return;
    // Only on a change: set_cpus takes the lock the probes take (see Watchdog::status).
    if (auto cpus = probing_cpus(); cpus != watchdog_cpus_) {
        watchdog_->set_cpus(cpus);
        watchdog_cpus_ = std::move(cpus);
    }
    const auto s = watchdog_->status();
    if (s.pet_errors != watchdog_errors_seen_) {
        spdlog::error("Watchdog {}: {} pet(s) failed, last: {}", s.device,
                      s.pet_errors - watchdog_errors_seen_, s.last_error);
        watchdog_errors_seen_ = s.pet_errors;
    }
}

// At the end, as [watchdog] on-stop says: the magic close, or left armed.
void Manager::release_watchdog() {
    if (!watchdog_) return;
    const auto s = watchdog_->status();
    if (s.armed) {
        if (options_.config.watchdog_on_stop == monitor::watchdog::OnStop::KeepArmed) {
            watchdog_->close_armed();
            spdlog::warn(
                "Watchdog {} left armed (on-stop = {}): the machine resets in {} unless it is "
                "petted again",
                s.device, monitor::watchdog::on_stop_name(options_.config.watchdog_on_stop),
                s.time_left_s ? fmt::format("{} s", *s.time_left_s) : std::string{"its timeout"});
        } else if (auto r = watchdog_->disarm(); !r) {
            spdlog::error("Watchdog: {}", r.error().message);
        } else {
            spdlog::info("Watchdog {} disarmed", s.device);
        }
    }
    watchdog_.reset();
}

void Manager::notify_status() const {
    sd_notifyf(0, "STATUS=Sampling %zu CPUs every second; listening on %s",
               engine_->online_cpus().size(), socket_->path().c_str());
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

int Manager::on_timer(sd_event_source* s, uint64_t, void* userdata) {
    // The argument is the time the timer was due, not the time now.
    auto* self = static_cast<Manager*>(userdata);
    std::uint64_t now = 0;
    sd_event_now(self->event_.get(), CLOCK_MONOTONIC, &now);
    self->on_tick(now);
    // The next tick is one period after the previous one, not after now, so ticks do not
    // drift; after a stall (suspend, SIGSTOP) the schedule restarts from now instead of
    // firing the missed ticks back to back.
    self->next_tick_usec_ += kTickUsec;
    if (self->next_tick_usec_ <= now) self->next_tick_usec_ = now + kTickUsec;
    sd_event_source_set_time(s, self->next_tick_usec_);
    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    return 0;
}

void Manager::on_tick(std::uint64_t now) {
    auto r = engine_->tick(steady_from_usec(now));
    watch_watchdog();
    loading_replies_.fill(nullptr);
    std::erase_if(watchers_, [this](const Watcher& w) {
        return !server_->send(w.connection, loading_reply(w.query, true));
    });
    // A failure that persists is logged once, and its end once.
    std::string error = r ? std::string{} : r.error().to_string();
    if (error != last_tick_error_) {
        if (!error.empty()) {
            spdlog::warn("Sampling: {}", error);
        } else {
            spdlog::info("Sampling works again");
        }
        last_tick_error_ = error;
    }
    if (options_.show_loading) print_loading();
}

void Manager::print_loading() const {
    auto report = engine_->loading({.per_cpu = true, .history = false});
    auto pct = [](const std::vector<monitor::SourceLoad>& loads, std::string_view source) {
        const auto* l = monitor::find_source(loads, source);
        if (l == nullptr || !l->stats || !l->stats->avg_prev_sec) return std::string{"     -"};
        return fmt::format("{:5.1f}%", *l->stats->avg_prev_sec);
    };
    std::string line = fmt::format("{:%H:%M:%S}", fmt::localtime(std::time(nullptr)));
    for (auto source : engine_->source_names()) {
        line += fmt::format("  {} all {}", source, pct(report.machine, source));
        for (const auto& c : report.cpus) {
            if (c.online) line += fmt::format("  cpu{} {}", c.cpu, pct(c.sources, source));
        }
    }
    std::puts(line.c_str());
    std::fflush(stdout);
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
    counters_->set_control_group(gid, gid ? name : std::string{});
}

void Manager::reload() {
    state_ = State::Reloading;
    sd_notify(0, "RELOADING=1\nSTATUS=Reloading the configuration");
    std::filesystem::path file = options_.config_file.value_or(default_config_path());
    Config next;
    bool have_file = options_.config_file.has_value() || std::filesystem::exists(file);
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
        engine_->set_history_seconds(options_.config.history_seconds);
        loading_replies_.fill(nullptr);
        apply_control_group();
        spdlog::info("Reloaded {}", have_file ? file.string() : std::string{"the defaults"});
    }
    state_ = State::Running;
    sd_notify(0, "READY=1");
    notify_status();
}

}  // namespace monitord
