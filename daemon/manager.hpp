// The Manager owns monitord's event loop and everything the loop drives: the engine's 1 s
// timer, the control socket and its varlink server, signals, sd_notify.
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "config.hpp"
#include "control_socket.hpp"
#include "counter_service.hpp"
#include "monitor/engine.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/watchdog/watchdog.hpp"
#include "sd_event_ptr.hpp"
#include "varlink_server.hpp"

namespace monitord {

struct ManagerOptions {
    Config config;
    std::optional<std::filesystem::path> config_file;  // re-read on SIGHUP
    Overrides overrides;        // the flags, applied over the file again at each reload
    bool show_loading = false;  // print one line of loading per second on stdout
    bool user_socket = false;   // default socket at the user's place, also for root (--user)
    std::filesystem::path proc_root = "/proc";
    std::filesystem::path sys_root = "/sys";
    CounterServiceOptions counters;
};

class Manager {
  public:
    static monitor::Result<std::unique_ptr<Manager>> create(ManagerOptions options);
    ~Manager();

    // Runs the event loop until SIGTERM or SIGINT; returns the exit code.
    int run();

  private:
    enum class State { Starting, Running, Reloading, Stopping };

    explicit Manager(ManagerOptions options);
    monitor::Result<void> setup();
    void register_methods();
    void on_tick(std::uint64_t now_usec);
    void reload();
    void print_loading() const;
    VarlinkServer::Response loading_reply(const monitor::LoadingQuery& query, bool more);
    void notify_status() const;
    void log_probes() const;
    monitor::Result<void> arm_watchdog();
    // The group for a socket the daemon makes: [access] socket-group, else "monitor" when it
    // exists and the daemon may give it (root, or a member), else none (its own group).
    monitor::Result<std::optional<gid_t>> socket_group() const;
    // Applies [access] control-group to the counter service (at start and reload).
    void apply_control_group();
    void watch_watchdog();
    void release_watchdog();
    std::optional<monitor::protocol::WatchdogInfo> watchdog_info() const;
    std::vector<int> probing_cpus() const;

    static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_signal(sd_event_source* s, const signalfd_siginfo* si, void* userdata);

    ManagerOptions options_;
    State state_ = State::Starting;
    std::chrono::steady_clock::time_point started_;
    EventPtr event_;
    SourcePtr timer_;
    SourcePtr sigterm_, sigint_, sighup_;
    // Before the engine: its probes hold it, and credit it from their threads.
    std::shared_ptr<monitor::watchdog::Watchdog> watchdog_;
    std::uint64_t watchdog_errors_seen_ = 0;
    std::vector<int> watchdog_cpus_;  // as last given to set_cpus
    std::unique_ptr<monitor::Engine> engine_;
    std::optional<ControlSocket> socket_;
    std::unique_ptr<VarlinkServer> server_;
    std::unique_ptr<CounterService> counters_;
    // Encoded GetLoading replies by query (per_cpu + 2 * history + 4 * more), valid until
    // the next tick.
    std::array<VarlinkServer::EncodedReply, 8> loading_replies_;
    struct Watcher {
        std::uint64_t connection;
        monitor::LoadingQuery query;
    };
    std::vector<Watcher> watchers_;  // GetLoading calls with "more": a reply every tick
    std::uint64_t next_tick_usec_ = 0;
    std::string last_tick_error_;
};

}  // namespace monitord
