// The history on disk with the real daemon: read across a restart (monctl loading --since),
// by a member of the socket's group, never corrupted by kill -9 in a loop, where a daemon
// keeps it when not told, a second daemon on the same directory, and what monctl refuses.
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "daemon_process.hpp"

namespace itest {
namespace {

using Clock = std::chrono::system_clock;

std::int64_t unix_ms(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string at_option(Clock::time_point t) {
    // "@SECONDS.mmm", one of journalctl's formats.
    const auto ms = unix_ms(t);
    std::string fraction = std::to_string(1000 + ms % 1000).substr(1);
    return "@" + std::to_string(ms / 1000) + "." + fraction;
}

// What a history file holds, read as another program would (read-only).
struct FileCheck {
    std::string integrity;
    std::int64_t seconds = 0;
    std::int64_t newest_ms = 0;
    std::int64_t runs = 0;
    std::int64_t stopped = 0;
};

FileCheck check_file(const std::filesystem::path& db) {
    FileCheck out;
    sqlite3* h = nullptr;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        out.integrity = "cannot open: " + std::string{sqlite3_errmsg(h)};
        sqlite3_close(h);
        return out;
    }
    auto text = [&](const char* sql) {
        std::string v;
        sqlite3_exec(
            h, sql,
            [](void* p, int, char** values, char**) {
                *static_cast<std::string*>(p) = values[0] != nullptr ? values[0] : "";
                return 0;
            },
            &v, nullptr);
        return v;
    };
    auto number = [&](const char* sql) {
        const std::string v = text(sql);
        return v.empty() ? std::int64_t{0} : std::stoll(v);
    };
    out.integrity = text("PRAGMA integrity_check");
    out.seconds = number("SELECT count(*) FROM seconds");
    out.newest_ms = number("SELECT max(t) FROM seconds");
    out.runs = number("SELECT count(*) FROM runs");
    out.stopped = number("SELECT count(*) FROM runs WHERE stopped IS NOT NULL");
    sqlite3_close(h);
    return out;
}

std::unique_ptr<Daemon> start_with(const std::filesystem::path& state) {
    Daemon::Options o;
    o.args = {"--state-directory", state.string(), "--probe", "off"};
    return Daemon::start(o);
}

TEST(History, ReadAcrossARestart) {
    ScratchDir dir;
    const auto state = dir.path() / "state";
    const auto begin = Clock::now();
    {
        auto d = start_with(state);
        ASSERT_TRUE(d);
        ASSERT_TRUE(d->wait_samples(3));
        EXPECT_NE(d->log().find("History of every second in " + (state / "history.db").string()),
                  std::string::npos)
            << d->log();
        EXPECT_EQ(d->stop(SIGTERM), 0);
    }
    const auto between = Clock::now();
    std::this_thread::sleep_for(2s);
    auto d = start_with(state);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(3));

