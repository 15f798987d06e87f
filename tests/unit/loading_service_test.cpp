// Tests of the LoadingService on the daemon's components (DaemonComponents): GetStatus (the
// daemon's version and state, the machine's CPUs, the probes, the watchdog once one is armed)
// and GetLoading, once and per CPU, with figures computed from the fixture's /proc/stat
// between two ticks, and with "more" a reply after every tick to each caller still there. The
// ticks come from tick() (what the timer does at the next tick), except where the timer's own
// ticks are the point.
#include "loading_service.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon_components.hpp"
#include "interface_check.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "monitord-config.h"
#include "test_support.hpp"

namespace monitord {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test_support::call_checked;
using test_support::ComponentOptions;
using test_support::Ticks;

// The fixture's /proc/stat at each tick, starting from the harness's {100, 900}, {200, 800}:
// (busy, idle) ticks since boot per CPU.
const std::map<int, Ticks> kSecond1 = {{0, {130, 970}}, {1, {290, 810}}};   // 30 %, 90 %
const std::map<int, Ticks> kSecond2 = {{0, {180, 1020}}, {1, {300, 900}}};  // 50 %, 10 %
// The machine: both CPUs' ticks added up.
constexpr double kMachine1 = 60.0;  // (30 + 90) / 200
constexpr double kMachine2 = 30.0;  // (50 + 10) / 200

// The reply's figures are rounded for the wire.
constexpr double kRounding = 0.01;

monitor::varlink::Call loading_call(json params, bool more) {
    return test_support::make_call("io.monitord.Monitor.GetLoading", std::move(params), more);
}

// The procstat statistics of one CPU of a per-CPU reply (null when absent).
json cpu_procstat(json loading, int cpu) {
    for (auto& c : loading["cpus"]) {
        if (c["cpu"] == cpu) return c["procstat"];
    }
    ADD_FAILURE() << "no cpu" << cpu << " in " << loading.dump();
    return nullptr;
}

// Statistics of the window: the last second, and the mean, lowest and highest of the seconds.
void ExpectStats(json stats, double last, double avg, double min, double max, int samples) {
    ASSERT_TRUE(stats.is_object()) << stats.dump();
    EXPECT_NEAR(stats["avg_prev_sec"].get<double>(), last, kRounding) << stats.dump();
    EXPECT_NEAR(stats["avg_prev_min"].get<double>(), avg, kRounding) << stats.dump();
    EXPECT_NEAR(stats["min_prev_min"].get<double>(), min, kRounding) << stats.dump();
    EXPECT_NEAR(stats["max_prev_min"].get<double>(), max, kRounding) << stats.dump();
    EXPECT_EQ(stats["samples"], samples) << stats.dump();
}

class LoadingServiceTest : public ::testing::Test {
  protected:
    void start(ComponentOptions o = {}) {
        components_.emplace(std::move(o));
        ASSERT_TRUE(components_->ok()) << components_->error();
        client_.emplace(components_->connect());
    }
    void start_with_manual_ticks() {
        ComponentOptions o;
        o.manual_ticks = true;
        start(std::move(o));
    }
    std::size_t watchers() {
        return components_->on_loop([&] { return components_->loading().watchers(); });
    }

