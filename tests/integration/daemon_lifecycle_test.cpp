// monitord's life: start-up, readiness, configuration, the socket, signals, bad settings.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "daemon_process.hpp"

namespace itest {
namespace {

bool is_socket(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

void write_file(const std::filesystem::path& p, const std::string& text) {
    std::ofstream out(p);
    out << text;
}

// A bound, listening AF_UNIX socket at `path`.
monitor::UniqueFd listening_socket(const std::string& path) {
    monitor::UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd.get(), 16), 0);
    return fd;
}

TEST(DaemonLifecycle, ReportsReadyAndStatusToSystemd) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_notification("STATUS=Sampling"));
    EXPECT_TRUE(is_socket(d->socket()));
    auto status = d->call("GetStatus");
    EXPECT_EQ(status["state"], "running");
    EXPECT_EQ(status["pid"], d->pid());
}

TEST(DaemonLifecycle, SigtermStopsCleanlyAndRemovesTheSocket) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    EXPECT_EQ(d->stop(SIGTERM), 0);
    EXPECT_FALSE(std::filesystem::exists(d->socket()));
    EXPECT_TRUE(d->wait_notification("STOPPING=1", 0ms));
    EXPECT_NE(d->log().find("Received SIGTERM"), std::string::npos) << d->log();
}

TEST(DaemonLifecycle, SigintStopsCleanly) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    EXPECT_EQ(d->stop(SIGINT), 0);
    EXPECT_FALSE(std::filesystem::exists(d->socket()));
}

