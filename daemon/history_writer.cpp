#include "history_writer.hpp"

#include <pthread.h>

#include <utility>

namespace monitord {

using monitor::Result;

namespace {

// How long a second that could not be written waits before the next try.
constexpr std::chrono::seconds kRetryAfter{1};

}  // namespace

HistoryWriter::HistoryWriter(std::unique_ptr<HistoryStore> store, Time now,
                             std::uint64_t prune_every)
    : store_(std::move(store)),
      file_(store_->file()),
      run_(store_->run()),
      prune_every_(prune_every),
      limits_(store_->limits()),
      prune_at_(now) {
    thread_ = std::thread([this] { work(); });
    // As ps -L and top -H show it; a name that does not fit is no reason to fail.
    (void)::pthread_setname_np(thread_.native_handle(), "history");
}

HistoryWriter::~HistoryWriter() {
    if (!stopped_) (void)stop(std::chrono::system_clock::now());
}

void HistoryWriter::post(Time at, monitor::HistorySecond second, bool sync) {
    {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        if (pending_.size() >= kMaxPendingSeconds) {
            pending_.pop_front();
            ++state_.dropped;
        }
        pending_.push_back(Item{at, std::move(second), sync});
    }
    wake_.notify_one();
}

void HistoryWriter::note_watchdog(Time at, std::string device, bool boot_reset) {
    {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        notes_.push_back(Note{at, std::move(device), boot_reset});
    }
    wake_.notify_one();
}

void HistoryWriter::set_limits(HistoryLimits limits) {
    std::lock_guard lock(mutex_);
    limits_ = limits;
}

HistoryLimits HistoryWriter::limits() const {
    std::lock_guard lock(mutex_);
    return limits_;
}

HistoryWriter::State HistoryWriter::state() const {
    std::lock_guard lock(mutex_);
    State s = state_;
    s.pending = pending_.size() + (writing_second_ ? 1 : 0);
    return s;
}

bool HistoryWriter::flush(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    done_.wait_for(lock, timeout, [this] { return idle() || stop_; });
    return idle() && !failed_;
}

void HistoryWriter::work() {
    std::unique_lock lock(mutex_);
    while (true) {
        wake_.wait(lock,
                   [this] { return stop_ || prune_due_ || !notes_.empty() || !pending_.empty(); });
        if (stop_) return;
        busy_ = true;
        Result<void> r;
        if (prune_due_) {
            prune_due_ = false;
            const Time at = prune_at_;
            store_->set_limits(limits_);
            lock.unlock();
            r = store_->prune(at);
            lock.lock();
        } else if (!notes_.empty()) {
            Note note = notes_.front();
            lock.unlock();
            r = store_->note_watchdog(note.at, note.device, note.boot_reset);
            lock.lock();
            if (r) notes_.pop_front();  // else tried again, as a second is
        } else {
            Item item = std::move(pending_.front());
            pending_.pop_front();
            writing_second_ = true;
            lock.unlock();
            r = store_->append(item.at, item.second, item.sync);
            lock.lock();
            writing_second_ = false;
            if (r) {
                ++state_.written;
                if (++since_prune_ >= prune_every_) {
                    since_prune_ = 0;
                    prune_due_ = true;
                    prune_at_ = item.at;
                }
            } else if (pending_.size() < kMaxPendingSeconds) {
                pending_.push_front(std::move(item));  // tried again first
            } else {
                ++state_.dropped;
            }
        }
        busy_ = false;
        failed_ = !r;
        state_.error = r ? std::string{} : r.error().message;
        done_.notify_all();
        // After a failure, a pause before the next try (the disk, or the lock's holder, may
        // need it), cut short by stop().
        if (!r) wake_.wait_for(lock, kRetryAfter, [this] { return stop_; });
    }
}

monitor::Result<void> HistoryWriter::stop(Time now) {
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return {};
        stop_ = true;
        stopped_ = true;
    }
    wake_.notify_all();
    done_.notify_all();
    if (thread_.joinable()) thread_.join();
    // The thread has ended: what it left is this thread's now.
    Result<void> status;
    for (const auto& note : notes_) {
        if (auto r = store_->note_watchdog(note.at, note.device, note.boot_reset); !r && status) {
            status = r;
        }
    }
    notes_.clear();
    for (auto& item : pending_) {
        if (auto r = store_->append(item.at, item.second, item.sync); !r && status) status = r;
    }
    pending_.clear();
    if (auto r = store_->stop_run(now); !r && status) status = r;
    return status;
}

}  // namespace monitord
