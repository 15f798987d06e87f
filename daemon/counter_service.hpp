// The performance-counter half of the control interface: PMU information, the event list,
// plans, the one on-demand counting session (collect for a duration, or start ... stop), a
// run of the daemon's runtime, which paces it, and the standing sessions of monitord.conf
// beside it; the service turns what the runs did into replies.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "access_rules.hpp"
#include "monitor/perf/caller_rights.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/metric_definitions.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/runtime/runtime.hpp"
#include "sample_run_watch.hpp"
#include "standing_counters.hpp"
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
    // The perf_event files one session opens (its counters and the events it samples), for a
    // user other than root ([limits] perf-files-per-session).
    monitor::perf::FileBudget files_per_session;
};

class CounterService {
  public:
    // Sessions run in `runtime`; `schedule_changed` is called when one starts or ends, so that
    // the loop asks the runtime again when to wake.
    CounterService(sd_event* event, VarlinkServer& server, monitor::Runtime& runtime,
                   std::function<void()> schedule_changed, CounterServiceOptions options);
    ~CounterService();
    CounterService(const CounterService&) = delete;
    CounterService& operator=(const CounterService&) = delete;

    // Starts libpfm4 and registers the methods. Without libpfm4 the methods answer with the
    // reason instead.
    void setup();
    // A connection closed: a collect it was waiting for ends and frees its counters.
    void connection_closed(std::uint64_t connection);
    // The standing sessions become those of `tables` (at start and at each reload).
    void configure_standing(const std::vector<StandingSessionConfig>& tables,
                            monitor::Runtime::Clock::time_point now);
    // The loading ticked at `now`: failed standing sessions may be tried again.
    void ticked(monitor::Runtime::Clock::time_point now);
    // What the runtime's run_due() did to a run: the records and replies it calls for.
    void run_stepped(const monitor::Runtime::Due::RunStep& step,
                     monitor::Runtime::Clock::time_point now);
    // The on-demand session: "a collect of 1000 ms by pid 42 (uid 0) at 2026-11-27 03:12:45
    // UTC, counting 3 events", or empty.
    std::string describe() const;
    // From now on (a reload): a running session goes on.
    void set_max_files_per_session(std::size_t n) { options_.files_per_session.most = n; }
    // The derived metrics sessions may ask for (metric_definitions()), from now on: sessions
    // running keep the formulas they started with.
    void set_metric_definitions(std::vector<monitor::perf::MetricDefinition> definitions) {
        metrics_ = std::move(definitions);
    }
    const std::vector<monitor::perf::MetricDefinition>& metric_definitions() const {
        return metrics_;
    }
    std::size_t max_files_per_session() const { return options_.files_per_session.most; }
    // The event catalog, made by setup(); null when performance counters are unavailable,
    // for catalog_error().
    const monitor::perf::EventCatalog* catalog() const { return catalog_ ? &*catalog_ : nullptr; }
    const std::string& catalog_error() const { return catalog_error_; }

  private:
    struct SampledAddress {
        std::uint64_t ip = 0;
        bool kernel = false;  // sampled in kernel mode (or any mode but user)
    };
    // Its implicit moves reach a throw of nlohmann::json's other_error that cannot run (in
    // json_value(value_t), a null type in the case of the types that are not null).
    // NOLINTNEXTLINE(bugprone-exception-escape): see above
    struct Session {
        monitor::Runtime::RunId run = 0;
        std::optional<std::uint64_t> owner;  // the connection of a collect
        bool stream = false;                 // collect with "more": a reply per period
        // Its reports' counts per CPU, or per core, die, socket or node, besides the totals.
        monitor::protocol::ReportShape shape;
        // Kept from period to period, to be filled again: the record of the last period, and
        // its encoder.
        monitor::protocol::CollectOut record;
        monitor::protocol::CollectRecords records;
        std::string started_by;  // "pid 42 (uid 1000)"
        std::chrono::system_clock::time_point started;
        // With sample_every: each event sampled (a sample run in the runtime, its rings read
        // once a second on the tick and before each record), and the last address seen of
        // each since the last record, and since the start.
        std::vector<monitor::Runtime::RunId> sampling;
        std::vector<std::unique_ptr<SampleRunWatch>> sampling_watch;  // their rings, half full
        std::vector<std::optional<SampledAddress>> last_address;
        std::vector<std::optional<SampledAddress>> last_address_ever;
        // Whether its owner may see kernel addresses (perf_rights): its records' addresses.
        bool owner_kernel_addresses = true;
    };

