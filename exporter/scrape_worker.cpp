#include "scrape_worker.hpp"

#include <utility>

namespace exporter {

using monitor::Result;

Result<std::unique_ptr<ScrapeWorker>> ScrapeWorker::start(sd_event* event,
                                                          MonitordScraper scraper) {
    std::unique_ptr<ScrapeWorker> w{new ScrapeWorker(std::move(scraper))};
    auto ready = monitord::LoopWakeup::start(
        event, [self = w.get()] { self->deliver(); }, "the scrapes' results");
    if (!ready) return std::unexpected(ready.error());
    w->ready_ = std::move(*ready);
    w->thread_ = std::thread([self = w.get()] { self->work(); });
    return w;
}

ScrapeWorker::~ScrapeWorker() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void ScrapeWorker::request(Done done) {
    waiting_.push_back(std::move(done));
    if (waiting_.size() > 1) return;  // a scrape runs: its result is this request's too
    {
        std::lock_guard lock(mutex_);
        go_ = true;
    }
    wake_.notify_one();
}

void ScrapeWorker::work() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return go_ || stop_; });
            if (stop_) return;
            go_ = false;
        }
        monitor::Error error;
        Scrape s = scraper_.scrape(&error);
        {
            std::lock_guard lock(mutex_);
            result_ = std::move(s);
            error_.reset();
            if (!result_.status) error_ = std::move(error);
        }
        ready_->wake();
    }
}

void ScrapeWorker::deliver() {
    Scrape s;
    std::optional<monitor::Error> error;
    {
        std::lock_guard lock(mutex_);
        s = result_;
        error = error_;
    }
    ++scrapes_;
    std::vector<Done> answered;
    answered.swap(waiting_);
    for (auto& done : answered) done(s, error);
}

}  // namespace exporter
