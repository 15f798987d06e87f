// The one mapping of a counting request onto a session's options: the counting part (events,
// sharing of counters) and the target, a cgroup path kept inside the cgroup tree and a
// systemd unit's cgroup found in it; every refusal names the value and what would work.
#include <gtest/gtest.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/perf/count_target.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "test_support.hpp"

namespace monitor::protocol {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

CounterRequest request(std::string_view target) {
    CounterRequest r;
    r.events = "perf::TASK-CLOCK,{perf::CONTEXT-SWITCHES,perf::CPU-MIGRATIONS}";
    r.target.kind = value_named(kTargetKindNames, target).value();
    return r;
}

std::string error_of(const Result<perf::SessionOptions>& o) {
    return o ? std::string{"(no error)"} : o.error().message;
}

class CounterRequestTest : public ::testing::Test {
  protected:
    void SetUp() override {
        fs::create_directories(root() / "system.slice/nginx.service");
        fs::create_directories(root() /
                               "user.slice/user-1000.slice/user@1000.service/app.slice/"
                               "foot-server.service");
    }
    fs::path root() const { return dir_.path() / "cgroup"; }

    test_support::ScratchDir dir_;
};

TEST_F(CounterRequestTest, TheCountingPartIgnoresTheTarget) {
    auto r = request("unit");
    r.target.unit = "not-running.service";  // a plan does not need its cgroup
    r.mux = perf::MuxMode::Kernel;
    r.slice_ms = 20;
    r.counter_budget = 2;
    auto o = counting_options(r);
    ASSERT_TRUE(o) << o.error().to_string();
    ASSERT_EQ(o->events.size(), 3u);
    EXPECT_EQ(o->events[0].group, perf::kNoGroup);
    EXPECT_EQ(o->events[1].group, o->events[2].group);
    EXPECT_EQ(o->mux, perf::MuxMode::Kernel);
    EXPECT_EQ(o->slice, std::chrono::milliseconds(20));
    EXPECT_EQ(o->counter_budget, 2);
    EXPECT_EQ(o->target.kind, perf::TargetKind::AllCpus);  // untouched
}

TEST_F(CounterRequestTest, EveryTargetMapsOntoItsKind) {
    auto all = session_options(request("all"), root());
    ASSERT_TRUE(all);
    EXPECT_EQ(all->target.kind, perf::TargetKind::AllCpus);
    auto each = session_options(request("each"), root());
    ASSERT_TRUE(each);
    EXPECT_EQ(each->target.kind, perf::TargetKind::EachCpu);
    auto cpu = request("cpu");
    cpu.target.cpu = 3;
    auto one = session_options(cpu, root());
    ASSERT_TRUE(one);
    EXPECT_EQ(one->target.kind, perf::TargetKind::OneCpu);
    EXPECT_EQ(one->target.cpu, 3);
    auto process = request("process");
    process.target.pid = 4242;
    auto p = session_options(process, root());
    ASSERT_TRUE(p);
    EXPECT_EQ(p->target.kind, perf::TargetKind::Process);
    EXPECT_EQ(p->target.pid, 4242);
    auto cgroup = request("cgroup");
    cgroup.target.cgroup = "system.slice";
    auto c = session_options(cgroup, root());
    ASSERT_TRUE(c);
    EXPECT_EQ(c->target.kind, perf::TargetKind::Cgroup);
    EXPECT_EQ(c->target.cgroup, "system.slice");
    EXPECT_EQ(c->cgroup_root, root().string());
}

// A unit's cgroup is found in the tree, in any slice, with ".service" added to a bare name;
// the session's target is that cgroup, the unit's name goes nowhere else.
TEST_F(CounterRequestTest, AUnitIsItsCgroupFoundInTheTree) {
    fs::create_directories(root() / "system.slice/system-getty.slice/getty@tty1.service");
    for (const auto& [unit, cgroup] :
         {std::pair{"nginx.service", "system.slice/nginx.service"},
          std::pair{"nginx", "system.slice/nginx.service"},
          std::pair{"getty@tty1.service", "system.slice/system-getty.slice/getty@tty1.service"},
          std::pair{"user@1000.service", "user.slice/user-1000.slice/user@1000.service"}}) {
        auto r = request("unit");
        r.target.unit = unit;
        auto o = session_options(r, root());
        ASSERT_TRUE(o) << unit << ": " << o.error().to_string();
        EXPECT_EQ(o->target.kind, perf::TargetKind::Cgroup) << unit;
        EXPECT_EQ(o->target.cgroup, cgroup) << unit;
    }
    auto absent = request("unit");
    absent.target.unit = "absent.service";
    auto o = session_options(absent, root());
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().status, Status::NoDev);
    EXPECT_NE(error_of(o).find("no cgroup for unit absent.service under " + root().string()),
              std::string::npos)
        << error_of(o);
    for (const char* bad : {"a/b.service", "..", ""}) {
        auto slash = request("unit");
        slash.target.unit = bad;
        EXPECT_FALSE(session_options(slash, root())) << "'" << bad << "'";
    }
    auto slash = request("unit");
    slash.target.unit = "a/b.service";
    EXPECT_NE(error_of(session_options(slash, root())).find("'a/b.service' is not a unit name"),
              std::string::npos);
}

