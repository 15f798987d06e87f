// Tests of the VarlinkServer on a real socket and sd-event loop (DaemonComponents), with fake
// handlers in place of the services': how the byte stream is cut into calls, the errors the
// server gives by itself, the access rules enforced before a handler runs (as another user
// when the test runs as root), the connection limits, and the replies a handler sends later
// with send(): a deferred reply, a stream, and a stream whose client went away.
#include "varlink_server.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon_components.hpp"
#include "monitor/protocol/varlink_idl.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using monitor::varlink::Call;
using monitor::varlink::Client;
using monitor::varlink::Reply;
using nlohmann::json;
using test_support::make_call;
using test_support::NoReplyWithin;

const std::string kMonitor = "io.monitord.Monitor.";
const std::string kPoke = "org.example.fake.Poke";

// A FAKE interface, served by these tests only: its method has a handler but no entry in the
// access table.
const monitor::varlink::Interface& fake_interface() {
    static const auto iface = monitor::varlink::Interface::parse(
        "# A fake interface for the tests of the varlink server.\n"
        "interface org.example.fake\n"
        "\n"
        "method Poke() -> ()\n");
    if (!iface) throw std::logic_error(iface.error().to_string());
    return *iface;
}

// A call as it goes on the wire, with its NUL.
std::string call_text(const std::string& method, json params = json::object(), bool more = false) {
    return monitor::varlink::encode(make_call(method, std::move(params), more)) + '\0';
}

Reply reply_with(json parameters, bool continues = false) {
    Reply r;
    r.parameters = std::move(parameters);
    r.continues = continues;
    return r;
}

// The next reply; a transport error fails the test.
Reply receive(Client& c) {
    auto r = c.receive();
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : Reply{.error = "no reply: " + r.error().message};
}

// The replies to `calls`, made one after the other on one connection by a child process as
// nobody (as the test's own user when that is not root).
std::vector<Reply> replies_as_nobody(const std::string& socket, const std::vector<Call>& calls) {
    const auto child = test_support::run_as_nobody([&](std::string& out) {
        auto c = Client::connect(socket);
        if (!c) {
            out = c.error().message;
            return 1;
        }
        for (const auto& call : calls) {
            auto reply = c->call(call);
            if (!reply) {
                out += reply.error().message;
                return 2;
            }
            out += monitor::varlink::encode(*reply);
            out.push_back('\0');
        }
        return 0;
    });
    EXPECT_EQ(child.code, 0) << child.out;
    std::vector<Reply> replies;
    std::string_view rest = child.out;
    for (auto end = rest.find('\0'); end != std::string_view::npos; end = rest.find('\0')) {
        auto reply = monitor::varlink::parse_reply(rest.substr(0, end));
        EXPECT_TRUE(reply) << reply.error().message;
        if (reply) replies.push_back(*reply);
        rest.remove_prefix(end + 1);
    }
    return replies;
}

class VarlinkServerTest : public ::testing::Test {
  protected:
    // The components with the fake handlers below, and `limits`.
    void start(ServerLimits limits = {}) {
        test_support::ComponentOptions o;
        o.limits = limits;
        o.bare_server = [this](VarlinkServer& server) { add_fakes(server); };
        components_.emplace(std::move(o));
        ASSERT_TRUE(components_->ok()) << components_->error();
    }