    using Response = VarlinkServer::Response;
    Response get_pmu_info() const;
    // The derived metrics `request` asks for, with their events, added to `options`.
    monitor::Result<void> add_requested_metrics(const monitor::protocol::CounterRequest& request,
                                                monitor::perf::SessionOptions& options) const;
    Response list_metrics() const;
    Response list_events(const monitor::protocol::ListEventsIn& in) const;
    Response plan(const monitor::protocol::CounterRequest& request, const Peer& peer) const;
    // `more`: the caller reads a reply per interval.
    Response collect(const monitor::protocol::CollectCountersIn& in, bool more, const Peer& peer);
    Response start(const monitor::protocol::CounterRequest& request, const Peer& peer);
    Response read(const Peer& peer);
    Response stop(const Peer& peer);
    Response get_standing(const std::optional<std::string>& name) const;
    // The standing session `session`, or the running one.
    Response reset(const std::optional<std::string>& session, const Peer& peer);
    // Pauses (`paused`) or resumes the standing session `session`, or the running one and its
    // sampling.
    Response set_paused(const std::optional<std::string>& session, bool paused, const Peer& peer);
    // NoSuchSession for `name`, listing the sessions there are.
    monitor::varlink::Reply no_such_session(const std::string& name) const;
    // The plan as a reply carries it, with the standing sessions it shares counters with.
    monitor::protocol::CounterPlan plan_message(const monitor::perf::Plan& plan) const;
    // Opens the request's counters as the one session `s` (its client-side fields filled
    // in), paced as `run` says; the error reply when that cannot be.
    // `rights`: what its client may count (perf_rights).
    std::optional<monitor::varlink::Reply> begin(const monitor::protocol::CounterRequest& request,
                                                 monitor::CounterRunOptions run, Session s,
                                                 const monitor::perf::CallerRights& rights);
    monitor::CounterRun& run() { return *runtime_.run(active_->run); }
    // The CPUs online as of the last loading tick; a report's other CPUs are offline.
    const std::vector<int>& online() const { return runtime_.engine().online_cpus(); }
    // The stream's record of the period that ended; false when its client is gone.
    bool send_period();
    // Opens the sampling of each event of a request with sample_every into `sampling`; the
    // error reply when that cannot be.
    std::optional<monitor::varlink::Reply> start_sampling(
        const monitor::protocol::CounterRequest& request,
        const monitor::perf::SessionOptions& options, const monitor::perf::PerfSession& counting,
        std::vector<std::unique_ptr<monitor::perf::ProfileSession>>& sampling);
    // Puts each of `sampling` into the runtime as a run of the active session, whose
    // observer keeps the last address of its event.
    void run_sampling(std::vector<std::unique_ptr<monitor::perf::ProfileSession>> sampling);
    // Puts each event's last sampled address into `report`: since the last record, or
    // (`whole`) since the start. A kernel address is 0 for a reader that may not see one
    // (`kernel_addresses` false), as the kernel shows it such readers.
    void put_sampled_addresses(monitor::protocol::CounterReport& report, bool whole,
                               bool kernel_addresses);

    // The session's options for `request` by a client with `rights`: PERM when it may not
    // count that target; user mode only when it may not count kernel mode. A process target's
    // processes are pinned in `pinned` before their check (opened_on_checked() after the open).
    monitor::Result<monitor::perf::SessionOptions> options_for(
        const monitor::protocol::CounterRequest& request, const monitor::perf::CallerRights& rights,
        std::vector<monitor::perf::PinnedProcess>& pinned) const;
    // NODEV when a pinned process exited before its counters were open: they may be on
    // another process that took its pid.
    static monitor::Result<void> opened_on_checked(
        const std::vector<monitor::perf::PinnedProcess>& pinned,
        const monitor::perf::SessionOptions& options);
    monitor::Result<std::unique_ptr<monitor::perf::PerfSession>> open_session(
        const monitor::perf::SessionOptions& options) const;
    monitor::varlink::Reply error_reply(const monitor::Error& e,
                                        const std::string& events = {}) const;
    void end_session();

    sd_event* event_;
    VarlinkServer& server_;
    monitor::Runtime& runtime_;
    std::function<void()> schedule_changed_;
    CounterServiceOptions options_;
    std::optional<monitor::perf::EventCatalog> catalog_;
    std::string catalog_error_;
    std::vector<monitor::perf::MetricDefinition> metrics_;
    std::optional<Session> active_;
    StandingCounters standing_;
};

}  // namespace monitord
