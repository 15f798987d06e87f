// Which socket directories a default path may use, and where daemon and client look.
#include "monitor/protocol/socket_path.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace monitor::protocol {
namespace {

namespace fs = std::filesystem;

class SocketDirectory : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "monitord-sockdir-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        root_ = tmpl;
    }
    void TearDown() override { fs::remove_all(root_); }

    std::string socket_in(const fs::path& dir) { return (dir / kSocketName).string(); }
    fs::path make_dir(const char* name, mode_t mode) {
        fs::path d = root_ / name;
        fs::create_directory(d);
        ::chmod(d.c_str(), mode);
        return d;
    }

    fs::path root_;
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

TEST(SocketPaths, EnvironmentVariableWinsForBoth) {
    ::setenv("MONITORD_SOCKET", "/some/where.sock", 1);
    EXPECT_EQ(daemon_socket_path(), "/some/where.sock");
    EXPECT_EQ(client_socket_paths(), std::vector<std::string>{"/some/where.sock"});
    ::unsetenv("MONITORD_SOCKET");
}

TEST(SocketPaths, DefaultsDependOnTheUser) {
    ::unsetenv("MONITORD_SOCKET");
    ::setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    auto paths = client_socket_paths();
    if (::geteuid() == 0) {
        EXPECT_EQ(daemon_socket_path(), kSystemSocket);
        EXPECT_EQ(paths, std::vector<std::string>{kSystemSocket});
    } else {
        EXPECT_EQ(daemon_socket_path(), "/run/user/1234/monitord/io.monitord.Monitor");
        ASSERT_EQ(paths.size(), 2u);
        EXPECT_EQ(paths[1], kSystemSocket);
        ::unsetenv("XDG_RUNTIME_DIR");
        EXPECT_EQ(daemon_socket_path(),
                  "/tmp/monitord-" + std::to_string(::getuid()) + "/io.monitord.Monitor");
    }
}

}  // namespace
}  // namespace monitor::protocol
