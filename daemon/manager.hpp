// The Manager is monitord's process: it owns the event loop, the signals, sd_notify, the
// control socket's place, the spinning probes' process and the watchdog's arming, and runs the
// Daemon (daemon.hpp) on them: built at start, applied the new settings at each reload.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "config.hpp"
#include "control_socket.hpp"
#include "counter_service.hpp"
#include "daemon.hpp"
#include "monitor/loading/probe_process.hpp"
#include "sd_event_ptr.hpp"

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
    void set_state(State state);
    // After each loading tick: the spinners' place every few ticks, the loading line.
    void ticked();
    void reload();
    void notify_status() const;
    void log_probes() const;
    // Starts the spinning probes in a process of their own and places it where they yield to
    // the busy threads of every other group; nullptr, with probe_fallback_ saying why, when no
    // place does (monitor/loading/probe_process.hpp).
    std::shared_ptr<monitor::ProbeProcess> start_spinners();
    // Places the spinners' process: in a cgroup with cpu.idle=1 (systemd's monitord.slice, or
    // one of the daemon's own without systemd) when its group does not yield already, or
    // when that changes nothing for other processes. Returns its group as it then is.
    monitor::Result<monitor::ProbeGroup> place_spinners(pid_t pid, bool settled);
    // Every few ticks: the spinners' group may change (a unit given CPUWeight= turns the cpu
    // controller on): placed again, or stopped when they no longer yield.
    void check_spinners();
    void fall_back(const std::string& why);
    monitor::Result<void> arm_watchdog();
    // The group for a socket the daemon makes: [access] socket-group, else "monitor" when it
    // exists and the daemon may give it (root, or a member), else none (its own group).
    monitor::Result<std::optional<gid_t>> socket_group() const;
    void release_watchdog();

    static int on_signal(sd_event_source* s, const signalfd_siginfo* si, void* userdata);

    ManagerOptions options_;
    State state_ = State::Starting;
    EventPtr event_;
    SourcePtr sigterm_, sigint_, sighup_;
    std::optional<monitor::ProbeGroup> probe_group_;
    std::shared_ptr<monitor::ProbeProcess> spinners_;  // with --probe spin, while they run
    bool made_probe_cgroup_ = false;                   // by place_in_idle_cgroup
    std::optional<std::string> probe_fallback_;
    std::uint64_t ticks_ = 0;
    std::optional<ControlSocket> socket_;
    std::unique_ptr<Daemon> daemon_;  // after the socket it serves
};

}  // namespace monitord
