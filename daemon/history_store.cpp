#include "history_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <map>
#include <string>
#include <system_error>
#include <utility>

namespace monitord {

using monitor::Error;
using monitor::fail;
using monitor::Result;
using monitor::Status;

namespace {

// Format 1: the tables below. A file of a later format is refused, not changed. The watchdog
// table came later within format 1: a daemon that does not know it leaves it alone.
constexpr int kSchemaVersion = 1;
constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY,
  boot_id TEXT NOT NULL,
  started INTEGER NOT NULL,  -- Unix time, ms
  last INTEGER,              -- the last second written
  stopped INTEGER            -- an orderly stop; NULL: running, or ended otherwise
);
CREATE TABLE IF NOT EXISTS seconds(
  t INTEGER PRIMARY KEY,     -- the end of the second, Unix time in ms
  run INTEGER NOT NULL,
  data BLOB NOT NULL         -- encode_history_second, deflated
);
CREATE TABLE IF NOT EXISTS watchdog(
  run INTEGER NOT NULL,      -- the run that armed it
  at INTEGER NOT NULL,       -- when, Unix time in ms
  device TEXT NOT NULL,
  boot_reset INTEGER NOT NULL  -- 1: the driver said this boot began with its reset
);
CREATE TABLE IF NOT EXISTS minutes(
  t INTEGER PRIMARY KEY,     -- the end of the minute's last second
  run INTEGER NOT NULL,
  data BLOB NOT NULL,        -- the mean (fold_history_seconds)
  low BLOB NOT NULL,
  high BLOB NOT NULL
);
)";

std::int64_t ms_of(HistoryStore::Time t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// A run's last second: runs.last is written every kSyncEvery seconds, so the seconds after it,
// up to the next run's start, say the rest (a walk of at most those seconds, by the key). For a
// row `r` of runs.
constexpr const char* kRunsLastSecond =
    "coalesce((SELECT max(s.t) FROM seconds s WHERE s.run = r.id AND s.t >="
    " coalesce(r.last, r.started) AND s.t <= coalesce((SELECT min(n.started) FROM"
    " runs n WHERE n.id > r.id), 9223372036854775807)), r.last)";

HistoryStore::Time time_of(std::int64_t ms) {
    return HistoryStore::Time{
        std::chrono::duration_cast<HistoryStore::Time::duration>(std::chrono::milliseconds{ms})};
}

}  // namespace

// Named, not anonymous: HistoryStore::Scratch holds them.
namespace history_detail {

// A second's bytes are kept deflated (zlib, level 1): a third to a half of their size at 64 CPUs
// and more (bench/history_size). One stream, reset for each second: deflateInit's quarter of
// a megabyte of state is made once.
class Deflater {
  public:
    Deflater() { ok_ = deflateInit(&z_, 1) == Z_OK; }
    ~Deflater() {
        if (ok_) deflateEnd(&z_);
    }
    Deflater(const Deflater&) = delete;
    Deflater& operator=(const Deflater&) = delete;

    // nullopt when zlib fails (the raw bytes are kept then).
    std::optional<std::vector<std::uint8_t>> operator()(const std::vector<std::uint8_t>& raw) {
        if (!ok_ || deflateReset(&z_) != Z_OK) return std::nullopt;
        std::vector<std::uint8_t> out(deflateBound(&z_, raw.size()));
        z_.next_in = const_cast<Bytef*>(raw.data());
        z_.avail_in = static_cast<uInt>(raw.size());
        z_.next_out = out.data();
        z_.avail_out = static_cast<uInt>(out.size());
        if (deflate(&z_, Z_FINISH) != Z_STREAM_END) return std::nullopt;
        out.resize(z_.total_out);
        return out;
    }

  private:
    z_stream z_{};
    bool ok_ = false;
};

}  // namespace history_detail

