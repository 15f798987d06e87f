#include "loading_service.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <ctime>

#include "monitor/protocol/monitor_messages.hpp"
#include "monitord-config.h"
#include "perf_errors.hpp"

namespace monitord {

using monitor::varlink::Call;

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
                           if (call.more) watchers_.push_back({peer.connection, query});
                           return loading(query, call.more);
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
                  query.units}];
    if (!cached) {
        cached = std::make_shared<const std::string>(
            monitor::varlink::encode(monitor::protocol::reply_of(
                monitor::protocol::method::GetLoading, runtime_.engine().loading(query), more)));
    }
    return VarlinkServer::Response{cached, more};
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