    // FAKE handlers on methods that have an entry in the access table, each counting its
    // calls: ReadCounters (reads) and StopCounters (controls) answer at once; GetStatus
    // answers later, with send(); GetLoading with "more" starts a stream fed with send().
    void add_fakes(VarlinkServer& server) {
        server.add_interface(
            *monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface));
        server.add_interface(fake_interface());
        for (const std::string& method :
             {kMonitor + "ReadCounters", kMonitor + "StopCounters", kPoke}) {
            server.add_method(method,
                              [this](const Call& c, const Peer&) -> VarlinkServer::Response {
                                  ++seen_.calls[c.method];
                                  return reply_with({{"handled", c.method}});
                              });
        }
        server.add_method(kMonitor + "GetStatus",
                          [this](const Call& c, const Peer& peer) -> VarlinkServer::Response {
                              ++seen_.calls[c.method];
                              seen_.later = peer.connection;
                              return VarlinkServer::Response::later();
                          });
        server.add_method(kMonitor + "GetLoading",
                          [this](const Call& c, const Peer& peer) -> VarlinkServer::Response {
                              ++seen_.calls[c.method];
                              if (c.more) {
                                  seen_.stream = peer.connection;
                                  seen_.streams.push_back(peer.connection);
                              }
                              return reply_with({{"n", 1}}, c.more);
                          });
        server.set_close_handler([this](std::uint64_t id) { seen_.closed.push_back(id); });
    }

    int calls(const std::string& method) {
        return components_->on_loop([&] { return seen_.calls[method]; });
    }
    bool send(std::uint64_t connection, const VarlinkServer::Response& response) {
        return components_->on_loop(
            [&] { return components_->server().send(connection, response); });
    }
    std::size_t connection_count() {
        return components_->on_loop([&] { return components_->server().connection_count(); });
    }

    // What the fake handlers saw; the loop's thread only.
    struct Seen {
        std::map<std::string, int> calls;
        std::uint64_t later = 0;             // the connection of the last deferred call
        std::uint64_t stream = 0;            // the connection of the last stream
        std::vector<std::uint64_t> streams;  // of every stream, in order
        std::vector<std::uint64_t> closed;
    } seen_;
    std::optional<test_support::DaemonComponents> components_;
};

// --- Framing ---------------------------------------------------------------------------------

TEST_F(VarlinkServerTest, SeveralCallsInOneWriteAreAnsweredInOrder) {
    start();
    auto c = components_->connect();
    ASSERT_TRUE(c.send_raw(call_text("org.varlink.service.GetInfo") +
                           call_text(kMonitor + "ReadCounters") +
                           call_text("org.varlink.service.GetInterfaceDescription",
                                     {{"interface", "io.monitord.Monitor"}})));
    auto info = receive(c);
    EXPECT_FALSE(info.error);
    EXPECT_EQ(info.parameters.value("vendor", ""), "monitord");
    EXPECT_EQ(info.parameters["interfaces"],
              json::array({"io.monitord.Monitor", "org.example.fake", "org.varlink.service"}));
    auto read = receive(c);
    EXPECT_FALSE(read.error);
    EXPECT_EQ(read.parameters["handled"], kMonitor + "ReadCounters");
    auto description = receive(c);
    EXPECT_FALSE(description.error);
    EXPECT_NE(description.parameters.value("description", "").find("interface io.monitord.Monitor"),
              std::string::npos);
    EXPECT_TRUE(NoReplyWithin(c, 100ms));
}

TEST_F(VarlinkServerTest, ACallSplitAcrossWritesIsAnsweredOnceItsNulArrives) {
    start();
    auto c = components_->connect();
    const std::string text = call_text(kMonitor + "ReadCounters");
    ASSERT_TRUE(c.send_raw(text.substr(0, 10)));
    EXPECT_TRUE(NoReplyWithin(c, 100ms)) << "answered half a call";
    for (std::size_t i = 10; i + 1 < text.size(); ++i) ASSERT_TRUE(c.send_raw(text.substr(i, 1)));
    EXPECT_TRUE(NoReplyWithin(c, 100ms)) << "answered a call without its NUL";
    // The NUL comes with the first half of the next call.
    const std::string next = call_text(kMonitor + "StopCounters");
    ASSERT_TRUE(c.send_raw(std::string(1, '\0') + next.substr(0, 20)));
    EXPECT_EQ(receive(c).parameters["handled"], kMonitor + "ReadCounters");
    ASSERT_TRUE(c.send_raw(next.substr(20)));
    EXPECT_EQ(receive(c).parameters["handled"], kMonitor + "StopCounters");
    EXPECT_EQ(calls(kMonitor + "ReadCounters"), 1);
    EXPECT_EQ(calls(kMonitor + "StopCounters"), 1);
}