    // Both runs' seconds, and the stop between them as gaps.
    auto r = d->monctl({"loading", "--since", at_option(begin), "--history", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& history = j["machine"]["procstat"]["history"];
    ASSERT_TRUE(history.is_array()) << r.out;
    std::size_t values = 0;
    std::size_t gaps = 0;
    for (const auto& v : history) (v.is_null() ? gaps : values) += 1;
    EXPECT_GE(values, 6u) << r.out;
    EXPECT_GE(gaps, 2u) << "the 2 s between the runs: " << r.out;
    EXPECT_EQ(j["window_seconds"], history.size());
    EXPECT_EQ(j["machine"]["procstat"]["samples"], values);

    // Only the first run's.
    r = d->monctl({"loading", "--since", at_option(begin), "--until", at_option(between),
                   "--per-cpu", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto first = nlohmann::json::parse(r.out);
    EXPECT_GE(first["machine"]["procstat"]["samples"], 3) << r.out;
    EXPECT_LE(
        first["timestamp"].get<std::int64_t>(),
        std::chrono::duration_cast<std::chrono::microseconds>(between.time_since_epoch()).count());
    EXPECT_FALSE(first["cpus"].empty()) << r.out;

    // The table says which stretch it is.
    r = d->monctl({"loading", "--since", "-1min", "--states"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("History from "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Where the time went (procstat)"), std::string::npos) << r.out;

    // The runs: the first stopped, the second runs.
    r = d->monctl({"watchdog", "history", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto runs = nlohmann::json::parse(r.out)["runs"];
    ASSERT_EQ(runs.size(), 2u) << r.out;
    EXPECT_EQ(runs[0]["ended"], "stopped") << r.out;
    EXPECT_EQ(runs[1]["ended"], "running") << r.out;
    r = d->monctl({"watchdog", "history"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("  stopped\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" to now  running\n"), std::string::npos) << r.out;

    const auto file = check_file(state / "history.db");
    EXPECT_EQ(file.integrity, "ok");
    EXPECT_EQ(file.runs, 2);
    EXPECT_EQ(file.stopped, 1) << "the first stopped in order, the second runs";
}

// A member of the socket's group, not root, reads the history as root does: a range, the
// runs, and a moment of the past in monctl top.
TEST(History, TheSocketsGroupReadsIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run monctl as nobody";
    if (::getgrnam("nogroup") == nullptr) GTEST_SKIP() << "no group nogroup here";
    ScratchDir conf{ScratchDir::Everyone};
    std::ofstream(conf / "monitord.conf") << "[access]\nsocket-group = \"nogroup\"\n";
    ScratchDir dir;
    const std::string state = (dir.path() / "state").string();
    const std::string config = (conf / "monitord.conf").string();
    Daemon::Options o;
    o.args = {"--state-directory", state, "--probe", "off", "--config", config};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    std::filesystem::permissions(d->dir().path(), std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
    ASSERT_TRUE(d->wait_samples(3));
    auto as_nobody = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {monctl_bin(), "--socket", d->socket()});
        return run(args, SpawnOptions{.uid = nobody_uid()});
    };
    auto r = as_nobody({"loading", "--since", "-1min", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_GE(nlohmann::json::parse(r.out)["machine"]["procstat"]["samples"], 2) << r.out;
    r = as_nobody({"watchdog", "history", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto runs = nlohmann::json::parse(r.out)["runs"];
    ASSERT_EQ(runs.size(), 1u) << r.out;
    EXPECT_EQ(runs[0]["ended"], "running") << r.out;
    r = as_nobody({"top", "--once", "--at", "-1s"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("history at"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cpu0"), std::string::npos) << r.out;
}

TEST(History, KillNineInALoopLosesAtMostTheLastSecondsAndNeverCorrupts) {
    ScratchDir dir;
    const auto state = dir.path() / "state";
    std::mt19937 random(12345);
    std::uniform_int_distribution<int> ms(1100, 2900);
    std::int64_t before = 0;
    for (int round = 0; round < 8; ++round) {
        auto d = start_with(state);
        ASSERT_TRUE(d);
        std::this_thread::sleep_for(std::chrono::milliseconds{ms(random)});
        const auto killed = Clock::now();
        EXPECT_EQ(d->stop(SIGKILL), -SIGKILL);
        const auto file = check_file(state / "history.db");
        ASSERT_EQ(file.integrity, "ok") << "round " << round;
        EXPECT_GT(file.seconds, before) << "round " << round << " wrote nothing";
        // A killed daemon loses at most the second it was writing (the log is in the page
        // cache: only a power loss can lose the seconds since the last full sync).
        EXPECT_GE(file.newest_ms, unix_ms(killed) - 2000) << "round " << round;
        EXPECT_EQ(file.runs, round + 1);
        EXPECT_EQ(file.stopped, 0);
        before = file.seconds;
    }
    // The next daemon tells each killed run's end, with its last seconds.
    auto d = start_with(state);
    ASSERT_TRUE(d);
    auto r = d->monctl({"watchdog", "history", "--json", "-n", "9"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto runs = nlohmann::json::parse(r.out)["runs"];
    ASSERT_EQ(runs.size(), 9u) << r.out;
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(runs[i]["ended"], "daemon_ended") << "run " << i << ": " << r.out;
        EXPECT_FALSE(runs[i]["last_seconds"].empty()) << "run " << i << ": " << r.out;
    }
    EXPECT_EQ(runs[8]["ended"], "running") << r.out;
}

TEST(History, AUsersDaemonKeepsItInItsStateHomeAndOneOnAGivenSocketNowhere) {
    ScratchDir dir;
    {
        Daemon::Options o;
        o.pass_socket = false;
        o.socket = (dir.path() / "run/monitord/io.monitord.Monitor").string();
        o.args = {"--user", "--probe", "off"};
        o.spawn.env = {"XDG_RUNTIME_DIR=" + (dir.path() / "run").string(),
                       "XDG_STATE_HOME=" + (dir.path() / "state").string()};
        o.spawn.unset_env = {"MONITORD_SOCKET", "STATE_DIRECTORY"};
        std::filesystem::create_directories(dir.path() / "run");
        std::filesystem::permissions(dir.path() / "run", std::filesystem::perms::owner_all);
        auto d = Daemon::start(o);
        ASSERT_TRUE(d);
        ASSERT_TRUE(d->wait_samples(1));
        EXPECT_TRUE(std::filesystem::exists(dir.path() / "state/monitord/history.db")) << d->log();
    }
    auto d = Daemon::start(Daemon::Options{.args = {"--probe", "off"}});
    ASSERT_TRUE(d);
    EXPECT_NE(d->log().find("No history on disk: no state directory"), std::string::npos)
        << d->log();
    auto r = d->monctl({"loading", "--since", "-1min"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("keeps no history on disk"), std::string::npos) << r.err;
}

TEST(History, ASecondDaemonOnTheSameDirectoryRunsWithoutIt) {
    ScratchDir dir;
    auto first = start_with(dir.path());
    ASSERT_TRUE(first);
    auto second = start_with(dir.path());
    ASSERT_TRUE(second);
    EXPECT_NE(second->log().find("another monitord (pid " + std::to_string(first->pid()) + ")"),
              std::string::npos)
        << second->log();
    EXPECT_TRUE(second->wait_samples(1)) << "it runs, without a history";
}

TEST(History, MonctlRefusesWhatTheHistoryCannotAnswer) {
    ScratchDir dir;
    auto d = start_with(dir.path());
    ASSERT_TRUE(d);
    auto r = d->monctl({"loading", "--since", "soon"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--since: 'soon' is not a time"), std::string::npos) << r.err;
    r = d->monctl({"loading", "--since", "-1h", "--units"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("not with --units"), std::string::npos) << r.err;
    r = d->monctl({"loading", "--since", "-1h", "--until", "-2h"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is before --since"), std::string::npos) << r.err;
    // Over the varlink interface: a range that ends before it begins.
    auto reply = d->connect().call("io.monitord.Monitor.GetLoading",
                                   {{"since", 5'000'000}, {"until", 4'000'000}});
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->error, "io.monitord.Monitor.InvalidRequest") << reply->parameters.dump();
    EXPECT_NE(reply->parameters.dump().find("before it begins"), std::string::npos)
        << reply->parameters.dump();
}

}  // namespace
}  // namespace itest
