// The history's reader thread: a read runs off the loop, which goes on meanwhile (a timer of
// it fires), and its reply comes back on the loop's thread, in the order posted; more than
// kMaxWaitingReads waiting are refused; a stop drops the reads not done without their `done`.
#include "history_reader.hpp"

#include <gtest/gtest.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "history_seconds.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using Response = HistoryReader::Response;
using test_support::history_second;
using test_support::kHistoryStart;
using test_support::ScratchDir;

// A history of three seconds, and a reader of it on `event`.
std::unique_ptr<HistoryReader> reader_of(const ScratchDir& dir, sd_event* event) {
    {
        auto store = HistoryStore::open(dir.path(), {});
        EXPECT_TRUE(store.has_value()) << store.error().to_string();
        EXPECT_TRUE((*store)->start_run("boot", kHistoryStart));
        for (int i = 1; i <= 3; ++i) {
            EXPECT_TRUE(
                (*store)->append(kHistoryStart + std::chrono::seconds{i}, history_second(i)));
        }
    }
    auto store = HistoryStore::open_reader(dir.path() / "history.db");
    EXPECT_TRUE(store.has_value()) << store.error().to_string();
    auto reader = HistoryReader::start(event, std::move(*store));
    EXPECT_TRUE(reader.has_value()) << reader.error().to_string();
    return std::move(*reader);
}

// The error name a reply of the test carries.
std::string name_of(const Response& r) {
    const auto* reply = std::get_if<monitor::varlink::Reply>(&r.message);
    return reply != nullptr && reply->error ? *reply->error : std::string{"?"};
}

EventPtr new_event() {
    sd_event* raw = nullptr;
    EXPECT_GE(sd_event_new(&raw), 0);
    return EventPtr{raw};
}

TEST(HistoryReader, ReadsRunOffTheLoopAndAnswerOnItInOrder) {
    ScratchDir dir;
    auto event = new_event();
    auto reader = reader_of(dir, event.get());
    const auto loop = std::this_thread::get_id();
    std::promise<void> release;
    auto released = release.get_future().share();
    std::thread::id reading;
    std::int64_t rows = -1;
    std::vector<std::string> answered;
    ASSERT_TRUE(reader->post(
        [&](const HistoryStore& history) -> Response {
            reading = std::this_thread::get_id();
            released.wait();
            auto r = history.rows(HistoryStore::Time{}, kHistoryStart + 10s);
            if (r) rows = static_cast<std::int64_t>(r->first + r->second);
            return monitor::varlink::make_error("test.First");
        },
        [&](Response reply) {
            EXPECT_EQ(std::this_thread::get_id(), loop);
            answered.push_back(name_of(reply));
        }));
    ASSERT_TRUE(reader->post(
        [](const HistoryStore&) -> Response { return monitor::varlink::make_error("test.Second"); },
        [&](Response reply) { answered.push_back(name_of(reply)); }));
    EXPECT_EQ(reader->pending(), 2u);

    // While the first read waits, the loop goes on: its timer fires.
    bool fired = false;
    sd_event_source* timer = nullptr;
    std::uint64_t now = 0;
    ASSERT_GE(sd_event_now(event.get(), CLOCK_MONOTONIC, &now), 0);
    ASSERT_GE(sd_event_add_time(
                  event.get(), &timer, CLOCK_MONOTONIC, now + 50'000, 0,
                  [](sd_event_source*, std::uint64_t, void* flag) {
                      *static_cast<bool*>(flag) = true;
                      return 0;
                  },
                  &fired),
              0);
    SourcePtr timer_source{timer};
    for (int i = 0; i < 50 && !fired; ++i) sd_event_run(event.get(), 100'000);
    EXPECT_TRUE(fired);
    EXPECT_TRUE(answered.empty()) << "the first read still waits";

    release.set_value();
    for (int i = 0; i < 100 && answered.size() < 2; ++i) sd_event_run(event.get(), 100'000);
    EXPECT_EQ(answered, (std::vector<std::string>{"test.First", "test.Second"}));
    EXPECT_EQ(rows, 3) << "read through the store's connection";
    EXPECT_NE(reading, loop);
    EXPECT_EQ(reader->pending(), 0u);
}

TEST(HistoryReader, TooManyWaitingAreRefusedAndAStopDropsThem) {
    ScratchDir dir;
    auto event = new_event();
    auto reader = reader_of(dir, event.get());
    std::promise<void> release;
    auto released = release.get_future().share();
    int done = 0;
    auto blocked = [&](const HistoryStore&) -> Response {
        released.wait();
        return monitor::varlink::make_error("test.Read");
    };
    // The one under way and kMaxWaitingReads behind it.
    for (std::size_t i = 0; i <= kMaxWaitingReads; ++i) {
        EXPECT_TRUE(reader->post(blocked, [&](Response) { ++done; })) << i;
    }
    EXPECT_FALSE(reader->post(blocked, [&](Response) { ++done; })) << "one more is refused";
    EXPECT_EQ(reader->pending(), kMaxWaitingReads + 1);
    release.set_value();
    reader.reset();  // the read under way ends; the others are dropped
    EXPECT_EQ(done, 0) << "no reply is given once the reader stopped";
}

}  // namespace
}  // namespace monitord
