// The loading half of the control interface: GetStatus (the daemon's identity and state, the
// probes, the watchdog) and GetLoading (the loading, once or after every tick), over the
// runtime's engine. The loading changes once a tick, so every caller between two ticks gets
// the same encoded reply.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "history_reader.hpp"
#include "history_store.hpp"
#include "monitor/loading/loading_report.hpp"
#include "monitor/loading/probe_group.hpp"
#include "monitor/runtime/runtime.hpp"
#include "varlink_server.hpp"

namespace monitord {

class LoadingService {
  public:
    LoadingService(VarlinkServer& server, const monitor::Runtime& runtime);
    LoadingService(const LoadingService&) = delete;
    LoadingService& operator=(const LoadingService&) = delete;

    // Registers GetStatus, GetLoading and GetHistoryRuns.
    void setup();
    // What GetStatus says of the daemon: its state ("running", "reloading", ...) and what
    // an orderly stop does to the watchdog.
    void set_state(std::string state) { state_ = std::move(state); }
    void set_watchdog_on_stop(monitor::watchdog::OnStop on_stop) { on_stop_ = on_stop; }
    monitor::watchdog::OnStop watchdog_on_stop() const { return on_stop_; }
    void set_probe_group(std::optional<monitor::ProbeGroup> group) {
        probe_group_ = std::move(group);
    }
    void set_probe_fallback(std::optional<std::string> why) { probe_fallback_ = std::move(why); }
    // Where GetLoading's ranges (since/until) and GetHistoryRuns read from (on the reader's
    // thread: the loop goes on meanwhile), and this daemon's run in it; nullptr: none (they
    // are refused, saying why).
    void set_history(HistoryReader* history, std::int64_t run) {
        history_ = history;
        history_run_ = run;
    }

    // After a tick: the replies are made afresh, and the callers that asked for more get
    // theirs.
    void loading_changed();
    // After a change of the history window: the next replies are made afresh.
    void forget_replies() { replies_.clear(); }
    // One line of the last second's loading per source, for the daemon's --show-loading.
    std::string loading_line() const;
    // The GetLoading calls with "more" still served; one whose client left is dropped at the
    // next tick. For the tests.
    std::size_t watchers() const { return watchers_.size(); }

  private:
    VarlinkServer::Response status() const;
    VarlinkServer::Response loading(const monitor::LoadingQuery& query, bool more);
    // Read on the history reader's thread, and answered from there to `connection`.
    VarlinkServer::Response range(const monitor::LoadingQuery& query, std::uint64_t connection);
    VarlinkServer::Response history_runs(const monitor::protocol::HistoryRunsIn& in,
                                         std::uint64_t connection);
    // `read` posted to the reader, its reply sent to `connection` when done: a deferred reply,
    // or the refusal when too many reads wait.
    VarlinkServer::Response read_history(HistoryReader::Read read, std::uint64_t connection);

    VarlinkServer& server_;
    const monitor::Runtime& runtime_;
    const std::chrono::steady_clock::time_point started_;
    std::string state_ = "starting";
    monitor::watchdog::OnStop on_stop_ = monitor::watchdog::OnStop::Disarm;
    std::optional<monitor::ProbeGroup> probe_group_;
    std::optional<std::string> probe_fallback_;
    HistoryReader* history_ = nullptr;
    std::int64_t history_run_ = 0;
    // Encoded GetLoading replies by query (per_cpu + 2 * history + 4 * states + 8 * totals +
    // 16 * more + 32 * context, and the units and tasks asked for), valid until the loading
    // changes.
    std::map<std::tuple<unsigned, std::int64_t, std::int64_t>, VarlinkServer::EncodedReply>
        replies_;
    struct Watcher {
        std::uint64_t connection;
        monitor::LoadingQuery query;
    };
    std::vector<Watcher> watchers_;  // GetLoading calls with "more": a reply every tick
};

}  // namespace monitord
