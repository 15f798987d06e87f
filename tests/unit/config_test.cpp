// monitord's configuration file: keys, defaults, and error messages that point at the line.
#include "config.hpp"

#include <grp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace monitord {
namespace {

namespace fs = std::filesystem;
using monitor::Status;

class ConfigTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (fs::path{::testing::TempDir()} / "monitord-config-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << "mkdtemp " << tmpl;
        dir_ = tmpl;
    }

    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }

    fs::path write(const std::string& name, const std::string& text) {
        fs::path p = dir_ / name;
        std::ofstream out{p, std::ios::binary};
        out << text;
        out.close();
        EXPECT_TRUE(out.good()) << "writing " << p;
        return p;
    }

    // Loads `text` from a file and expects BADARG; returns the message.
    std::string error_of(const std::string& text, const std::string& name = "monitord.conf") {
        fs::path p = write(name, text);
        auto r = load_config(p, Config{});
        if (r.has_value()) {
            ADD_FAILURE() << "expected an error for:\n" << text;
            return {};
        }
        EXPECT_EQ(r.error().status, Status::BadArg) << r.error().to_string();
        last_path_ = p.string();
        return r.error().message;
    }

    // "FILE:LINE: " for the file error_of() last wrote.
    std::string at(int line) const { return last_path_ + ":" + std::to_string(line) + ": "; }

    static bool starts_with(const std::string& s, const std::string& prefix) {
        return s.rfind(prefix, 0) == 0;
    }
    static bool contains(const std::string& s, const std::string& part) {
        return s.find(part) != std::string::npos;
    }

    fs::path dir_;
    std::string last_path_;
};

TEST_F(ConfigTest, DefaultsAreDocumented) {
    Config c;
    EXPECT_EQ(c.socket, "");
    EXPECT_EQ(c.log_level, "info");
    EXPECT_EQ(c.history_seconds, 60u);
    EXPECT_EQ(default_config_path().filename(), "monitord.conf");
    EXPECT_EQ(default_config_path().parent_path().filename(), "monitord");
    EXPECT_TRUE(default_config_path().is_absolute());
}

TEST_F(ConfigTest, AllKeysSet) {
    auto p = write("all.conf", R"(# every key
[daemon]
socket = "/run/test/monitord.sock"
log-level = "debug"

[loading]
history-seconds = 300
)");
    auto r = load_config(p, Config{});
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->socket, "/run/test/monitord.sock");
    EXPECT_EQ(r->log_level, "debug");
    EXPECT_EQ(r->history_seconds, 300u);
}

TEST_F(ConfigTest, EveryLogLevelAndTheHistoryBounds) {
    for (const char* level : {"trace", "debug", "info", "warning", "error"}) {
        auto p = write("level.conf", std::string{"[daemon]\nlog-level = \""} + level + "\"\n");
        auto r = load_config(p, Config{});
        ASSERT_TRUE(r.has_value()) << level << ": " << r.error().to_string();
        EXPECT_EQ(r->log_level, level);
    }
    for (int seconds : {1, 3600}) {
        auto p = write("hist.conf", "[loading]\nhistory-seconds = " + std::to_string(seconds));
        auto r = load_config(p, Config{});
        ASSERT_TRUE(r.has_value()) << seconds << ": " << r.error().to_string();
        EXPECT_EQ(r->history_seconds, static_cast<std::size_t>(seconds));
    }
}

TEST_F(ConfigTest, EmptyFileKeepsTheBase) {
    Config base;
    base.socket = "/tmp/base.sock";
    base.log_level = "warning";
    base.history_seconds = 17;
    for (const char* text : {"", "# only a comment\n\n", "[daemon]\n[loading]\n"}) {
        auto p = write("empty.conf", text);
        auto r = load_config(p, base);
        ASSERT_TRUE(r.has_value()) << r.error().to_string();
        EXPECT_EQ(r->socket, "/tmp/base.sock");
        EXPECT_EQ(r->log_level, "warning");
        EXPECT_EQ(r->history_seconds, 17u);
    }
}

TEST_F(ConfigTest, KeysInTheFileReplaceOnlyThemselves) {
    Config base;
    base.socket = "/tmp/base.sock";
    base.log_level = "warning";
    base.history_seconds = 17;
    auto p = write("partial.conf", "[loading]\nhistory-seconds = 120\n");
    auto r = load_config(p, base);
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->socket, "/tmp/base.sock");
    EXPECT_EQ(r->log_level, "warning");
    EXPECT_EQ(r->history_seconds, 120u);
}

