// DaemonClient against a stand-in daemon on a socket of the test's own, which answers each call
// with a reply the test writes: the typed calls read what the interface gives and refuse, as
// BADDATA naming the method and the field, what it does not.
#include "monitor/protocol/daemon_client.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "monitor/protocol/method_outputs.hpp"
#include "monitor/unique_fd.hpp"
#include "test_support.hpp"

namespace monitor::protocol {
namespace {

using nlohmann::json;

// Listens on a socket in a directory of its own; serve() answers one connection's calls with
// `replies`, in turn (each a message text without its NUL).
class StandInDaemon {
  public:
    StandInDaemon() : fd_(test_support::listening_socket(path_)) {}
    ~StandInDaemon() {
        if (server_.joinable()) server_.join();
    }
    StandInDaemon(const StandInDaemon&) = delete;
    StandInDaemon& operator=(const StandInDaemon&) = delete;

    void serve(std::vector<std::string> replies) {
        server_ = std::thread([this, replies = std::move(replies)] {
            monitor::UniqueFd c{::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
            std::string in;
            char buf[4096];
            for (const auto& reply : replies) {
                // One call, up to its NUL.
                while (in.find('\0') == std::string::npos) {
                    const ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
                    if (n <= 0) return;
                    in.append(buf, static_cast<std::size_t>(n));
                }
                in.erase(0, in.find('\0') + 1);
                const std::string out = reply + '\0';
                if (::send(c.get(), out.data(), out.size(), MSG_NOSIGNAL) < 0) return;
            }
        });
    }
    std::string path() const { return path_; }

  private:
    test_support::ScratchDir dir_{"monitord-client-test"};
    std::string path_ = (dir_ / "socket").string();
    monitor::UniqueFd fd_;
    std::thread server_;
};

std::string reply_text(const json& parameters, bool continues = false) {
    json r{{"parameters", parameters}};
    if (continues) r["continues"] = true;
    return r.dump();
}

const json kPlan = {
    {"slots", 1},
    {"groups",
     json::array({{{"pmu", "perf"}, {"sets", 1}, {"members", json::array({{{"event", "x"}}})}}})}};

TEST(DaemonClient, ATypedCallReadsTheReplyIntoItsOut) {
    StandInDaemon daemon;
    daemon.serve({reply_text({{"plan", kPlan}, {"threads", 4}})});
    auto c = DaemonClient::connect(daemon.path());
    ASSERT_TRUE(c) << c.error().to_string();
    auto out = c->call(method::StartCounters, CounterRequestIn{});
    ASSERT_TRUE(out) << out.error().to_string();
    EXPECT_EQ(out->threads, 4);
    ASSERT_EQ(out->plan.groups.size(), 1u);
    EXPECT_EQ(out->plan.groups[0].members[0].event, "x");
}

// The daemon's own errors carry a message written for people: the error is that message,
// with the status the error's name stands for (NoHistory: nothing there, NODEV); another's is
// shown whole.
TEST(DaemonClient, TheDaemonsOwnErrorsAreTheirMessage) {
    StandInDaemon daemon;
    daemon.serve({json{{"error", "io.monitord.Monitor.NoHistory"},
                       {"parameters", {{"message", "this monitord keeps no history on disk"}}}}
                      .dump(),
                  json{{"error", "org.example.Other"}, {"parameters", {{"why", "x"}}}}.dump()});
    auto c = DaemonClient::connect(daemon.path());
    ASSERT_TRUE(c) << c.error().to_string();
    auto none = c->call(method::GetHistoryRuns);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::NoDev);
    EXPECT_EQ(none.error().message, "this monitord keeps no history on disk");
    auto other = c->call(method::GetHistoryRuns);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().message, R"(GetHistoryRuns failed: org.example.Other {"why":"x"})");
}

TEST(DaemonClient, AReplyWithoutAFieldItsMethodGivesIsBadData) {
    StandInDaemon daemon;
    daemon.serve({reply_text({{"threads", 4}})});
    auto c = DaemonClient::connect(daemon.path());
    ASSERT_TRUE(c) << c.error().to_string();
    auto out = c->call(method::StartCounters, CounterRequestIn{});
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().status, Status::BadData);
    EXPECT_NE(out.error().message.find("StartCounters"), std::string::npos) << out.error().message;
    EXPECT_NE(out.error().message.find("plan"), std::string::npos) << out.error().message;
}

TEST(DaemonClient, AReplyWithAFieldOfAnotherTypeIsBadData) {
    StandInDaemon daemon;
    daemon.serve({reply_text({{"plan", kPlan}, {"threads", "four"}})});
    auto c = DaemonClient::connect(daemon.path());
    ASSERT_TRUE(c) << c.error().to_string();
    auto out = c->call(method::StartCounters, CounterRequestIn{});
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().status, Status::BadData) << out.error().message;
    EXPECT_NE(out.error().message.find("does not match io.monitord.Monitor"), std::string::npos)
        << out.error().message;
}

// A stream ends at the first reply that does not read, with that error; the replies before it
// reach the caller.
TEST(DaemonClient, AStreamEndsAtAReplyThatDoesNotRead) {
    StandInDaemon daemon;
    daemon.serve({reply_text({{"started", true}}, true) + '\0' +
                  reply_text({{"report", {{"samples", 1}}}}, true)});
    auto c = DaemonClient::connect(daemon.path());
    ASSERT_TRUE(c) << c.error().to_string();
    int replies = 0;
    auto r = c->stream(method::Profile, ProfileIn{}, [&](const ProfileOut& out) {
        ++replies;
        EXPECT_TRUE(out.started.value_or(false));
        return true;
    });
    EXPECT_EQ(replies, 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadData) << r.error().message;
    EXPECT_NE(r.error().message.find("Profile"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace monitor::protocol
