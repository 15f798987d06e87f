// The Daemon as monitord's process runs it (DaemonComponents builds the same object): every
// setting that a reload applies, changed and applied, takes effect in the running daemon; and
// a connection that closes ends what it started, profiles included.
#include "daemon.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "config.hpp"
#include "daemon_components.hpp"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using test_support::ComponentOptions;
using test_support::DaemonComponents;

// How a key is changed, and whether the running daemon then holds the new value (on the
// loop's thread).
struct Change {
    std::function<void(Config&)> change;
    std::function<bool(DaemonComponents&)> took;
};

// One entry for each key that config_keys() marks OnReload::Applies.
const std::map<std::string, Change, std::less<>>& reload_changes() {
    static const std::map<std::string, Change, std::less<>> changes = {
        {"[daemon] log-level",
         {[](Config& c) { c.log_level = spdlog::level::debug; },
          [](DaemonComponents&) { return spdlog::get_level() == spdlog::level::debug; }}},
        {"[loading] history-seconds",
         {[](Config& c) { c.history_seconds = 120; },
          [](DaemonComponents& d) { return d.runtime().engine().history_seconds() == 120; }}},
        {"[history] per-second",
         {[](Config& c) { c.history_per_second = 3600s; },
          [](DaemonComponents& d) {
              return d.daemon().history()->limits().seconds_kept == 3600s;
          }}},
        {"[history] keep",
         {[](Config& c) { c.history_keep = 7200s; },
          [](DaemonComponents& d) { return d.daemon().history()->limits().kept == 7200s; }}},
        {"[history] max-size",
         {[](Config& c) { c.history_max_size = 5; },
          [](DaemonComponents& d) {
              return d.daemon().history()->limits().max_bytes == std::uint64_t{5} << 20;
          }}},
        {"[watchdog] on-stop",
         {[](Config& c) { c.watchdog_on_stop = monitor::watchdog::OnStop::KeepArmed; },
          [](DaemonComponents& d) {
              return d.loading().watchdog_on_stop() == monitor::watchdog::OnStop::KeepArmed;
          }}},
        {"[access] control-group",
         {[](Config& c) { c.control_group = "nogroup"; },
          [](DaemonComponents& d) { return d.access().control_group() == "nogroup"; }}},
        {"[limits] idle-timeout",
         {[](Config& c) { c.idle_timeout = 7s; },
          [](DaemonComponents& d) { return d.server().limits().idle_timeout == 7s; }}},
        {"[limits] reply-memory-per-user",
         {[](Config& c) { c.reply_memory_per_user = 3; },
          [](DaemonComponents& d) {
              return d.server().limits().max_pending_per_user == std::size_t{3} << 20;
          }}},
        {"[limits] profiles-per-user",
         {[](Config& c) { c.profiles_per_user = 1; },
          [](DaemonComponents& d) { return d.profiles().options().max_profiles_per_user == 1; }}},
        {"[limits] profile-duration",
         {[](Config& c) { c.profile_duration = 90s; },
          [](DaemonComponents& d) { return d.profiles().options().max_duration_per_user == 90s; }}},
        {"[limits] perf-files-per-session",
         {[](Config& c) { c.perf_files_per_session = 100; },
          [](DaemonComponents& d) {
              return d.counters().max_files_per_session() == 100 &&
                     d.profiles().options().files_per_session.most == 100;
          }}},
    };
    return changes;
}

TEST(Daemon, EveryKeyThatAppliesAtReloadTakesEffect) {
    test_support::ScratchDir state;
    ComponentOptions o;
    o.config.state_directory = state.path();  // a history, whose limits a reload changes
    DaemonComponents d{std::move(o)};
    ASSERT_TRUE(d.ok()) << d.error();
    ASSERT_NE(d.on_loop([&] { return d.daemon().history(); }), nullptr);
    int applies = 0;
    for (const auto& key : config_keys()) {
        if (key.reload != OnReload::Applies) continue;
        ++applies;
        const std::string label = key.label();
        const auto change = reload_changes().find(label);
        ASSERT_NE(change, reload_changes().end())
            << label << " applies at reload, and this test does not check that it does";
        const Config running = d.on_loop([&] { return d.daemon().config(); });
        Config next = running;
        change->second.change(next);
        ASSERT_FALSE(key.same(running, next)) << label << ": the test's change changes nothing";
        EXPECT_FALSE(d.on_loop([&] { return change->second.took(d); }))
            << label << ": the daemon holds the new value before the reload";
        // As Manager::reload does: the plan keeps what waits for a restart, the rest applies.
        const ReloadPlan plan = plan_reload(running, next);
        EXPECT_TRUE(plan.at_restart.empty()) << plan.restart_message();
        d.on_loop([&] { d.daemon().apply(plan.config); });
        EXPECT_TRUE(d.on_loop([&] { return change->second.took(d); }))
            << label << ": not in effect after the reload";
    }
    EXPECT_EQ(applies, static_cast<int>(reload_changes().size()))
        << "a key checked here no longer applies at reload";
    spdlog::set_level(spdlog::level::info);
}

