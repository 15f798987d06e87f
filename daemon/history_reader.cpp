#include "history_reader.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace monitord {

using monitor::fail_errno;
using monitor::Result;

HistoryReader::HistoryReader(std::unique_ptr<HistoryStore> store)
    : store_(std::move(store)), file_(store_->file()) {}

Result<std::unique_ptr<HistoryReader>> HistoryReader::start(sd_event* event,
                                                            std::unique_ptr<HistoryStore> store) {
    std::unique_ptr<HistoryReader> r{new HistoryReader(std::move(store))};
    r->ready_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!r->ready_) return fail_errno(errno, "eventfd for the history's reads");
    sd_event_source* source = nullptr;
    const int rc = sd_event_add_io(
        event, &source, r->ready_.get(), EPOLLIN,
        [](sd_event_source*, int, uint32_t, void* self) {
            static_cast<HistoryReader*>(self)->deliver();
            return 0;
        },
        r.get());
    if (rc < 0) return fail_errno(-rc, "watching the history reads' eventfd");
    r->source_.reset(source);
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
        const std::uint64_t one = 1;
        (void)::write(ready_.get(), &one, sizeof one);
    }
}

void HistoryReader::deliver() {
    std::uint64_t n = 0;
    if (::read(ready_.get(), &n, sizeof n) != sizeof n) return;
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
