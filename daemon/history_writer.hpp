// Writes the history on a thread of its own, so that the daemon's loop (its ticks, its replies
// and, with sleeping probes, the watchdog's pets, which the tick's reading of the idle time
// earns) never waits for the disk: a sync that takes seconds on a busy or failing disk, or the
// file locked by another program, delays the seconds' writes and nothing else.
//
// The loop posts each second; the thread writes them in order, and keeps one that could not be
// written to try again a second later, up to kMaxPendingSeconds of them; beyond, the oldest
// are dropped and counted. The thread also prunes the store: at start (a large file's fold
// would otherwise hold up the daemon's start) and every prune_every seconds written.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "history_store.hpp"
#include "monitor/loading/history_record.hpp"
#include "monitor/status.hpp"

namespace monitord {

// Two minutes of seconds wait for a disk that does not take them (about 25 MB at 1,024 CPUs).
inline constexpr std::size_t kMaxPendingSeconds = 120;

class HistoryWriter {
  public:
    using Time = HistoryStore::Time;

    struct State {
        // The last write's or prune's error; empty once one succeeds again.
        std::string error;
        std::uint64_t written = 0;  // seconds
        std::uint64_t dropped = 0;  // seconds the queue had no room for
        std::size_t pending = 0;    // seconds waiting, the one being written included
    };

    // Takes `store` (open, its run started) to a thread that prunes it as of `now`, then writes
    // what is posted.
    HistoryWriter(std::unique_ptr<HistoryStore> store, Time now, std::uint64_t prune_every);
    // stop() if it was not called.
    ~HistoryWriter();
    HistoryWriter(const HistoryWriter&) = delete;
    HistoryWriter& operator=(const HistoryWriter&) = delete;

    // The second that ended at `at`, synced to the disk with `sync`. Never waits for the disk.
    void post(Time at, monitor::HistorySecond second, bool sync = false);
    // That this run armed the watchdog `device` at `at` (HistoryStore::note_watchdog), written
    // before the next second.
    void note_watchdog(Time at, std::string device, bool boot_reset);
    // The run the store started (HistoryStore::run()).
    std::int64_t run() const { return run_; }
    // From the next prune on.
    void set_limits(HistoryLimits limits);
    HistoryLimits limits() const;
    State state() const;
    const std::filesystem::path& file() const { return file_; }

    // Until nothing is pending or being pruned (a failed write is tried again meanwhile), or
    // `timeout` passed: whether all was written.
    bool flush(std::chrono::milliseconds timeout);

    // Ends the thread, tries what is pending once more, and records the orderly stop at `now`
    // (on the caller's thread): the first error.
    monitor::Result<void> stop(Time now);

  private:
    struct Item {
        Time at;
        monitor::HistorySecond second;
        bool sync = false;
    };
    struct Note {
        Time at;
        std::string device;
        bool boot_reset = false;
    };
    void work();
    bool idle() const { return pending_.empty() && notes_.empty() && !busy_ && !prune_due_; }

    std::unique_ptr<HistoryStore> store_;  // the thread's, and the caller's after stop()
    const std::filesystem::path file_;
    const std::int64_t run_;
    const std::uint64_t prune_every_;
    std::uint64_t since_prune_ = 0;  // the thread's

    mutable std::mutex mutex_;
    std::condition_variable wake_;  // the thread: work, or stop
    std::condition_variable done_;  // flush(): a write or prune ended
    std::deque<Item> pending_;
    std::deque<Note> notes_;
    HistoryLimits limits_;
    bool busy_ = false;  // the thread writes or prunes
    bool writing_second_ = false;
    bool prune_due_ = true;  // the first prune, at start
    Time prune_at_;          // as of when
    bool failed_ = false;    // the last write or prune failed
    bool stop_ = false;
    bool stopped_ = false;  // stop() ran
    State state_;
    std::thread thread_;
};

}  // namespace monitord
