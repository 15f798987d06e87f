// The watchdog in the real daemon, with a FIFO in place of /dev/watchdog: the pets come from
// the idle probes and stop when the CPUs are starved, an orderly stop writes the magic 'V'
// (unless keep-armed), SIGKILL does not, and bad settings fail at start with the reason. The
// real devices (i6300esb, softdog) are tested on a real kernel in tests/vm.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

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

class WatchdogDaemon : public testing::Test {
  protected:
    ScratchDir dir_{ScratchDir::Everyone};
};

TEST_F(WatchdogDaemon, TheProbesPetAndSigtermDisarms) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 3, 5s)) << "pets: " << w.pets() << "\n" << d->log();
    auto status = d->call("GetStatus");
    const auto& wd = status["watchdog"];
    ASSERT_TRUE(wd.is_object()) << status.dump();
    EXPECT_EQ(wd["device"], w.path());
    EXPECT_TRUE(wd["armed"].get<bool>());
    EXPECT_GE(wd["pets"].get<int>(), 3);
    EXPECT_EQ(wd["policy"], "all");
    EXPECT_EQ(wd["on_stop"], "disarm");
    EXPECT_TRUE(wd["identity"].is_null()) << "a FIFO has no watchdog ioctls";
    ASSERT_TRUE(wd["since_last_pet"].is_number());
    EXPECT_LT(wd["since_last_pet"].get<double>(), 1.0);
    auto shown = d->monctl({"watchdog", "status"});
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find(w.path() + ": armed"), std::string::npos) << shown.out;

    EXPECT_EQ(d->stop(SIGTERM), 0);
    ASSERT_TRUE(w.wait_closed(2s));
    const std::string data = w.data();
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(data.back(), 'V') << "no magic close at the end";
    EXPECT_EQ(std::count(data.begin(), data.end(), 'V'), 1);
    EXPECT_NE(d->log().find("disarmed"), std::string::npos) << d->log();
}

TEST_F(WatchdogDaemon, SleepingProbesPetToo) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w, {"--probe", "sleep"}));
    ASSERT_TRUE(d);
    EXPECT_TRUE(wait_pets(w, 5, 5s)) << "pets: " << w.pets() << "\n" << d->log();
}

TEST_F(WatchdogDaemon, SigkillLeavesItArmed) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 1, 5s));
    EXPECT_EQ(d->stop(SIGKILL), -SIGKILL);
    ASSERT_TRUE(w.wait_closed(2s));
    EXPECT_EQ(w.data().find('V'), std::string::npos);
}

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

std::vector<int> online_cpus(const Daemon& d) {
    return d.call("GetStatus")["cpus"].get<std::vector<int>>();
}

// The watchdog timeout of the starvation tests: idle time counts for as long, so a credit
// under way when the load begins completes within it, or never. A short one keeps the tests
// short; with 3 s, a CPU needs more than 3.3 % idle time to earn credits.
constexpr auto kShortTimeout = 3s;

// Pets in `window` while `busy` CPUs are kept busy by nice-0 loops, after the timeout and a
// second more: a credit under way when the load began may complete within the timeout, and
// the probe that earned it writes the pet itself, waiting on a busy CPU for its next turn as
// a SCHED_IDLE thread (a slice about every half second). Prints when the last pet came.
std::size_t pets_while_busy(const FifoWatchdog& w, const std::vector<int>& busy,
                            std::chrono::milliseconds window) {
    BusyCpus load(busy);
    const auto start = Clock::now();
    std::this_thread::sleep_for(kShortTimeout + 1s);
    const std::size_t before = w.pets();
    std::this_thread::sleep_for(window);
    const auto pets = w.pet_times();
    if (pets.size() == before) {
        std::printf("load on %zu CPUs: the last pet came %.2f s after it began\n", busy.size(),
                    pets.empty() ? 0.0 : seconds(pets.back() - start));
    }
    return w.pets() - before;
}

Daemon::Options with_short_timeout(const FifoWatchdog& w, std::vector<std::string> more = {}) {
    more.insert(more.end(), {"--watchdog-timeout", std::to_string(kShortTimeout.count())});
    return with_watchdog(w, more);
}

// policy = all: one starved CPU stops the pets (the machine would reset).
TEST_F(WatchdogDaemon, AllPolicyStopsPettingWhenOneCpuIsStarved) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_short_timeout(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    const std::size_t starved = pets_while_busy(w, {cpus.back()}, 2s);
    EXPECT_EQ(starved, 0u) << "cpu" << cpus.back() << " was busy; the pets should have stopped";
    auto status = d->call("GetStatus")["watchdog"];
    EXPECT_EQ(status["waiting_for"], nlohmann::json::array({cpus.back()})) << status.dump();
    // And they resume once it has idle time again.
    EXPECT_TRUE(wait_pets(w, w.pets() + 2, 5s));
}

// policy = any: pets go on while one CPU has idle time, and stop when every CPU is starved.
TEST_F(WatchdogDaemon, AnyPolicyStopsPettingOnlyWhenEveryCpuIsStarved) {
    FifoWatchdog w(dir_.path());
    const auto conf = dir_.path() / "monitord.conf";
    std::ofstream(conf) << "[watchdog]\npolicy = \"any\"\n";
    auto d = Daemon::start(with_short_timeout(w, {"--config", conf.string()}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    if (cpus.size() > 1) {
        EXPECT_GT(pets_while_busy(w, {cpus.back()}, 1s), 0u) << "the other CPUs were idle";
    }
    EXPECT_EQ(pets_while_busy(w, cpus, 2s), 0u) << "every CPU was busy";
}

// A healthy machine busy on every CPU is not reset: at 95 % each CPU still has 50 ms of idle
// time a second, 500 ms per timeout (10 s), and earns a credit every 2 s or so.
TEST_F(WatchdogDaemon, PetsKeepComingWhileEveryCpuIs95PercentBusy) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    DutyCycle load(95);
    std::this_thread::sleep_for(2s);
    const auto seen = watch_pets(w, 20s, "95 % on every CPU");
    EXPECT_LT(seen.longest_gap, 10s) << "a watchdog with the 10 s timeout would have reset it";
    EXPECT_GE(seen.pets, 4u);
    const auto loading = d->call("GetLoading")["machine"];
    EXPECT_GT(loading["probe"]["avg_prev_sec"].get<double>(), 80.0)
        << "the load did not run: " << loading.dump();
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

// Without a device and without a setting, the daemon runs without a watchdog (the README's
// foreground run). Only where /dev/watchdog does not exist: elsewhere it would be armed.
TEST_F(WatchdogDaemon, NoDeviceByDefaultMeansNoWatchdog) {
    if (std::filesystem::exists("/dev/watchdog")) {
        GTEST_SKIP() << "/dev/watchdog exists here: a test must not arm the machine's watchdog";
    }
    Daemon::Options o;
    o.no_watchdog = false;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->call("GetStatus")["watchdog"].is_null());
    auto shown = d->monctl({"watchdog", "status"});
    EXPECT_EQ(shown.exit_code, 0);
    EXPECT_NE(shown.out.find("No watchdog"), std::string::npos) << shown.out;
}

}  // namespace
}  // namespace itest
