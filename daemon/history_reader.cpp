#include "history_reader.hpp"

#include <pthread.h>

#include <utility>

namespace monitord {

using monitor::Result;

HistoryReader::HistoryReader(std::unique_ptr<HistoryStore> store)
    : store_(std::move(store)), file_(store_->file()) {}

Result<std::unique_ptr<HistoryReader>> HistoryReader::start(sd_event* event,
                                                            std::unique_ptr<HistoryStore> store) {
    std::unique_ptr<HistoryReader> r{new HistoryReader(std::move(store))};
    auto ready = LoopWakeup::start(
        event, [self = r.get()] { self->deliver(); }, "the history's reads");
    if (!ready) return std::unexpected(ready.error());
    r->ready_ = std::move(*ready);
    r->thread_ = std::thread([self = r.get()] { self->work(); });
    (void)::pthread_setname_np(r->thread_.native_handle(), "history-read");
    return r;
}

HistoryReader::~HistoryReader() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

bool HistoryReader::post(Read read, Done done) {
    if (pending_ > kMaxWaitingReads) return false;  // the one under way, and as many waiting
    {
        std::lock_guard lock(mutex_);
        to_read_.push_back(Job{std::move(read), std::move(done), std::nullopt});
    }
    ++pending_;
    wake_.notify_one();
    return true;
}

void HistoryReader::work() {
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || !to_read_.empty(); });
            if (stop_) return;
            job = std::move(to_read_.front());
            to_read_.pop_front();
        }
        job.reply.emplace(job.read(*store_));
        job.read = nullptr;  // what it held goes here, not on the loop
        {
            std::lock_guard lock(mutex_);
            read_.push_back(std::move(job));
        }
        ready_->wake();
    }
}

void HistoryReader::deliver() {
    std::deque<Job> done;
    {
        std::lock_guard lock(mutex_);
        done.swap(read_);
    }
    for (auto& job : done) {
        --pending_;
        job.done(std::move(*job.reply));
    }
}

}  // namespace monitord
