// Faults the real daemon meets on real machines: stopped and continued, out of descriptors,
// its socket's file system full, a long window on a large machine, a CPU taken offline while
// a counter session counts on it (through the injected sysfs root). The soak under 50 clients
// is bench/soak.py (5 minutes of it in the soak suite).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "perf_events_probe.hpp"
#include "synthetic_machine.hpp"
#include "watchdog_support.hpp"

namespace itest {
namespace {

using monitor::varlink::Call;
using monitor::varlink::Client;

// A field of /proc/PID/status, in its unit (kB for VmRSS).
long proc_status(pid_t pid, const std::string& key) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with(key + ":")) return std::stol(line.substr(key.size() + 1));
    }
    return -1;
}

std::size_t open_fds(pid_t pid) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid))) {
        (void)e;
        ++n;
    }
    return n;
}

// The descriptors monitord holds when nothing happens: the fewest seen over a second. Right
// after start it may still hold the connection of the check that it was ready, and each tick
// opens files for a moment.
std::size_t settled_fds(pid_t pid) {
    auto fewest = open_fds(pid);
    for (int i = 0; i < 20; ++i) {
        std::this_thread::sleep_for(50ms);
        fewest = std::min(fewest, open_fds(pid));
    }
    return fewest;
}

// A stream of GetLoading: the first reply comes at once, then one a tick.
Client loading_stream(const Daemon& d) {
    auto c = d.connect();
    Call call{.method = "io.monitord.Monitor.GetLoading", .more = true};
    call.parameters = {{"history", true}};
    auto first = c.call(call);
    EXPECT_TRUE(first && !first->error && first->continues);
    return c;
}

// ---- stopped and continued ----------------------------------------------------------------

// SIGSTOP stops every thread: the loop, so no tick and no reply, and the idle probes, so no
// pet, as when the daemon hangs (monitord(8), Watchdog: a hung daemon lets the watchdog reset
// the machine). Continued, it takes one tick for the whole gap, not one per second missed,
// answers at once and pets again.
TEST(Faults, StoppedForTwentySecondsThenContinued) {
    ScratchDir dir{ScratchDir::Everyone};
    FifoWatchdog w(dir.path());
    Daemon::Options o;
    o.no_watchdog = false;
    // Sleeping probes: they pet at each wake-up, whatever else runs on the machine.
    o.args = {"--watchdog", w.path(), "--probe", "sleep"};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(wait_pets(w, 3, 5s)) << d->log();
    ASSERT_TRUE(d->wait_samples(2));
    auto stream = loading_stream(*d);
    auto before = d->call("GetLoading", {{"history", true}});

    d->signal(SIGSTOP);
    const auto stopped = Clock::now();
    std::this_thread::sleep_for(20s);
    const std::size_t pets_stopped = w.pets();
    d->signal(SIGCONT);
    const auto continued = Clock::now();

    // Served at once.
    auto status = d->call("GetStatus");
    EXPECT_LT(seconds(Clock::now() - continued), 1.0);
    EXPECT_EQ(status["state"], "running");

    // No pet while stopped (but one the reader may have had on its way).
    std::size_t during = 0;
    for (auto t : w.pet_times()) {
        if (t > stopped + 100ms && t < continued) ++during;
    }
    EXPECT_EQ(during, 0u) << "pets while every thread of monitord was stopped";
    ASSERT_TRUE(wait_pets(w, pets_stopped + 2, 5s)) << "no pets after SIGCONT\n" << d->log();

    // The stream: no burst of the ticks missed. Within the first 3.5 s: the tick of the gap
    // and those of the next seconds, at most 5, not 20.
    stream.set_timeout(3s);
    std::vector<nlohmann::json> replies;
    while (Clock::now() < continued + 3500ms) {
        auto r = stream.receive();
        if (!r) break;
        ASSERT_FALSE(r->error) << r->parameters.dump();
        replies.push_back(r->parameters);
    }
    EXPECT_GE(replies.size(), 3u);
    EXPECT_LE(replies.size(), 5u) << "a burst of ticks after SIGCONT";
    for (std::size_t i = 1; i < replies.size(); ++i) {
        const double step =
            (replies[i]["timestamp"].get<double>() - replies[i - 1]["timestamp"].get<double>()) /
            1e6;
        EXPECT_GT(step, 0.5) << "ticks " << step << " s apart after SIGCONT";
    }
    // The history got a sample or a gap for the 20 s, not twenty: the window counts ticks.
    auto after = d->call("GetLoading", {{"history", true}});
    const auto grew = after["machine"]["procstat"]["history"].size() -
                      before["machine"]["procstat"]["history"].size();
    EXPECT_LE(grew, 8u) << after.dump();
    EXPECT_TRUE(d->alive());
    EXPECT_EQ(d->stop(SIGTERM), 0) << d->log();
}

