// The history's writer thread: the seconds posted are written in order and read by another
// connection while it writes; a file that cannot take them keeps them waiting, the oldest
// dropped and counted beyond kMaxPendingSeconds; stop() writes what waits and the orderly stop;
// the first prune runs on the thread.
#include "history_writer.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <vector>

#include "history_seconds.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using monitor::HistorySecond;
using Time = HistoryStore::Time;
using test_support::ScratchDir;

const Time kStart = test_support::kHistoryStart;
using test_support::history_second;

std::unique_ptr<HistoryStore> started_store(const std::filesystem::path& dir,
                                            HistoryLimits limits = {}) {
    auto store = HistoryStore::open(dir, limits);
    EXPECT_TRUE(store.has_value()) << store.error().to_string();
    EXPECT_TRUE((*store)->start_run("boot", kStart));
    return std::move(*store);
}

std::vector<double> loads(const std::filesystem::path& dir) {
    auto reader = HistoryStore::open_reader(dir / "history.db");
    EXPECT_TRUE(reader.has_value()) << reader.error().to_string();
    std::vector<double> out;
    if (!reader) return out;
    auto r =
        (*reader)->read(Time{}, kStart + 100'000s, [&](Time, const HistorySecond& s, auto*, auto*) {
            out.push_back(s.sources[0].machine.value_or(-1));
        });
    EXPECT_TRUE(r.has_value()) << r.error().to_string();
    return out;
}

