// The real monctl against the real monitord.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "daemon_process.hpp"

namespace itest {
namespace {

class Monctl : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        daemon_ = Daemon::start().release();
        ASSERT_TRUE(daemon_);
        ASSERT_TRUE(daemon_->wait_samples(2));
    }
    static void TearDownTestSuite() {
        delete daemon_;
        daemon_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(daemon_) << "the daemon did not start"; }

    static Daemon* daemon_;
};
Daemon* Monctl::daemon_ = nullptr;

TEST_F(Monctl, StatusShowsVersionStateAndCpus) {
    auto r = daemon_->monctl({"status"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("monitord 0."), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pid " + std::to_string(daemon_->pid())), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("online"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("procstat"), std::string::npos) << r.out;
}

TEST_F(Monctl, StatusJsonMatchesTheInterface) {
    auto r = daemon_->monctl({"status", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("GetStatus", j), "");
    EXPECT_EQ(j["pid"], daemon_->pid());
    EXPECT_FALSE(j["cpus"].empty());
}

TEST_F(Monctl, LoadingTableHasTheMachineRow) {
    auto r = daemon_->monctl({"loading"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("procstat"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nall "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("cpu0"), std::string::npos) << r.out;
}

TEST_F(Monctl, LoadingPerCpuHasARowPerOnlineCpu) {
    auto status = daemon_->call("GetStatus");
    auto r = daemon_->monctl({"loading", "--per-cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (int cpu : status["cpus"]) {
        EXPECT_NE(r.out.find("\ncpu" + std::to_string(cpu) + " "), std::string::npos) << r.out;
    }
}

TEST_F(Monctl, LoadingJsonIsInRangeAndMatchesTheInterface) {
    auto r = daemon_->monctl({"loading", "--per-cpu", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("GetLoading", j), "");
    std::vector<nlohmann::json> stats{j["machine"]["procstat"]};
    for (const auto& c : j["cpus"]) stats.push_back(c["procstat"]);
    ASSERT_GE(stats.size(), 2u);
    for (const auto& s : stats) {
        ASSERT_TRUE(s.is_object()) << j.dump();
        for (const char* k : {"avg_prev_min", "min_prev_min", "max_prev_min"}) {
            EXPECT_GE(s[k].get<double>(), 0.0) << k;
            EXPECT_LE(s[k].get<double>(), 100.0) << k;
        }
        EXPECT_LE(s["min_prev_min"].get<double>(), s["avg_prev_min"].get<double>());
        EXPECT_LE(s["avg_prev_min"].get<double>(), s["max_prev_min"].get<double>());
        EXPECT_GE(s["samples"].get<int>(), 2);
    }
}

TEST_F(Monctl, HistoryShowsOneRowPerSample) {
    auto j = nlohmann::json::parse(daemon_->monctl({"loading", "--history", "--json"}).out);
    auto hist = j["machine"]["procstat"]["history"];
    ASSERT_TRUE(hist.is_array()) << j.dump();
    EXPECT_EQ(hist.size(), j["machine"]["procstat"]["samples"].get<std::size_t>());
    auto r = daemon_->monctl({"loading", "--history"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("procstat:all"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    0s"), std::string::npos) << r.out;
}

TEST_F(Monctl, GlobalOptionsWorkAfterTheSubcommand) {
    auto r = run({monctl_bin(), "status", "--json", "--socket", daemon_->socket()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
}

TEST_F(Monctl, MonitordSocketVariableIsUsed) {
    SpawnOptions o;
    o.env = {"MONITORD_SOCKET=" + daemon_->socket()};
    auto r = run({monctl_bin(), "status"}, o);
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(MonctlWithoutDaemon, SaysWhereItLookedAndHowToStartIt) {
    TempDir dir;
    auto path = (dir / "nothing-here").string();
    auto r = run({monctl_bin(), "--socket", path, "status"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Start it with"), std::string::npos) << r.err;
}

TEST(MonctlWithoutDaemon, DefaultPlacesAreListed) {
    TempDir dir;
    SpawnOptions o;
    o.env = {"XDG_RUNTIME_DIR=" + dir.path().string()};
    o.unset_env = {"MONITORD_SOCKET"};
    if (::geteuid() == 0) o.uid = nobody_uid();
    auto r = run({monctl_bin(), "loading"}, o);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(dir.path().string() + "/monitord/io.monitord.Monitor"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("/run/monitord/io.monitord.Monitor"), std::string::npos) << r.err;
}

TEST(MonctlUsage, ErrorsExitWithTwo) {
    EXPECT_EQ(run({monctl_bin()}).exit_code, 2);
    EXPECT_EQ(run({monctl_bin(), "frobnicate"}).exit_code, 2);
    EXPECT_EQ(run({monctl_bin(), "loading", "--no-such-flag"}).exit_code, 2);
    auto help = run({monctl_bin(), "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("loading"), std::string::npos);
}

}  // namespace
}  // namespace itest

namespace itest {
namespace {

// A server that answers every message with one canned reply, to see what monctl does with
// replies the real daemon never sends.
class FakeServer {
  public:
    explicit FakeServer(std::string reply) : reply_(std::move(reply)) {
        path_ = (dir_ / "fake.sock").string();
        fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
        EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        EXPECT_EQ(::listen(fd_.get(), 4), 0);
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeServer() {
        ::shutdown(fd_.get(), SHUT_RDWR);
        thread_.join();
    }
    const std::string& path() const { return path_; }

  private:
    void serve() {
        for (;;) {
            monitor::UniqueFd c{::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
            if (!c) return;
            char buf[4096];
            std::string in;
            while (in.find('\0') == std::string::npos) {
                ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
                if (n <= 0) break;
                in.append(buf, static_cast<std::size_t>(n));
            }
            std::string out = reply_;
            out.push_back('\0');
            (void)!::send(c.get(), out.data(), out.size(), MSG_NOSIGNAL);
        }
    }

    TempDir dir_;
    std::string path_;
    std::string reply_;
    monitor::UniqueFd fd_;
    std::thread thread_;
};

struct HostileCase {
    const char* name;
    const char* reply;
    std::vector<std::string> args;
};

TEST(MonctlAgainstAStrangeServer, NeverCrashes) {
    const std::vector<HostileCase> cases = {
        {"source with a number",
         R"({"parameters":{"window_seconds":60,"machine":{"probe":5}}})",
         {"loading"}},
        {"unknown source key",
         R"({"parameters":{"window_seconds":60,"machine":{"gpu":{"x":1}}}})",
         {"loading"}},
        {"extra field in a CPU",
         R"({"parameters":{"window_seconds":60,"machine":{},"cpus":[{"cpu":0,"online":true,"mhz":1200}]}})",
         {"loading", "-p"}},
        {"negative window", R"({"parameters":{"window_seconds":-5,"machine":{}}})", {"loading"}},
        {"huge timestamp",
         R"({"parameters":{"timestamp":9223372036854775807,"window_seconds":60,"machine":{}}})",
         {"loading"}},
        {"missing field", R"({"parameters":{"machine":{}}})", {"loading"}},
        {"not JSON", "hello", {"status"}},
        {"an error",
         R"({"error":"org.example.Broken","parameters":{"why":"because"}})",
         {"status"}},
        {"huge uptime",
         R"({"parameters":{"version":"9","uptime":1e300,"state":"running","pid":1,"cpus":[0],"sources":[],"probe_mode":"off","probes":[],"history_seconds":60}})",
         {"status"}},
    };
    for (const auto& c : cases) {
        FakeServer server(c.reply);
        std::vector<std::string> argv{monctl_bin(), "--socket", server.path()};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        auto r = run(argv);
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1)
            << c.name << ": exit " << r.exit_code << "\n"
            << r.err;
        if (r.exit_code == 1) {
            EXPECT_NE(r.err.find("monctl: "), std::string::npos) << c.name;
        }
    }
}

TEST(MonctlAgainstAStrangeServer, ErrorRepliesAreNamed) {
    FakeServer server(R"({"error":"org.example.Broken","parameters":{"why":"because"}})");
    auto r = run({monctl_bin(), "--socket", server.path(), "status"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("org.example.Broken"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("because"), std::string::npos) << r.err;
}

TEST(MonctlDefaults, ADirectoryPreparedBySomeoneElseIsNotUsed) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a directory owned by another user";
    TempDir runtime;
    auto planted = runtime / "monitord";
    std::filesystem::create_directory(planted);
    ASSERT_EQ(::chown(planted.c_str(), nobody_uid(), static_cast<gid_t>(-1)), 0);
    SpawnOptions o;
    o.env = {"XDG_RUNTIME_DIR=" + runtime.path().string()};
    o.unset_env = {"MONITORD_SOCKET"};
    o.uid = 65533;  // someone who is neither root nor the directory's owner
    auto r = run({monctl_bin(), "status"}, o);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not used"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("belongs to uid"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace itest