// ---- out of descriptors -------------------------------------------------------------------

// At RLIMIT_NOFILE 64, 100 clients connect and stay: monitord answers those it could accept,
// does not spin on the others (accepting pauses, logged once), serves everyone again once they
// leave, and refuses a counter session that needs more descriptors than are left, saying so.
TEST(Faults, SixtyFourDescriptors) {
    Daemon::Options o;
    o.args = {"--probe", "sleep"};
    o.spawn.nofile = 64;
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    const auto fds_before = settled_fds(d->pid());

    std::vector<Client> clients;
    for (int i = 0; i < 100; ++i) {
        auto c = Client::connect(d->socket());
        ASSERT_TRUE(c) << c.error().to_string();  // the kernel queues what is not accepted
        clients.push_back(std::move(*c));
    }
    std::this_thread::sleep_for(1500ms);
    EXPECT_GE(open_fds(d->pid()), 60u) << "not at the limit";
    // The first clients are served.
    std::size_t served = 0;
    for (std::size_t i = 0; i < 10; ++i) {
        clients[i].set_timeout(2s);
        auto r = clients[i].call("io.monitord.Monitor.GetStatus");
        if (r && !r->error) ++served;
    }
    EXPECT_GT(served, 0u) << d->log();
    // Not spinning on accept: under 10% of a CPU for 2 s.
    auto cpu_ticks = [&] {
        std::ifstream in(fmt::format("/proc/{}/stat", d->pid()));
        std::stringstream all;
        all << in.rdbuf();
        const std::string text = all.str();
        std::istringstream rest(text.substr(text.rfind(')') + 2));
        std::string f;
        long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> f; ++i) {
            if (i == 14) utime = std::stol(f);
            if (i == 15) stime = std::stol(f);
        }
        return utime + stime;
    };
    const long t0 = cpu_ticks();
    std::this_thread::sleep_for(2s);
    EXPECT_LT(cpu_ticks() - t0, 0.1 * 2 * ::sysconf(_SC_CLK_TCK)) << "spinning at EMFILE";

    clients.clear();
    EXPECT_TRUE(test_support::wait_until([&] { return open_fds(d->pid()) <= fds_before; }, 5s))
        << open_fds(d->pid()) << " descriptors, " << fds_before << " before";
    // All served again; the log says what happened, once and not ten times a second.
    for (int i = 0; i < 3; ++i) EXPECT_EQ(d->call("GetStatus")["state"], "running");

    // 28 events on each of the CPUs: more descriptors than are left.
    std::string events = "perf::TASK-CLOCK";
    for (int i = 0; i < 27; ++i) events += i % 2 ? ",perf::CONTEXT-SWITCHES" : ",perf::PAGE-FAULTS";
    auto c = d->connect();
    auto refused = c.call("io.monitord.Monitor.StartCounters",
                          {{"request", {{"events", events}, {"target", {{"kind", "each"}}}}}});
    ASSERT_TRUE(refused) << refused.error().to_string();
    EXPECT_EQ(refused->error, "io.monitord.Monitor.CounterFailure") << refused->parameters;
    EXPECT_NE(refused->parameters.value("message", "").find("RLIMIT_NOFILE is 64"),
              std::string::npos)
        << refused->parameters;
    EXPECT_TRUE(test_support::wait_until([&] { return open_fds(d->pid()) == fds_before + 1; }, 3s))
        << open_fds(d->pid()) << " descriptors, " << fds_before
        << " before: the failed session's are not all closed (c holds one)";
    const auto log = d->log();
    std::size_t warnings = 0;
    for (auto p = log.find("descriptors"); p != std::string::npos;
         p = log.find("descriptors", p + 1)) {
        ++warnings;
    }
    EXPECT_GE(warnings, 1u) << log;
    EXPECT_LE(warnings, 3u) << log;
    EXPECT_EQ(d->stop(SIGTERM), 0) << log;
}

// ---- the socket's file system full ---------------------------------------------------------

// The socket cannot be made (ENOSPC on a full tmpfs, as /run full): monitord fails to start
// and says where and why.
TEST(Faults, FullRunDirectory) {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a full tmpfs needs root";
    ScratchDir dir;
    const auto run = dir.path() / "run";
    std::filesystem::create_directories(run);
    // Room for two inodes: the root directory and one file.
    if (::mount("tmpfs", run.c_str(), "tmpfs", 0, "size=64k,nr_inodes=2,mode=0755") != 0) {
        GTEST_SKIP() << "mount a tmpfs: " << std::strerror(errno);
    }
    struct Unmount {
        std::string path;
        ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
    } unmount{run.string()};
    std::ofstream(run / "filler") << "x";
    ASSERT_FALSE(std::ofstream(run / "another")) << "the tmpfs is not full";

    const auto socket = (run / "io.monitord.Monitor").string();
    auto r = itest::run(
        {monitord_bin(), "--socket", socket, "--watchdog", "none", "--probe", "off"}, {}, 15s);
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    const auto said = r.out + r.err;
    EXPECT_NE(said.find(socket), std::string::npos) << said;
    EXPECT_NE(said.find("No space left on device"), std::string::npos) << said;
    EXPECT_NE(said.find("the file system of " + run.string() + " is full"), std::string::npos)
        << said;
}