namespace {

using history_detail::Deflater;

// The most a second's bytes inflate to: 2 sources of 65,535 CPUs with their states.
constexpr std::size_t kMostInflated = 4u << 20;

// What a row holds, decoded: deflated bytes start with zlib's 0x78, the raw format with its
// version.
monitor::Result<monitor::HistorySecond> decoded(std::span<const std::uint8_t> stored) {
    if (stored.empty() || stored[0] != 0x78) return monitor::decode_history_second(stored);
    z_stream z{};
    if (inflateInit(&z) != Z_OK) return fail(Status::AllocMem, "inflate a second");
    std::vector<std::uint8_t> out(std::min<std::size_t>(stored.size() * 8, kMostInflated));
    z.next_in = const_cast<Bytef*>(stored.data());
    z.avail_in = static_cast<uInt>(stored.size());
    int rc = Z_OK;
    while (true) {
        z.next_out = out.data() + z.total_out;
        z.avail_out = static_cast<uInt>(out.size() - z.total_out);
        rc = inflate(&z, Z_FINISH);
        // More room only when it ran out of room (not of input, cut short).
        if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR) || z.avail_out != 0) break;
        if (out.size() >= kMostInflated) break;
        out.resize(std::min(out.size() * 2, kMostInflated));
    }
    const auto total = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        return fail(Status::BadData, "a second of the history on disk does not inflate");
    }
    out.resize(total);
    return monitor::decode_history_second(out);
}

Result<std::vector<std::uint8_t>> stored(Deflater& deflate, const monitor::HistorySecond& second) {
    auto raw = monitor::encode_history_second(second);
    if (!raw) return std::unexpected(raw.error());
    if (auto d = deflate(*raw)) return std::move(*d);
    return raw;
}

}  // namespace

namespace history_detail {

// A prepared statement, finalized when it goes.
class Statement {
  public:
    Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
    ~Statement() { sqlite3_finalize(s_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    bool ok() const { return rc_ == SQLITE_OK; }
    sqlite3_stmt* get() const { return s_; }
    void bind(int i, std::int64_t v) { sqlite3_bind_int64(s_, i, v); }
    void bind(int i, const std::string& v) {
        sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    void bind(int i, const std::vector<std::uint8_t>& v) {
        sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    }
    int step() { return sqlite3_step(s_); }
    std::int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }
    bool null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
    std::span<const std::uint8_t> blob(int col) const {
        const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(s_, col));
        const int n = sqlite3_column_bytes(s_, col);
        return p == nullptr ? std::span<const std::uint8_t>{}
                            : std::span<const std::uint8_t>{p, static_cast<std::size_t>(n)};
    }
    std::string text(int col) const {
        const auto* p = sqlite3_column_text(s_, col);
        return p == nullptr ? std::string{} : std::string{reinterpret_cast<const char*>(p)};
    }

  private:
    sqlite3_stmt* s_ = nullptr;
    int rc_ = SQLITE_ERROR;
};

}  // namespace history_detail

namespace {

using history_detail::Statement;

}  // namespace

// What each second's write reuses: the deflate stream and the prepared statements.
struct HistoryStore::Scratch {
    using Deflater = history_detail::Deflater;
    using Statement = history_detail::Statement;
    explicit Scratch(sqlite3* db)
        : insert(db, "INSERT OR REPLACE INTO seconds(t, run, data) VALUES(?, ?, ?)"),
          last(db, "UPDATE runs SET last = ? WHERE id = ?") {}
    Deflater deflate;
    // A clock set back writes over the seconds it repeats.
    Statement insert;
    Statement last;
};

Error HistoryStore::error(const std::string& what) const {
    const int code = db_ != nullptr ? sqlite3_extended_errcode(db_) : SQLITE_ERROR;
    const char* message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
    Status status = Status::IoErr;
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) status = Status::Busy;
    if ((code & 0xff) == SQLITE_NOMEM) status = Status::AllocMem;
    if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) {
        status = Status::BadData;
    }
    if ((code & 0xff) == SQLITE_PERM || (code & 0xff) == SQLITE_READONLY ||
        (code & 0xff) == SQLITE_CANTOPEN) {
        status = Status::Perm;
    }
    return Error{status, "history " + file_.string() + ": " + what + ": " + message};
}

Result<void> HistoryStore::exec(const char* sql) const {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
        std::string m = message != nullptr ? message : "failed";
        sqlite3_free(message);
        return fail(Status::IoErr, "history " + file_.string() + ": " + m);
    }
    return {};
}

