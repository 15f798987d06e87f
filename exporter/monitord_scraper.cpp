#include "monitord_scraper.hpp"

#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/monitor_messages.hpp"

namespace exporter {

Scrape MonitordScraper::scrape(monitor::Error* error) {
    const auto started = std::chrono::steady_clock::now();
    Scrape s;
    auto finish = [&](const monitor::Error* e) {
        if (e != nullptr) {
            client_.reset();
            if (error != nullptr) *error = *e;
        }
        s.at = std::chrono::system_clock::now();
        s.duration_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        return s;
    };
    // A connection kept from the previous scrape may have been closed by a monitord that
    // restarted since: then one new connection is tried before monitord counts as down. Not
    // after a timeout (NOTRDY): a monitord that is stopped or busy would make the scrape wait
    // twice as long.
    std::optional<monitor::Result<monitor::protocol::DaemonStatus>> status;
    if (client_) status = client_->call(monitor::protocol::method::GetStatus);
    if (status && !*status && status->error().status == monitor::Status::NotRdy) {
        return finish(&status->error());
    }
    if (!status || !*status) {
        auto c = monitor::protocol::DaemonClient::connect(socket_);
        if (!c) return finish(&c.error());
        client_.emplace(std::move(*c));
        client_->set_timeout(timeout_);
        status = client_->call(monitor::protocol::method::GetStatus);
        if (!*status) return finish(&status->error());
    }
    auto loading = client_->call(monitor::protocol::method::GetLoading,
                                 monitor::LoadingQuery{.per_cpu = collectors_.needs_per_cpu(),
                                                       .totals = collectors_.needs_totals(),
                                                       .units = collectors_.units_asked(),
                                                       .context = collectors_.needs_context()});
    if (!loading) return finish(&loading.error());
    if (collectors_.needs_standing()) {
        auto standing = client_->call(monitor::protocol::method::GetStandingCounters);
        if (!standing) return finish(&standing.error());
        s.standing = std::move(standing->sessions);
    }
    s.status = std::move(**status);
    s.loading = std::move(*loading);
    return finish(nullptr);
}

}  // namespace exporter
