// The history on disk: seconds written and read back by another opening of the file, the runs
// and how they ended, the fold into minutes after seconds_kept, the retention and the size cap,
// and files it must not touch.
#include "history_store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "history_seconds.hpp"
#include "sqlite_syncs.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using monitor::HistorySecond;
using Time = HistoryStore::Time;
using test_support::ScratchDir;

const Time kStart = test_support::kHistoryStart;
using test_support::history_second;

struct Row {
    Time at;
    double load;
    double seconds;
    std::optional<double> high;
};

std::vector<Row> read_all(const HistoryStore& store, Time from = Time{},
                          Time to = Time{} + 4'000'000'000s) {
    std::vector<Row> rows;
    auto r = store.read(
        from, to,
        [&](Time at, const HistorySecond& s, const HistorySecond*, const HistorySecond* high) {
            rows.push_back({at, *s.sources[0].machine, s.seconds,
                            high ? high->sources[0].machine : std::nullopt});
        });
    EXPECT_TRUE(r.has_value()) << r.error().to_string();
    return rows;
}

TEST(HistoryStore, SecondsWrittenAreReadBackAfterAReopen) {
    ScratchDir dir;
    {
        auto store = HistoryStore::open(dir.path() / "state", {});
        ASSERT_TRUE(store.has_value()) << store.error().to_string();
        ASSERT_TRUE((*store)->start_run("boot-a", kStart));
        for (int i = 1; i <= 25; ++i) {
            ASSERT_TRUE((*store)->append(kStart + std::chrono::seconds{i}, history_second(i)));
        }
        ASSERT_TRUE((*store)->stop_run(kStart + 26s));
    }
    auto store = HistoryStore::open(dir.path() / "state", {});
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    EXPECT_EQ((*store)->file(), dir.path() / "state/history.db");
    const auto rows = read_all(**store, kStart + 5s, kStart + 9s);
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_EQ(rows[0].at, kStart + 5s);
    EXPECT_DOUBLE_EQ(rows[4].load, 9);
    auto span = (*store)->span();
    ASSERT_TRUE(span.has_value() && span->has_value());
    EXPECT_EQ((*span)->first, kStart + 1s);
    EXPECT_EQ((*span)->second, kStart + 25s);
}

TEST(HistoryStore, ARunWithoutAStopEndedOtherwise) {
    ScratchDir dir;
    {
        auto store = *HistoryStore::open(dir.path(), {});
        ASSERT_TRUE(store->start_run("boot-a", kStart));
        ASSERT_TRUE(store->append(kStart + 1s, history_second(5)));
        ASSERT_TRUE(store->append(kStart + 2s, history_second(6)));
        // No stop_run: killed.
    }
    auto store = *HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(store->start_run("boot-b", kStart + 100s));
    ASSERT_TRUE(store->append(kStart + 101s, history_second(7)));
    ASSERT_TRUE(store->stop_run(kStart + 102s));
    auto runs = store->runs();
    ASSERT_TRUE(runs.has_value());
    ASSERT_EQ(runs->size(), 2u);
    EXPECT_EQ((*runs)[0].boot_id, "boot-a");
    EXPECT_EQ((*runs)[0].last, kStart + 2s);
    EXPECT_FALSE((*runs)[0].stopped.has_value());
    EXPECT_EQ((*runs)[1].boot_id, "boot-b");
    EXPECT_EQ((*runs)[1].stopped, kStart + 102s);
}

TEST(HistoryStore, SecondsOlderThanKeptFoldIntoMinutes) {
    ScratchDir dir;
    auto store = *HistoryStore::open(dir.path(), HistoryLimits{.seconds_kept = 120s});
    ASSERT_TRUE(store->start_run("b", kStart));
    // Minute 1: 1..60 (load 10, one 70), minute 2: 61..120 (20), minute 3: 121..150 (30).
    for (int i = 1; i <= 150; ++i) {
        const double load = i <= 60 ? (i == 30 ? 70 : 10) : i <= 120 ? 20 : 30;
        ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(load)));
    }
    // At 250 s: what ended by 130 s is older than 120 s; the minute 121..180 is cut, so kept.
    ASSERT_TRUE(store->prune(kStart + 250s));
    const auto rows = read_all(*store);
    ASSERT_EQ(rows.size(), 2u + 30u);
    EXPECT_EQ(rows[0].at, kStart + 60s);
    EXPECT_DOUBLE_EQ(rows[0].seconds, 60);
    EXPECT_NEAR(rows[0].load, (59 * 10 + 70) / 60.0, 0.01);
    EXPECT_EQ(rows[0].high, 70);
    EXPECT_EQ(rows[1].at, kStart + 120s);
    EXPECT_DOUBLE_EQ(rows[1].load, 20);
    EXPECT_EQ(rows[2].at, kStart + 121s);
    EXPECT_FALSE(rows[2].high.has_value());
    // Folding again changes nothing.
    ASSERT_TRUE(store->prune(kStart + 250s));
    EXPECT_EQ(read_all(*store).size(), 32u);
}