// Below a user's manager its owner names the cgroups: a user's `systemd-run --user
// --unit=nginx` is never taken for the system's nginx, and a unit only a user runs is named
// by its cgroup.
TEST_F(CounterRequestTest, AUsersUnitIsNeverTakenForTheSystems) {
    const fs::path users = "user.slice/user-1000.slice/user@1000.service/app.slice";
    fs::create_directories(root() / users / "nginx.service");
    auto r = request("unit");
    r.target.unit = "nginx";
    auto o = session_options(r, root());
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_EQ(o->target.cgroup, "system.slice/nginx.service");

    r.target.unit = "foot-server.service";  // only in the user's manager
    o = session_options(r, root());
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().status, Status::NoDev);
    EXPECT_NE(error_of(o).find("is named by its cgroup"), std::string::npos) << error_of(o);

    // Before the system's nginx runs, the user's is not found either.
    fs::remove(root() / "system.slice/nginx.service");
    r.target.unit = "nginx";
    EXPECT_FALSE(session_options(r, root()));
}

// A unit with Delegate=yes (systemd marks its cgroup with trusted.delegate=1): its own cgroup
// is found, the names below it are its owner's.
TEST_F(CounterRequestTest, NamesBelowADelegatedUnitAreNotUnits) {
    const fs::path delegated = root() / "system.slice/containers.service";
    fs::create_directories(delegated / "payload/nginx.service");
    fs::remove(root() / "system.slice/nginx.service");
    if (::setxattr(delegated.c_str(), "trusted.delegate", "1", 1, 0) != 0 &&
        ::setxattr(delegated.c_str(), "user.delegate", "1", 1, 0) != 0) {
        GTEST_SKIP() << "cannot set trusted.delegate or user.delegate on " << delegated << ": "
                     << std::strerror(errno);
    }
    auto r = request("unit");
    r.target.unit = "containers.service";
    auto o = session_options(r, root());
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_EQ(o->target.cgroup, "system.slice/containers.service");
    r.target.unit = "nginx";
    o = session_options(r, root());
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().status, Status::NoDev) << error_of(o);
}

// Two cgroups of one name outside any delegated subtree (one made by hand): refused, naming
// both, rather than the first one found.
TEST_F(CounterRequestTest, ANameOfTwoCgroupsIsRefusedNamingBoth) {
    fs::create_directories(root() / "custom/nginx.service");
    auto r = request("unit");
    r.target.unit = "nginx.service";
    auto o = session_options(r, root());
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().status, Status::BadArg);
    EXPECT_NE(error_of(o).find("system.slice/nginx.service"), std::string::npos) << error_of(o);
    EXPECT_NE(error_of(o).find("custom/nginx.service"), std::string::npos) << error_of(o);
    EXPECT_NE(error_of(o).find("as a cgroup target"), std::string::npos) << error_of(o);
}

