#include "daemon.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "logging.hpp"
#include "monitor/text_file.hpp"

namespace monitord {

namespace {

// The timer's accuracy: the loading tick, a rotation or a period's end may come this late.
constexpr std::uint64_t kTimerAccuracyUsec = 1'000;
// How often (in ticks) the history folds, drops and caps what it keeps.
constexpr std::uint64_t kHistoryPruneEvery = 300;
// A pet this late (they come about once a second) is a machine that starves its probes.
constexpr std::chrono::seconds kLatePet{2};

// sd-event's CLOCK_MONOTONIC and std::chrono::steady_clock are one clock.
Daemon::Clock::time_point steady_from_usec(std::uint64_t usec) {
    return Daemon::Clock::time_point{std::chrono::microseconds{usec}};
}

std::uint64_t usec_from_steady(Daemon::Clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

}  // namespace

monitor::Result<std::unique_ptr<Daemon>> Daemon::create(DaemonParts parts, const Config& config) {
    std::unique_ptr<Daemon> d{new Daemon(std::move(parts))};
    if (auto r = d->setup(config); !r) return std::unexpected(r.error());
    return d;
}

Daemon::~Daemon() {
    // Its reads' replies go to the server: the reads not done are dropped first.
    history_reader_.reset();
    if (history_writer_) {
        if (auto r = history_writer_->stop(parts_.wall_clock()); !r) {
            spdlog::warn("History: {}", r.error().message);
        }
    }
    if (server_) server_->set_close_handler({});
    profiles_.reset();  // its rings and sources, before the loop goes
    counters_.reset();  // its runs, before the runtime goes
    loading_.reset();
    server_.reset();
    timer_.reset();
    runtime_.reset();
}

monitor::Result<void> Daemon::setup(const Config& config) {
    config_ = config;
    monitor::EngineOptions eo;
    eo.proc_root = parts_.proc_root;
    eo.sys_root = parts_.sys_root;
    eo.history_seconds = config.history_seconds;
    eo.probe = parts_.probe.value_or(config.probe);
    eo.spinners = parts_.spinners;
    eo.cgroup_root = parts_.sys_root / "fs/cgroup";
    eo.cpu_context = true;  // sampled only while GetLoading asks for it
    eo.tasks = true;        // likewise
    auto watchdog = parts_.watchdog != nullptr
                        ? parts_.watchdog
                        : std::make_shared<monitor::watchdog::Watchdog>(config.watchdog_policy);
    auto runtime = monitor::Runtime::create(eo, std::move(watchdog), parts_.clock);
    if (!runtime) return std::unexpected(runtime.error());
    runtime_ = std::move(*runtime);
    if (const auto* units = runtime_->engine().units()) {
        spdlog::debug("CPU time per unit from {} under {}",
                      monitor::cgroup_accounting_name(units->accounting()), units->root().string());
    } else {
        spdlog::info("No CPU time per unit: {}", runtime_->engine().units_error());
    }

    server_ = std::make_unique<VarlinkServer>(
        parts_.event, parts_.listen_fd,
        VarlinkServer::Info{"monitord", "monitord", parts_.version, "man:monitord(8)"}, access_,
        parts_.limits);
    loading_ = std::make_unique<LoadingService>(*server_, *runtime_);
    loading_->setup();
    open_history();
    auto counter_options = parts_.counters;
    counter_options.proc_root = parts_.proc_root;
    counter_options.sys_root = parts_.sys_root;
    const monitor::perf::FileBudget files{.most = config.perf_files_per_session,
                                          .source = kPerfFilesSource};
    counter_options.files_per_session = files;
    counters_ = std::make_unique<CounterService>(
        parts_.event, *server_, *runtime_, [this] { schedule(); }, std::move(counter_options));
    counters_->setup();
    profiles_ = std::make_unique<ProfileService>(
        parts_.event, *server_, *runtime_, [this] { schedule(); }, counters_->catalog(),
        counters_->catalog_error(), [this] { return runtime_->engine().online_cpus(); },
        ProfileServiceOptions{.cgroup_root = parts_.counters.cgroup_root,
                              .kallsyms = parts_.proc_root / "kallsyms",
                              .modules = parts_.proc_root / "modules",
                              .max_profiles = kMaxProfiles,
                              .max_profiles_per_user = config.profiles_per_user,
                              .max_duration_per_user = config.profile_duration,
                              .files_per_session = files});
    profiles_->setup();
    server_->set_close_handler([this](std::uint64_t connection) {
        counters_->connection_closed(connection);
        profiles_->connection_closed(connection);
    });
    apply(config);
    return {};
}

void Daemon::open_history() {
    const auto dir = config_.state_directory.value_or(parts_.default_state_directory);
    if (dir.empty()) {
        spdlog::info("No history on disk: no state directory ([daemon] state-directory)");
        return;
    }
    auto store = HistoryStore::open(dir, config_.history_limits());
    if (!store) {
        spdlog::warn("No history on disk: {}", store.error().message);
        return;
    }
    const auto boot_id = monitor::read_text_file(parts_.boot_id_file);
    std::string boot = boot_id ? *boot_id : std::string{};
    while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
    const auto now = parts_.wall_clock();
    if (auto r = (*store)->start_run(boot, now); !r) {
        spdlog::warn("No history on disk: {}", r.error().message);
        return;
    }
    auto reader = HistoryStore::open_reader((*store)->file());
    if (!reader) {
        spdlog::warn("No history on disk: {}", reader.error().message);
        return;
    }
    auto reading = HistoryReader::start(parts_.event, std::move(*reader));
    if (!reading) {
        spdlog::warn("No history on disk: {}", reading.error().message);
        return;
    }
    spdlog::info("History of every second in {}", (*store)->file().string());
    // Its first prune on the writer's thread, as the later ones.
    history_writer_ = std::make_unique<HistoryWriter>(std::move(*store), now, kHistoryPruneEvery);
    history_reader_ = std::move(*reading);
    loading_->set_history(history_reader_.get(), history_writer_->run());
}

// After each tick: its second to the history's writer. A failure that persists is logged
// once, and its end with the seconds it lost; so is a disk too slow to keep up.
void Daemon::write_history() {
    if (!history_writer_) return;
    if (const auto second = runtime_->engine().last_second()) {
        // While the watchdog is armed and its pets are late (the machine starves its probes),
        // each second is synced: a reset, which loses what the disk has not, finds the seconds
        // that led to it on disk, not the last kSyncEvery of them lost.
        bool sync = false;
        if (const auto* dog = runtime_->watchdog()) {
            const auto since = dog->since_last_pet();
            sync = since && *since >= kLatePet;
        }
        history_writer_->post(parts_.wall_clock(), *second, sync);
    }
    const auto state = history_writer_->state();
    const auto lost = state.dropped - history_dropped_;
    if (state.error != last_history_error_) {
        if (!state.error.empty()) {
            spdlog::warn("History: {}; the seconds wait to be written (at most {} of them)",
                         state.error, kMaxPendingSeconds);
        } else {
            spdlog::info("History: writing again; {} second(s) could not wait and are lost", lost);
            history_dropped_ = state.dropped;
        }
        last_history_error_ = state.error;
    } else if (state.error.empty() && lost > 0 && state.pending <= 1) {
        // Writes that succeed, too slowly: said once it caught up.
        spdlog::warn("History: the disk fell behind; {} second(s) could not wait and are lost",
                     lost);
        history_dropped_ = state.dropped;
    }
}

void Daemon::note_watchdog_armed(const std::string& device, bool boot_reset) {
    if (history_writer_) history_writer_->note_watchdog(parts_.wall_clock(), device, boot_reset);
}

void Daemon::apply(const Config& config) {
    config_ = config;
    if (history_writer_) history_writer_->set_limits(config.history_limits());
    set_log_level(config.log_level);
    runtime_->engine().set_history_seconds(config.history_seconds);
    loading_->forget_replies();
    loading_->set_watchdog_on_stop(config.watchdog_on_stop);
    apply_control_group();
    server_->set_idle_timeout(config.idle_timeout);
    server_->set_max_pending_per_user(config.reply_memory_per_user << 20);
    profiles_->set_max_profiles_per_user(config.profiles_per_user);
    profiles_->set_max_duration_per_user(config.profile_duration);
    profiles_->set_max_files_per_session(config.perf_files_per_session);
    counters_->set_max_files_per_session(config.perf_files_per_session);
    counters_->set_metric_definitions(metric_definitions(config));
    counters_->configure_standing(config.counters, Clock::now());
}

void Daemon::apply_control_group() {
    const auto& name = config_.control_group;
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

monitor::Result<void> Daemon::start() {
    if (auto r = server_->start(); !r) return r;
    sd_event_source* t = nullptr;
    if (int r = sd_event_add_time(parts_.event, &t, CLOCK_MONOTONIC,
                                  usec_from_steady(runtime_->next_due()), kTimerAccuracyUsec,
                                  on_timer, this);
        r < 0) {
        return monitor::fail_errno(-r, "create the runtime's timer");
    }
    timer_.reset(t);
    sd_event_source_set_description(t, "runtime");
    return {};
}

int Daemon::on_timer(sd_event_source*, uint64_t, void* userdata) {
    // The argument is the time the timer was due, not the time now.
    auto* self = static_cast<Daemon*>(userdata);
    if (self->parts_.on_timer) self->parts_.on_timer();
    std::uint64_t now = 0;
    sd_event_now(self->parts_.event, CLOCK_MONOTONIC, &now);
    self->run_due(steady_from_usec(now));
    return 0;
}

void Daemon::schedule() {
    if (!timer_) return;
    sd_event_source_set_time(timer_.get(), usec_from_steady(runtime_->next_due()));
    sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
}

void Daemon::run_due(Clock::time_point now) {
    auto due = runtime_->run_due(now);
    for (const auto& step : due.runs) counters_->run_stepped(step, now);
    // The counter service's sample runs only read their rings: their steps call for nothing.
    for (auto& step : due.samplings) profiles_->run_stepped(step);
    if (due.failed_pets > 0) {
        spdlog::error("Watchdog {}: {} pet(s) failed, last: {}",
                      runtime_->watchdog()->status().device, due.failed_pets, due.last_pet_error);
    }
    if (due.ticked) {
        write_history();
        loading_->loading_changed();
        counters_->ticked(now);
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
        if (parts_.on_tick) parts_.on_tick();
    }
    schedule();
}

}  // namespace monitord
