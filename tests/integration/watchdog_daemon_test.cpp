// The watchdog in the real daemon, with a FIFO in place of /dev/watchdog: the pets come from
// the idle probes and stop when the CPUs are starved, an orderly stop writes the magic 'V'
// (unless keep-armed), SIGKILL does not, and bad settings fail at start with the reason. The
// real devices (i6300esb, softdog) are tested on a real kernel in tests/vm.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon_process.hpp"
#include "monitor/loading/idle_probe.hpp"

namespace itest {
namespace {

// The reading end of a FIFO that monitord takes for its watchdog device: it records what the
// daemon writes (a NUL per pet, 'V' for the magic close) and when the daemon closed it.
class FifoWatchdog {
  public:
    explicit FifoWatchdog(const std::filesystem::path& dir) : path_((dir / "watchdog").string()) {
        EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0) << std::strerror(errno);
        fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        EXPECT_GE(fd_, 0);
        reader_ = std::thread([this] { read_loop(); });
    }
    ~FifoWatchdog() {
        stop_ = true;
        reader_.join();
        ::close(fd_);
    }
    const std::string& path() const { return path_; }

    std::size_t pets() const {
        std::lock_guard lock(mutex_);
        return static_cast<std::size_t>(std::count(data_.begin(), data_.end(), '\0'));
    }
    std::string data() const {
        std::lock_guard lock(mutex_);
        return data_;
    }
    // The writer closed: read() returned 0 after it had opened.
    bool closed() const { return closed_; }
    bool wait_closed(std::chrono::milliseconds within) const {
        const auto deadline = std::chrono::steady_clock::now() + within;
        while (!closed_ && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(10ms);
        }
        return closed_;
    }

  private:
    void read_loop() {
        bool opened = false;
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            ::poll(&p, 1, 20);
            char buf[256];
            const ssize_t n = ::read(fd_, buf, sizeof buf);
            if (n > 0) {
                opened = true;
                std::lock_guard lock(mutex_);
                data_.append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 && opened) {
                closed_ = true;  // POLLHUP: the writer is gone
                return;
            } else if (n == 0) {
                std::this_thread::sleep_for(10ms);  // no writer yet
            }
        }
    }

    std::string path_;
    int fd_ = -1;
    std::thread reader_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> closed_{false};
    mutable std::mutex mutex_;
    std::string data_;
};

Daemon::Options with_watchdog(const FifoWatchdog& w, std::vector<std::string> more = {}) {
    Daemon::Options o;
    o.no_watchdog = false;
    o.args = {"--watchdog", w.path()};
    o.args.insert(o.args.end(), more.begin(), more.end());
    return o;
}

bool wait_pets(const FifoWatchdog& w, std::size_t n, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (w.pets() < n && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    return w.pets() >= n;
}

class WatchdogDaemon : public testing::Test {
  protected:
    TempDir dir_;
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

// Busy processes of normal priority on `cpus` CPUs (pinned, one each) for as long as the
// object lives.
class BusyCpus {
  public:
    explicit BusyCpus(const std::vector<int>& cpus) {
        for (int cpu : cpus) {
            pid_t pid = ::fork();
            if (pid == 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(static_cast<std::size_t>(cpu), &set);
                ::sched_setaffinity(0, sizeof set, &set);
                volatile unsigned long x = 0;
                for (;;) x = x + 1;
            }
            if (pid > 0) pids_.push_back(pid);
        }
    }
    ~BusyCpus() {
        for (pid_t p : pids_) ::kill(p, SIGKILL);
        for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
    }

  private:
    std::vector<pid_t> pids_;
};

std::vector<int> online_cpus(const Daemon& d) {
    return d.call("GetStatus")["cpus"].get<std::vector<int>>();
}

// Pets in `window` while `busy` CPUs are kept busy, after a settling time in which a credit
// already under way may complete.
std::size_t pets_while_busy(const FifoWatchdog& w, const std::vector<int>& busy,
                            std::chrono::milliseconds window) {
    BusyCpus load(busy);
    // Idle time from before the load may complete a credit within one credit window, and the
    // probe that earned it writes the pet itself: on a busy CPU that SCHED_IDLE thread waits
    // for its next turn (a slice about every half second), so allow one more window.
    std::this_thread::sleep_for(2 * monitor::kIdleCreditWindow + 100ms);
    const std::size_t before = w.pets();
    std::this_thread::sleep_for(window);
    return w.pets() - before;
}

// policy = all: one starved CPU stops the pets (the machine would reset).
TEST_F(WatchdogDaemon, AllPolicyStopsPettingWhenOneCpuIsStarved) {
    FifoWatchdog w(dir_.path());
    auto d = Daemon::start(with_watchdog(w));
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
    auto d = Daemon::start(with_watchdog(w, {"--config", conf.string()}));
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 2, 5s));
    const auto cpus = online_cpus(*d);
    if (cpus.size() > 1) {
        EXPECT_GT(pets_while_busy(w, {cpus.back()}, 1s), 0u) << "the other CPUs were idle";
    }
    EXPECT_EQ(pets_while_busy(w, cpus, 2s), 0u) << "every CPU was busy";
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