// The check that keeps a cgroup path inside the tree is the one the session applies when it
// opens the directory (cgroup_directory), made here before anything is opened.
TEST_F(CounterRequestTest, ACgroupPathThatCouldLeadOutOfTheTreeIsRefused) {
    for (const char* path : {"..", "../etc", "system.slice/../../etc", "a/b/../c"}) {
        auto r = request("cgroup");
        r.target.cgroup = path;
        auto o = session_options(r, root());
        ASSERT_FALSE(o) << path;
        EXPECT_EQ(o.error().status, Status::BadArg);
        EXPECT_NE(error_of(o).find(std::string{"cgroup '"} + path +
                                   "': '..' could lead out of the cgroup tree"),
                  std::string::npos)
            << error_of(o);
    }
    // Two dots inside a name are a name.
    auto dots = request("cgroup");
    dots.target.cgroup = "system.slice/a..b.service";
    EXPECT_TRUE(session_options(dots, root()));
}

TEST_F(CounterRequestTest, BadRequestsNameTheValueAndWhatWouldWork) {
    auto cpu = request("cpu");
    EXPECT_EQ(error_of(session_options(cpu, root())), "target 'cpu' needs a cpu");
    cpu.target.cpu = -1;
    EXPECT_EQ(error_of(session_options(cpu, root())), "no cpu -1");
    auto process = request("process");
    EXPECT_EQ(error_of(session_options(process, root())), "target 'process' needs a pid or pids");
    process.target.pid = 0;
    EXPECT_EQ(error_of(session_options(process, root())), "no process 0");
    EXPECT_EQ(error_of(session_options(request("cgroup"), root())),
              "target 'cgroup' needs a cgroup path");
    EXPECT_EQ(error_of(session_options(request("unit"), root())),
              "target 'unit' needs a unit name");
    // A kind the interface does not name does not get this far: reading the call refuses it.
    try {
        (void)target_request_from_json(nlohmann::json{{"kind", "everything"}});
        ADD_FAILURE() << "target 'everything' was read";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(),
                     "unknown target kind 'everything' (all, each, cpu, process, cgroup or unit)");
    }
    auto slice = request("all");
    slice.slice_ms = 5;
    EXPECT_EQ(error_of(session_options(slice, root())),
              "slice of 5 ms: choose from 10 to 10000 ms");
    auto budget = request("all");
    budget.counter_budget = 33;
    EXPECT_EQ(error_of(counting_options(budget)), "counter budget 33: choose from 1 to 32");
    auto braces = request("all");
    braces.events = "{perf::TASK-CLOCK";
    EXPECT_FALSE(counting_options(braces));
    auto sampled = request("all");
    sampled.sample_every = 0;
    EXPECT_EQ(error_of(counting_options(sampled)), "sample every 0 events: give 1 or more");
}

// perf stat -C 0,2: CPUs of kinds all and each, in order and once each; any other kind
// refuses a list, and a negative CPU is named.
TEST_F(CounterRequestTest, AllAndEachTakeAListOfCpus) {
    auto listed = request("all");
    listed.target.cpus = {3, 0, 3};
    auto all = session_options(listed, root());
    ASSERT_TRUE(all) << all.error().to_string();
    EXPECT_EQ(all->target.kind, perf::TargetKind::AllCpus);
    EXPECT_EQ(all->target.cpus, (std::vector<int>{0, 3}));
    EXPECT_EQ(target_text(listed), "cpu3, cpu0, cpu3");
    listed.target.kind = TargetRequest::Kind::Each;
    auto each = session_options(listed, root());
    ASSERT_TRUE(each);
    EXPECT_EQ(each->target.kind, perf::TargetKind::EachCpu);
    EXPECT_EQ(each->target.cpus, (std::vector<int>{0, 3}));
    EXPECT_EQ(counter_request_from_json(to_json(listed)), listed) << to_json(listed).dump();

    auto process = request("process");
    process.target.pid = 42;
    process.target.cpus = {1};
    EXPECT_EQ(error_of(session_options(process, root())),
              "target 'process' takes no list of CPUs (kinds all and each do)");
    listed.target.cpus = {1, -2};
    EXPECT_EQ(error_of(session_options(listed, root())), "no cpu -2");
}

