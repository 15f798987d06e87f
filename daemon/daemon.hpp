// monitord without its process: the runtime (the engine, the watchdog, the counter runs) on one
// timer of the event loop it is given, the varlink server on the listening socket it is given,
// the services that answer the methods, and the settings applied to all of them. Built from a
// Config and the parts a process provides and a test replaces (DaemonParts). The process shell
// (Manager: signals, sd_notify, where the socket is, the spinning probes' process, arming the
// watchdog) and the tests build this same object.
#pragma once

#include <systemd/sd-event.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "access_rules.hpp"
#include "config.hpp"
#include "counter_service.hpp"
#include "history_reader.hpp"
#include "history_store.hpp"
#include "history_writer.hpp"
#include "loading_service.hpp"
#include "monitor/loading/probe_process.hpp"
#include "monitor/runtime/runtime.hpp"
#include "monitor/status.hpp"
#include "profile_service.hpp"
#include "sd_event_ptr.hpp"
#include "varlink_server.hpp"

namespace monitord {

struct DaemonParts {
    sd_event* event = nullptr;  // the loop it runs on; outlives the Daemon
    int listen_fd = -1;         // a listening socket; outlives the Daemon
    std::string version;        // as GetInfo and org.varlink.service say it
    std::filesystem::path proc_root = "/proc";
    std::filesystem::path sys_root = "/sys";
    // The probes as they run: the config's, unless the shell could not start the spinning
    // ones (then Sleep); `spinners`, their process, with Spin.
    std::optional<monitor::ProbeMode> probe;
    std::shared_ptr<monitor::ProbeProcess> spinners;
    // Null: one with the config's pet policy.
    std::shared_ptr<monitor::watchdog::Watchdog> watchdog;
    // CLOCK_MONOTONIC, the loop timer's clock (a test may move it).
    std::function<monitor::Runtime::Clock::time_point()> clock = [] {
        return monitor::Runtime::Clock::now();
    };
    // Where the history is kept when the config does not say (Config::state_directory);
    // empty: nowhere.
    std::filesystem::path default_state_directory;
    // The kernel's boot id (a run of the history names its boot).
    std::filesystem::path boot_id_file = "/proc/sys/kernel/random/boot_id";
    // The wall clock the history's seconds are dated by (a test may move it).
    std::function<std::chrono::system_clock::time_point()> wall_clock = [] {
        return std::chrono::system_clock::now();
    };
    // The connections it serves (idle-timeout and reply memory come from the Config).
    ServerLimits limits;
    // The counter service's device and cgroup root (its roots are proc_root and sys_root).
    CounterServiceOptions counters;
    // On the loop, after each loading tick: the shell's once-a-second work.
    std::function<void()> on_tick;
    // On the loop, each time the runtime's timer fires, before what is due runs (a test moves
    // a simulated PMU's clock).
    std::function<void()> on_timer;
};

class Daemon {
  public:
    using Clock = monitor::Runtime::Clock;

    // Builds the runtime (the probes calibrate meanwhile), the server and the services, and
    // applies `config`. Serves nothing until start().
    static monitor::Result<std::unique_ptr<Daemon>> create(DaemonParts parts, const Config& config);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Applies the keys that config_keys() marks OnReload::Applies, and the [[counters]]
    // tables, to the running parts: at start, and at each reload with plan_reload()'s config
    // (whose other keys keep their running values).
    void apply(const Config& config);
    const Config& config() const { return config_; }

    // Records in the history that this run armed the watchdog `device`, and whether its driver
    // said the boot began with its reset (GetHistoryRuns tells a watchdog's reset by it).
    void note_watchdog_armed(const std::string& device, bool boot_reset);

    // Serves the socket and sets the runtime's timer.
    monitor::Result<void> start();

    // Does what is due at `now` (the loading tick, counter runs, the watchdog's pets) and sets
    // the timer to when the runtime is next due. The timer calls it; a test may, at a time of
    // its choosing.
    void run_due(Clock::time_point now);
    void schedule();

    // The loop's thread only.
    monitor::Runtime& runtime() { return *runtime_; }
    VarlinkServer& server() { return *server_; }
    AccessRules& access() { return access_; }
    LoadingService& loading() { return *loading_; }
    CounterService& counters() { return *counters_; }
    ProfileService& profiles() { return *profiles_; }
    // The history on disk: its reader and its writer (each a thread of its own); nullptr
    // without one (no state directory, or it could not be opened: logged).
    const HistoryReader* history_reader() const { return history_reader_.get(); }
    HistoryWriter* history_writer() { return history_writer_.get(); }

  private:
    explicit Daemon(DaemonParts parts) : parts_(std::move(parts)) {}
    monitor::Result<void> setup(const Config& config);
    // [access] control-group to the access rules.
    void apply_control_group();
    void open_history();
    void write_history();

    static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);

    DaemonParts parts_;
    Config config_;
    std::unique_ptr<monitor::Runtime> runtime_;
    std::unique_ptr<HistoryWriter> history_writer_;
    std::unique_ptr<HistoryReader> history_reader_;  // GetLoading's ranges, GetHistoryRuns
    std::string last_history_error_;
    std::uint64_t history_dropped_ = 0;  // as last logged
    AccessRules access_;  // before the server, which checks every call against it
    std::unique_ptr<VarlinkServer> server_;
    std::unique_ptr<LoadingService> loading_;
    std::unique_ptr<CounterService> counters_;
    std::unique_ptr<ProfileService> profiles_;
    SourcePtr timer_;
    std::string last_tick_error_;
};

}  // namespace monitord
