// The watchdog in the real daemon, with a FIFO in place of /dev/watchdog: the pets come from
// the idle probes in both modes (sleep, the default: the kernel's idle time; spin: the probes'
// own) and stop when a CPU is starved, wherever the busy work runs (the test's session,
// another session, another cgroup under the cpu controller, a cgroup with cpu.idle=1); an
// orderly stop writes the magic 'V' (unless keep-armed), SIGKILL does not; no configuration
// arms no watchdog; bad settings fail at start with the reason. The real devices (i6300esb,
// softdog) are tested on a real kernel in tests/vm.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "cgroups.hpp"
#include "daemon_process.hpp"
#include "watchdog_support.hpp"

namespace itest {
namespace {

Daemon::Options with_watchdog(const FifoWatchdog& w, std::vector<std::string> more = {}) {
    Daemon::Options o;
    o.no_watchdog = false;
    o.args = {"--watchdog", w.path()};
    o.args.insert(o.args.end(), more.begin(), more.end());
    return o;
}

std::vector<int> online_cpus(const Daemon& d) {
    return d.call("GetStatus")["cpus"].get<std::vector<int>>();
}

class WatchdogDaemon : public testing::Test {
  protected:
    ScratchDir dir_{ScratchDir::Everyone};
};

// The tests that hold for both probe modes.
class WatchdogDaemonMode : public testing::TestWithParam<std::string> {
  protected:
    Daemon::Options with_watchdog(const FifoWatchdog& w, std::vector<std::string> more = {}) {
        more.insert(more.begin(), {"--probe", GetParam()});
        return itest::with_watchdog(w, more);
    }
    ScratchDir dir_{ScratchDir::Everyone};
};

// Sleeping probes pet about once a second (each loading tick gives them the kernel's idle
// time), spinning ones up to ten times; both within two seconds of the start.
TEST_P(WatchdogDaemonMode, TheProbesPetAndSigtermDisarms) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 3, 6s)) << "pets: " << w.pets() << "\n" << d->log();
    auto status = d->call("GetStatus");
    EXPECT_EQ(status["probe_mode"], GetParam());
    const auto& wd = status["watchdog"];
    ASSERT_TRUE(wd.is_object()) << status.dump();
    EXPECT_EQ(wd["device"], w.path());
    EXPECT_TRUE(wd["armed"].get<bool>());
    // The probe that wrote the third pet may not have counted it yet: it is a SCHED_IDLE
    // thread, which anything may preempt.
    EXPECT_GE(wd["pets"].get<int>(), 2);
    EXPECT_EQ(wd["policy"], "all");
    EXPECT_EQ(wd["on_stop"], "disarm");
    EXPECT_FALSE(wd["nowayout"].get<bool>()) << "a FIFO is no watchdog driver";
    EXPECT_TRUE(wd["identity"].is_null()) << "a FIFO has no watchdog ioctls";
    ASSERT_TRUE(wd["since_last_pet"].is_number());
    EXPECT_LT(wd["since_last_pet"].get<double>(), 1.5);
    auto shown = d->monctl({"watchdog", "status"});
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find(w.path() + ": armed"), std::string::npos) << shown.out;
    // Before arming, the log says who can now reset the machine.
    EXPECT_NE(d->log().find("any process of any user that keeps one CPU busy"), std::string::npos)
        << d->log();

    EXPECT_EQ(d->stop(SIGTERM), 0);
    ASSERT_TRUE(w.wait_closed(2s));
    const std::string data = w.data();
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(data.back(), 'V') << "no magic close at the end";
    EXPECT_EQ(std::count(data.begin(), data.end(), 'V'), 1);
    EXPECT_NE(d->log().find("disarmed"), std::string::npos) << d->log();
}

TEST_P(WatchdogDaemonMode, SigkillLeavesItArmed) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 1, 5s));
    EXPECT_EQ(d->stop(SIGKILL), -SIGKILL);
    ASSERT_TRUE(w.wait_closed(2s));
    EXPECT_EQ(w.data().find('V'), std::string::npos);
}

// The watchdog timeout of the starvation tests, the shortest sleeping probes take: a CPU
// needs more than 3.3 % idle time to earn credits.
constexpr auto kShortTimeout = 3s;

// Pets in `window` while `busy` CPUs are kept busy by nice-0 loops placed `where`, after the
// timeout and a second more: idle time from before the load counts for a timeout (spin: the
// probes still get a sliver of the CPU, and with it credits, until that idle time is too old;
// sleep: the first tick that finds no idle time since the one before ends them). Prints when
// the last pet came.
std::size_t pets_while_busy(const FifoWatchdog& w, const std::vector<int>& busy,
                            std::chrono::milliseconds window,
                            Placement where = Placement::SameSession,
                            const CpuCgroup* cgroup = nullptr) {
    BusyCpus load(busy, where, cgroup);
    const auto start = Clock::now();
    std::this_thread::sleep_for(kShortTimeout + 1s);
    const std::size_t before = w.pets();
    std::this_thread::sleep_for(window);
    const auto pets = w.pet_times();
    if (pets.size() == before) {
        std::printf("load on %zu CPUs in %s: the last pet came %.2f s after it began\n",
                    busy.size(), placement_name(where),
                    pets.empty() ? 0.0 : seconds(pets.back() - start));
    }
    return w.pets() - before;
}

