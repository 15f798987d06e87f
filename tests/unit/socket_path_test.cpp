// Which socket directories a default path may use, where daemon and client look, and the
// clients' search.
#include "monitor/protocol/socket_path.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "monitor/unique_fd.hpp"
#include "test_support.hpp"

namespace monitor::protocol {
namespace {

namespace fs = std::filesystem;

class SocketDirectory : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(root_.empty()); }

    std::string socket_in(const fs::path& dir) { return (dir / kSocketName).string(); }
    fs::path make_dir(const char* name, mode_t mode) {
        fs::path d = root_ / name;
        fs::create_directory(d);
        ::chmod(d.c_str(), mode);
        return d;
    }

    test_support::ScratchDir scratch_{"monitord-sockdir"};
    const fs::path root_ = scratch_.path();
};

TEST_F(SocketDirectory, APrivateDirectoryOfOurOwnIsTrusted) {
    EXPECT_TRUE(check_socket_directory(socket_in(make_dir("mine", 0700))));
    EXPECT_TRUE(check_socket_directory(socket_in(make_dir("readable", 0755))));
}

TEST_F(SocketDirectory, ADirectoryOthersCanWriteIsNot) {
    auto r = check_socket_directory(socket_in(make_dir("open", 0777)));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::Perm);
    EXPECT_NE(r.error().message.find("writable by others"), std::string::npos);
    EXPECT_FALSE(check_socket_directory(socket_in(make_dir("group", 0770))));
}

TEST_F(SocketDirectory, ASymbolicLinkIsNot) {
    auto target = make_dir("target", 0700);
    fs::create_directory_symlink(target, root_ / "link");
    auto r = check_socket_directory(socket_in(root_ / "link"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("not a directory"), std::string::npos);
}

TEST_F(SocketDirectory, SomeoneElsesDirectoryIsNot) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
    auto d = make_dir("theirs", 0700);
    ASSERT_EQ(::chown(d.c_str(), 65534, static_cast<gid_t>(-1)), 0);
    auto r = check_socket_directory(socket_in(d));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("belongs to uid 65534"), std::string::npos);
}

TEST_F(SocketDirectory, AMissingDirectoryIsAnError) {
    EXPECT_FALSE(check_socket_directory(socket_in(root_ / "absent")));
}

// --- The places: one list, for the daemon's default and the clients' search -----------------

const SocketPlace kSystem{SocketPlaceKind::System, kSystemSocket};

TEST(SocketPlaces, TheEnvironmentVariableIsTheOnlyPlaceForBoth) {
    const SocketEnvironment env{1000, "/some/where.sock", "/run/user/1000"};
    const SocketPlace place{SocketPlaceKind::Environment, "/some/where.sock"};
    EXPECT_EQ(socket_places(env), std::vector{place});
    EXPECT_EQ(daemon_socket_place(env, false), place);
    EXPECT_EQ(daemon_socket_place({0, "/some/where.sock", ""}, false), place) << "root too";
}

TEST(SocketPlaces, ClientsTryTheUsersOwnDaemonThenTheSystemOne) {
    const SocketPlace user{SocketPlaceKind::User, "/run/user/1000/monitord/io.monitord.Monitor"};
    EXPECT_EQ(socket_places({1000, "", "/run/user/1000"}), (std::vector{user, kSystem}));
    const SocketPlace tmp{SocketPlaceKind::User, "/tmp/monitord-1000/io.monitord.Monitor"};
    EXPECT_EQ(socket_places({1000, "", ""}), (std::vector{tmp, kSystem}));
    EXPECT_EQ(socket_places({1000, "", "relative/dir"}), (std::vector{tmp, kSystem}))
        << "a relative XDG_RUNTIME_DIR is ignored";
}

// Root's own daemon (./scripts/run, monitord --user) is found as anyone's is: the README's
// first steps as root without XDG_RUNTIME_DIR.
TEST(SocketPlaces, RootLooksAtItsOwnDaemonToo) {
    const SocketPlace tmp{SocketPlaceKind::User, "/tmp/monitord-0/io.monitord.Monitor"};
    EXPECT_EQ(socket_places({0, "", ""}), (std::vector{tmp, kSystem}));
    const SocketPlace xdg{SocketPlaceKind::User, "/run/user/0/monitord/io.monitord.Monitor"};
    EXPECT_EQ(socket_places({0, "", "/run/user/0"}), (std::vector{xdg, kSystem}));
}