// The evidence of a run that went down: its last kRunEndSecondsKept stay seconds when the rest
// is folded; a run stopped in order and the running one are folded whole.
TEST(HistoryStore, TheLastSecondsOfARunThatWentDownStaySeconds) {
    ScratchDir dir;
    {
        auto store = *HistoryStore::open(dir.path(), {});
        ASSERT_TRUE(store->start_run("boot-a", kStart));
        for (int i = 1; i <= 1005; ++i) {
            ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i},
                                      history_second(i >= 950 ? 100 : 5)));
        }
        // No stop: the machine went down.
    }
    auto store = *HistoryStore::open(dir.path(), HistoryLimits{.seconds_kept = 120s});
    ASSERT_TRUE(store->start_run("boot-b", kStart + 2000s));
    for (int i = 2001; i <= 2100; ++i) {
        ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(1)));
    }
    ASSERT_TRUE(store->stop_run(kStart + 2101s));
    ASSERT_TRUE(store->start_run("boot-b", kStart + 3000s));
    for (int i = 3001; i <= 3100; ++i) {
        ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(2)));
    }
    ASSERT_TRUE(store->prune(kStart + 5000s));
    const auto rows = read_all(*store);
    ASSERT_FALSE(rows.empty());
    for (std::size_t i = 1; i < rows.size(); ++i) {
        ASSERT_LT(rows[i - 1].at, rows[i].at) << "in time order, row " << i;
    }
    const auto kept = kRunEndSecondsKept.count();
    std::size_t seconds = 0;
    for (const auto& r : rows) {
        const auto at = std::chrono::duration_cast<std::chrono::seconds>(r.at - kStart).count();
        if (r.high.has_value()) continue;  // a minute
        ++seconds;
        EXPECT_GT(at, 1005 - kept) << "a second not of the last ones of the run that went down";
        EXPECT_LE(at, 1005);
    }
    EXPECT_EQ(seconds, static_cast<std::size_t>(kept));
    // The minute cut by the kept seconds ends before them, with the seconds it holds.
    const auto cut = std::ranges::find(rows, kStart + std::chrono::seconds{1005 - kept}, &Row::at);
    ASSERT_NE(cut, rows.end());
    EXPECT_TRUE(cut->high.has_value());
    EXPECT_DOUBLE_EQ(cut->seconds, static_cast<double>((1005 - kept) % 60));
    // The run's last second is still told, though runs.last is written every tenth.
    auto runs = *store->runs();
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0].last, kStart + 1005s);
    // Pruned again: nothing changes.
    ASSERT_TRUE(store->prune(kStart + 5000s));
    EXPECT_EQ(read_all(*store).size(), rows.size());
}

TEST(HistoryStore, WhatIsOlderThanKeptGoesAndItsRuns) {
    ScratchDir dir;
    auto store =
        *HistoryStore::open(dir.path(), HistoryLimits{.seconds_kept = 86400s, .kept = 60s});
    ASSERT_TRUE(store->start_run("old", kStart));
    for (int i = 1; i <= 10; ++i) {
        ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(1)));
    }
    ASSERT_TRUE(store->stop_run(kStart + 11s));
    ASSERT_TRUE(store->start_run("new", kStart + 100s));
    ASSERT_TRUE(store->append(kStart + 101s, history_second(2)));
    ASSERT_TRUE(store->prune(kStart + 120s));
    const auto rows = read_all(*store);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].at, kStart + 101s);
    auto runs = *store->runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].boot_id, "new");
}

