// The real monctl against the real monitord.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "cgroups.hpp"
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

TEST_F(Monctl, StatesShowMpstatColumnsPerCpu) {
    auto status = daemon_->call("GetStatus");
    auto r = daemon_->monctl({"loading", "--states", "--per-cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* title : {"%usr", "%nice", "%sys", "%iowait", "%irq", "%soft", "%steal",
                              "%guest", "%gnice", "%idle"}) {
        EXPECT_NE(r.out.find(title), std::string::npos) << title << " in\n" << r.out;
    }
    EXPECT_NE(r.out.find("The average of the last"), std::string::npos) << r.out;
    for (int cpu : status["cpus"]) {
        EXPECT_NE(r.out.find("\ncpu" + std::to_string(cpu) + " "), std::string::npos) << r.out;
    }
    auto j = nlohmann::json::parse(daemon_->monctl({"loading", "--states", "--json"}).out);
    EXPECT_EQ(check_reply("GetLoading", j), "");
    ASSERT_TRUE(j["machine"]["procstat"]["states"]["avg"].is_object()) << j.dump();
}

// Every CSV starts with a time column: the sample's time in UTC, the same on every line of a
// sample.
TEST_F(Monctl, CsvHasATimeColumn) {
    auto loading = daemon_->monctl({"loading", "--csv", "--per-cpu"});
    ASSERT_EQ(loading.exit_code, 0) << loading.err;
    EXPECT_EQ(loading.out.rfind("time,cpu,source,last,avg,min,max,samples\n", 0), 0u)
        << loading.out;
    EXPECT_NE(loading.out.find(",all,procstat,"), std::string::npos) << loading.out;
    EXPECT_NE(loading.out.find(",0,procstat,"), std::string::npos) << loading.out;
    std::istringstream lines(loading.out);
    std::string line;
    std::getline(lines, line);  // the header
    std::string first_time;
    while (std::getline(lines, line)) {
        const std::string time = line.substr(0, line.find(','));
        // 2026-11-24T16:55:01.123Z
        EXPECT_EQ(time.size(), 24u) << line;
        EXPECT_EQ(time.back(), 'Z') << line;
        EXPECT_EQ(time[10], 'T') << line;
        if (first_time.empty()) first_time = time;
        EXPECT_EQ(time, first_time) << "one sample, one time";
    }

    auto states = daemon_->monctl({"loading", "--csv", "--states"});
    ASSERT_EQ(states.exit_code, 0) << states.err;
    // mpstat's order: iowait before irq.
    EXPECT_EQ(states.out.rfind("time,cpu,source,interval,user,nice,system,iowait,irq,softirq,"
                               "steal,guest,guest_nice,idle\n",
                               0),
              0u)
        << states.out;
    EXPECT_NE(states.out.find(",all,procstat,last,"), std::string::npos) << states.out;
    EXPECT_NE(states.out.find(",all,procstat,avg,"), std::string::npos) << states.out;

    auto history = daemon_->monctl({"loading", "--csv", "--history"});
    ASSERT_EQ(history.exit_code, 0) << history.err;
    EXPECT_EQ(history.out.rfind("time,cpu,source,load\n", 0), 0u) << history.out;

    auto both = daemon_->monctl({"loading", "--csv", "--json"});
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
    auto two_tables = daemon_->monctl({"loading", "--csv", "--history", "--states"});
    EXPECT_EQ(two_tables.exit_code, 2);
    EXPECT_NE(two_tables.err.find("not both"), std::string::npos) << two_tables.err;
}

