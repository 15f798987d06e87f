#include "scrape_worker.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace exporter {

using monitor::fail_errno;
using monitor::Result;

Result<std::unique_ptr<ScrapeWorker>> ScrapeWorker::start(sd_event* event,
                                                          MonitordScraper scraper) {
    std::unique_ptr<ScrapeWorker> w{new ScrapeWorker(std::move(scraper))};
    w->ready_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!w->ready_) return fail_errno(errno, "eventfd for the scrapes' results");
    sd_event_source* source = nullptr;
    const int r = sd_event_add_io(
        event, &source, w->ready_.get(), EPOLLIN,
        [](sd_event_source*, int, uint32_t, void* self) {
            static_cast<ScrapeWorker*>(self)->deliver();
            return 0;
        },
        w.get());
    if (r < 0) return fail_errno(-r, "watching the scrapes' eventfd");
    w->source_.reset(source);
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
        const std::uint64_t one = 1;
        (void)::write(ready_.get(), &one, sizeof one);
    }
}

void ScrapeWorker::deliver() {
    std::uint64_t n = 0;
    if (::read(ready_.get(), &n, sizeof n) != sizeof n) return;
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