TEST(SocketPlaces, TheDaemonListensAtTheSystemPlaceForRootUnlessAskedForItsOwn) {
    EXPECT_EQ(daemon_socket_place({0, "", ""}, false), kSystem);
    EXPECT_EQ(daemon_socket_place({0, "", ""}, true).path, "/tmp/monitord-0/io.monitord.Monitor");
    EXPECT_EQ(daemon_socket_place({1000, "", "/run/user/1000"}, false).path,
              "/run/user/1000/monitord/io.monitord.Monitor");
    EXPECT_EQ(daemon_socket_place({1000, "", ""}, true).path,
              "/tmp/monitord-1000/io.monitord.Monitor");
    for (uid_t uid : {0u, 1000u}) {
        for (bool user : {false, true}) {
            const SocketEnvironment env{uid, "", ""};
            const auto places = socket_places(env);
            EXPECT_NE(std::ranges::find(places, daemon_socket_place(env, user)), places.end())
                << "the daemon's default is one of the places clients search";
        }
    }
}

TEST(SocketPlaces, TheCurrentEnvironmentIsRead) {
    ::setenv("MONITORD_SOCKET", "/x.sock", 1);
    ::setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
    auto env = SocketEnvironment::current();
    EXPECT_EQ(env.euid, ::geteuid());
    EXPECT_EQ(env.monitord_socket, "/x.sock");
    EXPECT_EQ(env.xdg_runtime_dir, "/run/user/7");
    ::unsetenv("MONITORD_SOCKET");
    ::unsetenv("XDG_RUNTIME_DIR");
    env = SocketEnvironment::current();
    EXPECT_EQ(env.monitord_socket, "");
    EXPECT_EQ(env.xdg_runtime_dir, "");
}

// --- The search ------------------------------------------------------------------------------

// A listening socket at `path`, or one nobody listens on (bound, never listening: what a
// daemon that died leaves behind behaves the same, ECONNREFUSED).
UniqueFd unix_socket(const std::string& path, bool listening) {
    UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    if (listening) {
        EXPECT_EQ(::listen(fd.get(), 4), 0);
    }
    return fd;
}

TEST_F(SocketDirectory, ASocketNobodyListensOnSendsTheSearchOn) {
    const auto dir = make_dir("places", 0700);
    const std::string stale = (dir / "stale.sock").string();
    const std::string live = (dir / "live.sock").string();
    auto s1 = unix_socket(stale, false);
    auto s2 = unix_socket(live, true);
    auto c = connect_to_daemon({{SocketPlaceKind::User, stale}, {SocketPlaceKind::System, live}});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->path, live);
}

TEST_F(SocketDirectory, WhenNoneAnswersTheErrorNamesEveryPlace) {
    const auto dir = make_dir("none", 0700);
    const auto open_dir = make_dir("open", 0777);
    const std::string stale = (dir / "stale.sock").string();
    auto s = unix_socket(stale, false);
    const std::string missing = (dir / "missing.sock").string();
    const std::string untrusted = (open_dir / kSocketName).string();
    auto c = connect_to_daemon({{SocketPlaceKind::User, untrusted},
                                {SocketPlaceKind::User, stale},
                                {SocketPlaceKind::System, missing}});
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().status, Status::NoDev);
    const auto& m = c.error().message;
    EXPECT_NE(m.find(untrusted + ": not used: socket directory"), std::string::npos) << m;
    EXPECT_NE(m.find(stale + ": nothing listens"), std::string::npos) << m;
    EXPECT_NE(m.find(missing), std::string::npos) << m;
    EXPECT_NE(m.find("./scripts/run"), std::string::npos) << m;
    EXPECT_NE(m.find("systemctl start monitord.socket"), std::string::npos) << m;
}

}  // namespace
}  // namespace monitor::protocol