TEST(HistoryStore, TheOldestGoFirstBeyondTheSizeCap) {
    ScratchDir dir;
    auto store = *HistoryStore::open(dir.path(), HistoryLimits{.max_bytes = 150'000});
    ASSERT_TRUE(store->start_run("b", kStart));
    // 256 CPUs: about 1 KB a second raw, 480 KB in all deflated.
    for (int i = 1; i <= 1000; ++i) {
        ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(i % 100, 256)));
    }
    ASSERT_GT(*store->bytes_used(), 400'000u);
    ASSERT_TRUE(store->prune(kStart + 1001s));
    EXPECT_LE(*store->bytes_used(), 150'000u);
    const auto rows = read_all(*store);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows.back().at, kStart + 1000s) << "the newest stay";
    EXPECT_GT(rows.front().at, kStart + 500s);
    EXPECT_LE(std::filesystem::file_size(store->file()), 200'000u)
        << "the freed pages are given back";
}

TEST(HistoryStore, ARowThatDoesNotDecodeIsSkippedAndCounted) {
    ScratchDir dir;
    auto store = *HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(store->start_run("b", kStart));
    ASSERT_TRUE(store->append(kStart + 1s, history_second(1)));
    ASSERT_TRUE(store->append(kStart + 2s, history_second(2)));
    ASSERT_TRUE(store->append(kStart + 3s, history_second(3)));
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(store->file().c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE seconds SET data = x'0102' WHERE t = 1800000001000",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        // Deflated bytes cut short.
        ASSERT_EQ(
            sqlite3_exec(db, "UPDATE seconds SET data = substr(data, 1, 8) WHERE t = 1800000003000",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
        sqlite3_close(db);
    }
    const auto rows = read_all(*store);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_DOUBLE_EQ(rows[0].load, 2);
    EXPECT_EQ(store->skipped(), 2u);
}

TEST(HistoryStore, AMinuteThatDoesNotDecodeIsSkippedAndCounted) {
    ScratchDir dir;
    auto store = *HistoryStore::open(dir.path(), HistoryLimits{.seconds_kept = 60s});
    ASSERT_TRUE(store->start_run("b", kStart));
    for (int i = 1; i <= 120; ++i) {
        ASSERT_TRUE(
            store->append(kStart + std::chrono::seconds{i}, history_second(i <= 60 ? 1 : 2)));
    }
    ASSERT_TRUE(store->prune(kStart + 240s));  // both minutes folded
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(store->file().c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE minutes SET low = x'0102' WHERE t = 1800000060000",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    const auto rows = read_all(*store);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].at, kStart + 120s);
    EXPECT_DOUBLE_EQ(rows[0].load, 2);
    EXPECT_EQ(store->skipped(), 1u);
}

TEST(HistoryStore, AFileThatIsNotAHistoryIsNamedAndLeftAlone) {
    ScratchDir dir;
    {
        std::ofstream f(dir / "history.db");
        f << "not a database, and long enough to be read as one's header........................";
    }
    auto store = HistoryStore::open(dir.path(), {});
    ASSERT_FALSE(store.has_value());
    EXPECT_NE(store.error().message.find((dir / "history.db").string()), std::string::npos)
        << store.error().message;
    std::ifstream f(dir / "history.db");
    std::string text;
    std::getline(f, text);
    EXPECT_EQ(text.rfind("not a database", 0), 0u);
}

TEST(HistoryStore, ALaterFormatIsRefused) {
    ScratchDir dir;
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open((dir / "history.db").c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=7", nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    auto store = HistoryStore::open(dir.path(), {});
    ASSERT_FALSE(store.has_value());
    EXPECT_NE(store.error().message.find("format 7"), std::string::npos) << store.error().message;
}

// The watchdog a run armed, and what its driver said of the boot's start, come back with the
// runs; a file written before the watchdog table had one is read as before.
TEST(HistoryStore, TheWatchdogARunArmedIsKeptWithIt) {
    ScratchDir dir;
    {
        auto store = *HistoryStore::open(dir.path(), {});
        ASSERT_TRUE(store->start_run("boot-a", kStart));
        ASSERT_TRUE(store->append(kStart + 1s, history_second(5)));
    }
    auto store = *HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(store->start_run("boot-b", kStart + 100s));
    ASSERT_TRUE(store->note_watchdog(kStart + 101s, "/dev/watchdog0", true));
    auto runs = store->runs();
    ASSERT_TRUE(runs.has_value()) << runs.error().to_string();
    ASSERT_EQ(runs->size(), 2u);
    EXPECT_FALSE((*runs)[0].watchdog.has_value());
    EXPECT_FALSE((*runs)[0].boot_reset_by_watchdog.has_value());
    EXPECT_EQ((*runs)[1].watchdog, "/dev/watchdog0");
    EXPECT_EQ((*runs)[1].boot_reset_by_watchdog, true);
    // A run no longer kept takes its watchdog rows with it.
    store->set_limits(HistoryLimits{.seconds_kept = 86400s, .kept = 60s});
    ASSERT_TRUE(store->prune(kStart + 1000s));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "history.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM watchdog", -1, &q, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(q, 0), 1) << "the running run's row stays";
    sqlite3_finalize(q);
    sqlite3_close(db);
}

HistoryRun run_of(std::int64_t id, std::string boot, bool stopped = false,
                  std::optional<bool> boot_reset = std::nullopt) {
    HistoryRun r;
    r.id = id;
    r.boot_id = std::move(boot);
    r.started = kStart + std::chrono::seconds{id * 100};
    r.last = r.started + 50s;
    if (stopped) r.stopped = r.started + 51s;
    if (boot_reset) {
        r.watchdog = "/dev/watchdog";
        r.boot_reset_by_watchdog = boot_reset;
    }
    return r;
}

TEST(RunEnd, EachWayARunEndsIsToldFromTheRunsAfterIt) {
    const std::vector<HistoryRun> runs{
        run_of(1, "a", true),          // stopped
        run_of(2, "a"),                // killed: the next run is of the same boot
        run_of(3, "a"),                // the next is of boot b, which began with a reset
        run_of(4, "b", false, true),   // boot c too, as its third run's driver says
        run_of(5, "c"),                // killed
        run_of(6, "c"),                // killed
        run_of(7, "c", false, true),   // boot d's driver says it did not reset it
        run_of(8, "d", false, false),  // boot e armed no watchdog: nothing says
        run_of(9, "e"),                //
        run_of(10, "f"),               // running
        run_of(11, "f"),               // after the running one (another daemon's): unknown
    };
    auto end = [&](std::size_t i) { return run_end_name(run_end(runs, i, 10)); };
    EXPECT_EQ(end(0), "stopped");
    EXPECT_EQ(end(1), "daemon_ended");
    EXPECT_EQ(end(2), "watchdog_reset");
    EXPECT_EQ(end(3), "watchdog_reset") << "a later run of boot c says it";
    EXPECT_EQ(end(4), "daemon_ended");
    EXPECT_EQ(end(5), "daemon_ended");
    EXPECT_EQ(end(6), "machine_down") << "boot d's driver said it did not reset it";
    EXPECT_EQ(end(7), "machine_down") << "boot e armed no watchdog";
    EXPECT_EQ(end(8), "machine_down");
    EXPECT_EQ(end(9), "running");
    EXPECT_EQ(end(10), "unknown");
}

// Every kSyncEvery-th second is synced, and one asked to be (a starving machine's, which a
// watchdog's reset would otherwise lose); the others are not.
TEST(HistoryStore, ASecondAskedToBeSyncedIsAndTheOthersEveryTenth) {
    test_support::SqliteSyncs::install();
    ScratchDir dir;
    auto store = *HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(store->start_run("b", kStart));
    auto append = [&](int i, bool sync) {
        const int before = test_support::SqliteSyncs::sync_count();
        EXPECT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(i), sync));
        return test_support::SqliteSyncs::sync_count() - before;
    };
    for (int i = 1; i <= 5; ++i) EXPECT_EQ(append(i, false), 0) << "second " << i;
    EXPECT_GE(append(6, true), 1) << "asked to be synced";
    for (int i = 7; i <= 9; ++i) EXPECT_EQ(append(i, false), 0) << "second " << i;
    EXPECT_GE(append(10, false), 1) << "the tenth";
    EXPECT_EQ(read_all(*store).size(), 10u);
}

TEST(HistoryStore, ASecondDaemonOnTheSameDirectoryIsRefused) {
    ScratchDir dir;
    auto first = HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(first.has_value()) << first.error().to_string();
    auto second = HistoryStore::open(dir.path(), {});
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().status, monitor::Status::Busy);
    EXPECT_NE(second.error().message.find("pid " + std::to_string(::getpid())), std::string::npos)
        << second.error().message;
    first->reset();
    EXPECT_TRUE(HistoryStore::open(dir.path(), {}).has_value()) << "free once the first closed";
}

TEST(HistoryStore, AStateDirectoryThatCannotBeMadeIsNamed) {
    ScratchDir dir;
    { std::ofstream f(dir / "file"); }
    auto store = HistoryStore::open(dir / "file/state", {});
    ASSERT_FALSE(store.has_value());
    EXPECT_NE(store.error().message.find("file/state"), std::string::npos) << store.error().message;
}

}  // namespace
}  // namespace monitord