TEST_F(VarlinkServerTest, AnEmptyMessageIsInvalidAndTheConnectionGoesOn) {
    start();
    auto c = components_->connect();
    // A call followed by two NULs: the second ends a message of nothing.
    ASSERT_TRUE(c.send_raw(call_text(kMonitor + "ReadCounters") + std::string(1, '\0')));
    EXPECT_FALSE(receive(c).error);
    auto empty = receive(c);
    EXPECT_EQ(empty.error, kMonitor + "InvalidMessage");
    ASSERT_TRUE(c.send_raw(std::string(1, '\0')));
    EXPECT_EQ(receive(c).error, kMonitor + "InvalidMessage");
    ASSERT_TRUE(c.send_raw(call_text(kMonitor + "ReadCounters")));
    EXPECT_FALSE(receive(c).error);
    EXPECT_EQ(calls(kMonitor + "ReadCounters"), 2);
}

TEST_F(VarlinkServerTest, ACallWithoutItsNulAtTheEndIsInvalidAndNeverHandled) {
    start();
    auto c = components_->connect();
    std::string text = call_text(kMonitor + "ReadCounters");
    text.pop_back();
    ASSERT_TRUE(c.send_raw(text));
    ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
    auto r = receive(c);
    EXPECT_EQ(r.error, kMonitor + "InvalidMessage");
    EXPECT_NE(r.parameters.value("reason", "").find("before the message's NUL terminator"),
              std::string::npos)
        << r.parameters.dump();
    auto closed = c.receive();
    ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error().status, monitor::Status::IoErr) << closed.error().message;
    EXPECT_EQ(calls(kMonitor + "ReadCounters"), 0);
}

// --- The server's own errors -----------------------------------------------------------------

TEST_F(VarlinkServerTest, ParametersThatDoNotMatchTheInterfaceAreInvalidParameter) {
    start();
    auto c = components_->connect();
    const std::pair<json, std::string> bad[] = {
        {{{"per_cpu", "yes"}}, "per_cpu"},
        {{{"bogus", true}}, "bogus"},
    };
    for (const auto& [params, name] : bad) {
        auto r = c.call(kMonitor + "GetLoading", params);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->error, "org.varlink.service.InvalidParameter") << params.dump();
        EXPECT_EQ(r->parameters.value("parameter", ""), name) << params.dump();
    }
    auto missing = c.call("org.varlink.service.GetInterfaceDescription");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->error, "org.varlink.service.InvalidParameter");
    EXPECT_EQ(missing->parameters.value("parameter", ""), "interface");
    EXPECT_EQ(calls(kMonitor + "GetLoading"), 0);
}

TEST_F(VarlinkServerTest, UnknownMethodsAndInterfacesAndMissingHandlersHaveTheirErrors) {
    start();
    auto c = components_->connect();
    auto r = c.call(kMonitor + "Frobnicate");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, "org.varlink.service.MethodNotFound");
    EXPECT_EQ(r->parameters.value("method", ""), kMonitor + "Frobnicate");
    r = c.call("org.example.nothing.Do");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, "org.varlink.service.InterfaceNotFound");
    EXPECT_EQ(r->parameters.value("interface", ""), "org.example.nothing");
    // In the interface and the access table, but nothing handles it here.
    r = c.call(kMonitor + "GetPmuInfo");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, "org.varlink.service.MethodNotImplemented");
}

TEST_F(VarlinkServerTest, AMethodWithAHandlerButNoAccessRuleIsRefusedToEveryone) {
    start();
    auto c = components_->connect();
    auto r = c.call(kPoke);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->error, "org.varlink.service.PermissionDenied");
    EXPECT_NE(r->parameters.value("message", "").find("has no access rule"), std::string::npos)
        << r->parameters.dump();
    EXPECT_EQ(calls(kPoke), 0) << "the handler ran";
}

// --- Access ----------------------------------------------------------------------------------

