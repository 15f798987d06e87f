// Asks monitord, afresh on every scrape, for its status and what the collectors need of it: its
// loading (per CPU, with the time by state) and its standing counter sessions, over one
// connection kept between scrapes and made again when it broke. It blocks: the exporter runs it on
// its ScrapeWorker's thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "machine_metrics.hpp"
#include "monitor/protocol/daemon_client.hpp"

namespace exporter {

class MonitordScraper {
  public:
    // `socket`: monitord's socket, or empty for the places monctl looks in. `timeout`: how long
    // a reply may take before the scrape counts monitord as down. `collectors`: what to ask for.
    MonitordScraper(std::string socket, std::chrono::milliseconds timeout,
                    CollectorSet collectors = CollectorSet::defaults())
        : socket_(std::move(socket)), timeout_(timeout), collectors_(collectors) {}

    // The replies; when monitord does not answer, a Scrape without them and the error in
    // `error`.
    Scrape scrape(monitor::Error* error);

  private:
    std::string socket_;
    std::chrono::milliseconds timeout_;
    CollectorSet collectors_;
    std::optional<monitor::protocol::DaemonClient> client_;
};

}  // namespace exporter
