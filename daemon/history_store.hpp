// The history on disk: every second's figures (HistorySecond) in an SQLite database under the
// state directory, the daemon's runs beside them, kept for a period and a size the operator
// sets, downsampled to minutes after a day.
//
// Crash safety: the database is in WAL mode. Each second is a transaction committed with
// synchronous=NORMAL, which a killed daemon keeps (the log is in the page cache) but a power
// loss may not; every kSyncEvery-th commit is made with synchronous=FULL, which syncs the log
// and with it every commit before. A power loss thus loses at most the last kSyncEvery
// seconds, and never leaves a corrupt file: SQLite's log replays whole transactions only. A
// second may be synced on its own (append's `sync`): the daemon does so while the watchdog's
// pets are late, so that the seconds before a reset survive it.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/loading/history_record.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitord {

inline constexpr std::uint64_t kSyncEvery = 10;
// The defaults: each second for a day, each minute after it for 30 days, at most 1 GiB.
inline constexpr std::chrono::seconds kDefaultHistorySecondsKept{86400};
inline constexpr std::chrono::seconds kDefaultHistoryKept{30 * 86400};
inline constexpr std::uint64_t kDefaultHistoryMaxBytes = std::uint64_t{1} << 30;
// The bounds of the settings ([history] in monitord.conf(5)).
inline constexpr std::chrono::seconds kMinHistorySecondsKept{60};
inline constexpr std::chrono::seconds kMaxHistoryKept{10LL * 366 * 86400};
inline constexpr std::uint64_t kMaxHistoryMaxMiB = std::uint64_t{1} << 20;
// The last seconds of a run that did not stop in order (killed, a crash, a power loss, a
// watchdog's reset) stay seconds when those around them are folded into minutes: they are the
// evidence of what the machine did before it went down, kept as long as the rest (kept).
inline constexpr std::chrono::seconds kRunEndSecondsKept{300};

struct HistoryLimits {
    // Seconds older than this are folded into minutes.
    std::chrono::seconds seconds_kept = kDefaultHistorySecondsKept;
    // Anything older than this goes.
    std::chrono::seconds kept = kDefaultHistoryKept;
    // The oldest rows go first when the data take more.
    std::uint64_t max_bytes = kDefaultHistoryMaxBytes;
};

// One start of the daemon that wrote to the history.
struct HistoryRun {
    std::int64_t id = 0;
    std::string boot_id;  // the kernel's boot id: a new one is a new boot
    std::chrono::system_clock::time_point started;
    // The last second written.
    std::optional<std::chrono::system_clock::time_point> last;
    // When it stopped in order; nullopt for the running one and for one that ended otherwise
    // (killed, a crash, a power loss, a reset).
    std::optional<std::chrono::system_clock::time_point> stopped;
    // The watchdog it armed (the last, if it armed more than one), and what the driver said
    // then of the reset that began the boot (WDIOF_CARDRESET); nullopt: it armed none.
    std::optional<std::string> watchdog;
    std::optional<bool> boot_reset_by_watchdog;
};

// How a run ended, from the runs in order (runs()): stopped in order; the daemon ended without
// a stop and the next run is of the same boot (killed, a crash); the machine went down under
// it (the next run is of another boot: a power loss, a crash of the kernel, a reset), by the
// watchdog's reset when the driver said so to a run of that next boot; still running (the
// run `running`); or unknown (no run after it to tell).
enum class RunEnd { Running, Stopped, DaemonEnded, MachineDown, WatchdogReset, Unknown };
std::string_view run_end_name(RunEnd e);
RunEnd run_end(const std::vector<HistoryRun>& runs, std::size_t i, std::int64_t running);

class HistoryStore {
  public:
    using Time = std::chrono::system_clock::time_point;
    // A second (or a minute: seconds is 60) of the history; `low` and `high` are a minute's
    // lowest and highest per-second loads, nullptr for a second.
    using Visit =
        std::function<void(Time at, const monitor::HistorySecond& second,
                           const monitor::HistorySecond* low, const monitor::HistorySecond* high)>;

    // Opens (makes) `directory`/history.db, and locks the directory (history.lock) for this
    // process: a second daemon given the same directory is refused (BUSY, naming the one that
    // holds it) instead of writing its seconds between the first one's. The errors name the
    // file.
    static monitor::Result<std::unique_ptr<HistoryStore>> open(
        const std::filesystem::path& directory, HistoryLimits limits);
    // Opens the file another HistoryStore (open()) keeps, to read only: a connection of its
    // own, which SQLite's log (WAL) lets read while the other writes, on another thread.
    static monitor::Result<std::unique_ptr<HistoryStore>> open_reader(
        const std::filesystem::path& file);
    ~HistoryStore();
    HistoryStore(const HistoryStore&) = delete;
    HistoryStore& operator=(const HistoryStore&) = delete;

    const std::filesystem::path& file() const { return file_; }
    void set_limits(HistoryLimits limits) { limits_ = limits; }
    const HistoryLimits& limits() const { return limits_; }

    // Records this start of the daemon (the runs before it that have no stop ended otherwise).
    monitor::Result<void> start_run(const std::string& boot_id, Time now);
    // Records the orderly stop of the run start_run() began, and syncs.
    monitor::Result<void> stop_run(Time now);

    // Records that the run armed the watchdog `device` at `at`, and whether its driver said the
    // boot began with its reset.
    monitor::Result<void> note_watchdog(Time at, const std::string& device, bool boot_reset);
    // This process's run (start_run()); 0 before it and after stop_run().
    std::int64_t run() const { return run_; }

    // Writes the second that ended at `at` and commits it; with `sync`, or every kSyncEvery-th
    // second, synced to the disk. Written again (a retry), it replaces the row.
    monitor::Result<void> append(Time at, const monitor::HistorySecond& second, bool sync = false);

    // The seconds and minutes from `from` to `to` (inclusive), in time order. A row that does
    // not decode is skipped and counted in skipped().
    monitor::Result<void> read(Time from, Time to, const Visit& visit) const;
    std::uint64_t skipped() const { return skipped_; }

    // Folds the seconds older than seconds_kept into minutes (but the last kRunEndSecondsKept
    // of each run that ended otherwise than by a stop), drops what is older than kept,
    // and the oldest rows while the data take more than max_bytes. A few hundred milliseconds
    // a day's seconds; the daemon calls it every few minutes.
    monitor::Result<void> prune(Time now);

    // The rows from `from` to `to`: seconds and minutes (what a read of them costs).
    monitor::Result<std::pair<std::uint64_t, std::uint64_t>> rows(Time from, Time to) const;
    monitor::Result<std::vector<HistoryRun>> runs() const;
    // Bytes the data take in the file (its pages in use).
    monitor::Result<std::uint64_t> bytes_used() const;
    // The oldest and newest times held; nullopt when empty.
    monitor::Result<std::optional<std::pair<Time, Time>>> span() const;

  private:
    HistoryStore(std::filesystem::path file, HistoryLimits limits);
    monitor::Result<void> exec(const char* sql) const;
    monitor::Error error(const std::string& what) const;
    monitor::Result<void> fold_minutes(Time before);
    monitor::Result<void> drop_before(Time before);
    monitor::Result<void> cap_size();

    struct Scratch;

    std::filesystem::path file_;
    HistoryLimits limits_;
    monitor::UniqueFd lock_;
    std::unique_ptr<Scratch> scratch_;
    sqlite3* db_ = nullptr;
    std::int64_t run_ = 0;
    std::uint64_t commits_ = 0;
    mutable std::uint64_t skipped_ = 0;
};

}  // namespace monitord