// perf stat -p 42,43: the processes of kind process, in order and once each, with or without
// `pid`; one alone is `pid`; a bad one named; more than 1,024 refused.
TEST_F(CounterRequestTest, AProcessTargetTakesAListOfProcesses) {
    auto listed = request("process");
    listed.target.pids = {43, 42, 43};
    auto o = session_options(listed, root());
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_EQ(o->target.kind, perf::TargetKind::Process);
    EXPECT_EQ(o->target.pid, 42);
    EXPECT_EQ(o->target.pids, (std::vector<pid_t>{42, 43}));
    EXPECT_EQ(perf::target_processes(o->target), (std::vector<pid_t>{42, 43}));
    EXPECT_EQ(target_text(listed), "processes 43, 42, 43");
    EXPECT_EQ(perf::processes_text(o->target.pids), "processes 42, 43");
    EXPECT_EQ(counter_request_from_json(to_json(listed)), listed) << to_json(listed).dump();

    listed.target.pid = 41;  // beside the list: one more
    o = session_options(listed, root());
    ASSERT_TRUE(o);
    EXPECT_EQ(o->target.pids, (std::vector<pid_t>{41, 42, 43}));
    EXPECT_EQ(target_text(listed), "processes 41, 43, 42, 43");

    auto one = request("process");
    one.target.pids = {7, 7};
    o = session_options(one, root());
    ASSERT_TRUE(o);
    EXPECT_EQ(o->target.pid, 7);
    EXPECT_TRUE(o->target.pids.empty());
    EXPECT_EQ(perf::target_processes(o->target), (std::vector<pid_t>{7}));
    EXPECT_EQ(perf::processes_text({7}), "process 7");

    auto bad = request("process");
    bad.target.pids = {42, -3};
    EXPECT_EQ(error_of(session_options(bad, root())), "no process -3");
    bad.target.pids = {42, std::int64_t{1} << 40};
    EXPECT_EQ(error_of(session_options(bad, root())), "no process 1099511627776");
    bad.target.pids.assign(1025, 0);
    std::iota(bad.target.pids.begin(), bad.target.pids.end(), 1);
    EXPECT_EQ(error_of(session_options(bad, root())), "1025 processes: count at most 1024 at once");
    bad.target.pids.pop_back();
    EXPECT_TRUE(session_options(bad, root()));
    // Only kind process takes them.
    auto all = request("all");
    all.target.pids = {42};
    EXPECT_EQ(error_of(session_options(all, root())),
              "target 'all' takes no list of processes (kind process does)");
}