// Another connection holding the write lock (BEGIN EXCLUSIVE), as an operator's sqlite3 may.
class WriteLock {
  public:
    explicit WriteLock(const std::filesystem::path& file) {
        EXPECT_EQ(sqlite3_open(file.c_str(), &db_), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    }
    ~WriteLock() { release(); }
    WriteLock(const WriteLock&) = delete;
    WriteLock& operator=(const WriteLock&) = delete;
    void release() {
        if (db_ == nullptr) return;
        EXPECT_EQ(sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db_);
        db_ = nullptr;
    }

  private:
    sqlite3* db_ = nullptr;
};

// Until the writer's state says a write failed (SQLite's busy timeout is 1 s).
HistoryWriter::State failed_state(const HistoryWriter& writer) {
    auto state = writer.state();
    for (int i = 0; i < 400 && state.error.empty(); ++i) {
        std::this_thread::sleep_for(25ms);
        state = writer.state();
    }
    return state;
}

TEST(HistoryWriter, WritesThePostedSecondsInOrderWhileAnotherConnectionReads) {
    ScratchDir dir;
    HistoryWriter writer(started_store(dir.path()), kStart, 1000);
    for (int i = 1; i <= 20; ++i) writer.post(kStart + std::chrono::seconds{i}, history_second(i));
    ASSERT_TRUE(writer.flush(20s)) << writer.state().error;
    const auto state = writer.state();
    EXPECT_EQ(state.written, 20u);
    EXPECT_EQ(state.pending, 0u);
    const auto got = loads(dir.path());
    ASSERT_EQ(got.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_DOUBLE_EQ(got[static_cast<std::size_t>(i)], i + 1);
}

TEST(HistoryWriter, SecondsTheFileCannotTakeWaitAndAreWrittenWhenItCan) {
    ScratchDir dir;
    HistoryWriter writer(started_store(dir.path()), kStart, 1000);
    ASSERT_TRUE(writer.flush(20s));  // the first prune
    WriteLock lock(dir.path() / "history.db");
    for (int i = 1; i <= 5; ++i) writer.post(kStart + std::chrono::seconds{i}, history_second(i));
    const auto held = failed_state(writer);
    EXPECT_NE(held.error.find("database is locked"), std::string::npos) << held.error;
    EXPECT_EQ(held.pending, 5u);
    EXPECT_EQ(held.written, 0u);
    EXPECT_FALSE(writer.flush(100ms));
    lock.release();
    ASSERT_TRUE(writer.flush(20s)) << writer.state().error;
    const auto after = writer.state();
    EXPECT_TRUE(after.error.empty()) << after.error;
    EXPECT_EQ(after.written, 5u);
    EXPECT_EQ(after.dropped, 0u);
    EXPECT_EQ(loads(dir.path()), (std::vector<double>{1, 2, 3, 4, 5}));
}

TEST(HistoryWriter, BeyondTheMostThatWaitTheOldestAreDroppedAndCounted) {
    ScratchDir dir;
    HistoryWriter writer(started_store(dir.path()), kStart, 100'000);
    ASSERT_TRUE(writer.flush(20s));
    WriteLock lock(dir.path() / "history.db");
    const int posted = static_cast<int>(kMaxPendingSeconds) + 7;
    for (int i = 1; i <= posted; ++i) {
        writer.post(kStart + std::chrono::seconds{i}, history_second(i / 2.0));  // a load: <= 100
    }
    const auto held = failed_state(writer);
    EXPECT_EQ(held.dropped, 7u);
    EXPECT_EQ(held.pending, kMaxPendingSeconds);
    lock.release();
    ASSERT_TRUE(writer.flush(30s)) << writer.state().error;
    const auto got = loads(dir.path());
    ASSERT_EQ(got.size(), kMaxPendingSeconds);
    EXPECT_DOUBLE_EQ(got.front(), 8 / 2.0);  // the newest kept
    EXPECT_DOUBLE_EQ(got.back(), posted / 2.0);
}

TEST(HistoryWriter, StopWritesWhatWaitsAndTheOrderlyStop) {
    ScratchDir dir;
    {
        HistoryWriter writer(started_store(dir.path()), kStart, 1000);
        {
            WriteLock lock(dir.path() / "history.db");
            for (int i = 1; i <= 3; ++i)
                writer.post(kStart + std::chrono::seconds{i}, history_second(i));
            (void)failed_state(writer);
        }
        // The lock is gone, the thread waits a second to try again: stop() does.
        auto r = writer.stop(kStart + 4s);
        ASSERT_TRUE(r.has_value()) << r.error().to_string();
        writer.post(kStart + 5s, history_second(5));  // after the stop: not written
    }
    EXPECT_EQ(loads(dir.path()), (std::vector<double>{1, 2, 3}));
    auto store = HistoryStore::open(dir.path(), {});
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    auto runs = (*store)->runs();
    ASSERT_TRUE(runs.has_value());
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].stopped, kStart + 4s);
}

TEST(HistoryWriter, PrunesOnItsThreadAtStartAndEveryFewSecondsWritten) {
    ScratchDir dir;
    // Seconds from before seconds_kept, written by an earlier run that stopped in order (the
    // last seconds of one that did not would stay seconds).
    {
        auto store = started_store(dir.path(), HistoryLimits{.seconds_kept = 60s});
        for (int i = 1; i <= 120; ++i) {
            ASSERT_TRUE(store->append(kStart + std::chrono::seconds{i}, history_second(10)));
        }
        ASSERT_TRUE(store->stop_run(kStart + 121s));
    }
    auto reader = HistoryStore::open_reader(dir.path() / "history.db");
    ASSERT_TRUE(reader.has_value());
    HistoryWriter writer(started_store(dir.path(), HistoryLimits{.seconds_kept = 60s}),
                         kStart + 300s, 10);
    ASSERT_TRUE(writer.flush(20s)) << writer.state().error;
    auto rows = (*reader)->rows(Time{}, kStart + 100'000s);
    ASSERT_TRUE(rows.has_value());
    EXPECT_EQ(rows->first, 0u) << "seconds left unfolded";
    EXPECT_EQ(rows->second, 2u);
    // Ten seconds written: a prune as of the tenth, with the limits set since.
    writer.set_limits(HistoryLimits{.seconds_kept = 60s, .kept = 30s});
    for (int i = 1; i <= 10; ++i) {
        writer.post(kStart + 300s + std::chrono::seconds{i}, history_second(20));
    }
    ASSERT_TRUE(writer.flush(20s)) << writer.state().error;
    rows = (*reader)->rows(Time{}, kStart + 100'000s);
    ASSERT_TRUE(rows.has_value());
    EXPECT_EQ(rows->first, 10u);
    EXPECT_EQ(rows->second, 0u) << "the minutes older than kept are still there";
}

TEST(HistoryWriter, AReaderIsRefusedWhatOnlyTheWriterDoes) {
    ScratchDir dir;
    { auto store = started_store(dir.path()); }
    auto reader = HistoryStore::open_reader(dir.path() / "history.db");
    ASSERT_TRUE(reader.has_value()) << reader.error().to_string();
    auto r = (*reader)->append(kStart + 1s, history_second(1));
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("opened to read"), std::string::npos) << r.error().message;
    auto missing = HistoryStore::open_reader(dir.path() / "none.db");
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("none.db"), std::string::npos)
        << missing.error().message;
}

}  // namespace
}  // namespace monitord