// A spinner pinned to cpu0 in a cgroup of the test's own: monctl loading --units names that
// cgroup first, with nearly all of a CPU; the table and the JSON say the same.
TEST_F(Monctl, UnitsNameTheCgroupThatLoadsACpu) {
    const auto mount = cgroup2_mount();
    if (mount.empty()) GTEST_SKIP() << "no cgroup2 tree on this machine";
    if (::geteuid() != 0) GTEST_SKIP() << "making a cgroup takes root";
    const std::string name = "monctl-units-" + std::to_string(::getpid());
    CgroupDir group(mount / name, own_cgroup(mount));
    ASSERT_EQ(group.error(), 0) << std::strerror(group.error());
    Child spin(Child::Does::Spin);
    ASSERT_EQ(group.add(spin.pid()), "");
    cpu_set_t cpu0;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    ASSERT_EQ(::sched_setaffinity(spin.pid(), sizeof cpu0, &cpu0), 0) << std::strerror(errno);
    // Two ticks with the spinner in its cgroup: the second's interval is all its.
    std::this_thread::sleep_for(std::chrono::milliseconds(2200));

    auto r = daemon_->monctl({"loading", "--units", "3", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("GetLoading", j), "");
    ASSERT_TRUE(j["units"].is_object()) << j.dump();
    const auto& top = j["units"]["top"];
    ASSERT_FALSE(top.empty()) << j.dump();
    ASSERT_LE(top.size(), 3u);
    EXPECT_EQ(top[0]["cgroup"], "/" + name) << j["units"].dump();
    EXPECT_EQ(top[0]["unit"], "/" + name) << "a cgroup no unit names goes by its path";
    EXPECT_GE(top[0]["cpu"].get<double>(), 90) << j["units"].dump();
    EXPECT_LE(top[0]["cpu"].get<double>(), 102) << j["units"].dump();

    auto table = daemon_->monctl({"loading", "--units"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("CPU time per unit (cgroup"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("\nUNIT "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("\n/" + name + " "), std::string::npos) << table.out;
}

// A spinner pinned to the last CPU in a cgroup of the test's own: monctl loading --tasks lists
// it first on that CPU, with nearly all of it, its name and its cgroup; the table says the
// same. Asking starts the daemon's sampling: monctl waits for the first figures.
TEST_F(Monctl, TasksNameTheThreadThatLoadsACpu) {
    const auto mount = cgroup2_mount();
    if (mount.empty()) GTEST_SKIP() << "no cgroup2 tree on this machine";
    if (::geteuid() != 0) GTEST_SKIP() << "making a cgroup takes root";
    const std::string name = "monctl-tasks-" + std::to_string(::getpid());
    CgroupDir group(mount / name, own_cgroup(mount));
    ASSERT_EQ(group.error(), 0) << std::strerror(group.error());
    Child spin(Child::Does::Spin);
    ASSERT_EQ(group.add(spin.pid()), "");
    const int last = static_cast<int>(std::thread::hardware_concurrency()) - 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(last, &set);
    ASSERT_EQ(::sched_setaffinity(spin.pid(), sizeof set, &set), 0) << std::strerror(errno);

    auto r = daemon_->monctl({"loading", "--tasks", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("GetLoading", j), "");
    ASSERT_TRUE(j["tasks"].is_object()) << j.dump();
    const auto& tasks = j["tasks"];
    EXPECT_GT(tasks["interval"].get<double>(), 0.5) << tasks.dump();
    EXPECT_GE(tasks["count"].get<std::int64_t>(), tasks["processes"].get<std::int64_t>());
    const nlohmann::json* first = nullptr;
    std::map<int, int> per_cpu;
    for (const auto& t : tasks["top"]) {
        const int cpu = t["cpu"].get<int>();
        if (++per_cpu[cpu] == 1 && cpu == last) first = &t;
    }
    for (const auto& [cpu, n] : per_cpu) EXPECT_LE(n, 2) << "cpu" << cpu << ": " << tasks.dump();
    ASSERT_NE(first, nullptr) << "cpu" << last << " has no task: " << tasks.dump();
    EXPECT_EQ((*first)["pid"], spin.pid()) << tasks.dump();
    EXPECT_EQ((*first)["tid"], spin.pid());
    EXPECT_GE((*first)["load"].get<double>(), 90) << tasks.dump();
    EXPECT_LE((*first)["load"].get<double>(), 102) << tasks.dump();
    EXPECT_EQ((*first)["cgroup"], "/" + name) << tasks.dump();
    EXPECT_EQ((*first)["unit"], "/" + name) << tasks.dump();
    EXPECT_FALSE((*first)["comm"].get<std::string>().empty());

    auto table = daemon_->monctl({"loading", "--tasks"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("Busiest tasks of each CPU"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find(" " + std::to_string(spin.pid()) + " "), std::string::npos)
        << table.out;
    EXPECT_NE(table.out.find("/" + name), std::string::npos) << table.out;
}

TEST_F(Monctl, TasksOutOfRangeOrInCsvAreRefused) {
    for (const char* n : {"0", "101", "many"}) {
        auto r = daemon_->monctl({"loading", "--tasks", n});
        EXPECT_EQ(r.exit_code, 2) << n;
        EXPECT_NE(r.err.find("--tasks"), std::string::npos) << r.err;
    }
    auto csv = daemon_->monctl({"loading", "--tasks", "--csv"});
    EXPECT_EQ(csv.exit_code, 2);
    EXPECT_NE(csv.err.find("--tasks"), std::string::npos) << csv.err;
}

TEST_F(Monctl, UnitsOutOfRangeOrInCsvAreRefused) {
    for (const char* n : {"0", "1001", "many"}) {
        auto r = daemon_->monctl({"loading", "--units", n});
        EXPECT_EQ(r.exit_code, 2) << n;
        EXPECT_NE(r.err.find("--units"), std::string::npos) << r.err;
    }
    auto csv = daemon_->monctl({"loading", "--units", "--csv"});
    EXPECT_EQ(csv.exit_code, 2);
    EXPECT_NE(csv.err.find("--units"), std::string::npos) << csv.err;
}

// Three spinners pinned to cpu0: monctl loading --context waits for the daemon's rates
// (asking starts the sampling), then shows the runnable tasks, the pressure they make where
// the kernel has PSI, the interrupts, and a row per CPU; the JSON says the same.
TEST_F(Monctl, ContextShowsTheTasksThatPressOnACpu) {
    std::vector<std::unique_ptr<Child>> spinners;
    cpu_set_t cpu0;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    for (int i = 0; i < 3; ++i) {
        spinners.push_back(std::make_unique<Child>(Child::Does::Spin));
        ASSERT_EQ(::sched_setaffinity(spinners.back()->pid(), sizeof cpu0, &cpu0), 0)
            << std::strerror(errno);
    }
    auto r = daemon_->monctl({"loading", "--context", "--per-cpu", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(check_reply("GetLoading", j), "");
    const auto& c = j["context"]["sample"];
    ASSERT_TRUE(c["interval"].is_number()) << c.dump();
    EXPECT_GT(c["interval"].get<double>(), 0.5) << "monctl waited for the rates: " << c.dump();
    ASSERT_TRUE(c["procs_running"].is_number()) << c.dump();
    EXPECT_GE(c["procs_running"].get<int>(), 3) << c.dump();
    ASSERT_TRUE(c["interrupts"].is_number()) << c.dump();
    EXPECT_GT(c["interrupts"].get<double>(), 0) << "the timer ticks at least";
    ASSERT_TRUE(c["cpus"].is_array()) << c.dump();
    EXPECT_EQ(c["cpus"].size(), j["cpus"].size()) << "a row per CPU: " << c.dump();
    if (std::filesystem::exists("/proc/pressure/cpu")) {
        ASSERT_TRUE(c["pressure"]["some"].is_number()) << c.dump();
        EXPECT_GT(c["pressure"]["some"].get<double>(), 0.5)
            << "two of three spinners wait while one runs: " << c.dump();
    }

    auto table = daemon_->monctl({"loading", "--context", "--per-cpu"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("CPU context over the"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("runnable"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("interrupts "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("WAITING"), std::string::npos) << table.out;
    auto csv = daemon_->monctl({"loading", "--context", "--csv"});
    EXPECT_EQ(csv.exit_code, 2);
    EXPECT_NE(csv.err.find("--context"), std::string::npos) << csv.err;
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
    ScratchDir dir{ScratchDir::Everyone};
    auto path = (dir / "nothing-here").string();
    auto r = run({monctl_bin(), "--socket", path, "status"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Start one with ./scripts/run"), std::string::npos) << r.err;
}

TEST(MonctlWithoutDaemon, DefaultPlacesAreListed) {
    ScratchDir dir{ScratchDir::Everyone};
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

// Root too looks at its own daemon's place first, then at the system daemon's.
TEST(MonctlWithoutDaemon, RootsPlacesAreListed) {
    if (::geteuid() != 0) GTEST_SKIP() << "the places of root";
    if (std::filesystem::exists("/tmp/monitord-0/io.monitord.Monitor")) {
        GTEST_SKIP() << "root's own daemon may be running here (/tmp/monitord-0)";
    }
    SpawnOptions o;
    o.unset_env = {"MONITORD_SOCKET", "XDG_RUNTIME_DIR"};
    auto r = run({monctl_bin(), "loading"}, o);
    if (r.exit_code == 0) GTEST_SKIP() << "the system daemon runs here";
    EXPECT_EQ(r.exit_code, 1);
    const auto own = r.err.find("/tmp/monitord-0/io.monitord.Monitor");
    const auto system = r.err.find("/run/monitord/io.monitord.Monitor");
    EXPECT_NE(own, std::string::npos) << r.err;
    EXPECT_NE(system, std::string::npos) << r.err;
    EXPECT_LT(own, system) << "root's own daemon comes first";
}

// A daemon started as the README's first command does (./scripts/run: monitord --user), and
// found by its next one, `monctl loading --per-cpu`, without --socket: as root without
// XDG_RUNTIME_DIR (the socket under /tmp/monitord-0), and as a user with and without it.
struct FindCase {
    bool as_nobody;
    bool with_xdg;
};

class MonctlFindsTheUsersOwnDaemon : public testing::TestWithParam<FindCase> {};

TEST_P(MonctlFindsTheUsersOwnDaemon, WithoutSocket) {
    const auto c = GetParam();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as root and as nobody";
    const uid_t uid = c.as_nobody ? nobody_uid() : 0;
    ScratchDir runtime{ScratchDir::Everyone};
    SpawnOptions spawn;
    spawn.unset_env = {"MONITORD_SOCKET"};
    std::string place = "/tmp/monitord-" + std::to_string(uid) + "/io.monitord.Monitor";
    if (c.with_xdg) {
        spawn.env = {"XDG_RUNTIME_DIR=" + runtime.path().string()};
        ASSERT_EQ(::chown(runtime.path().c_str(), uid, static_cast<gid_t>(-1)), 0);
        place = (runtime / "monitord/io.monitord.Monitor").string();
    } else {
        spawn.unset_env.push_back("XDG_RUNTIME_DIR");
        if (std::filesystem::exists(place)) {
            GTEST_SKIP() << "a daemon of uid " << uid << "'s own may be running at " << place;
        }
    }
    if (c.as_nobody) spawn.uid = uid;
    Daemon::Options o;
    o.pass_socket = false;
    o.socket = place;
    o.args = {"--user", "--probe", "off"};
    o.spawn = spawn;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(std::filesystem::is_socket(place))
        << "monitord --user does not listen at " << place;
    auto r = run({monctl_bin(), "loading", "--per-cpu"}, spawn);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("cpu0"), std::string::npos) << r.out;
    EXPECT_EQ(d->stop(SIGTERM), 0);
    EXPECT_FALSE(std::filesystem::exists(place)) << "the socket was left behind";
}

INSTANTIATE_TEST_SUITE_P(Users, MonctlFindsTheUsersOwnDaemon,
                         testing::Values(FindCase{false, false}, FindCase{false, true},
                                         FindCase{true, false}, FindCase{true, true}),
                         [](const testing::TestParamInfo<FindCase>& p) {
                             return std::string{p.param.as_nobody ? "Nobody" : "Root"} +
                                    (p.param.with_xdg ? "WithXdgRuntimeDir"
                                                      : "WithoutXdgRuntimeDir");
                         });

// A socket left behind by a daemon of one's own that died does not hide the next place.
TEST(MonctlFindsTheDaemon, PastAStaleSocketOfItsOwnPlace) {
    ScratchDir runtime{ScratchDir::Everyone};
    std::filesystem::create_directory(runtime / "monitord");
    ::chmod((runtime / "monitord").c_str(), 0700);
    const std::string stale = (runtime / "monitord/io.monitord.Monitor").string();
    {
        // Bound and closed: the file stays, nobody listens.
        monitor::UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", stale.c_str());
        ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    }
    SpawnOptions spawn;
    spawn.env = {"XDG_RUNTIME_DIR=" + runtime.path().string()};
    spawn.unset_env = {"MONITORD_SOCKET"};
    auto r = run({monctl_bin(), "status"}, spawn);
    // Without a system daemon here, the error names the stale socket and the system place.
    if (r.exit_code == 0) {
        EXPECT_EQ(r.out.find(stale), std::string::npos) << r.out;
        return;
    }
    EXPECT_NE(r.err.find(stale + ": nothing listens"), std::string::npos) << r.err;
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

    ScratchDir dir_{ScratchDir::Everyone};
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
    ScratchDir runtime{ScratchDir::Everyone};
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