TEST_F(VarlinkServerTest, ControlIsRefusedToAnotherUserBeforeItsHandlerRunsUntilItsGroupMay) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to call as another user (nobody)";
    start();
    auto own = components_->connect();
    auto r = own.call(kMonitor + "StopCounters");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->error) << "root may control";
    ASSERT_EQ(calls(kMonitor + "StopCounters"), 1);

    // Refused before its parameters are looked at: a refused caller learns nothing more.
    auto replies = replies_as_nobody(
        components_->socket_path(),
        {make_call(kMonitor + "StopCounters"), make_call(kMonitor + "StopCounters", {{"bogus", 1}}),
         make_call(kMonitor + "ReadCounters")});
    ASSERT_EQ(replies.size(), 3u);
    for (int i : {0, 1}) {
        EXPECT_EQ(replies[i].error, kMonitor + "PermissionDenied") << i;
        EXPECT_NE(replies[i].parameters.value("message", "").find("uid 65534"), std::string::npos)
            << replies[i].parameters.dump();
    }
    EXPECT_FALSE(replies[2].error) << "reading is open to anyone who reaches the socket";
    EXPECT_EQ(calls(kMonitor + "StopCounters"), 1) << "a refused call reached its handler";
    EXPECT_EQ(calls(kMonitor + "ReadCounters"), 1);

    components_->on_loop(
        [&] { components_->access().set_control_group(test_support::kNogroup, "nogroup"); });
    replies = replies_as_nobody(components_->socket_path(), {make_call(kMonitor + "StopCounters")});
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_FALSE(replies[0].error) << replies[0].parameters.dump();
    EXPECT_EQ(calls(kMonitor + "StopCounters"), 2);
}

// --- Connection limits -----------------------------------------------------------------------

// Whether a call on `c` is answered: a connection the server refused is closed at once.
bool served(Client& c) {
    auto r = c.call("org.varlink.service.GetInfo");
    return r && !r->error;
}

TEST_F(VarlinkServerTest, ConnectionsBeyondTheTotalLimitAreClosed) {
    start({.max_connections = 2});
    auto first = std::make_optional(components_->connect());
    auto second = components_->connect();
    ASSERT_TRUE(served(*first));
    ASSERT_TRUE(served(second));
    auto third = components_->connect();  // the kernel's backlog takes it; the server does not
    EXPECT_FALSE(served(third));
    EXPECT_EQ(connection_count(), 2u);

    first.reset();
    EXPECT_TRUE(test_support::wait_until([&] { return connection_count() == 1; }, 5s));
    auto fourth = components_->connect();
    EXPECT_TRUE(served(fourth));
}

TEST_F(VarlinkServerTest, OneUserCannotTakeMoreThanItsShareButRootMay) {
    start({.max_per_user = 2});
    // nobody (or the test's own user, when that is not root) opens three connections.
    const auto child = test_support::run_as_nobody([&](std::string& out) {
        std::vector<Client> clients;
        for (int i = 0; i < 3; ++i) {
            auto c = Client::connect(components_->socket_path());
            if (!c) return 1;
            clients.push_back(std::move(*c));
            out += served(clients.back()) ? '1' : '0';
        }
        return 0;
    });
    ASSERT_EQ(child.code, 0) << child.out;
    EXPECT_EQ(child.out, "110");
    if (::geteuid() != 0) return;
    std::vector<Client> root;
    for (int i = 0; i < 3; ++i) {
        root.push_back(components_->connect());
        EXPECT_TRUE(served(root.back())) << "root's connection " << i;
    }
}

// --- Replies sent later ----------------------------------------------------------------------