Result<std::unique_ptr<HistoryStore>> HistoryStore::open(const std::filesystem::path& directory,
                                                         HistoryLimits limits) {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec) {
        return monitor::fail_errno(ec.value(), "make the state directory " + directory.string());
    }
    std::unique_ptr<HistoryStore> s{new HistoryStore(directory / "history.db", limits)};
    const auto lock_path = directory / "history.lock";
    s->lock_.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640));
    if (!s->lock_) return monitor::fail_errno(errno, "open " + lock_path.string());
    if (::flock(s->lock_.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) return monitor::fail_errno(errno, "lock " + lock_path.string());
        char pid[32] = {};
        const ssize_t n = ::pread(s->lock_.get(), pid, sizeof pid - 1, 0);
        std::string holder = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : "";
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
            holder.pop_back();
        return fail(Status::Busy, "history " + directory.string() + ": another monitord" +
                                      (holder.empty() ? "" : " (pid " + holder + ")") +
                                      " keeps its history there; give each daemon a state "
                                      "directory of its own");
    }
    {
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(s->lock_.get(), 0) == 0) {
            (void)::pwrite(s->lock_.get(), pid.data(), pid.size(), 0);
        }
    }
    const int rc = sqlite3_open_v2(
        s->file_.c_str(), &s->db_,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
        nullptr);
    if (rc != SQLITE_OK) return std::unexpected(s->error("cannot open it"));
    ::chmod(s->file_.c_str(), 0640);
    // Another writer (a second daemon on the same directory) is waited for a moment, then
    // refused.
    sqlite3_busy_timeout(s->db_, 1000);
    std::int64_t found = 0;
    {
        Statement version(s->db_, "PRAGMA user_version");
        if (!version.ok() || version.step() != SQLITE_ROW) {
            return std::unexpected(s->error("cannot read it (not an SQLite database?)"));
        }
        found = version.integer(0);
    }
    if (found > kSchemaVersion) {
        return fail(Status::BadData, "history " + s->file_.string() + ": format " +
                                         std::to_string(found) + " is newer than this monitord's " +
                                         std::to_string(kSchemaVersion) + "; it is left as it is");
    }
    // auto_vacuum takes effect only before the first table: a new file's freed pages can then
    // be given back (prune's incremental_vacuum).
    for (const char* sql : {"PRAGMA auto_vacuum=INCREMENTAL", "PRAGMA journal_mode=WAL",
                            "PRAGMA synchronous=NORMAL"}) {
        if (auto r = s->exec(sql); !r) return std::unexpected(r.error());
    }
    if (auto r = s->exec(kSchema); !r) return std::unexpected(r.error());
    if (found == 0) {
        if (auto r = s->exec("PRAGMA user_version=1"); !r) return std::unexpected(r.error());
    }
    s->scratch_ = std::make_unique<Scratch>(s->db_);
    if (!s->scratch_->insert.ok() || !s->scratch_->last.ok()) {
        return std::unexpected(s->error("prepare its writes"));
    }
    return s;
}

