#include "loading_service.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <limits>

#include "monitor/loading/history_range.hpp"
#include "monitor/protocol/method_inputs.hpp"
#include "monitor/protocol/method_outputs.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitord-config.h"
#include "perf_errors.hpp"

namespace monitord {

using monitor::varlink::Call;

namespace {

// The most CPU-rows (a row's CPUs, summed over the rows) a range reads: about 2 s of reading,
// on the history reader's thread, and a reply of a size that a client takes.
constexpr std::uint64_t kMaxRangeCpuRows = std::uint64_t{1} << 22;
// GetHistoryRuns: how many runs by default and at most, and the seconds before an end.
constexpr std::int64_t kDefaultHistoryRuns = 20;
constexpr std::int64_t kMaxHistoryRuns = 1000;
constexpr std::chrono::seconds kHistoryRunLastSeconds{10};

// The error of a call about the history when there is none to read.
monitor::varlink::Reply no_history(std::string message) {
    return monitor::varlink::make_error("io.monitord.Monitor.NoHistory",
                                        nlohmann::json{{"message", std::move(message)}});
}

// GetLoading over [from, to] of `history` (on the reader's thread: the loop ticks on
// meanwhile), for a machine of `cpus` CPUs.
VarlinkServer::Response read_range(const HistoryStore& history, const monitor::LoadingQuery& query,
                                   HistoryStore::Time from, HistoryStore::Time to,
                                   std::uint64_t cpus) {
    using Time = HistoryStore::Time;
    // A range's cost (its rows, each holding every CPU) is bounded, and so is its reply.
    auto rows = history.rows(from, to);
    if (!rows) return no_history(rows.error().message);
    if ((rows->first + rows->second) * cpus > kMaxRangeCpuRows) {
        return perf_error_reply(
            monitor::Error{monitor::Status::BadArg,
                           fmt::format("since/until: the range holds {} rows of {} CPUs; a reply "
                                       "reads at most {} CPU-seconds (an hour at 1,024 CPUs, a "
                                       "day at 48): narrow the range",
                                       rows->first + rows->second, cpus, kMaxRangeCpuRows)},
            nullptr);
    }
    if (query.history) {
        const auto most = query.per_cpu ? monitor::kMaxRangeValuesPerCpu : monitor::kMaxRangeValues;
        // Against what the history holds: a range reaching beyond it is not that long.
        auto span = history.span();
        const Time first = span && *span ? std::max(from, (*span)->first) : from;
        const Time last = span && *span ? std::min(to, (*span)->second) : to;
        if (last - first > most) {
            return perf_error_reply(
                monitor::Error{
                    monitor::Status::BadArg,
                    fmt::format(
                        "since/until: the per-second values (history) of {} s are asked "
                        "for; a reply carries at most {} s of them{}: narrow the range, or "
                        "ask without history",
                        std::chrono::duration_cast<std::chrono::seconds>(last - first).count(),
                        most.count(), query.per_cpu ? " per CPU" : "")},
                nullptr);
        }
    }
    monitor::HistoryRange range(query);
    auto r = history.read(
        from, to,
        [&](Time at, const monitor::HistorySecond& s, const monitor::HistorySecond* low,
            const monitor::HistorySecond* high) { range.add(at, s, low, high); });
    if (!r) return no_history(r.error().message);
    // Encoded here too: a long range's reply is the larger part of the work.
    return VarlinkServer::EncodedReply{
        std::make_shared<const std::string>(monitor::varlink::encode(monitor::protocol::reply_of(
            monitor::protocol::method::GetLoading, range.report(), false)))};
}

// GetHistoryRuns: the `most` newest runs of `history`, this daemon's being `running` (on the
// reader's thread, as a range).
VarlinkServer::Response read_runs(const HistoryStore& history, std::int64_t most,
                                  std::int64_t running) {
    using Time = HistoryStore::Time;
    auto runs = history.runs();
    if (!runs) return no_history(runs.error().message);
    auto us = [](Time t) {
        return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    };
    monitor::protocol::HistoryRunsOut out;
    out.file = history.file().string();
    const std::size_t first = runs->size() > static_cast<std::size_t>(most)
                                  ? runs->size() - static_cast<std::size_t>(most)
                                  : 0;
    for (std::size_t i = first; i < runs->size(); ++i) {
        const HistoryRun& r = (*runs)[i];
        monitor::protocol::HistoryRunInfo info;
        info.id = r.id;
        info.boot_id = r.boot_id;
        info.started = us(r.started);
        if (r.last) info.last = us(*r.last);
        if (r.stopped) info.stopped = us(*r.stopped);
        const RunEnd end = run_end(*runs, i, running);
        info.ended = std::string(run_end_name(end));
        info.watchdog = r.watchdog;
        info.boot_reset_by_watchdog = r.boot_reset_by_watchdog;
        // The evidence of an end that was not a stop: what the machine did before it.
        if (end != RunEnd::Stopped && end != RunEnd::Running && r.last) {
            const Time from = *r.last - kHistoryRunLastSeconds + std::chrono::milliseconds(1);
            auto lasts = history.read(
                from, *r.last,
                [&](Time at, const monitor::HistorySecond& s, const monitor::HistorySecond*,
                    const monitor::HistorySecond*) {
                    monitor::protocol::HistoryRunSecond second{.at = us(at), .machine = {}};
                    for (const auto& source : s.sources) {
                        second.machine.push_back({source.name, source.machine});
                    }
                    info.last_seconds.push_back(std::move(second));
                });
            if (!lasts) return no_history(lasts.error().message);
        }
        out.runs.push_back(std::move(info));
    }
    return monitor::protocol::reply_of(monitor::protocol::method::GetHistoryRuns, out);
}

}  // namespace

LoadingService::LoadingService(VarlinkServer& server, const monitor::Runtime& runtime)
    : server_(server), runtime_(runtime), started_(std::chrono::steady_clock::now()) {}

void LoadingService::setup() {
    server_.add_interface(
        *monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface));
    namespace method = monitor::protocol::method;
    server_.add_method(method::GetStatus,
                       [this](const monitor::protocol::NoInput&, const Call&,
                              const Peer&) -> VarlinkServer::Response { return status(); });
    // With "more", the caller gets a reply after every tick (monctl --watch).
    server_.add_method(method::GetLoading,
                       [this](const monitor::LoadingQuery& query, const Call& call,
                              const Peer& peer) -> VarlinkServer::Response {
                           if (auto ok = monitor::check(query); !ok) {
                               return perf_error_reply(ok.error(), nullptr);
                           }
                           if (query.ranged()) {
                               if (call.more) {
                                   return perf_error_reply(
                                       monitor::Error{monitor::Status::BadArg,
                                                      "since/until: a range is answered once; "
                                                      "call without more"},
                                       nullptr);
                               }
                               return range(query, peer.connection);
                           }
                           if (call.more) watchers_.push_back({peer.connection, query});
                           return loading(query, call.more);
                       });
    server_.add_method(method::GetHistoryRuns,
                       [this](const monitor::protocol::HistoryRunsIn& in, const Call&,
                              const Peer& peer) -> VarlinkServer::Response {
                           return history_runs(in, peer.connection);
                       });
}