    // A watchdog's FIFO and its reader outlive the components, whose probes write to it
    // until they stop.
    test_support::ScratchDir scratch_;
    monitor::UniqueFd fifo_reader_;
    std::optional<test_support::DaemonComponents> components_;
    std::optional<monitor::varlink::Client> client_;
};

TEST_F(LoadingServiceTest, GetStatusSaysWhatTheDaemonAndTheMachineAre) {
    start_with_manual_ticks();
    json s = call_checked(*client_, "GetStatus");
    EXPECT_EQ(s["version"], MONITORD_VERSION);
    EXPECT_EQ(s["state"], "starting");
    EXPECT_EQ(s["pid"], ::getpid());
    EXPECT_GE(s["uptime"].get<double>(), 0.0);
    EXPECT_EQ(s["cpus"], json::array({0, 1}));
    EXPECT_EQ(s["sources"], json::array({"procstat"}));
    EXPECT_EQ(s["probe_mode"], "off");
    EXPECT_EQ(s["probes"], json::array());
    EXPECT_EQ(s["history_seconds"], 60);
    EXPECT_TRUE(s["watchdog"].is_null()) << s["watchdog"].dump();

    components_->on_loop([&] { components_->loading().set_state("running"); });
    EXPECT_EQ(call_checked(*client_, "GetStatus")["state"], "running");
}

TEST_F(LoadingServiceTest, GetStatusShowsTheWatchdogOnceItIsArmed) {
    // A FIFO stands in for /dev/watchdog: its reader lets the watchdog open it.
    const auto fifo = scratch_ / "watchdog";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    fifo_reader_.reset(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(fifo_reader_);
    ComponentOptions o;
    o.manual_ticks = true;
    // As the daemon has it: a watchdog, given to the runtime unarmed, petted by probes that
    // sleep (they measure nothing).
    o.probe = monitor::ProbeMode::Sleep;
    o.watchdog =
        std::make_shared<monitor::watchdog::Watchdog>(monitor::watchdog::PetPolicyKind::All);
    start(std::move(o));

    json s = call_checked(*client_, "GetStatus");
    EXPECT_EQ(s["probe_mode"], "sleep");
    EXPECT_EQ(s["probes"].size(), 2u) << s["probes"].dump();
    EXPECT_TRUE(s["watchdog"].is_null()) << "a watchdog never armed: " << s["watchdog"].dump();

    components_->on_loop(
        [&] { ASSERT_TRUE(components_->runtime().arm_watchdog(fifo.string(), 10s)); });
    s = call_checked(*client_, "GetStatus");
    ASSERT_TRUE(s["watchdog"].is_object()) << s.dump();
    EXPECT_EQ(s["watchdog"]["device"], fifo.string());
    EXPECT_EQ(s["watchdog"]["armed"], true);
    EXPECT_EQ(s["watchdog"]["policy"], "all");
    EXPECT_EQ(s["watchdog"]["on_stop"], "disarm");

    components_->on_loop(
        [&] { components_->loading().set_watchdog_on_stop(monitor::watchdog::OnStop::KeepArmed); });
    EXPECT_EQ(call_checked(*client_, "GetStatus")["watchdog"]["on_stop"], "keep_armed");
}

TEST_F(LoadingServiceTest, GetLoadingReportsTheStatBetweenTicksForTheMachineAndEachCpu) {
    start_with_manual_ticks();
    // Before the first tick there is nothing to say yet.
    json l = call_checked(*client_, "GetLoading");
    EXPECT_TRUE(l["timestamp"].is_null());
    EXPECT_EQ(l["window_seconds"], 60);
    EXPECT_TRUE(l["machine"]["procstat"].is_null()) << l.dump();
    EXPECT_FALSE(l["machine"].contains("probe")) << "no probes run";
    EXPECT_FALSE(l.contains("cpus"));

    components_->write_stat(kSecond1);
    components_->tick();
    l = call_checked(*client_, "GetLoading", {{"per_cpu", true}});
    EXPECT_TRUE(l["timestamp"].is_number_integer());
    ExpectStats(l["machine"]["procstat"], kMachine1, kMachine1, kMachine1, kMachine1, 1);
    ASSERT_EQ(l["cpus"].size(), 2u) << l.dump();
    for (auto& c : l["cpus"]) EXPECT_EQ(c["online"], true) << c.dump();
    ExpectStats(cpu_procstat(l, 0), 30, 30, 30, 30, 1);
    ExpectStats(cpu_procstat(l, 1), 90, 90, 90, 90, 1);

    components_->write_stat(kSecond2);
    components_->tick();
    l = call_checked(*client_, "GetLoading", {{"per_cpu", true}, {"history", true}});
    ExpectStats(l["machine"]["procstat"], kMachine2, 45, kMachine2, kMachine1, 2);
    ExpectStats(cpu_procstat(l, 0), 50, 40, 30, 50, 2);
    ExpectStats(cpu_procstat(l, 1), 10, 50, 10, 90, 2);
    const auto history = l["machine"]["procstat"]["history"];
    ASSERT_EQ(history.size(), 2u) << history.dump();
    EXPECT_NEAR(history[0].get<double>(), kMachine1, kRounding);
    EXPECT_NEAR(history[1].get<double>(), kMachine2, kRounding);
    // Without the history, none is sent.
    EXPECT_FALSE(call_checked(*client_, "GetLoading")["machine"]["procstat"].contains("history"));
}

// The busiest units beside the loading, from the machine's cgroup tree; a reply made for one
// number of units is not served to a query for another; a number out of range is refused.
TEST_F(LoadingServiceTest, GetLoadingWithUnitsNamesTheBusiestUnits) {
    auto cpu_stat = [](int usec) {
        return "usage_usec " + std::to_string(usec) + "\nuser_usec " + std::to_string(usec) +
               "\nsystem_usec 0\n";
    };
    ComponentOptions o;
    o.manual_ticks = true;
    o.cgroups = {{"cgroup.controllers", "cpu\n"},
                 {"system.slice/a.service/cpu.stat", cpu_stat(0)},
                 {"system.slice/b.service/cpu.stat", cpu_stat(0)}};
    start(std::move(o));
    const auto a = components_->sys_root() / "fs/cgroup/system.slice/a.service/cpu.stat";
    const auto b = components_->sys_root() / "fs/cgroup/system.slice/b.service/cpu.stat";
    test_support::write_file(a, cpu_stat(700'000));
    test_support::write_file(b, cpu_stat(200'000));
    components_->write_stat(kSecond1);
    components_->tick();
    json l = call_checked(*client_, "GetLoading", {{"units", 1}});
    ASSERT_TRUE(l["units"].is_object()) << l.dump();
    EXPECT_EQ(l["units"]["accounting"], "cgroup2 cpu.stat");
    EXPECT_EQ(l["units"]["count"], 2);
    ASSERT_EQ(l["units"]["top"].size(), 1u) << l.dump();
    EXPECT_EQ(l["units"]["top"][0]["unit"], "a.service");
    EXPECT_EQ(l["units"]["top"][0]["cgroup"], "/system.slice/a.service");
    // The manual tick's interval is the harness's, not a second: the two units' shares are
    // in the ratio of their times.
    const double cpu_a = l["units"]["top"][0]["cpu"].get<double>();
    l = call_checked(*client_, "GetLoading", {{"units", 2}});
    ASSERT_EQ(l["units"]["top"].size(), 2u) << l.dump();
    EXPECT_NEAR(l["units"]["top"][1]["cpu"].get<double>() * 3.5, cpu_a, kRounding * 4) << l.dump();
    EXPECT_FALSE(call_checked(*client_, "GetLoading").contains("units"));

    auto refused = client_->call("io.monitord.Monitor.GetLoading", {{"units", 1001}});
    ASSERT_TRUE(refused) << refused.error().message;
    ASSERT_TRUE(refused->error);
    EXPECT_EQ(*refused->error, "io.monitord.Monitor.InvalidRequest");
    EXPECT_NE(refused->parameters.dump().find("units: 1001 is out of range; ask for 1 to 1000"),
              std::string::npos)
        << refused->parameters.dump();
}

// The CPUs' context, from the injected /proc: asking starts its sampling (no figures yet),
// the next tick reads it (instant figures), the one after gives rates; per CPU with per_cpu;
// a reply made without it is not served to a query with it.
TEST_F(LoadingServiceTest, GetLoadingWithContextStartsItsSampling) {
    auto interrupts = [](int loc0, int loc1) {
        return "           CPU0       CPU1\nLOC: " + std::to_string(loc0) + " " +
               std::to_string(loc1) + "   Local timer interrupts\n";
    };
    ComponentOptions o;
    o.manual_ticks = true;
    o.proc_files = {{"interrupts", interrupts(0, 0)},
                    {"pressure/cpu", "some avg10=1.00 avg60=2.00 avg300=3.00 total=0\n"}};
    start(std::move(o));
    const auto proc = components_->proc_root();
    components_->write_stat(kSecond1);
    components_->tick();
    EXPECT_FALSE(call_checked(*client_, "GetLoading").contains("context"));
    json l = call_checked(*client_, "GetLoading", {{"context", true}});
    ASSERT_TRUE(l["context"].is_object()) << l.dump();
    EXPECT_FALSE(l["context"].contains("sample")) << "asking starts it: " << l.dump();

    components_->write_stat(kSecond2);
    components_->tick();
    l = call_checked(*client_, "GetLoading", {{"context", true}});
    EXPECT_EQ(l["context"]["sample"]["interval"], 0) << "the first reading: " << l.dump();
    EXPECT_EQ(l["context"]["sample"]["pressure"]["avg300"], 3);
    EXPECT_FALSE(l["context"]["sample"].contains("interrupts"));

    test_support::write_file(proc / "interrupts", interrupts(300, 100));
    test_support::write_file(proc / "pressure/cpu",
                             "some avg10=1.00 avg60=2.00 avg300=3.00 total=100\n");
    components_->write_stat(kSecond1);
    components_->tick();
    l = call_checked(*client_, "GetLoading", {{"context", true}, {"per_cpu", true}});
    const json& c = l["context"]["sample"];
    ASSERT_TRUE(c["interval"].is_number()) << l.dump();
    const double seconds = c["interval"].get<double>();
    ASSERT_GT(seconds, 0) << l.dump();
    EXPECT_NEAR(c["interrupts"].get<double>(), 400 / seconds, 400 / seconds * 1e-3);
    EXPECT_EQ(c["interrupt_sources"][0]["source"], "LOC");
    ASSERT_EQ(c["cpus"].size(), 2u) << l.dump();
    EXPECT_EQ(c["cpus"][0]["top_interrupt"], "LOC");
    EXPECT_NEAR(c["cpus"][1]["interrupts"].get<double>(), 100 / seconds, 100 / seconds * 1e-3);
    EXPECT_FALSE(
        call_checked(*client_, "GetLoading", {{"context", true}})["context"]["sample"].contains(
            "cpus"))
        << "per CPU with per_cpu only";
}

// The states come with their own query: a reply made for a query without them is not served
// to one with them, nor the other way round.
TEST_F(LoadingServiceTest, GetLoadingWithStatesSaysWhereTheTimeWent) {
    start_with_manual_ticks();
    components_->write_stat(kSecond1);
    components_->tick();
    components_->write_stat(kSecond2);
    components_->tick();
    EXPECT_FALSE(
        call_checked(*client_, "GetLoading", {{"per_cpu", true}})["machine"]["procstat"].contains(
            "states"));
    json l = call_checked(*client_, "GetLoading", {{"per_cpu", true}, {"states", true}});
    // cpu0's second 2: busy 130 -> 180 (the fixture puts a quarter of the busy ticks since
    // boot in system: 32 -> 45, the rest in user: 98 -> 135), idle 970 -> 1020.
    const json last = cpu_procstat(l, 0)["states"]["last"];
    ASSERT_TRUE(last.is_object()) << l.dump();
    EXPECT_NEAR(last["user"].get<double>(), 37.0, kRounding);
    EXPECT_NEAR(last["system"].get<double>(), 13.0, kRounding);
    EXPECT_NEAR(last["idle"].get<double>(), 50.0, kRounding);
    EXPECT_EQ(cpu_procstat(l, 0)["states"]["samples"], 2);
    // The machine: both CPUs' times added up, so its idle share is the mean of theirs.
    const json machine = l["machine"]["procstat"]["states"];
    EXPECT_NEAR(machine["last"]["idle"].get<double>(), 100.0 - kMachine2, kRounding);
    EXPECT_NEAR(machine["avg"]["idle"].get<double>(), 100.0 - 45.0, kRounding);
    // And the reply without states is still the one without.
    EXPECT_FALSE(
        call_checked(*client_, "GetLoading", {{"per_cpu", true}})["machine"]["procstat"].contains(
            "states"));
}

// The totals come with their own query too, and grow with every tick.
TEST_F(LoadingServiceTest, GetLoadingWithTotalsGivesTheTimeByStateSoFar) {
    start_with_manual_ticks();
    components_->write_stat(kSecond1);
    components_->tick();
    const json query{{"per_cpu", true}, {"totals", true}};
    EXPECT_FALSE(
        call_checked(*client_, "GetLoading", {{"per_cpu", true}})["machine"]["procstat"].contains(
            "state_seconds"));
    json first = call_checked(*client_, "GetLoading", query);
    const json s1 = cpu_procstat(first, 0)["state_seconds"];
    ASSERT_TRUE(s1.is_object()) << first.dump();
    EXPECT_FALSE(cpu_procstat(first, 0).contains("states")) << "totals do not bring the shares";
    components_->write_stat(kSecond2);
    components_->tick();
    json second = call_checked(*client_, "GetLoading", query);
    const json s2 = cpu_procstat(second, 0)["state_seconds"];
    double grew = 0;
    for (const auto& [state, seconds] : s2.items()) {
        EXPECT_GE(seconds.get<double>(), s1[state].get<double>()) << state;
        grew += seconds.get<double>() - s1[state].get<double>();
    }
    EXPECT_GT(grew, 0) << "the second tick's interval was added";
    // The machine's is the sum of its CPUs'.
    const double machine_idle = second["machine"]["procstat"]["state_seconds"]["idle"];
    EXPECT_NEAR(machine_idle,
                cpu_procstat(second, 0)["state_seconds"]["idle"].get<double>() +
                    cpu_procstat(second, 1)["state_seconds"]["idle"].get<double>(),
                1e-9);
    EXPECT_FALSE(
        call_checked(*client_, "GetLoading", {{"per_cpu", true}})["machine"]["procstat"].contains(
            "state_seconds"))
        << "the reply without totals is still the one without";
}

TEST_F(LoadingServiceTest, GetLoadingWithMoreRepliesAfterEveryTick) {
    start_with_manual_ticks();
    auto per_cpu = components_->connect();
    auto first = client_->call(loading_call(json::object(), true));
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_TRUE(first->continues);
    EXPECT_TRUE(first->parameters["machine"]["procstat"].is_null());
    auto first_per_cpu = per_cpu.call(loading_call({{"per_cpu", true}}, true));
    ASSERT_TRUE(first_per_cpu) << first_per_cpu.error().message;
    EXPECT_EQ(watchers(), 2u);
    EXPECT_TRUE(test_support::NoReplyWithin(*client_, 200ms)) << "a reply before any tick";

    const std::pair<const std::map<int, Ticks>*, double> seconds[] = {{&kSecond1, kMachine1},
                                                                      {&kSecond2, kMachine2}};
    for (const auto& [stat, machine] : seconds) {
        components_->write_stat(*stat);
        components_->tick();
        auto r = client_->receive();
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_TRUE(r->continues);
        EXPECT_EQ(test_support::check_reply("GetLoading", r->parameters), "");
        EXPECT_NEAR(r->parameters["machine"]["procstat"]["avg_prev_sec"].get<double>(), machine,
                    kRounding);
        EXPECT_FALSE(r->parameters.contains("cpus"));
        auto c = per_cpu.receive();
        ASSERT_TRUE(c) << c.error().message;
        EXPECT_EQ(c->parameters["cpus"].size(), 2u);
        EXPECT_TRUE(test_support::NoReplyWithin(*client_, 50ms)) << "more than a reply a tick";
    }
}

TEST_F(LoadingServiceTest, AWatcherThatLeftIsDroppedAtTheNextTick) {
    start_with_manual_ticks();
    {
        auto leaving = components_->connect();
        ASSERT_TRUE(leaving.call(loading_call(json::object(), true)));
        ASSERT_TRUE(client_->call(loading_call(json::object(), true)));
        EXPECT_EQ(watchers(), 2u);
    }  // the first watcher's client closes
    components_->write_stat(kSecond1);
    components_->tick();
    EXPECT_EQ(watchers(), 1u);
    auto r = client_->receive();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_NEAR(r->parameters["machine"]["procstat"]["avg_prev_sec"].get<double>(), kMachine1,
                kRounding);
}

// The peak of this process's resident memory, in KiB (VmHWM).
std::size_t peak_rss_kib() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("VmHWM:")) return std::stoul(line.substr(6));
    }
    return 0;
}

// The largest reply there is: an hour's window on 256 CPUs, each second of each CPU, with the
// states. Measured: its size, the time to make it and the memory that takes (the components
// run in this process: its peak, before the client reads a byte). A user other than root who
// asks for it on many connections and reads none holds at most [limits]
// reply-memory-per-user of the daemon's memory: the replies past it are LimitExceeded. Under
// the sanitizers, which make it ten times slower, a quarter of the hour with a quarter of the
// budget: the same paths, a quarter of the bytes (the whole hour runs in the release build).
TEST_F(LoadingServiceTest, AnHourOn256CpusIsAReplyHeldToTheBudget) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the client must be another user";
    constexpr int kCpus = 256;
    constexpr int kSeconds = test_support::kSanitized ? 900 : 3600;
    // The default, or a quarter of it.
    constexpr std::size_t kBudget = std::size_t{test_support::kSanitized ? 16 : 64} << 20;
    ComponentOptions o;
    o.manual_ticks = true;
    o.online = fmt::format("0-{}", kCpus - 1);
    o.stat.clear();
    for (int cpu = 0; cpu < kCpus; ++cpu) o.stat[cpu] = {100, 900};
    o.config.reply_memory_per_user = kBudget >> 20;
    start(std::move(o));
    components_->on_loop([&] { components_->runtime().engine().set_history_seconds(kSeconds); });
    auto stat = std::map<int, Ticks>{};
    for (int cpu = 0; cpu < kCpus; ++cpu) stat[cpu] = {100, 900};
    const auto fill_start = std::chrono::steady_clock::now();
    for (int second = 1; second <= kSeconds + 1; ++second) {
        for (auto& [cpu, t] : stat) {
            const std::uint64_t busy = static_cast<std::uint64_t>(cpu * 7 + second * 13) % 101;
            t.busy += busy;
            t.idle += 100 - busy;
        }
        components_->write_stat(stat);
        components_->tick();
    }
    const double fill_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();

    // The reply as LoadingService makes it, on the loop: its size, its time, and the peak of
    // memory while it is made (the components run in this process).
    const json query = {{"per_cpu", true}, {"history", true}, {"states", true}};
    const std::size_t peak_before = peak_rss_kib();
    const auto [size, make_s] = components_->on_loop([&] {
        const auto t0 = std::chrono::steady_clock::now();
        monitor::varlink::Reply r;
        r.parameters = monitor::protocol::to_json(components_->runtime().engine().loading(
            {.per_cpu = true, .history = true, .states = true}));
        const std::size_t bytes = monitor::varlink::encode(r).size();
        return std::pair{
            bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    });
    const std::size_t peak_made = peak_rss_kib();
    EXPECT_GT(size, (std::size_t{4} << 20) * kSeconds / 3600) << "an hour of 256 CPUs is megabytes";
    EXPECT_LT(size, kBudget) << "one reply fits the default budget";
    // Root's, whole.
    client_->set_timeout(60s);
    auto whole = client_->call("io.monitord.Monitor.GetLoading", query);
    ASSERT_TRUE(whole) << whole.error().message;
    ASSERT_FALSE(whole->error) << *whole->error;
    ASSERT_EQ(whole->parameters["cpus"].size(), std::size_t{kCpus});
    EXPECT_EQ(whole->parameters["cpus"][0]["procstat"]["history"].size(), std::size_t{kSeconds})
        << "every second of the window";

    // nobody's: the same on more connections than the budget holds, none read. The sockets'
    // buffers take some of each reply, which the daemon does not hold: a quarter more, and
    // three.
    const std::size_t connections = kBudget / size * 5 / 4 + 3;
    const auto nobody = test_support::start_as_nobody([&](std::string& out) {
        std::vector<monitor::varlink::Client> c;
        for (std::size_t i = 0; i < connections; ++i) {
            auto client = monitor::varlink::Client::connect(components_->socket_path());
            if (!client ||
                !client->send_raw(monitor::varlink::encode(loading_call(query, false)) + '\0')) {
                return 1;
            }
            client->set_timeout(60s);
            c.push_back(std::move(*client));
        }
        ::sleep(2);  // the daemon holds what waits meanwhile
        std::size_t answered = 0, refused = 0;
        for (auto& client : c) {
            auto r = client.receive();
            if (!r) return 2;
            if (r->error == "io.monitord.Monitor.LimitExceeded") {
                ++refused;
                if (out.empty()) out = r->parameters.value("message", "");
            } else if (!r->error && r->parameters["cpus"].size() == std::size_t{kCpus}) {
                ++answered;
            }
        }
        out = fmt::format("{} whole, {} refused: {}", answered, refused, out);
        return 0;
    });
    std::size_t most_held = 0;
    test_support::wait_until(
        [&] {
            most_held = std::max(most_held, components_->on_loop([&] {
                return components_->server().pending_of(test_support::kNobody);
            }));
            return false;
        },
        1500ms);
    const auto child = test_support::wait_for(nobody);
    ASSERT_EQ(child.code, 0) << child.out;
    EXPECT_LE(most_held, kBudget);
    std::size_t answered = 0, refused = 0;
    ASSERT_EQ(std::sscanf(child.out.c_str(), "%zu whole, %zu refused", &answered, &refused), 2)
        << child.out;
    EXPECT_EQ(answered + refused, connections) << child.out;
    // The socket's buffers take some of each, which the daemon does not hold.
    EXPECT_GE(answered, kBudget / size) << child.out;
    EXPECT_GE(refused, 1u) << child.out;
    EXPECT_NE(child.out.find("[limits] reply-memory-per-user"), std::string::npos) << child.out;
    std::printf(
        "%d CPUs, %d s of history (filled in %.1f s): a reply of %.1f MiB made in %.2f s, "
        "the peak RSS %zu -> %zu KiB while it was made; nobody asked on %zu connections "
        "and held at most %.1f MiB of the %zu (%s)\n",
        kCpus, kSeconds, fill_s, static_cast<double>(size) / (1 << 20), make_s, peak_before,
        peak_made, connections, static_cast<double>(most_held) / (1 << 20), kBudget >> 20,
        child.out.c_str());
}

// The runtime's timer, as the daemon sets it, ticks by itself a second apart: a watcher's
// replies come without tick().
TEST_F(LoadingServiceTest, TheTimerTicksASecondApart) {
    start();
    auto first = client_->call(loading_call(json::object(), true));
    ASSERT_TRUE(first) << first.error().message;
    components_->write_stat(kSecond1);
    // The first sample that has a figure reads kSecond1 (a tick before the write, on a slow
    // machine, saw no change: a gap).
    std::optional<double> last;
    std::optional<std::int64_t> timestamp;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!last && std::chrono::steady_clock::now() < deadline) {
        auto r = client_->receive();
        ASSERT_TRUE(r) << r.error().message;
        auto procstat = r->parameters["machine"]["procstat"];
        if (procstat.is_object() && procstat["avg_prev_sec"].is_number()) {
            last = procstat["avg_prev_sec"].get<double>();
            timestamp = r->parameters["timestamp"].get<std::int64_t>();
        }
    }
    ASSERT_TRUE(last) << "no sample within 10 s";
    EXPECT_NEAR(*last, kMachine1, kRounding);
    // And the next tick comes by itself, about a second later.
    auto next = client_->receive();
    ASSERT_TRUE(next) << next.error().message;
    EXPECT_GT(next->parameters["timestamp"].get<std::int64_t>(), *timestamp);
}

// GetLoading over a range of the history on disk (a store of the test's own, two hours of
// made-up seconds): the statistics are the range's, each CPU's values at most an hour, the
// more flag and a daemon without a history refused, and what the reply says matches the
// interface.
TEST_F(LoadingServiceTest, ARangeIsReadFromTheHistoryOnDisk) {
    start_with_manual_ticks();
    auto missing = client_->call("io.monitord.Monitor.GetLoading", json{{"since", 1}});
    ASSERT_TRUE(missing.has_value());
    EXPECT_EQ(missing->error, "io.monitord.Monitor.NoHistory");
    EXPECT_NE(missing->parameters.dump().find("no history on disk"), std::string::npos)
        << missing->parameters.dump();

    auto store = HistoryStore::open(scratch_ / "state", {});
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    const auto t0 = std::chrono::system_clock::time_point{} + std::chrono::seconds{1'700'000'000};
    ASSERT_TRUE((*store)->start_run("b", t0));
    for (int i = 1; i <= 7200; ++i) {
        monitor::HistorySecond s;
        s.seconds = 1;
        const double load = i <= 3600 ? 20 : 40;
        s.sources.push_back({.name = "procstat",
                             .machine = load,
                             .has_states = false,
                             .machine_states = std::nullopt,
                             .cpus = {{0, load, std::nullopt}, {1, load / 2, std::nullopt}}});
        ASSERT_TRUE((*store)->append(t0 + std::chrono::seconds{i}, s));
    }
    // Read on a thread of its own, as the daemon reads it.
    auto opened = HistoryStore::open_reader((*store)->file());
    ASSERT_TRUE(opened.has_value()) << opened.error().to_string();
    auto reader = components_->on_loop(
        [&] { return HistoryReader::start(components_->event(), std::move(*opened)); });
    ASSERT_TRUE(reader.has_value()) << reader.error().to_string();
    components_->on_loop(
        [&] { components_->loading().set_history(reader->get(), (*store)->run()); });
    auto us = [](std::chrono::system_clock::time_point t) {
        return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    };
    json all = call_checked(
        *client_, "GetLoading",
        json{{"since", us(t0)}, {"until", us(t0 + std::chrono::hours{3})}, {"per_cpu", true}});
    EXPECT_EQ(all["window_seconds"], 7200);
    EXPECT_EQ(all["timestamp"], us(t0 + std::chrono::seconds{7200}));
    ExpectStats(all["machine"]["procstat"], 40, 30, 20, 40, 7200);
    ExpectStats(cpu_procstat(all, 1), 20, 15, 10, 20, 7200);

    json last_hour = call_checked(
        *client_, "GetLoading",
        json{{"since", us(t0 + std::chrono::seconds{3601})}, {"history", true}, {"per_cpu", true}});
    EXPECT_EQ(last_hour["window_seconds"], 3600);
    EXPECT_EQ(last_hour["machine"]["procstat"]["history"].size(), 3600u);

    auto too_long = client_->call("io.monitord.Monitor.GetLoading",
                                  json{{"since", us(t0)}, {"history", true}, {"per_cpu", true}});
    ASSERT_TRUE(too_long.has_value());
    EXPECT_EQ(too_long->error, "io.monitord.Monitor.InvalidRequest");
    EXPECT_NE(too_long->parameters.dump().find("at most 3600 s"), std::string::npos)
        << too_long->parameters.dump();
    // The machine's values of both hours fit.
    json machine = call_checked(*client_, "GetLoading", json{{"since", us(t0)}, {"history", true}});
    EXPECT_EQ(machine["machine"]["procstat"]["history"].size(), 7200u);

    auto more = client_->call(loading_call(json{{"since", us(t0)}}, true));
    ASSERT_TRUE(more.has_value());
    EXPECT_EQ(more->error, "io.monitord.Monitor.InvalidRequest");
    components_->on_loop([&] {
        components_->loading().set_history(nullptr, 0);
        reader->reset();  // on the loop's thread, whose event source it holds
    });
}

}  // namespace
}  // namespace monitord