// policy = all: one starved CPU stops the pets (the machine would reset).
TEST_P(WatchdogDaemonMode, AllPolicyStopsPettingWhenOneCpuIsStarved) {
    SKIP_UNDER_SANITIZERS();
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(
        with_watchdog(w, {"--watchdog-timeout", std::to_string(kShortTimeout.count())}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    const std::size_t starved = pets_while_busy(w, {cpus.back()}, 2s);
    EXPECT_EQ(starved, 0u) << "cpu" << cpus.back() << " was busy; the pets should have stopped";
    auto status = d->call("GetStatus")["watchdog"];
    EXPECT_EQ(status["waiting_for"], nlohmann::json::array({cpus.back()})) << status.dump();
    // And they resume once it has idle time again; the first pet came after more than half
    // the timeout (the load's 3 s and more): a near miss, counted.
    EXPECT_TRUE(wait_pets(w, w.pets() + 2, 5s));
    status = d->call("GetStatus")["watchdog"];
    EXPECT_GE(status["late_pets"].get<int>(), 1) << status.dump();
    EXPECT_GT(status["longest_pet_gap"].get<double>(), 1.5) << status.dump();
}

// policy = any: pets go on while one CPU has idle time, and stop when every CPU is starved.
TEST_P(WatchdogDaemonMode, AnyPolicyStopsPettingOnlyWhenEveryCpuIsStarved) {
    SKIP_UNDER_SANITIZERS();
    FifoWatchdog w(dir_.path());
    const auto conf = dir_.path() / "monitord.conf";
    std::ofstream(conf) << "[watchdog]\npolicy = \"any\"\n";
    auto d = Daemon::start(with_watchdog(w, {"--config", conf.string(), "--watchdog-timeout",
                                             std::to_string(kShortTimeout.count())}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    if (cpus.size() > 1) {
        EXPECT_GT(pets_while_busy(w, {cpus.back()}, 2s), 0u) << "the other CPUs were idle";
    }
    EXPECT_EQ(pets_while_busy(w, cpus, 2s), 0u) << "every CPU was busy";
}

// A healthy machine busy on every CPU is not reset: at 95 % each CPU still has 50 ms of idle
// time a second, 500 ms per timeout (10 s).
TEST_P(WatchdogDaemonMode, PetsKeepComingWhileEveryCpuIs95PercentBusy) {
    SKIP_UNDER_SANITIZERS();
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    DutyCycle load(95);
    std::this_thread::sleep_for(2s);
    // More than a timeout: the pets of a starved machine would have stopped within it.
    const auto seen = watch_pets(w, 12s, ("95 % on every CPU, " + GetParam()).c_str());
    EXPECT_LT(seen.longest_gap, 5s) << "pets should come every second or more often";
    EXPECT_GE(seen.pets, 6u);
    const auto wd = d->call("GetStatus")["watchdog"];
    EXPECT_EQ(wd["late_pets"], 0) << "no near miss at 95 %: " << wd.dump();
    EXPECT_LT(wd["longest_pet_gap"].get<double>(), 5.0) << wd.dump();
    const auto loading = d->call("GetLoading")["machine"];
    const char* source = GetParam() == "spin" ? "probe" : "procstat";
    EXPECT_GT(loading[source]["avg_prev_sec"].get<double>(), 80.0)
        << "the load did not run: " << loading.dump();
}

std::string mode_name(const testing::TestParamInfo<std::string>& info) {
    return info.param;
}

INSTANTIATE_TEST_SUITE_P(Probes, WatchdogDaemonMode, testing::Values("sleep", "spin"), mode_name);

// The default mode earns its credits from the kernel's idle time, which no scheduling group
// can distort: a busy loop starves its CPU wherever it runs, and the pets stop. (Spinning
// probes compete with the loop by group weights; see monitord(8).)
class WatchdogDaemonPlacement : public testing::TestWithParam<Placement> {
  protected:
    ScratchDir dir_{ScratchDir::Everyone};
};

TEST_P(WatchdogDaemonPlacement, SleepingProbesStopPettingWhereverTheBusyWorkRuns) {
    SKIP_UNDER_SANITIZERS();
    const Placement where = GetParam();
    std::unique_ptr<CpuCgroup> cgroup;
    if (where == Placement::OtherCgroup || where == Placement::IdleCgroup) {
        std::string why_not;
        cgroup = CpuCgroup::make("monitord-test-" + std::to_string(::getpid()), why_not);
        if (!cgroup) GTEST_SKIP() << why_not;
        if (where == Placement::IdleCgroup) {
            if (auto e = cgroup->set_idle(); !e.empty()) {
                GTEST_SKIP() << "no cpu.idle here (kernel 5.15 and later): " << e;
            }
        }
    }
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(
        with_watchdog(w, {"--watchdog-timeout", std::to_string(kShortTimeout.count())}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    EXPECT_EQ(pets_while_busy(w, {cpus.back()}, 2s, where, cgroup.get()), 0u)
        << "cpu" << cpus.back() << " was busy in " << placement_name(where);
    EXPECT_TRUE(wait_pets(w, w.pets() + 2, 5s)) << "the pets resume once the load has gone";
}

std::string placement_case(const testing::TestParamInfo<Placement>& info) {
    switch (info.param) {
        case Placement::SameSession:
            return "SameSession";
        case Placement::OtherSession:
            return "OtherSession";
        case Placement::OtherCgroup:
            return "OtherCgroup";
        case Placement::IdleCgroup:
            return "IdleCgroup";
    }
    return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Busy, WatchdogDaemonPlacement,
                         testing::Values(Placement::OtherSession, Placement::OtherCgroup,
                                         Placement::IdleCgroup),
                         placement_case);

TEST_F(WatchdogDaemon, KeepArmedWritesNoMagicClose) {
    FifoWatchdog w(dir_.path());
    const auto conf = dir_.path() / "monitord.conf";
    std::ofstream(conf) << "[watchdog]\non-stop = \"keep-armed\"\n";
    auto d = Daemon::start(with_watchdog(w, {"--config", conf.string()}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 1, 5s));
    EXPECT_EQ(d->call("GetStatus")["watchdog"]["on_stop"], "keep_armed");
    EXPECT_EQ(d->stop(SIGTERM), 0);
    ASSERT_TRUE(w.wait_closed(2s));
    EXPECT_EQ(w.data().find('V'), std::string::npos);
    EXPECT_NE(d->log().find("left armed"), std::string::npos) << d->log();
}

TEST_F(WatchdogDaemon, AMissingDeviceFailsTheStart) {
    const std::string missing = (dir_.path() / "no-watchdog").string();
    Daemon::Options o;
    o.no_watchdog = false;
    o.args = {"--watchdog", missing};
    o.wait_ready = false;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->stop(0, 10s), 1) << d->log();
    EXPECT_NE(d->log().find(missing + ": no such device"), std::string::npos) << d->log();
    EXPECT_NE(d->log().find("modprobe softdog"), std::string::npos) << d->log();
}

TEST_F(WatchdogDaemon, NoProbesNoWatchdog) {
    FifoWatchdog w(dir_.path());
    auto o = with_watchdog(w, {"--probe", "off"});
    o.wait_ready = false;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->stop(0, 10s), 1) << d->log();
    EXPECT_NE(d->log().find("--probe off runs none"), std::string::npos) << d->log();
}

// The probes pet about once a second: a timeout under 3 s would fire between two pets.
TEST_F(WatchdogDaemon, ATimeoutUnderThreeSecondsIsRefused) {
    FifoWatchdog w(dir_.path());
    for (const char* mode : {"sleep", "spin"}) {
        auto r = run(
            {monitord_bin(), "--watchdog", w.path(), "--watchdog-timeout", "2", "--probe", mode});
        EXPECT_EQ(r.exit_code, 2) << mode;
        EXPECT_NE(r.err.find("--watchdog-timeout: 2 is out of range; use an integer from 3 to "
                             "3600 (seconds)"),
                  std::string::npos)
            << r.err;
    }
    EXPECT_EQ(w.data().find('\0'), std::string::npos) << "it was never petted";
}

TEST_F(WatchdogDaemon, BadSettingsNameTheFlagOrKey) {
    auto r = run({monitord_bin(), "--watchdog", "dev/watchdog"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--watchdog: 'dev/watchdog' is not absolute"), std::string::npos) << r.err;
    r = run({monitord_bin(), "--watchdog-timeout", "0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--watchdog-timeout"), std::string::npos) << r.err;
    const auto conf = dir_.path() / "bad.conf";
    std::ofstream(conf) << "[watchdog]\npolicy = \"most\"\n";
    r = run({monitord_bin(), "--check-config", "--config", conf.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(":2: [watchdog] policy: 'most' is not accepted; use any or all"),
              std::string::npos)
        << r.err;
}

// The watchdog is opt-in: without a device in the configuration or on the command line, the
// daemon arms none, whether /dev/watchdog exists or not (a test must not arm the machine's
// own: the VM suite shows it with a real device).
TEST_F(WatchdogDaemon, NoConfigurationArmsNoWatchdog) {
    Daemon::Options o;
    o.no_watchdog = false;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->call("GetStatus")["watchdog"].is_null());
    auto shown = d->monctl({"watchdog", "status"});
    EXPECT_EQ(shown.exit_code, 0);
    EXPECT_NE(shown.out.find("No watchdog: none is configured (it is opt-in"), std::string::npos)
        << shown.out;
    EXPECT_EQ(d->log().find("Arming watchdog"), std::string::npos) << d->log();
}

}  // namespace
}  // namespace itest
