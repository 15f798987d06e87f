// The performance-counter half of the control interface: PMU information, the event list,
// plans, and the one counting session (collect for a duration, or start ... stop), with its
// multiplexing timer on the daemon's event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "sd_event_ptr.hpp"
#include "varlink_server.hpp"

namespace monitord {

// Makes the counter device of a session: perf_event_open normally, a simulated PMU in tests.
using DeviceFactory = std::function<std::unique_ptr<monitor::perf::CounterDevice>()>;

struct CounterServiceOptions {
    std::filesystem::path cgroup_root = "/sys/fs/cgroup";
    // Where the processor is read from (the catalog's check of built-in tables).
    std::filesystem::path proc_root = "/proc";
    std::filesystem::path sys_root = "/sys";
    DeviceFactory device;  // empty: perf_event_open
    // When the daemon's next loading tick is due (CLOCK_MONOTONIC, µs). Records of an
    // interval of whole seconds end on these ticks, so that the loop wakes once a second.
    std::function<std::uint64_t()> next_tick_usec;
};

class CounterService {
  public:
    CounterService(sd_event* event, VarlinkServer& server,
                   std::function<std::vector<int>()> online_cpus, CounterServiceOptions options);
    ~CounterService();
    CounterService(const CounterService&) = delete;
    CounterService& operator=(const CounterService&) = delete;

    // Starts libpfm4 and registers the methods. Without libpfm4 the methods answer with the
    // reason instead.
    void setup();
    // A connection closed: a collect it was waiting for ends and frees its counters.
    void connection_closed(std::uint64_t connection);
    // "collecting 3 events on all CPUs for pid 42", or empty.
    std::string describe() const;
    // The group whose members may start and stop sessions besides root and the daemon's
    // own user ([access] control-group); nullopt for none.
    void set_control_group(std::optional<gid_t> gid, std::string name);

  private:
    struct Session {
        std::unique_ptr<monitor::perf::PerfSession> session;
        std::optional<std::uint64_t> owner;  // the connection of a collect
        bool stream = false;                 // collect with "more": a reply per period
        bool per_cpu = false;
        std::optional<std::chrono::milliseconds> interval;
        std::chrono::steady_clock::time_point ends;  // collect only
        std::int64_t period = 0;
        // Kept from period to period, to be filled again: the counts now, at the previous
        // period and between the two; the record of the last period and its JSON.
        monitor::perf::PerfReport now;
        monitor::perf::PerfReport last;
        monitor::perf::PerfReport delta;
        monitor::protocol::CounterReport record;
        nlohmann::json record_json;
        std::string started_by;  // "pid 42 (uid 1000)"
    };

    using Response = VarlinkServer::Response;
    Response get_pmu_info() const;
    Response list_events(const monitor::varlink::Call& call) const;
    Response plan(const monitor::varlink::Call& call) const;
    Response collect(const monitor::varlink::Call& call, const Peer& peer);
    Response start(const monitor::varlink::Call& call, const Peer& peer);
    Response read();
    Response stop();
    std::optional<monitor::Error> refuse(const Peer& peer) const;
    std::optional<gid_t> control_gid_;
    std::string control_group_;
    // When the period that would end at `target` ends: on the nearest loading tick when the
    // interval is whole seconds, else `target`; never after the session's end.
    std::chrono::steady_clock::time_point period_end(
        std::chrono::steady_clock::time_point target) const;
    // Opens the request's counters as the one session `s` (its client-side fields filled
    // in); the error reply when that cannot be.
    std::optional<monitor::varlink::Reply> begin(const monitor::protocol::CounterRequest& request,
                                                 Session s);

    monitor::Result<monitor::perf::SessionOptions> options_for(
        const monitor::protocol::CounterRequest& request) const;
    monitor::Result<std::unique_ptr<monitor::perf::PerfSession>> open_session(
        const monitor::perf::SessionOptions& options) const;
    monitor::varlink::Reply error_reply(const monitor::Error& e,
                                        const std::string& events = {}) const;
    monitor::Result<void> arm_timers();
    void on_slice();
    void on_period();
    void end_session();

    static int on_slice_timer(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_period_timer(sd_event_source* s, uint64_t usec, void* userdata);

    sd_event* event_;
    VarlinkServer& server_;
    std::function<std::vector<int>()> online_cpus_;
    CounterServiceOptions options_;
    std::optional<monitor::perf::EventCatalog> catalog_;
    std::string catalog_error_;
    std::optional<Session> active_;
    SourcePtr slice_timer_;
    SourcePtr period_timer_;
};

}  // namespace monitord