VarlinkServer::Response LoadingService::status() const {
    const auto& engine = runtime_.engine();
    monitor::protocol::DaemonStatus s;
    s.version = MONITORD_VERSION;
    s.uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    s.state = state_;
    s.pid = ::getpid();
    s.cpus = engine.online_cpus();
    for (auto n : engine.source_names()) s.sources.emplace_back(n);
    s.probe_mode = monitor::probe_mode_name(engine.probe_mode());
    if (const auto* probes = engine.probes()) {
        for (const auto& r : probes->read()) s.probes.push_back(monitor::protocol::probe_status(r));
    }
    if (probe_group_) s.probe_group = monitor::protocol::probe_group_info(*probe_group_);
    s.probe_fallback = probe_fallback_;
    s.history_seconds = static_cast<std::int64_t>(engine.history_seconds());
    if (const auto* dog = runtime_.watchdog()) {
        s.watchdog = monitor::protocol::watchdog_info(
            dog->status(),
            monitor::protocol::enum_value(monitor::watchdog::on_stop_name(on_stop_)));
    }
    return monitor::protocol::reply_of(monitor::protocol::method::GetStatus, s);
}

VarlinkServer::Response LoadingService::loading(const monitor::LoadingQuery& query, bool more) {
    auto& cached =
        replies_[{(query.per_cpu ? 1U : 0U) + (query.history ? 2U : 0U) + (query.states ? 4U : 0U) +
                      (query.totals ? 8U : 0U) + (more ? 16U : 0U) + (query.context ? 32U : 0U),
                  query.units, query.tasks}];
    if (!cached) {
        cached = std::make_shared<const std::string>(
            monitor::varlink::encode(monitor::protocol::reply_of(
                monitor::protocol::method::GetLoading, runtime_.engine().loading(query), more)));
    }
    return VarlinkServer::Response{cached, more};
}