// With a state directory, each tick's second goes to the history on disk, as the engine saw
// it, and GetLoading reads it back over a range; the run is recorded, and its stop.
TEST(Daemon, EachTicksSecondGoesToTheHistory) {
    test_support::ScratchDir state;
    ComponentOptions o;
    o.manual_ticks = true;
    o.config.state_directory = state.path();
    {
        DaemonComponents d{std::move(o)};
        ASSERT_TRUE(d.ok()) << d.error();
        d.write_stat({{0, {130, 970}}, {1, {290, 810}}});  // 30 %, 90 %
        d.tick();
        // A second is keyed by its wall-clock millisecond: the ticks a test makes at once are
        // kept apart.
        std::this_thread::sleep_for(5ms);
        d.write_stat({{0, {180, 1020}}, {1, {300, 900}}});  // 50 %, 10 %
        d.tick();
        std::vector<double> machine;
        std::vector<double> cpu1;
        auto r = d.on_loop([&] {
            return d.daemon().history()->read(
                {}, std::chrono::system_clock::now() + 1h,
                [&](auto, const monitor::HistorySecond& s, auto*, auto*) {
                    machine.push_back(s.sources.back().machine.value_or(-1));
                    cpu1.push_back(s.sources.back().cpus.at(1).load.value_or(-1));
                });
        });
        ASSERT_TRUE(r.has_value()) << r.error().to_string();
        ASSERT_EQ(machine.size(), 2u);
        EXPECT_NEAR(machine[0], 60, 0.01);
        EXPECT_NEAR(machine[1], 30, 0.01);
        EXPECT_NEAR(cpu1[0], 90, 0.01);
        EXPECT_NEAR(cpu1[1], 10, 0.01);
    }
    // Stopped in order: the run says so.
    auto store = HistoryStore::open(state.path(), {});
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    auto runs = (*store)->runs();
    ASSERT_TRUE(runs.has_value());
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_TRUE((*runs)[0].stopped.has_value());
    EXPECT_TRUE((*runs)[0].last.has_value()) << "its last second, though none was synced";
}

// The [[counters]] tables: a reload starts the sessions added, and stops those removed.
TEST(Daemon, AReloadStartsAndStopsTheStandingSessions) {
    DaemonComponents d{ComponentOptions{}};
    ASSERT_TRUE(d.ok()) << d.error();
    auto client = d.connect();
    auto standing = [&] {
        auto r = client.call(test_support::make_call("io.monitord.Monitor.GetStandingCounters"));
        EXPECT_TRUE(r) << r.error().message;
        std::vector<std::string> names;
        if (r && r->parameters.contains("sessions")) {
            for (const auto& s : r->parameters["sessions"]) {
                names.push_back(s["name"].get<std::string>());
            }
        }
        return names;
    };
    EXPECT_TRUE(standing().empty());
    Config next = d.on_loop([&] { return d.daemon().config(); });
    StandingSessionConfig table;
    table.name = "reloaded";
    table.request.events = "perf::TASK-CLOCK";
    table.request.mux = monitor::perf::MuxMode::Kernel;
    next.counters.push_back(table);
    d.on_loop([&] { d.daemon().apply(plan_reload(d.daemon().config(), next).config); });
    EXPECT_EQ(standing(), std::vector<std::string>{"reloaded"});
    next.counters.clear();
    d.on_loop([&] { d.daemon().apply(plan_reload(d.daemon().config(), next).config); });
    EXPECT_TRUE(standing().empty());
}

// A profile whose client goes away ends with its connection, as counter sessions do, long
// before it would send anything: the Daemon wires the profiles to the server's close handler
// too.
TEST(Daemon, AProfileEndsWithItsConnection) {
    DaemonComponents d{ComponentOptions{}};
    ASSERT_TRUE(d.ok()) << d.error();
    {
        auto client = d.connect();
        auto call =
            test_support::make_call("io.monitord.Monitor.Profile",
                                    {{"request",
                                      {{"event", "perf::CPU-CLOCK"},
                                       {"frequency", 100},
                                       {"target", {{"kind", "process"}, {"pid", ::getpid()}}}}},
                                     {"duration_ms", 600'000}},
                                    true);
        auto started = client.call(call);
        ASSERT_TRUE(started) << started.error().message;
        const std::string error = started->error.value_or("");
        if (error == "io.monitord.Monitor.NoPmu" ||
            error == "io.monitord.Monitor.PermissionDenied") {
            GTEST_SKIP() << "no sampling here: " << started->parameters.dump();
        }
        ASSERT_EQ(error, "") << started->parameters.dump();
        ASSERT_EQ(d.on_loop([&] { return d.profiles().running(); }), 1u);
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (d.on_loop([&] { return d.profiles().running(); }) != 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(d.on_loop([&] { return d.profiles().running(); }), 0u)
        << "the profile outlived its connection";
}

}  // namespace
}  // namespace monitord