// The CPUs a target opens on: a CPU or a list that is not online is named with those that are.
// Per core, die, socket or node: only with kind each, by the interface's names, in the
// target's text, and the groups of the topology under an injected /sys.
TEST_F(CounterRequestTest, EachCpuPerCoreDieSocketOrNode) {
    auto each = request("each");
    each.target.per = CpuLevel::Core;
    ASSERT_TRUE(session_options(each, root()));
    EXPECT_EQ(target_text(each.target), "each core");
    each.target.cpus = {0, 2};
    EXPECT_EQ(target_text(each.target), "each core of cpu0, cpu2");
    const json j = to_json(each.target);
    EXPECT_EQ(j["per"], "core");
    EXPECT_EQ(target_request_from_json(j), each.target);
    EXPECT_FALSE(to_json(request("each").target).contains("per")) << "per CPU is the default";
    EXPECT_THROW(target_request_from_json(json{{"kind", "each"}, {"per", "thread"}}),
                 std::invalid_argument);

    auto all = request("all");
    all.target.per = CpuLevel::Socket;
    EXPECT_EQ(error_of(session_options(all, root())),
              "target 'all' is not counted per socket (kind each is)");

    // Two cores of two threads (cpu0 and cpu2 one core), cpu3 offline.
    const auto sys = dir_.path() / "sys";
    const std::vector<std::pair<int, int>> cores = {{0, 0}, {1, 1}, {2, 0}};
    for (const auto& [cpu, core] : cores) {
        const auto topology = sys / ("devices/system/cpu/cpu" + std::to_string(cpu)) / "topology";
        test_support::write_file(topology / "physical_package_id", "0\n");
        test_support::write_file(topology / "core_id", std::to_string(core) + "\n");
    }
    const std::vector<int> cpus = {0, 1, 2, 3};
    each.target.cpus.clear();
    auto shape = report_shape(each.target, cpus, sys);
    ASSERT_TRUE(shape) << shape.error().to_string();
    EXPECT_TRUE(shape->per_cpu);
    EXPECT_EQ(shape->groups,
              (std::vector<CpuGroup>{{"S0-D0-C0", {0, 2}}, {"S0-D0-C1", {1}}, {"cpu3", {3}}}));
    // Per CPU, and a target that is not each CPU: no groups, and sysfs is not read.
    auto plain = report_shape(request("each").target, cpus, dir_.path() / "none");
    ASSERT_TRUE(plain);
    EXPECT_TRUE(plain->per_cpu);
    EXPECT_TRUE(plain->groups.empty());
    auto total = report_shape(request("all").target, cpus, dir_.path() / "none");
    ASSERT_TRUE(total);
    EXPECT_FALSE(total->per_cpu);
    // A topology that is not one is refused, by its file.
    test_support::write_file(sys / "devices/system/cpu/cpu1/topology/core_id", "one\n");
    auto bad = report_shape(each.target, cpus, sys);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("cpu1/topology/core_id"), std::string::npos)
        << bad.error().message;
}

TEST(TargetCpus, AreTheOnlineOnesOrThoseListed) {
    const std::vector<int> online{0, 1, 3};
    perf::CountTarget t;
    EXPECT_EQ(perf::target_cpus(t, online).value(), online);
    t.cpus = {1, 3};
    EXPECT_EQ(perf::target_cpus(t, online).value(), (std::vector<int>{1, 3}));
    t.kind = perf::TargetKind::EachCpu;
    EXPECT_EQ(perf::target_cpus(t, online).value(), (std::vector<int>{1, 3}));
    t.cpus = {1, 2};
    auto offline = perf::target_cpus(t, online);
    ASSERT_FALSE(offline);
    EXPECT_EQ(offline.error().status, Status::NoDev);
    EXPECT_EQ(offline.error().message, "cpu2 is not online (online: 0, 1, 3)");
    t = {.kind = perf::TargetKind::OneCpu, .cpu = 4};
    EXPECT_EQ(perf::target_cpus(t, online).error().message, "cpu4 is not online (online: 0, 1, 3)");
    t.cpu = 3;
    EXPECT_EQ(perf::target_cpus(t, online).value(), (std::vector<int>{3}));
    // A task is opened on every online CPU by a profile, whatever it lists.
    t = {.kind = perf::TargetKind::Process, .pid = 1};
    EXPECT_EQ(perf::target_cpus(t, online).value(), online);
}

// What a request asks travels unchanged, sample_every included.
TEST_F(CounterRequestTest, TravelsUnchanged) {
    auto r = request("process");
    r.target.pid = 42;
    r.counter_budget = 2;
    r.sample_every = 1'000'000;
    EXPECT_EQ(counter_request_from_json(to_json(r)), r) << to_json(r).dump();
}

}  // namespace
}  // namespace monitor::protocol
