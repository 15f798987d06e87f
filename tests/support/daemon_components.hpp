// monitord's Daemon (daemon/daemon.hpp), the very object the daemon's process runs, without the
// process: an sd-event loop on a thread of its own, a listening AF_UNIX socket in a scratch
// directory, the Daemon built on them from a Config over a temporary /proc and /sys (with its
// runtime, server and every service, as monitord wires them). Or, for the server's own tests,
// a VarlinkServer alone with the test's handlers. The test's thread talks to them over the
// socket with the real varlink client. Everything of sd-event and the components belongs to
// the loop's thread: a test that must act on them directly posts the work there with
// on_loop().
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include "access_rules.hpp"
#include "config.hpp"
#include "counter_service.hpp"
#include "daemon.hpp"
#include "loading_service.hpp"
#include "monitor/protocol/varlink_client.hpp"
#include "monitor/runtime/runtime.hpp"
#include "monitor/unique_fd.hpp"
#include "sd_event_ptr.hpp"
#include "test_support.hpp"
#include "varlink_server.hpp"

namespace test_support {

struct ComponentOptions {
    // The machine the runtime reads: /proc/stat and the online CPUs; for the counters'
    // catalog, /proc/cpuinfo and a core PMU in /sys (see DescribedMachine).
    std::map<int, Ticks> stat = {{0, {100, 900}}, {1, {200, 800}}};
    std::string online = "0-1";
    // Files of the machine's cgroup tree, by path below /sys/fs/cgroup ("cgroup.controllers",
    // "system.slice/a.service/cpu.stat"); none: the machine has no cgroup accounting.
    std::map<std::string, std::string> cgroups;
    // Other files of /proc, by path below it ("interrupts", "pressure/cpu"), as at start.
    std::map<std::string, std::string> proc_files;
    std::string cpuinfo;
    bool core_pmu = false;
    // Off: no probe threads; sleep runs probes that measure nothing and can pet a watchdog.
    monitor::ProbeMode probe = monitor::ProbeMode::Off;
    // Given to the runtime, to be armed by a test (it needs probes).
    std::shared_ptr<monitor::watchdog::Watchdog> watchdog;
    // The connections served (idle-timeout and reply memory are the config's).
    monitord::ServerLimits limits;
    // The loading tick comes only from tick(), not a second apart from the timer: the
    // runtime's first tick is put an hour away. Counter runs keep their own times.
    bool manual_ticks = false;
    // The Daemon's settings, applied as at start.
    monitord::Config config;
    // The counter service's device (empty: perf_event_open) and cgroup root.
    monitord::CounterServiceOptions counters;
    // Not empty: no Daemon, a VarlinkServer alone, to which this adds the test's own handlers
    // and interfaces on the loop's thread before it starts (the server's own tests).
    std::function<void(monitord::VarlinkServer&)> bare_server;
    // Run on the loop's thread whenever the runtime's timer fires, before what is due runs.
    std::function<void()> on_timer;
};

// A call of `method` (qualified: "io.monitord.Monitor.GetLoading").
monitor::varlink::Call make_call(std::string method,
                                 nlohmann::json parameters = nlohmann::json::object(),
                                 bool more = false);

// No reply comes on `client` within `wait`.
testing::AssertionResult NoReplyWithin(monitor::varlink::Client& client,
                                       std::chrono::milliseconds wait);

class DaemonComponents {
  public:
    using Clock = monitor::Runtime::Clock;

    // Sets the components up on the loop's thread and starts the loop; error() says what
    // failed when ok() is false.
    explicit DaemonComponents(ComponentOptions options = {});
    // Ends the loop and takes the components down on its thread, in Manager's order.
    ~DaemonComponents();
    DaemonComponents(const DaemonComponents&) = delete;
    DaemonComponents& operator=(const DaemonComponents&) = delete;

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    const std::string& socket_path() const { return socket_path_; }
    std::filesystem::path proc_root() const { return machine_.proc(); }
    std::filesystem::path sys_root() const { return machine_.sys(); }

    // A client connected to the server; throws when it cannot connect.
    monitor::varlink::Client connect() const;

    // Runs `fn` on the loop's thread and returns what it returned (or throws what it threw).
    template <class F>
    std::invoke_result_t<F&> on_loop(F&& fn) {
        using R = std::invoke_result_t<F&>;
        if (!ok()) throw std::logic_error("the components did not start: " + error_);
        std::packaged_task<R()> task([&fn]() -> R { return fn(); });
        auto result = task.get_future();
        post([&task] { task(); });
        return result.get();
    }

    // Writes /proc/stat, on the loop's thread so that no sample reads it half written.
    void write_stat(const std::map<int, Ticks>& cpus);
    // Does what is due at the runtime's next tick, now: the loading tick (and the counter
    // runs due by then), as if the timer had fired at that time.
    void tick();

    // The loop's thread only (inside on_loop, a handler, or the hooks). All but server() and
    // access() need the Daemon (no bare_server).
    monitord::VarlinkServer& server() { return daemon_ ? daemon_->server() : *server_; }
    monitord::AccessRules& access() { return daemon_ ? daemon_->access() : access_; }
    monitord::Daemon& daemon() { return *daemon_; }
    monitor::Runtime& runtime() { return daemon_->runtime(); }
    monitord::LoadingService& loading() { return daemon_->loading(); }
    monitord::CounterService& counters() { return daemon_->counters(); }
    monitord::ProfileService& profiles() { return daemon_->profiles(); }
    sd_event* event() { return event_.get(); }

  private:
    monitor::Result<void> setup();
    void teardown();
    void post(std::function<void()> fn);

    static int on_wake(sd_event_source* s, int fd, uint32_t revents, void* userdata);

    ComponentOptions options_;
    DescribedMachine machine_;
    ScratchDir socket_dir_{"monitord-components", ScratchDir::Everyone};
    std::string socket_path_;
    std::string error_;
    std::thread loop_;

    // Work posted to the loop's thread, and the eventfd that wakes it for that.
    std::mutex mutex_;
    std::deque<std::function<void()>> posted_;
    monitor::UniqueFd wake_fd_;

    // The loop's thread only.
    monitord::EventPtr event_;
    monitord::SourcePtr wake_source_;
    monitor::UniqueFd listen_fd_;
    std::unique_ptr<monitord::Daemon> daemon_;
    // bare_server only.
    monitord::AccessRules access_;
    std::unique_ptr<monitord::VarlinkServer> server_;
};

}  // namespace test_support