// ---- a long window on a large machine ------------------------------------------------------

// The history window at its longest (3,600 s) on 256 CPUs: the memory it takes is the
// difference with the default window's, stated here and in monitord(8): 56 bytes a CPU a second
// without probes, about 200 KiB a CPU for an hour (the rings of loads and of CPU states are
// allocated whole at the start).
TEST(Faults, AnHourOfHistoryOn256Cpus) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's shadow memory counts in the RSS compared";
#endif
    SyntheticMachine machine(256);
    auto rss_with = [&](int seconds) {
        Daemon::Options o;
        o.args = machine.daemon_args();
        o.args.insert(o.args.end(), {"--history-seconds", std::to_string(seconds)});
        auto d = Daemon::start(o);
        EXPECT_TRUE(d);
        if (!d) return -1L;
        EXPECT_TRUE(d->wait_samples(3));
        auto l = d->call("GetLoading", {{"per_cpu", true}, {"history", true}, {"states", true}});
        EXPECT_EQ(l["window_seconds"], seconds);
        EXPECT_EQ(l["cpus"].size(), 256u);
        const long rss = proc_status(d->pid(), "VmRSS");
        EXPECT_EQ(d->stop(SIGTERM), 0) << d->log();
        return rss;
    };
    const long minute = rss_with(60);
    const long hour = rss_with(3600);
    const double mib = static_cast<double>(hour - minute) / 1024;
    std::printf(
        "RSS with 256 CPUs: %ld KiB with a 60 s window, %ld KiB with 3600 s "
        "(+%.1f MiB, %.0f KiB a CPU)\n",
        minute, hour, mib, static_cast<double>(hour - minute) / 256);
    EXPECT_GT(hour, minute);
    EXPECT_LT(static_cast<double>(hour - minute) / 256, 220.0)
        << "monitord(8) states 56 bytes a CPU a second (197 KiB an hour) without probes";
}

// ---- a CPU taken offline --------------------------------------------------------------------

// cpu1 leaves the online list (the injected sysfs root) while a session counts on every CPU:
// the session goes on, the report stays whole and valid (its counts are the kernel's: a
// real CPU's events stop counting while it is offline, enabled and running time with them)
// and names cpu1 offline, and the loading shows cpu1 offline, its seconds gaps, until it
// comes back.
TEST(Faults, ACpuGoesOfflineWhileCounting) {
    SKIP_WITHOUT_PERF_EVENTS();
    if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
    SyntheticMachine machine(2);
    Daemon::Options o;
    o.args = machine.daemon_args();
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    auto started =
        d->call("StartCounters",
                {{"request", {{"events", "perf::TASK-CLOCK"}, {"target", {{"kind", "each"}}}}}});
    ASSERT_TRUE(started.contains("plan")) << started.dump();
    std::this_thread::sleep_for(1500ms);
    machine.set_online("0");
    std::this_thread::sleep_for(2500ms);
    auto status = d->call("GetStatus");
    EXPECT_EQ(status["cpus"], nlohmann::json::array({0})) << status.dump();
    auto read = d->call("ReadCounters");
    ASSERT_TRUE(read.contains("report")) << read.dump();
    const auto& event = read["report"]["events"][0];
    EXPECT_EQ(event["cpus"].size(), 2u) << event.dump();
    EXPECT_EQ(read["report"]["offline_cpus"], nlohmann::json::array({1})) << read.dump();
    // The loading lists cpu1 as offline, its last second a gap.
    auto loading = d->call("GetLoading", {{"per_cpu", true}});
    ASSERT_EQ(loading["cpus"].size(), 2u) << loading.dump();
    EXPECT_FALSE(loading["cpus"][1]["online"].get<bool>()) << loading.dump();
    EXPECT_TRUE(loading["cpus"][1]["procstat"]["avg_prev_sec"].is_null()) << loading.dump();

    machine.set_online("0-1");
    std::this_thread::sleep_for(2500ms);
    EXPECT_EQ(d->call("GetStatus")["cpus"].size(), 2u);
    auto stopped = d->call("StopCounters");
    ASSERT_TRUE(stopped.contains("report")) << stopped.dump();
    EXPECT_TRUE(stopped["report"]["final"].get<bool>());
    EXPECT_FALSE(stopped["report"].contains("offline_cpus")) << stopped.dump();
    EXPECT_EQ(d->stop(SIGTERM), 0) << d->log();
}

}  // namespace
}  // namespace itest