Result<std::unique_ptr<HistoryStore>> HistoryStore::open_reader(const std::filesystem::path& file) {
    std::unique_ptr<HistoryStore> s{new HistoryStore(file, {})};
    const int rc =
        sqlite3_open_v2(s->file_.c_str(), &s->db_,
                        SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
    if (rc != SQLITE_OK) return std::unexpected(s->error("cannot open it to read"));
    sqlite3_busy_timeout(s->db_, 1000);
    Statement version(s->db_, "PRAGMA user_version");
    if (!version.ok() || version.step() != SQLITE_ROW) {
        return std::unexpected(s->error("cannot read it (not an SQLite database?)"));
    }
    if (version.integer(0) > kSchemaVersion) {
        return fail(Status::BadData, "history " + s->file_.string() + ": format " +
                                         std::to_string(version.integer(0)) +
                                         " is newer than this monitord's " +
                                         std::to_string(kSchemaVersion));
    }
    return s;
}

HistoryStore::HistoryStore(std::filesystem::path file, HistoryLimits limits)
    : file_(std::move(file)), limits_(limits) {}

HistoryStore::~HistoryStore() {
    scratch_.reset();  // its statements before the connection
    sqlite3_close_v2(db_);
}

Result<void> HistoryStore::start_run(const std::string& boot_id, Time now) {
    Statement insert(db_, "INSERT INTO runs(boot_id, started) VALUES(?, ?)");
    if (!insert.ok()) return std::unexpected(error("record the run"));
    insert.bind(1, boot_id);
    insert.bind(2, ms_of(now));
    if (insert.step() != SQLITE_DONE) return std::unexpected(error("record the run"));
    run_ = sqlite3_last_insert_rowid(db_);
    return {};
}

Result<void> HistoryStore::stop_run(Time now) {
    if (run_ == 0) return {};
    if (auto r = exec("PRAGMA synchronous=FULL"); !r) return r;
    Statement update(db_, "UPDATE runs SET stopped = ? WHERE id = ?");
    if (!update.ok()) return std::unexpected(error("record the stop"));
    update.bind(1, ms_of(now));
    update.bind(2, run_);
    if (update.step() != SQLITE_DONE) return std::unexpected(error("record the stop"));
    run_ = 0;
    return exec("PRAGMA synchronous=NORMAL");
}

Result<void> HistoryStore::note_watchdog(Time at, const std::string& device, bool boot_reset) {
    if (run_ == 0) return fail(Status::BadState, "history " + file_.string() + ": no run started");
    Statement insert(db_, "INSERT INTO watchdog(run, at, device, boot_reset) VALUES(?, ?, ?, ?)");
    if (!insert.ok()) return std::unexpected(error("record the watchdog"));
    insert.bind(1, run_);
    insert.bind(2, ms_of(at));
    insert.bind(3, device);
    insert.bind(4, std::int64_t{boot_reset ? 1 : 0});
    if (insert.step() != SQLITE_DONE) return std::unexpected(error("record the watchdog"));
    return {};
}

Result<void> HistoryStore::append(Time at, const monitor::HistorySecond& second, bool sync) {
    if (!scratch_) return fail(Status::BadState, "history " + file_.string() + ": opened to read");
    // A commit that failed (the file busy) leaves its transaction open: it goes first.
    if (sqlite3_get_autocommit(db_) == 0) (void)exec("ROLLBACK");
    auto data = stored(scratch_->deflate, second);
    if (!data) return std::unexpected(data.error());
    auto& insert = scratch_->insert;
    sqlite3_reset(insert.get());
    insert.bind(1, ms_of(at));
    insert.bind(2, run_);
    insert.bind(3, *data);
    // Each second commits on its own; every kSyncEvery-th, with the run's last second, is
    // synced and with it every one before.
    if (++commits_ % kSyncEvery != 0 && !sync) {
        if (insert.step() != SQLITE_DONE) return std::unexpected(error("write a second"));
        return {};
    }
    if (auto r = exec("PRAGMA synchronous=FULL"); !r) return r;
    Result<void> status = exec("BEGIN");
    if (status) {
        auto& last = scratch_->last;
        sqlite3_reset(last.get());
        last.bind(1, ms_of(at));
        last.bind(2, run_);
        if (insert.step() != SQLITE_DONE || last.step() != SQLITE_DONE) {
            status = std::unexpected(error("write a second"));
        }
        if (auto r = exec(status ? "COMMIT" : "ROLLBACK"); !r && status) status = r;
    }
    if (auto r = exec("PRAGMA synchronous=NORMAL"); !r && status) status = r;
    return status;
}

Result<void> HistoryStore::read(Time from, Time to, const Visit& visit) const {
    // Minutes and seconds merged in time order: the seconds kept at the end of a run lie among
    // the minutes.
    Statement q(db_,
                "SELECT t, data, low, high FROM minutes WHERE t BETWEEN ?1 AND ?2 UNION ALL "
                "SELECT t, data, NULL, NULL FROM seconds WHERE t BETWEEN ?1 AND ?2 ORDER BY t");
    if (!q.ok()) return std::unexpected(error("read the history"));
    q.bind(1, ms_of(from));
    q.bind(2, ms_of(to));
    int rc = 0;
    while ((rc = q.step()) == SQLITE_ROW) {
        auto row = decoded(q.blob(1));
        if (!row) {
            ++skipped_;
            continue;
        }
        if (q.null(2)) {
            visit(time_of(q.integer(0)), *row, nullptr, nullptr);
            continue;
        }
        auto low = decoded(q.blob(2));
        auto high = decoded(q.blob(3));
        if (!low || !high) {
            ++skipped_;
            continue;
        }
        visit(time_of(q.integer(0)), *row, &*low, &*high);
    }
    if (rc != SQLITE_DONE) return std::unexpected(error("read the history"));
    return {};
}

Result<void> HistoryStore::fold_minutes(Time before) {
    // The seconds to fold, a minute (of the wall clock) at a time, one minute in memory; the
    // minute that `before` cuts stays whole until it is all before it.
    const std::int64_t cut = ms_of(before) / 60'000 * 60'000;
    if (auto r = exec("BEGIN"); !r) return r;
    Result<void> status;
    {
        // The runs that ended otherwise than by a stop, but the running one: their last seconds
        // stay (ends: run, its last second).
        std::map<std::int64_t, std::int64_t> ends;
        Statement e(db_, (std::string{"SELECT r.id, "} + kRunsLastSecond +
                          " FROM runs r WHERE r.stopped IS NULL AND r.id != ?")
                             .c_str());
        if (e.ok()) {
            e.bind(1, run_);
            while (e.step() == SQLITE_ROW) {
                if (!e.null(1)) ends.emplace(e.integer(0), e.integer(1));
            }
        }
        const std::int64_t keep = kRunEndSecondsKept.count() * 1000;
        auto kept = [&](std::int64_t run, std::int64_t t) {
            const auto end = ends.find(run);
            return end != ends.end() && t > end->second - keep && t <= end->second;
        };
        Statement q(db_, "SELECT t, run, data FROM seconds WHERE t <= ? ORDER BY t");
        Statement insert(
            db_, "INSERT OR REPLACE INTO minutes(t, run, data, low, high) VALUES(?, ?, ?, ?, ?)");
        Statement drop(db_, "DELETE FROM seconds WHERE t >= ? AND t < ?");
        if (!e.ok() || !q.ok() || !insert.ok() || !drop.ok())
            status = std::unexpected(error("fold the seconds"));
        std::int64_t minute_t = 0;
        std::int64_t minute_run = 0;
        std::vector<monitor::HistorySecond> seconds;
        auto flush = [&] {
            if (seconds.empty()) return;
            const auto fold = monitor::fold_history_seconds(seconds);
            seconds.clear();
            auto mean = stored(scratch_->deflate, fold.mean);
            auto low = stored(scratch_->deflate, fold.low);
            auto high = stored(scratch_->deflate, fold.high);
            if (!mean || !low || !high) return;  // what was encoded once encodes again
            sqlite3_reset(insert.get());
            insert.bind(1, minute_t);
            insert.bind(2, minute_run);
            insert.bind(3, *mean);
            insert.bind(4, *low);
            insert.bind(5, *high);
            if (insert.step() != SQLITE_DONE) status = std::unexpected(error("fold the seconds"));
        };
        // The folded seconds go by ranges, [from, until), between the kept ones.
        std::int64_t from = std::numeric_limits<std::int64_t>::min();
        auto drop_to = [&](std::int64_t until) {
            if (until <= from) return;
            sqlite3_reset(drop.get());
            drop.bind(1, from);
            drop.bind(2, until);
            if (drop.step() != SQLITE_DONE) status = std::unexpected(error("fold the seconds"));
        };
        if (status) {
            q.bind(1, cut);
            int rc = 0;
            while (status && (rc = q.step()) == SQLITE_ROW) {
                const std::int64_t t = q.integer(0);
                const std::int64_t run = q.integer(1);
                if (kept(run, t)) {
                    flush();  // no minute spans them
                    drop_to(t);
                    from = t + 1;
                    continue;
                }
                // A second belongs to the minute its end falls in, (m, m + 60 s].
                if (!seconds.empty() && (t - 1) / 60'000 != (minute_t - 1) / 60'000) flush();
                minute_t = t;
                minute_run = run;
                if (auto second = decoded(q.blob(2))) {
                    seconds.push_back(std::move(*second));
                } else {
                    ++skipped_;
                }
            }
            if (status && rc != SQLITE_DONE) status = std::unexpected(error("fold the seconds"));
            if (status) flush();
            if (status) drop_to(cut + 1);
        }
    }
    if (auto r = exec(status ? "COMMIT" : "ROLLBACK"); !r && status) status = r;
    return status;
}

Result<void> HistoryStore::drop_before(Time before) {
    for (const char* sql : {"DELETE FROM minutes WHERE t < ?", "DELETE FROM seconds WHERE t < ?"}) {
        Statement drop(db_, sql);
        if (!drop.ok()) return std::unexpected(error("drop old rows"));
        drop.bind(1, ms_of(before));
        if (drop.step() != SQLITE_DONE) return std::unexpected(error("drop old rows"));
    }
    // The runs that have no row left, but the running one.
    Statement runs(db_,
                   "DELETE FROM runs WHERE id != ? AND id NOT IN (SELECT run FROM seconds) "
                   "AND id NOT IN (SELECT run FROM minutes) AND coalesce(last, started) < ?");
    if (!runs.ok()) return std::unexpected(error("drop old runs"));
    runs.bind(1, run_);
    runs.bind(2, ms_of(before));
    if (runs.step() != SQLITE_DONE) return std::unexpected(error("drop old runs"));
    return exec("DELETE FROM watchdog WHERE run NOT IN (SELECT id FROM runs)");
}

Result<std::uint64_t> HistoryStore::bytes_used() const {
    Statement pages(db_, "PRAGMA page_count");
    Statement free(db_, "PRAGMA freelist_count");
    Statement size(db_, "PRAGMA page_size");
    if (!pages.ok() || !free.ok() || !size.ok() || pages.step() != SQLITE_ROW ||
        free.step() != SQLITE_ROW || size.step() != SQLITE_ROW) {
        return std::unexpected(error("measure it"));
    }
    return static_cast<std::uint64_t>(
               std::max<std::int64_t>(pages.integer(0) - free.integer(0), 0)) *
           static_cast<std::uint64_t>(size.integer(0));
}

Result<void> HistoryStore::cap_size() {
    // The oldest tenth of the rows at a time, the minutes (the oldest) first.
    bool dropped = false;
    for (int round = 0; round < 20; ++round) {
        auto used = bytes_used();
        if (!used) return std::unexpected(used.error());
        if (*used <= limits_.max_bytes) break;
        dropped = true;
        // The seconds kept at the end of a run may be older than the minutes.
        Statement oldest(
            db_,
            "SELECT min(coalesce((SELECT min(t) FROM minutes), (SELECT min(t) FROM seconds)),"
            " coalesce((SELECT min(t) FROM seconds), (SELECT min(t) FROM minutes))),"
            " (SELECT max(t) FROM seconds), (SELECT max(t) FROM minutes)");
        if (!oldest.ok() || oldest.step() != SQLITE_ROW || oldest.null(0)) break;
        const std::int64_t first = oldest.integer(0);
        const std::int64_t last = std::max(oldest.integer(1), oldest.integer(2));
        const std::int64_t cut = first + std::max<std::int64_t>((last - first) / 10, 1000);
        if (auto r = drop_before(time_of(cut)); !r) return r;
    }
    if (!dropped) return {};
    // The freed pages leave the file at the checkpoint, which writes the log into it.
    if (auto r = exec("PRAGMA incremental_vacuum"); !r) return r;
    return exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

Result<void> HistoryStore::prune(Time now) {
    if (!scratch_) return fail(Status::BadState, "history " + file_.string() + ": opened to read");
    if (auto r = fold_minutes(now - limits_.seconds_kept); !r) return r;
    if (auto r = drop_before(now - limits_.kept); !r) return r;
    return cap_size();
}

Result<std::pair<std::uint64_t, std::uint64_t>> HistoryStore::rows(Time from, Time to) const {
    Statement q(db_,
                "SELECT (SELECT count(*) FROM seconds WHERE t BETWEEN ?1 AND ?2),"
                " (SELECT count(*) FROM minutes WHERE t BETWEEN ?1 AND ?2)");
    if (!q.ok()) return std::unexpected(error("count the rows"));
    q.bind(1, ms_of(from));
    q.bind(2, ms_of(to));
    if (q.step() != SQLITE_ROW) return std::unexpected(error("count the rows"));
    return std::pair{static_cast<std::uint64_t>(q.integer(0)),
                     static_cast<std::uint64_t>(q.integer(1))};
}

Result<std::vector<HistoryRun>> HistoryStore::runs() const {
    Statement q(db_,
                (std::string{"SELECT id, boot_id, started, "} + kRunsLastSecond +
                 ", stopped,"
                 " (SELECT device FROM watchdog w WHERE w.run = r.id ORDER BY at DESC LIMIT 1),"
                 " (SELECT max(boot_reset) FROM watchdog w WHERE w.run = r.id)"
                 " FROM runs r ORDER BY id")
                    .c_str());
    if (!q.ok()) return std::unexpected(error("read the runs"));
    std::vector<HistoryRun> out;
    int rc = 0;
    while ((rc = q.step()) == SQLITE_ROW) {
        HistoryRun r;
        r.id = q.integer(0);
        r.boot_id = q.text(1);
        r.started = time_of(q.integer(2));
        if (!q.null(3)) r.last = time_of(q.integer(3));
        if (!q.null(4)) r.stopped = time_of(q.integer(4));
        if (!q.null(5)) r.watchdog = q.text(5);
        if (!q.null(6)) r.boot_reset_by_watchdog = q.integer(6) != 0;
        out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return std::unexpected(error("read the runs"));
    return out;
}

Result<std::optional<std::pair<HistoryStore::Time, HistoryStore::Time>>> HistoryStore::span()
    const {
    Statement q(db_,
                "SELECT min(coalesce((SELECT min(t) FROM minutes), (SELECT min(t) FROM seconds)),"
                " coalesce((SELECT min(t) FROM seconds), (SELECT min(t) FROM minutes))),"
                " max(coalesce((SELECT max(t) FROM seconds), 0), coalesce((SELECT max(t) FROM "
                "minutes), 0))");
    if (!q.ok() || q.step() != SQLITE_ROW) return std::unexpected(error("read its span"));
    if (q.null(0)) return std::nullopt;
    return std::pair{time_of(q.integer(0)), time_of(q.integer(1))};
}

std::string_view run_end_name(RunEnd e) {
    switch (e) {
        case RunEnd::Running:
            return "running";
        case RunEnd::Stopped:
            return "stopped";
        case RunEnd::DaemonEnded:
            return "daemon_ended";
        case RunEnd::MachineDown:
            return "machine_down";
        case RunEnd::WatchdogReset:
            return "watchdog_reset";
        case RunEnd::Unknown:
            return "unknown";
    }
    return "unknown";
}

RunEnd run_end(const std::vector<HistoryRun>& runs, std::size_t i, std::int64_t running) {
    const HistoryRun& r = runs.at(i);
    if (r.stopped) return RunEnd::Stopped;
    if (r.id == running) return RunEnd::Running;
    if (i + 1 >= runs.size()) return RunEnd::Unknown;
    const std::string& next_boot = runs[i + 1].boot_id;
    if (next_boot == r.boot_id && !r.boot_id.empty()) return RunEnd::DaemonEnded;
    // A new boot: the driver of a watchdog armed in it says whether its reset began it.
    std::optional<bool> reset;
    for (std::size_t j = i + 1; j < runs.size() && runs[j].boot_id == next_boot; ++j) {
        if (runs[j].boot_reset_by_watchdog) {
            reset = reset.value_or(false) || *runs[j].boot_reset_by_watchdog;
        }
    }
    return reset.value_or(false) ? RunEnd::WatchdogReset : RunEnd::MachineDown;
}

}  // namespace monitord