TEST(DaemonLifecycle, MissingSocketDirectoryIsAClearError) {
    ScratchDir dir{ScratchDir::Everyone};
    auto socket = (dir / "no/such/dir/io.monitord.Monitor").string();
    auto r = run({monitord_bin(), "--socket", socket});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find((dir / "no/such/dir").string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, UnwritableSocketDirectoryIsAClearError) {
    ScratchDir dir{ScratchDir::Everyone};
    auto locked = dir / "locked";
    std::filesystem::create_directory(locked);
    ::chmod(locked.c_str(), 0555);
    SpawnOptions opts;
    if (::geteuid() == 0) opts.uid = nobody_uid();  // root would write anyway
    auto r = run({monitord_bin(), "--socket", (locked / "sock").string()}, opts);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("not writable"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(locked.string()), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, OverlongSocketPathIsAUsageError) {
    auto r = run({monitord_bin(), "--socket", "/tmp/" + std::string(120, 'x')});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("longer than 107 bytes"), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, OverlongSocketPathInTheConfigFileIsAnError) {
    ScratchDir dir{ScratchDir::Everyone};
    auto conf = dir / "monitord.conf";
    std::ofstream(conf) << "[daemon]\nsocket = \"/tmp/" << std::string(120, 'x') << "\"\n";
    auto r = run({monitord_bin(), "--config", conf.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(conf.string() + ":2"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("longer than 107 bytes"), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, RelativeSocketPathIsAUsageError) {
    auto r = run({monitord_bin(), "--socket", "relative/sock"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("absolute"), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, UnknownOptionIsAUsageError) {
    auto r = run({monitord_bin(), "--no-such-option"});
    EXPECT_EQ(r.exit_code, 2);
}

TEST(DaemonLifecycle, VersionFlag) {
    auto r = run({monitord_bin(), "--version"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("monitord "), std::string::npos) << r.out;
}

TEST(DaemonLifecycle, SecondDaemonOnTheSameSocketIsRefused) {
    auto first = Daemon::start();
    ASSERT_TRUE(first);
    auto r = run({monitord_bin(), "--socket", first->socket()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("already listening"), std::string::npos) << r.err;
    // The first one keeps its socket and keeps serving.
    EXPECT_EQ(first->call("GetStatus")["state"], "running");
}

TEST(DaemonLifecycle, StaleSocketFromACrashIsReplaced) {
    ScratchDir dir{ScratchDir::Everyone};
    auto path = (dir / "sock").string();
    { auto fd = listening_socket(path); }  // closed, file left behind like after SIGKILL
    ASSERT_TRUE(is_socket(path));
    Daemon::Options o;
    o.socket = path;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->call("GetStatus")["state"], "running");
}

TEST(DaemonLifecycle, PathThatIsNotASocketIsLeftAlone) {
    ScratchDir dir{ScratchDir::Everyone};
    auto path = dir / "regular-file";
    write_file(path, "keep me");
    auto r = run({monitord_bin(), "--socket", path.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is not a socket"), std::string::npos) << r.err;
    std::ifstream in(path);
    std::string content;
    std::getline(in, content);
    EXPECT_EQ(content, "keep me");
}

TEST(DaemonLifecycle, ConfigFileSettingsApplyAndFlagsOverrideThem) {
    ScratchDir dir{ScratchDir::Everyone};
    write_file(dir / "monitord.conf", "[loading]\nhistory-seconds = 5\n");
    Daemon::Options o;
    o.args = {"--config", (dir / "monitord.conf").string()};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->call("GetStatus")["history_seconds"], 5);

    o.args.push_back("--history-seconds");
    o.args.push_back("7");
    auto d2 = Daemon::start(o);
    ASSERT_TRUE(d2);
    EXPECT_EQ(d2->call("GetStatus")["history_seconds"], 7);
}

TEST(DaemonLifecycle, BadConfigFileNamesFileLineAndKey) {
    ScratchDir dir{ScratchDir::Everyone};
    auto conf = dir / "monitord.conf";
    write_file(conf, "[loading]\n\nhistory-seconds = 0\n");
    auto r = run({monitord_bin(), "--config", conf.string(), "--socket", (dir / "s").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(conf.string() + ":3"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("history-seconds"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1 to 3600"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "s"));
}

TEST(DaemonLifecycle, MissingConfigFileIsAnError) {
    ScratchDir dir{ScratchDir::Everyone};
    auto r = run({monitord_bin(), "--config", (dir / "absent.conf").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("absent.conf"), std::string::npos) << r.err;
}

TEST(DaemonLifecycle, CheckConfigValidatesWithoutStarting) {
    ScratchDir dir{ScratchDir::Everyone};
    write_file(dir / "good.conf", "[daemon]\nlog-level = \"debug\"\n");
    write_file(dir / "bad.conf", "[daemon]\nlog-level = \"loud\"\n");
    auto good = run({monitord_bin(), "--check-config", "--config", (dir / "good.conf").string()});
    EXPECT_EQ(good.exit_code, 0) << good.err;
    EXPECT_NE(good.out.find("OK"), std::string::npos);
    auto bad = run({monitord_bin(), "--check-config", "--config", (dir / "bad.conf").string()});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("bad.conf:2"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("loud"), std::string::npos) << bad.err;
}

TEST(DaemonLifecycle, SighupReloadsAndABadFileKeepsTheRunningSettings) {
    ScratchDir dir{ScratchDir::Everyone};
    auto conf = dir / "monitord.conf";
    write_file(conf, "[loading]\nhistory-seconds = 5\n");
    Daemon::Options o;
    o.args = {"--config", conf.string()};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);

    write_file(conf, "[loading]\nhistory-seconds = 9\n");
    d->signal(SIGHUP);
    ASSERT_TRUE(d->wait_notification("RELOADING=1"));
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (d->call("GetStatus")["history_seconds"] != 9 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(d->call("GetStatus")["history_seconds"], 9);

    write_file(conf, "[loading]\nhistory-seconds = \"many\"\n");
    d->signal(SIGHUP);
    deadline = std::chrono::steady_clock::now() + 5s;
    while (d->log().find("Reload failed") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_NE(d->log().find("Reload failed"), std::string::npos) << d->log();
    EXPECT_EQ(d->call("GetStatus")["history_seconds"], 9);
    EXPECT_EQ(d->call("GetStatus")["state"], "running");
}

TEST(DaemonLifecycle, DefaultSocketOfAnUnprivilegedUserIsUnderXdgRuntimeDir) {
    ScratchDir runtime{ScratchDir::Everyone};
    Daemon::Options o;
    o.pass_socket = false;
    o.socket = (runtime / "monitord/io.monitord.Monitor").string();
    o.spawn.env = {"XDG_RUNTIME_DIR=" + runtime.path().string()};
    o.spawn.unset_env = {"MONITORD_SOCKET"};
    if (::geteuid() == 0) {
        o.spawn.uid = nobody_uid();
        ASSERT_EQ(::chown(runtime.path().c_str(), nobody_uid(), static_cast<gid_t>(-1)), 0);
    }
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_TRUE(is_socket(d->socket()));
    struct stat st {};
    ASSERT_EQ(::stat((runtime / "monitord").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(d->call("GetStatus")["state"], "running");
}

TEST(DaemonLifecycle, SocketActivationUsesThePassedSocketAndLeavesItInPlace) {
    ScratchDir dir{ScratchDir::Everyone};
    auto path = (dir / "activated.sock").string();
    auto listener = listening_socket(path);
    Daemon::Options o;
    o.pass_socket = false;
    o.socket = path;
    o.spawn.pass_fd = listener.get();
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->call("GetStatus")["state"], "running");
    EXPECT_NE(d->log().find("socket activation"), std::string::npos) << d->log();
    EXPECT_EQ(d->stop(SIGTERM), 0);
    EXPECT_TRUE(is_socket(path));  // systemd's socket, not ours to remove
}

}  // namespace
}  // namespace itest

namespace itest {
namespace {

long long machine_samples(Daemon& d) {
    auto j = d.call("GetLoading");
    const auto& p = j["machine"]["procstat"];
    return p.is_object() ? p["samples"].get<long long>() : 0;
}

TEST(DaemonLifecycle, AStallDoesNotFireTheMissedTicksBackToBack) {
    Daemon::Options o;
    o.args = {"--probe", "off"};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(1));
    d->signal(SIGSTOP);
    std::this_thread::sleep_for(3500ms);
    d->signal(SIGCONT);
    std::this_thread::sleep_for(300ms);
    const long long after = machine_samples(*d);
    // One late tick at most, not one per missed second.
    auto j = d->call("GetLoading", {{"history", true}});
    auto history = j["machine"]["procstat"]["history"];
    ASSERT_TRUE(history.is_array());
    EXPECT_LE(history.size(), 3u) << j.dump();
    EXPECT_GE(after, 1);
}

TEST(DaemonLifecycle, ADefaultDirectoryPreparedBySomeoneElseIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a directory owned by another user";
    ScratchDir runtime{ScratchDir::Everyone};
    auto planted = runtime / "monitord";
    std::filesystem::create_directory(planted);
    ::chmod(planted.c_str(), 0777);
    Daemon::Options o;
    o.pass_socket = false;
    o.wait_ready = false;
    o.spawn.env = {"XDG_RUNTIME_DIR=" + runtime.path().string()};
    o.spawn.unset_env = {"MONITORD_SOCKET"};
    o.spawn.uid = nobody_uid();
    ASSERT_EQ(::chown(runtime.path().c_str(), nobody_uid(), static_cast<gid_t>(-1)), 0);
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    auto code = d->stop(0, 10s);  // signal 0: just wait for it to exit
    EXPECT_EQ(code, 1) << d->log();
    EXPECT_NE(d->log().find("writable by others"), std::string::npos) << d->log();
}

}  // namespace
}  // namespace itest
