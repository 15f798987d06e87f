// The Daemon as monitord's process runs it (DaemonComponents builds the same object): every
// setting that a reload applies, changed and applied, takes effect in the running daemon; and
// a connection that closes ends what it started, profiles included.
#include "daemon.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "config.hpp"
#include "daemon_components.hpp"
#include "monitor/protocol/method_outputs.hpp"
#include "monitor/text_file.hpp"
#include "monitor/unique_fd.hpp"
#include "sqlite_syncs.hpp"
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
              return d.daemon().history_writer()->limits().seconds_kept == 3600s;
          }}},
        {"[history] keep",
         {[](Config& c) { c.history_keep = 7200s; },
          [](DaemonComponents& d) { return d.daemon().history_writer()->limits().kept == 7200s; }}},
        {"[history] max-size",
         {[](Config& c) { c.history_max_size = 5; },
          [](DaemonComponents& d) {
              return d.daemon().history_writer()->limits().max_bytes == std::uint64_t{5} << 20;
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
    ASSERT_NE(d.on_loop([&] { return d.daemon().history_reader(); }), nullptr);
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
        // Written on the history's own thread.
        ASSERT_TRUE(d.daemon().history_writer()->flush(10s));
        std::vector<double> machine;
        std::vector<double> cpu1;
        // Another reading connection: the daemon's is its reader thread's.
        auto reader = HistoryStore::open_reader(state.path() / "history.db");
        ASSERT_TRUE(reader) << reader.error().to_string();
        auto r = (*reader)->read({}, std::chrono::system_clock::now() + 1h,
                                 [&](auto, const monitor::HistorySecond& s, auto*, auto*) {
                                     machine.push_back(s.sources.back().machine.value_or(-1));
                                     cpu1.push_back(s.sources.back().cpus.at(1).load.value_or(-1));
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

// The history file held by another program (an operator's sqlite3 in a write transaction):
// the ticks go on, their seconds wait, and are all written once it lets go; the failure and
// the recovery are in the writer's state.
TEST(Daemon, SecondsTheHistoryCannotTakeWaitAndAreWrittenLater) {
    test_support::ScratchDir state;
    ComponentOptions o;
    o.manual_ticks = true;
    o.config.state_directory = state.path();
    DaemonComponents d{std::move(o)};
    ASSERT_TRUE(d.ok()) << d.error();
    auto* writer = d.daemon().history_writer();
    ASSERT_NE(writer, nullptr);
    ASSERT_TRUE(writer->flush(10s));  // the first prune
    sqlite3* holder = nullptr;
    ASSERT_EQ(sqlite3_open((state.path() / "history.db").c_str(), &holder), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
    for (std::uint64_t i = 0; i < 3; ++i) {
        d.write_stat({{0, {130 + 100 * i, 970}}, {1, {290, 810 + 100 * i}}});
        d.tick();
        std::this_thread::sleep_for(5ms);  // seconds are keyed by their millisecond
    }
    // The first write gives up after SQLite's busy timeout (1 s), and waits to try again.
    auto held = writer->state();
    for (int i = 0; i < 200 && held.error.empty(); ++i) {
        std::this_thread::sleep_for(50ms);
        held = writer->state();
    }
    EXPECT_FALSE(writer->flush(100ms)) << "written through another's exclusive lock";
    EXPECT_NE(held.error.find("locked"), std::string::npos) << held.error;
    EXPECT_GE(held.pending, 1u);
    EXPECT_EQ(sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(holder);
    ASSERT_TRUE(writer->flush(20s)) << writer->state().error;
    const auto after = writer->state();
    EXPECT_TRUE(after.error.empty()) << after.error;
    EXPECT_EQ(after.dropped, 0u);
    EXPECT_EQ(after.written, 3u);
    std::size_t rows = 0;
    auto reader = HistoryStore::open_reader(state.path() / "history.db");
    ASSERT_TRUE(reader) << reader.error().to_string();
    auto r = (*reader)->read({}, std::chrono::system_clock::now() + 1h,
                             [&](auto, const auto&, auto*, auto*) { ++rows; });
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(rows, 3u);
}

// While the watchdog is armed and its pets are late (the probes starve), each second is synced
// to the disk, so that the seconds before a reset survive it; while they come, not.
TEST(Daemon, WhileTheWatchdogsPetsAreLateEachSecondIsSynced) {
    test_support::SqliteSyncs::install();
    test_support::ScratchDir state;
    const auto fifo = state.path() / "watchdog";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    monitor::UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(reader);
    ComponentOptions o;
    o.manual_ticks = true;
    o.probe = monitor::ProbeMode::Sleep;
    o.watchdog =
        std::make_shared<monitor::watchdog::Watchdog>(monitor::watchdog::PetPolicyKind::All);
    o.config.state_directory = state.path() / "state";
    DaemonComponents d{std::move(o)};
    ASSERT_TRUE(d.ok()) << d.error();
    auto* writer = d.daemon().history_writer();
    ASSERT_TRUE(writer->flush(10s));
    // A second's syncs. The CPUs busy all of it: no idle time, so no pet from its tick.
    std::uint64_t busy = 100;
    auto tick_syncs = [&] {
        const int before = test_support::SqliteSyncs::sync_count();
        busy += 100;
        d.write_stat({{0, {busy, 900}}, {1, {busy + 100, 800}}});
        d.tick();
        EXPECT_TRUE(writer->flush(10s));
        return test_support::SqliteSyncs::sync_count() - before;
    };
    EXPECT_EQ(tick_syncs(), 0) << "not armed";
    d.on_loop([&] { ASSERT_TRUE(d.runtime().arm_watchdog(fifo.string(), 10s)); });
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(tick_syncs(), 0) << "armed, just petted (the arm is a pet)";
    std::this_thread::sleep_for(2100ms);
    EXPECT_GE(tick_syncs(), 1) << "armed, the last pet 2 s ago";
    d.on_loop([&] { ASSERT_TRUE(d.runtime().watchdog()->disarm()); });
}

// GetHistoryRuns: the runs before this one, how each ended (the next run's boot, and what the
// watchdog's driver said to it), and the last seconds before an end that was not a stop.
TEST(Daemon, GetHistoryRunsSaysHowEachRunEnded) {
    using namespace std::chrono;
    test_support::ScratchDir state;
    auto boot = monitor::read_text_file("/proc/sys/kernel/random/boot_id");
    ASSERT_TRUE(boot.has_value());
    std::string this_boot = *boot;
    while (!this_boot.empty() && this_boot.back() == '\n') this_boot.pop_back();
    const auto t0 = time_point_cast<milliseconds>(system_clock::now()) - 1h;
    auto second = [](double load) {
        monitor::HistorySecond s;
        s.seconds = 1;
        s.sources.push_back({.name = "procstat",
                             .machine = load,
                             .has_states = false,
                             .machine_states = std::nullopt,
                             .cpus = {}});
        return s;
    };
    {
        auto store = *HistoryStore::open(state.path(), {});
        // An earlier boot's run that the machine's reset ended: 12 seconds, the load rising.
        ASSERT_TRUE(store->start_run("boot-0", t0));
        for (int i = 1; i <= 12; ++i) ASSERT_TRUE(store->append(t0 + seconds{i}, second(i * 8)));
    }
    {
        auto store = *HistoryStore::open(state.path(), {});
        ASSERT_TRUE(store->start_run("boot-1", t0 + 100s));
        ASSERT_TRUE(store->note_watchdog(t0 + 101s, "/dev/watchdog", true));
        ASSERT_TRUE(store->append(t0 + 102s, second(1)));
        ASSERT_TRUE(store->stop_run(t0 + 103s));
        // This boot's run, killed after 3 seconds.
        ASSERT_TRUE(store->start_run(this_boot, t0 + 200s));
        for (int i = 1; i <= 3; ++i) ASSERT_TRUE(store->append(t0 + 200s + seconds{i}, second(50)));
    }
    ComponentOptions o;
    o.manual_ticks = true;
    o.config.state_directory = state.path();
    DaemonComponents d{std::move(o)};
    ASSERT_TRUE(d.ok()) << d.error();
    auto client = d.connect();
    auto r = client.call(test_support::make_call("io.monitord.Monitor.GetHistoryRuns"));
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_FALSE(r->error) << r->parameters.dump();
    auto out =
        monitor::protocol::output_from_json<monitor::protocol::HistoryRunsOut>(r->parameters);
    EXPECT_EQ(out.file, (state.path() / "history.db").string());
    ASSERT_EQ(out.runs.size(), 4u);
    std::vector<std::string> ended;
    for (const auto& run : out.runs) ended.push_back(run.ended);
    EXPECT_EQ(ended,
              (std::vector<std::string>{"watchdog_reset", "stopped", "daemon_ended", "running"}));
    // The reset run's last 10 seconds, the newest last; none for the stop.
    const auto& reset = out.runs[0].last_seconds;
    ASSERT_EQ(reset.size(), 10u);
    EXPECT_EQ(reset.back().at, duration_cast<microseconds>((t0 + 12s).time_since_epoch()).count());
    ASSERT_EQ(reset.back().machine.size(), 1u);
    EXPECT_EQ(reset.back().machine[0].source, "procstat");
    EXPECT_EQ(reset.back().machine[0].load, 96);
    EXPECT_EQ(reset.front().machine[0].load, 24);
    EXPECT_TRUE(out.runs[1].last_seconds.empty());
    EXPECT_EQ(out.runs[1].watchdog, "/dev/watchdog");
    EXPECT_EQ(out.runs[2].last_seconds.size(), 3u);
    EXPECT_EQ(out.runs[2].boot_id, this_boot);
    // The newest two; a count out of range names what works.
    auto two =
        client.call(test_support::make_call("io.monitord.Monitor.GetHistoryRuns", {{"most", 2}}));
    ASSERT_TRUE(two && !two->error);
    EXPECT_EQ(two->parameters["runs"].size(), 2u);
    EXPECT_EQ(two->parameters["runs"][1]["ended"], "running");
    auto refused =
        client.call(test_support::make_call("io.monitord.Monitor.GetHistoryRuns", {{"most", 0}}));
    ASSERT_TRUE(refused && refused->error);
    EXPECT_EQ(*refused->error, "io.monitord.Monitor.InvalidRequest");
    EXPECT_NE(refused->parameters.dump().find("1 to 1000"), std::string::npos)
        << refused->parameters.dump();
}

// Without a state directory, GetHistoryRuns says there is no history and why.
TEST(Daemon, GetHistoryRunsWithoutAHistorySaysWhy) {
    DaemonComponents d{ComponentOptions{}};
    ASSERT_TRUE(d.ok()) << d.error();
    auto client = d.connect();
    auto r = client.call(test_support::make_call("io.monitord.Monitor.GetHistoryRuns"));
    ASSERT_TRUE(r && r->error);
    EXPECT_EQ(*r->error, "io.monitord.Monitor.NoHistory");
    EXPECT_NE(r->parameters.dump().find("state-directory"), std::string::npos)
        << r->parameters.dump();
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