TEST_F(ConfigTest, ShippedExampleLoadsAndItsCommentedValuesAreTheDefaults) {
    const fs::path example = fs::path{FIXTURES_DIR} / ".." / ".." / "etc" / "monitord.conf";
    ASSERT_TRUE(fs::exists(example)) << example;
    auto as_is = load_config(example, Config{});
    ASSERT_TRUE(as_is.has_value()) << as_is.error().to_string();

    // Uncomment every "#key = value" line: the result must still load, with the defaults.
    std::ifstream in{example};
    std::stringstream uncommented;
    std::string line;
    // The socket group "monitor" comes with the package; a machine without it keeps it off.
    const bool have_monitor_group = ::getgrnam("monitor") != nullptr;
    while (std::getline(in, line)) {
        if (line.size() > 1 && line[0] == '#' && line[1] != ' ' &&
            line.find(" = ") != std::string::npos &&
            (have_monitor_group || line.find("socket-group") == std::string::npos)) {
            line.erase(0, 1);
        }
        uncommented << line << '\n';
    }
    auto p = write("example.conf", uncommented.str());
    Config base;
    base.log_level = "error";
    base.history_seconds = 5;
    auto r = load_config(p, base);
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->log_level, Config{}.log_level);
    EXPECT_EQ(r->history_seconds, Config{}.history_seconds);
    EXPECT_FALSE(r->socket.empty());
}

TEST_F(ConfigTest, AccessGroups) {
    ASSERT_NE(::getgrnam("root"), nullptr);
    auto p = write("access.conf", "[access]\nsocket-group = \"root\"\ncontrol-group = \"root\"\n");
    auto r = load_config(p, Config{});
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->socket_group, "root");
    EXPECT_EQ(r->control_group, "root");
    EXPECT_FALSE(Config{}.socket_group.has_value());
    EXPECT_EQ(Config{}.control_group, "");
    auto none = write("none.conf", "[access]\ncontrol-group = \"\"\n");
    ASSERT_TRUE(load_config(none, Config{}).has_value());

    std::string msg = error_of("[access]\n\ncontrol-group = \"no-such-group-here\"\n");
    EXPECT_TRUE(starts_with(msg, at(3))) << msg;
    EXPECT_TRUE(contains(msg, "[access] control-group: unknown group 'no-such-group-here'")) << msg;
    EXPECT_TRUE(contains(msg, "getent group")) << msg;
    msg = error_of("[access]\nsocket-group = \"\"\n");
    EXPECT_TRUE(starts_with(msg, at(2))) << msg;
    EXPECT_TRUE(contains(msg, "[access] socket-group: no group named")) << msg;
}

TEST_F(ConfigTest, UnknownSection) {
    std::string msg = error_of("[daemon]\nlog-level = \"info\"\n\n[network]\nport = 1\n");
    EXPECT_TRUE(starts_with(msg, at(4))) << msg;
    EXPECT_TRUE(contains(msg, "[network]")) << msg;
    EXPECT_TRUE(contains(msg, "[daemon]")) << msg;
    EXPECT_TRUE(contains(msg, "[loading]")) << msg;
}

TEST_F(ConfigTest, UnknownKey) {
    std::string msg = error_of("[daemon]\nsocket = \"/run/x\"\n\nlog_level = \"info\"\n");
    EXPECT_TRUE(starts_with(msg, at(4))) << msg;
    EXPECT_TRUE(contains(msg, "[daemon]")) << msg;
    EXPECT_TRUE(contains(msg, "'log_level'")) << msg;
    EXPECT_TRUE(contains(msg, "socket")) << msg;
    EXPECT_TRUE(contains(msg, "log-level")) << msg;
    EXPECT_FALSE(contains(msg, "history-seconds")) << msg;
}

TEST_F(ConfigTest, KeyInTheWrongSection) {
    std::string msg = error_of("[loading]\n# comment\nlog-level = \"debug\"\n");
    EXPECT_TRUE(starts_with(msg, at(3))) << msg;
    EXPECT_TRUE(contains(msg, "'log-level'")) << msg;
    EXPECT_TRUE(contains(msg, "history-seconds")) << msg;
}

TEST_F(ConfigTest, HistorySecondsOfTheWrongType) {
    for (const char* value : {"\"60\"", "60.0", "true", "[60]"}) {
        SCOPED_TRACE(value);
        std::string msg =
            error_of(std::string{"[daemon]\n\n[loading]\nhistory-seconds = "} + value + "\n");
        EXPECT_TRUE(starts_with(msg, at(4))) << msg;
        EXPECT_TRUE(contains(msg, "[loading] history-seconds: ")) << msg;
        EXPECT_TRUE(contains(msg, "integer")) << msg;
        EXPECT_TRUE(contains(msg, "1 to 3600")) << msg;
    }
}

TEST_F(ConfigTest, HistorySecondsOutOfRange) {
    for (const char* value : {"0", "3601", "-1", "9999999999"}) {
        SCOPED_TRACE(value);
        std::string msg = error_of(std::string{"[loading]\nhistory-seconds = "} + value + "\n");
        EXPECT_TRUE(starts_with(msg, at(2))) << msg;
        EXPECT_TRUE(contains(msg, "history-seconds")) << msg;
        EXPECT_TRUE(contains(msg, std::string{value} + " is out of range")) << msg;
        EXPECT_TRUE(contains(msg, "use an integer from 1 to 3600")) << msg;
    }
}