TEST_F(VarlinkServerTest, AnIdleConnectionClosesAfterTheTimeoutButNotWhileACallIsUnderWay) {
    start();  // the default timeout: minutes
    auto idle = components_->connect();
    auto busy = components_->connect();
    auto waiting = components_->connect();
    ASSERT_TRUE(served(idle));
    // A deferred call under way: the daemon is the one to speak, however long it takes.
    ASSERT_TRUE(waiting.send_raw(call_text(kMonitor + "GetStatus")));
    ASSERT_TRUE(test_support::wait_until(
        [&] { return components_->on_loop([&] { return seen_.later; }) != 0; }, 2s));
    const auto later = components_->on_loop([&] { return seen_.later; });
    // As a reload that lowers [access] idle-timeout does: it applies to the open connections.
    components_->on_loop([&] { components_->server().set_idle_timeout(400ms); });
    // `busy` calls every 100 ms, for three timeouts.
    for (int i = 0; i < 12; ++i) {
        ASSERT_TRUE(served(busy)) << i;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(connection_count(), 2u) << "the idle connection is still open";
    EXPECT_FALSE(served(idle));
    EXPECT_TRUE(served(busy));

    // The deferred reply still reaches its client, which is idle from then on.
    EXPECT_TRUE(send(later, reply_with({{"state", "late"}})));
    EXPECT_EQ(receive(waiting).parameters["state"], "late");
    EXPECT_TRUE(test_support::wait_until(
        [&] {
            return components_->on_loop([&] { return std::ranges::count(seen_.closed, later); }) ==
                   1;
        },
        2s))
        << "a connection idle since its deferred reply ended is still open";

    // Zero: never.
    components_->on_loop([&] { components_->server().set_idle_timeout(0ms); });
    auto fresh = components_->connect();
    ASSERT_TRUE(served(fresh));
    std::this_thread::sleep_for(600ms);
    EXPECT_TRUE(served(fresh));
}

TEST_F(VarlinkServerTest, OneUsersWaitingRepliesStayWithinItsBudgetButRootsDoNot) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the clients must be another user";
    start({.max_pending_per_user = std::size_t{1} << 20});
    // More than the socket's buffer takes (about 200 KiB): most of it waits in the daemon.
    const std::string big(900 * 1024, 'x');
    // nobody's side: two streams, then what each receives; `b` first, while `a`'s reply waits.
    const auto nobody = test_support::start_as_nobody([&](std::string& out) {
        std::vector<Client> c;
        for (int i = 0; i < 2; ++i) {
            auto client = Client::connect(components_->socket_path());
            if (!client) return 1;
            client->set_timeout(10s);
            if (!client->send_raw(call_text(kMonitor + "GetLoading", json::object(), true)) ||
                !client->receive()) {  // the stream's first reply
                return 2;
            }
            c.push_back(std::move(*client));
        }
        auto b = c[1].receive();
        auto a = c[0].receive();
        if (!a || !b) return 3;
        out =
            fmt::format("b: {} {}\na: {} bytes", b->error.value_or("-"),
                        b->parameters.value("message", ""), a->parameters.value("big", "").size());
        return 0;
    });
    // The daemon's side: once both of nobody's streams started, a big reply on each.
    int sent_a = -1, sent_b = -1, after_b = -1;
    if (test_support::wait_until(
            [&] { return components_->on_loop([&] { return seen_.streams.size(); }) == 2; }, 5s)) {
        const auto ids = components_->on_loop([&] { return seen_.streams; });
        sent_a = send(ids[0], reply_with({{"big", big}}, true));
        sent_b = send(ids[1], reply_with({{"big", big}}, true));
        after_b = send(ids[1], reply_with({{"n", 2}}, true));
    }
    const auto child = test_support::wait_for(nobody);
    ASSERT_EQ(child.code, 0) << child.out;
    EXPECT_EQ(sent_a, 1);
    EXPECT_EQ(sent_b, 1) << "the stream was there; its reply was replaced";
    EXPECT_EQ(after_b, 0) << "the error ended b's stream";
    EXPECT_NE(child.out.find("b: io.monitord.Monitor.LimitExceeded"), std::string::npos)
        << child.out;
    EXPECT_NE(child.out.find("[limits] reply-memory-per-user"), std::string::npos) << child.out;
    EXPECT_NE(child.out.find("a: 921600 bytes"), std::string::npos) << child.out;
    EXPECT_TRUE(test_support::wait_until(
        [&] {
            return components_->on_loop([&] { return components_->server().pending_of(65534); }) ==
                   0;
        },
        2s))
        << "what nobody's connections read is no longer counted";

    // Root: two such replies on two connections, nothing refused.
    std::vector<Client> root;
    for (int i = 0; i < 2; ++i) {
        root.push_back(components_->connect());
        ASSERT_TRUE(root.back().send_raw(call_text(kMonitor + "GetLoading", json::object(), true)));
        EXPECT_TRUE(receive(root.back()).continues);
    }
    const auto ids = components_->on_loop([&] { return seen_.streams; });
    ASSERT_EQ(ids.size(), 4u);
    EXPECT_TRUE(send(ids[2], reply_with({{"big", big}}, true)));
    EXPECT_TRUE(send(ids[3], reply_with({{"big", big}}, true)));
    for (auto& c : root) {
        auto r = receive(c);
        EXPECT_FALSE(r.error) << *r.error;
        EXPECT_EQ(r.parameters.value("big", "").size(), big.size());
    }
}

