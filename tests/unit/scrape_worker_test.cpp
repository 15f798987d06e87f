// The exporter's scrape worker: monitord asked on a thread of its own, one scrape at a time,
// its result shared by the requests that came while it ran.
#include "scrape_worker.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>

#include "sd_event_ptr.hpp"
#include "test_support.hpp"

namespace exporter {
namespace {

using namespace std::chrono_literals;

// A socket that takes connections into its backlog and never answers: a stopped monitord.
struct SilentSocket {
    test_support::ScratchDir dir{"silent"};
    monitor::UniqueFd fd;
    std::string path = (dir.path() / "io.monitord.Monitor").string();
    SilentSocket() { fd = test_support::listening_socket(path); }
};

monitord::EventPtr new_loop() {
    sd_event* e = nullptr;
    EXPECT_GE(sd_event_new(&e), 0);
    return monitord::EventPtr{e};
}

// Runs `event` until `done` holds, for at most `limit`.
bool run_until(sd_event* event, const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < end) sd_event_run(event, 100'000);
    return done();
}

TEST(ScrapeWorker, RequestsThatComeWhileAScrapeRunsShareItsResult) {
    SilentSocket monitord;
    auto event = new_loop();
    auto w = ScrapeWorker::start(event.get(), MonitordScraper{monitord.path, 300ms});
    ASSERT_TRUE(w) << w.error().message;
    auto& worker = **w;
    int answered = 0;
    std::vector<std::string> errors;
    for (int i = 0; i < 3; ++i) {
        worker.request([&](const Scrape& s, const std::optional<monitor::Error>& e) {
            ++answered;
            EXPECT_FALSE(s.status);
            errors.push_back(e ? e->message : "no error");
        });
    }
    EXPECT_EQ(worker.waiting(), 3U);
    ASSERT_TRUE(run_until(
        event.get(), [&] { return answered == 3; }, 5s));
    EXPECT_EQ(worker.scrapes(), 1U) << "one scrape for the three requests";
    for (const auto& e : errors) EXPECT_NE(e.find("within 300 ms"), std::string::npos) << e;
    EXPECT_EQ(worker.waiting(), 0U);

    // A request after the result: a scrape of its own.
    worker.request([&](const Scrape&, const std::optional<monitor::Error>&) { ++answered; });
    ASSERT_TRUE(run_until(
        event.get(), [&] { return answered == 4; }, 5s));
    EXPECT_EQ(worker.scrapes(), 2U);
}

// Stopping while a scrape runs: the thread ends with the scrape, unanswered requests dropped.
TEST(ScrapeWorker, StopsWhileAScrapeRuns) {
    SilentSocket monitord;
    auto event = new_loop();
    auto w = ScrapeWorker::start(event.get(), MonitordScraper{monitord.path, 300ms});
    ASSERT_TRUE(w) << w.error().message;
    bool answered = false;
    (*w)->request([&](const Scrape&, const std::optional<monitor::Error>&) { answered = true; });
    w->reset();
    EXPECT_FALSE(answered);
}

}  // namespace
}  // namespace exporter