VarlinkServer::Response LoadingService::range(const monitor::LoadingQuery& query,
                                              std::uint64_t connection) {
    using std::chrono::microseconds;
    using Time = HistoryStore::Time;
    if (history_ == nullptr) {
        return no_history(
            "since/until: this monitord keeps no history on disk (it has no state directory: "
            "monitord.conf(5), [daemon] state-directory; see its log for why)");
    }
    // Microseconds as far as the clock's nanoseconds reach (the year 2262).
    auto time_of = [](std::int64_t us) {
        constexpr std::int64_t kLast = std::numeric_limits<std::int64_t>::max() / 1000;
        return Time{microseconds{std::clamp<std::int64_t>(us, 0, kLast)}};
    };
    const Time from = query.since ? time_of(*query.since) : Time{};
    const Time to =
        query.until
            ? time_of(*query.until)
            : std::chrono::time_point_cast<Time::duration>(std::chrono::system_clock::now());
    const auto cpus = std::max<std::uint64_t>(runtime_.engine().online_cpus().size(), 1);
    return read_history(
        [query, from, to, cpus](const HistoryStore& history) {
            return read_range(history, query, from, to, cpus);
        },
        connection);
}

VarlinkServer::Response LoadingService::read_history(HistoryReader::Read read,
                                                     std::uint64_t connection) {
    const bool posted =
        history_->post(std::move(read), [this, connection](VarlinkServer::Response reply) {
            // A caller that left meanwhile is not there to send to: nothing more to do.
            (void)server_.send(connection, reply);
        });
    if (!posted) {
        return no_history(fmt::format(
            "the history is busy: {} reads under way or waiting; try again", history_->pending()));
    }
    return VarlinkServer::Response::later();
}

VarlinkServer::Response LoadingService::history_runs(const monitor::protocol::HistoryRunsIn& in,
                                                     std::uint64_t connection) {
    const std::int64_t most = in.most.value_or(kDefaultHistoryRuns);
    if (most < 1 || most > kMaxHistoryRuns) {
        return perf_error_reply(
            monitor::Error{monitor::Status::BadArg,
                           fmt::format("most: {} runs; ask for 1 to {}", most, kMaxHistoryRuns)},
            nullptr);
    }
    if (history_ == nullptr) {
        return no_history(
            "this monitord keeps no history on disk, so no record of its runs (it has no state "
            "directory: monitord.conf(5), [daemon] state-directory; see its log for why)");
    }
    return read_history(
        [most, running = history_run_](const HistoryStore& history) {
            return read_runs(history, most, running);
        },
        connection);
}

void LoadingService::loading_changed() {
    forget_replies();
    std::erase_if(watchers_, [this](const Watcher& w) {
        return !server_.send(w.connection, loading(w.query, true));
    });
}

std::string LoadingService::loading_line() const {
    const auto& engine = runtime_.engine();
    auto report = engine.loading({.per_cpu = true, .history = false});
    auto pct = [](const std::vector<monitor::SourceLoad>& loads, std::string_view source) {
        const auto* l = monitor::find_source(loads, source);
        if (l == nullptr || !l->stats || !l->stats->avg_prev_sec) return std::string{"     -"};
        return fmt::format("{:5.1f}%", *l->stats->avg_prev_sec);
    };
    std::string line = fmt::format("{:%H:%M:%S}", fmt::localtime(std::time(nullptr)));
    for (auto source : engine.source_names()) {
        line += fmt::format("  {} all {}", source, pct(report.machine, source));
        for (const auto& c : report.cpus) {
            if (c.online) line += fmt::format("  cpu{} {}", c.cpu, pct(c.sources, source));
        }
    }
    return line;
}

}  // namespace monitord