TEST_F(VarlinkServerTest, ADeferredCallIsAnsweredBySendAndHoldsTheCallsAfterIt) {
    start();
    auto c = components_->connect();
    ASSERT_TRUE(
        c.send_raw(call_text(kMonitor + "GetStatus") + call_text(kMonitor + "ReadCounters")));
    EXPECT_TRUE(NoReplyWithin(c, 100ms));
    EXPECT_EQ(calls(kMonitor + "ReadCounters"), 0) << "read a call while one was deferred";

    const auto later = components_->on_loop([&] { return seen_.later; });
    ASSERT_NE(later, 0u);
    EXPECT_TRUE(send(later, reply_with({{"state", "late"}})));
    auto deferred = receive(c);
    EXPECT_FALSE(deferred.error);
    EXPECT_FALSE(deferred.continues);
    EXPECT_EQ(deferred.parameters["state"], "late");
    EXPECT_EQ(receive(c).parameters["handled"], kMonitor + "ReadCounters");
    // Answered: nothing more may be sent for that call.
    EXPECT_FALSE(send(later, reply_with({{"state", "again"}})));
    EXPECT_TRUE(NoReplyWithin(c, 100ms));
}

TEST_F(VarlinkServerTest, AStreamGoesOnUntilAReplyWithoutContinues) {
    start();
    auto c = components_->connect();
    ASSERT_TRUE(c.send_raw(call_text(kMonitor + "GetLoading", json::object(), true) +
                           call_text(kMonitor + "ReadCounters")));
    auto first = receive(c);
    EXPECT_TRUE(first.continues);
    EXPECT_EQ(first.parameters["n"], 1);
    EXPECT_TRUE(NoReplyWithin(c, 100ms)) << "answered a call behind a stream";

    const auto stream = components_->on_loop([&] { return seen_.stream; });
    ASSERT_NE(stream, 0u);
    EXPECT_TRUE(send(stream, reply_with({{"n", 2}}, true)));
    // An encoded reply, as the services share one among many callers.
    auto encoded =
        std::make_shared<const std::string>(monitor::varlink::encode(reply_with({{"n", 3}}, true)));
    EXPECT_TRUE(send(stream, VarlinkServer::Response{encoded, true}));
    EXPECT_TRUE(send(stream, reply_with({{"n", 4}})));
    for (int n : {2, 3, 4}) {
        auto r = receive(c);
        EXPECT_FALSE(r.error);
        EXPECT_EQ(r.parameters["n"], n);
        EXPECT_EQ(r.continues, n < 4) << n;
    }
    // The stream is over: the call that waited behind it is answered.
    EXPECT_EQ(receive(c).parameters["handled"], kMonitor + "ReadCounters");
    EXPECT_FALSE(send(stream, reply_with({{"n", 5}}, true)));
}

TEST_F(VarlinkServerTest, AStreamWhoseClientLeftIsClosedAndSendSaysSo) {
    start();
    std::uint64_t stream = 0;
    {
        auto c = components_->connect();
        auto first = c.call(make_call(kMonitor + "GetLoading", json::object(), true));
        ASSERT_TRUE(first) << first.error().message;
        EXPECT_TRUE(first->continues);
        stream = components_->on_loop([&] { return seen_.stream; });
        ASSERT_NE(stream, 0u);
    }  // the client closes
    EXPECT_TRUE(test_support::wait_until(
        [&] {
            return components_->on_loop([&] { return std::ranges::count(seen_.closed, stream); }) ==
                   1;
        },
        5s))
        << "the close handler was not called for the stream's connection";
    EXPECT_FALSE(send(stream, reply_with({{"n", 2}}, true)));
    EXPECT_EQ(connection_count(), 0u);
}

}  // namespace
}  // namespace monitord
