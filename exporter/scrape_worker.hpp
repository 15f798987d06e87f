// Asks monitord on a thread of its own, so that the exporter's loop keeps serving while
// monitord takes its time (up to --timeout, when it is stopped or busy): one scrape at a
// time, and the requests that arrive while it runs get its result, as they would a cached
// second. The thread wakes the loop when a result is there.
#pragma once

#include <systemd/sd-event.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "loop_wakeup.hpp"
#include "machine_metrics.hpp"
#include "monitor/status.hpp"
#include "monitord_scraper.hpp"

namespace exporter {

class ScrapeWorker {
  public:
    // A scrape's result: the replies, and the error when monitord did not answer.
    using Done = std::function<void(const Scrape&, const std::optional<monitor::Error>&)>;

    static monitor::Result<std::unique_ptr<ScrapeWorker>> start(sd_event* event,
                                                                MonitordScraper scraper);
    // Stops the thread once its scrape (if any) ends; requests not answered are dropped.
    ~ScrapeWorker();
    ScrapeWorker(const ScrapeWorker&) = delete;
    ScrapeWorker& operator=(const ScrapeWorker&) = delete;

    // On the loop: `done` is called on the loop with the running scrape's result, or when
    // none runs, with that of one started now.
    void request(Done done);

    // Requests waiting for a result.
    std::size_t waiting() const { return waiting_.size(); }
    // Scrapes whose result was handed out.
    std::uint64_t scrapes() const { return scrapes_; }

  private:
    explicit ScrapeWorker(MonitordScraper scraper) : scraper_(std::move(scraper)) {}
    void work();
    void deliver();  // on the loop, woken by the thread

    MonitordScraper scraper_;  // the thread's alone
    std::unique_ptr<monitord::LoopWakeup> ready_;  // a result is there
    std::vector<Done> waiting_;  // the loop's: for the scrape under way (none: none runs)
    std::uint64_t scrapes_ = 0;  // the loop's

    std::mutex mutex_;
    std::condition_variable wake_;
    bool go_ = false;    // a scrape is asked for
    bool stop_ = false;  // the thread should end
    Scrape result_;      // the last scrape's, under mutex_
    std::optional<monitor::Error> error_;
    std::thread thread_;
};

}  // namespace exporter