TEST_F(ConfigTest, BadLogLevel) {
    for (const char* value : {"\"loud\"", "\"INFO\"", "\"\"", "3"}) {
        SCOPED_TRACE(value);
        std::string msg = error_of(std::string{"# levels\n[daemon]\nlog-level = "} + value + "\n");
        EXPECT_TRUE(starts_with(msg, at(3))) << msg;
        EXPECT_TRUE(contains(msg, "[daemon] log-level: ")) << msg;
        for (const char* level : {"trace", "debug", "info", "warning", "error"}) {
            EXPECT_TRUE(contains(msg, level)) << msg;
        }
    }
}

TEST_F(ConfigTest, BadSocket) {
    for (const char* value : {"\"relative/path\"", "\"\"", "42"}) {
        SCOPED_TRACE(value);
        std::string msg = error_of(std::string{"[daemon]\nsocket = "} + value + "\n");
        EXPECT_TRUE(starts_with(msg, at(2))) << msg;
        EXPECT_TRUE(contains(msg, "[daemon] socket: ")) << msg;
        EXPECT_TRUE(contains(msg, "absolute path")) << msg;
    }
}

TEST_F(ConfigTest, TomlSyntaxError) {
    std::string msg = error_of("[daemon]\nlog-level = \"info\"\nsocket = \"/run/x\n");
    EXPECT_TRUE(starts_with(msg, at(3))) << msg;

    msg = error_of("[daemon]\n\n\nlog-level info\n");
    EXPECT_TRUE(starts_with(msg, at(4))) << msg;

    msg = error_of("[daemon]\nlog-level = \"info\"\nlog-level = \"debug\"\n");
    EXPECT_TRUE(starts_with(msg, at(3))) << msg;
}

TEST_F(ConfigTest, MissingFileIsNoDev) {
    fs::path p = dir_ / "does-not-exist.conf";
    auto r = load_config(p, Config{});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::NoDev);
    EXPECT_TRUE(contains(r.error().message, p.string())) << r.error().message;
}

TEST_F(ConfigTest, TopLevelKeyOutsideAnySection) {
    std::string msg = error_of("history-seconds = 30\n\n[loading]\nhistory-seconds = 60\n");
    EXPECT_TRUE(starts_with(msg, at(1))) << msg;
    EXPECT_TRUE(contains(msg, "history-seconds")) << msg;
    // It names the key and the section the key belongs in.
    EXPECT_TRUE(contains(msg, "outside any section")) << msg;
    EXPECT_TRUE(contains(msg, "[loading]")) << msg;
}

// A "key = value" line before the first section header is a misplaced key, not a section:
// the message must not call it one (for "daemon = 5" it would even contradict itself,
// "unknown section [daemon]; sections are [daemon], [loading]").
TEST_F(ConfigTest, TopLevelValueIsNotReportedAsAnUnknownSection) {
    std::string msg = error_of("history-seconds = 30\n[loading]\n");
    EXPECT_TRUE(starts_with(msg, at(1))) << msg;
    EXPECT_FALSE(contains(msg, "unknown section")) << msg;

    msg = error_of("daemon = 5\n");
    EXPECT_TRUE(starts_with(msg, at(1))) << msg;
    EXPECT_FALSE(contains(msg, "unknown section [daemon]")) << msg;
}

TEST(ConfigValidate, LogLevel) {
    for (const char* level : {"trace", "debug", "info", "warning", "error"}) {
        EXPECT_TRUE(validate_log_level(level).has_value()) << level;
    }
    for (const char* level : {"", "Info", "warn", "critical", "info "}) {
        auto r = validate_log_level(level);
        ASSERT_FALSE(r.has_value()) << level;
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find(std::string{"'"} + level + "'"), std::string::npos)
            << r.error().message;
        EXPECT_NE(r.error().message.find("warning"), std::string::npos) << r.error().message;
    }
}

TEST(ConfigValidate, HistorySeconds) {
    for (long long s : {1LL, 2LL, 60LL, 3599LL, 3600LL}) {
        EXPECT_TRUE(validate_history_seconds(s).has_value()) << s;
    }
    for (long long s : {0LL, -1LL, 3601LL, -9223372036854775807LL, 9223372036854775807LL}) {
        auto r = validate_history_seconds(s);
        ASSERT_FALSE(r.has_value()) << s;
        EXPECT_EQ(r.error().status, Status::BadArg);
        EXPECT_NE(r.error().message.find(std::to_string(s)), std::string::npos)
            << r.error().message;
        EXPECT_NE(r.error().message.find("1 to 3600"), std::string::npos) << r.error().message;
    }
}

}  // namespace
}  // namespace monitord
