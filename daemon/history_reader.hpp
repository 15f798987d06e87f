// Reads the history on disk on a thread of its own, so that the daemon's loop keeps its tick
// and serves other calls while a read takes its time (a day of seconds on many CPUs is
// seconds of reading and inflating): GetLoading's ranges and GetHistoryRuns. The reads run one
// at a time, in the order posted; at most kMaxWaitingReads wait, and one more is refused. The
// thread wakes the loop when a read is done, which hands its reply to the caller's `done`.
#pragma once

#include <systemd/sd-event.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "history_store.hpp"
#include "loop_wakeup.hpp"
#include "monitor/status.hpp"
#include "varlink_server.hpp"

namespace monitord {

// Reads waiting behind the one under way: more calls at once than clients would make.
inline constexpr std::size_t kMaxWaitingReads = 16;

class HistoryReader {
  public:
    using Response = VarlinkServer::Response;
    // On the thread, with the reading connection: the reply.
    using Read = std::function<Response(const HistoryStore&)>;
    // On the loop, with the read's reply.
    using Done = std::function<void(Response)>;

    // Takes `store` (open for reading) to a thread of its own; `event` is the loop's.
    static monitor::Result<std::unique_ptr<HistoryReader>> start(
        sd_event* event, std::unique_ptr<HistoryStore> store);
    // Stops the thread once the read under way ends; the reads not done are dropped, their
    // `done` never called.
    ~HistoryReader();
    HistoryReader(const HistoryReader&) = delete;
    HistoryReader& operator=(const HistoryReader&) = delete;

    // On the loop: `read` runs on the thread, then `done` on the loop with its reply. False
    // (and neither is called) when kMaxWaitingReads wait already.
    bool post(Read read, Done done);
    // Reads posted whose `done` was not called yet: the one under way and those waiting.
    std::size_t pending() const { return pending_; }
    const std::filesystem::path& file() const { return file_; }

  private:
    explicit HistoryReader(std::unique_ptr<HistoryStore> store);
    void work();
    void deliver();  // on the loop, woken by the thread

    struct Job {
        Read read;
        Done done;
        std::optional<Response> reply;
    };

    std::unique_ptr<HistoryStore> store_;  // the thread's
    const std::filesystem::path file_;
    std::unique_ptr<LoopWakeup> ready_;  // a read is done
    std::size_t pending_ = 0;  // the loop's

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> to_read_;  // under mutex_
    std::deque<Job> read_;     // done, their replies waiting for the loop; under mutex_
    bool stop_ = false;        // under mutex_
    std::thread thread_;
};

}  // namespace monitord
