// Tests of finding the task group the idle probes compete in, and of lowering an autogroup of
// the process's own, on made-up /proc and cgroup trees (every case the kernel can present).
#include "monitor/loading/probe_group.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::ScratchDir;
using test_support::write_file;

std::string read(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A /proc with self/cgroup, the autogroup switch and self/autogroup (each left out when
// empty), and a cgroup2 tree.
struct Machine {
    Machine(const std::string& cgroup, const std::string& enabled, const std::string& autogroup) {
        if (!cgroup.empty()) write_file(proc() / "self/cgroup", cgroup);
        if (!enabled.empty()) write_file(proc() / "sys/kernel/sched_autogroup_enabled", enabled);
        if (!autogroup.empty()) write_file(proc() / "self/autogroup", autogroup);
        std::filesystem::create_directories(cgroup2());
    }
    std::filesystem::path proc() const { return dir / "proc"; }
    std::filesystem::path cgroup2() const { return dir / "cgroup"; }
    ScratchDir dir;
};

constexpr const char* kV2Only = "0::/user.slice/session-3.scope\n";
constexpr const char* kV1RootCpu =
    "9:name=systemd:/\n4:memory:/x\n2:cpu,cpuacct:/\n1:cpuset:/\n0::/\n";

TEST(ProbeGroup, AnAutogroupOfItsOwnIsLoweredToNice19) {
    Machine m(kV2Only, "1\n", "/autogroup-42 nice 0\n");
    auto g = lower_probe_group(m.proc(), m.cgroup2(), true);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Autogroup);
    EXPECT_EQ(g->name, "/autogroup-42");
    EXPECT_EQ(g->nice, 19);
    EXPECT_TRUE(g->own);
    EXPECT_TRUE(g->yields());
    EXPECT_EQ(read(m.proc() / "self/autogroup"), "19\n");  // what the kernel is told
    EXPECT_NE(describe_probe_group(*g).find("nice 19"), std::string::npos);
}

TEST(ProbeGroup, AnAutogroupSharedWithTheSessionIsLeftAsItIs) {
    Machine m(kV1RootCpu, "1\n", "/autogroup-7 nice 0\n");
    auto g = lower_probe_group(m.proc(), m.cgroup2(), false);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Autogroup);
    EXPECT_EQ(g->nice, 0);
    EXPECT_FALSE(g->own);
    EXPECT_FALSE(g->yields());
    EXPECT_EQ(read(m.proc() / "self/autogroup"), "/autogroup-7 nice 0\n");
    const auto note = describe_probe_group(*g);
    EXPECT_NE(note.find("share autogroup /autogroup-7"), std::string::npos) << note;
    EXPECT_NE(note.find("setsid"), std::string::npos) << note;
}

TEST(ProbeGroup, AnAutogroupAlreadyAt19IsNotWrittenAgain) {
    Machine m(kV2Only, "1\n", "/autogroup-5 nice 19\n");
    auto g = lower_probe_group(m.proc(), m.cgroup2(), true);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->nice, 19);
    EXPECT_EQ(read(m.proc() / "self/autogroup"), "/autogroup-5 nice 19\n");
}

TEST(ProbeGroup, AutogroupsSwitchedOffOrAbsentLeaveTheRootGroup) {
    for (const char* enabled : {"0\n", ""}) {
        Machine m(kV2Only, enabled, enabled[0] ? "/autogroup-1 nice 0\n" : "");
        auto g = lower_probe_group(m.proc(), m.cgroup2(), true);
        ASSERT_TRUE(g) << g.error().to_string();
        EXPECT_EQ(g->kind, ProbeGroup::Kind::Root) << "enabled: '" << enabled << "'";
        EXPECT_TRUE(g->yields());
        if (enabled[0]) {
            EXPECT_EQ(read(m.proc() / "self/autogroup"), "/autogroup-1 nice 0\n");
        }
    }
}

TEST(ProbeGroup, ACgroupV1CpuHierarchyBelowTheRootIsACgroup) {
    Machine m("3:cpu,cpuacct:/system.slice/monitord.service\n0::/\n", "1\n",
              "/autogroup-9 nice 0\n");
    auto g = lower_probe_group(m.proc(), m.cgroup2(), true);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Cgroup);
    EXPECT_EQ(g->name, "/system.slice/monitord.service");
    EXPECT_FALSE(g->yields());
    // An autogroup does not apply inside a cgroup's task group: it is not touched.
    EXPECT_EQ(read(m.proc() / "self/autogroup"), "/autogroup-9 nice 0\n");
    EXPECT_NE(describe_probe_group(*g).find("CPUWeight=idle"), std::string::npos);
}

TEST(ProbeGroup, ACgroupV2WithTheCpuControllerIsACgroup) {
    Machine m("0::/system.slice/monitord.service\n", "1\n", "/autogroup-9 nice 0\n");
    write_file(m.cgroup2() / "system.slice/monitord.service/cpu.weight", "100\n");
    auto g = find_probe_group(m.proc(), m.cgroup2(), true);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Cgroup);
    EXPECT_EQ(g->name, "/system.slice/monitord.service");

    // Without cpu.weight the controller is off there: the autogroup decides.
    std::filesystem::remove(m.cgroup2() / "system.slice/monitord.service/cpu.weight");
    g = find_probe_group(m.proc(), m.cgroup2(), true);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Autogroup);
}

// Where the hierarchies are, from mountinfo: a hybrid machine (v1's cpu and the unified one),
// a v2-only one, and lines that are not cgroups.
TEST(CgroupRoots, FoundInMountinfo) {
    ScratchDir dir;
    write_file(dir.path() / "hybrid",
               "25 1 0:23 / /sys rw - sysfs sysfs rw\n"
               "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"
               "33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
               "34 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset\n");
    auto roots = find_cgroup_roots(dir.path() / "hybrid");
    EXPECT_EQ(roots.cpu_v1, "/sys/fs/cgroup/cpu,cpuacct");
    EXPECT_EQ(roots.v2, "/sys/fs/cgroup/unified");
    write_file(dir.path() / "v2", "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    roots = find_cgroup_roots(dir.path() / "v2");
    EXPECT_EQ(roots.cpu_v1, "");
    EXPECT_EQ(roots.v2, "/sys/fs/cgroup");
    roots = find_cgroup_roots(dir.path() / "missing");
    EXPECT_TRUE(roots.cpu_v1.empty() && roots.v2.empty());
}

// A process in a cgroup below the root yields when the cgroup at the top of its path is idle,
// or weighs the least; not otherwise.
TEST(ProbeGroup, ACgroupYieldsWhenItsTopIsIdleOrWeighsTheLeast) {
    Machine m("", "1\n", "");
    write_file(m.proc() / "42/cgroup", "0::/monitord.slice/monitord-probes-42.scope\n");
    write_file(m.proc() / "42/stat", "42 (monitord-probes) S 1 42 42 0 -1\n");
    const auto scope = m.cgroup2() / "monitord.slice/monitord-probes-42.scope";
    write_file(scope / "cpu.weight", "100\n");
    write_file(m.cgroup2() / "monitord.slice/cpu.weight", "100\n");
    write_file(m.cgroup2() / "monitord.slice/cpu.idle", "0\n");
    const CgroupRoots roots{{}, m.cgroup2()};
    auto g = find_process_group(m.proc(), 42, roots);
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Cgroup);
    EXPECT_EQ(g->top, "/monitord.slice");
    EXPECT_FALSE(g->yields());

    write_file(m.cgroup2() / "monitord.slice/cpu.idle", "1\n");
    g = find_process_group(m.proc(), 42, roots);
    ASSERT_TRUE(g);
    EXPECT_TRUE(g->top_idle);
    EXPECT_TRUE(g->yields());
    EXPECT_NE(describe_probe_group(*g).find("below /monitord.slice with cpu.idle=1"),
              std::string::npos)
        << describe_probe_group(*g);

    // systemd gives the scope no cpu controller of its own when nothing below the slice asks
    // for it: the scope's tasks are in the slice's task group, which is idle.
    std::filesystem::remove(scope / "cpu.weight");
    g = find_process_group(m.proc(), 42, roots);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Cgroup);
    EXPECT_EQ(g->name, "/monitord.slice");
    EXPECT_TRUE(g->yields()) << describe_probe_group(*g);
    write_file(scope / "cpu.weight", "100\n");

    // A kernel before cpu.idle: the lowest weight.
    std::filesystem::remove(m.cgroup2() / "monitord.slice/cpu.idle");
    write_file(m.cgroup2() / "monitord.slice/cpu.weight", "1\n");
    g = find_process_group(m.proc(), 42, roots);
    ASSERT_TRUE(g);
    EXPECT_TRUE(g->top_lowest_weight);
    EXPECT_TRUE(g->yields());

    // v1: cpu.shares 2 is the least.
    write_file(m.proc() / "43/cgroup", "3:cpu,cpuacct:/monitord.probes\n0::/\n");
    const auto v1 = m.dir.path() / "cpu";
    write_file(v1 / "monitord.probes/cpu.shares", "2\n");
    g = find_process_group(m.proc(), 43, CgroupRoots{v1, m.cgroup2()});
    ASSERT_TRUE(g);
    EXPECT_EQ(g->top, "/monitord.probes");
    EXPECT_TRUE(g->yields());
}

// A process that leads its session is told from its stat.
TEST(ProbeGroup, AProcessLeadingItsSessionOwnsItsAutogroup) {
    Machine m("", "1\n", "");
    write_file(m.proc() / "50/cgroup", kV2Only);
    write_file(m.proc() / "50/autogroup", "/autogroup-9 nice 19\n");
    write_file(m.proc() / "50/stat", "50 (a b) c) S 1 50 50 0 -1\n");
    auto g = find_process_group(m.proc(), 50, CgroupRoots{{}, m.cgroup2()});
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->kind, ProbeGroup::Kind::Autogroup);
    EXPECT_TRUE(g->own);
    EXPECT_TRUE(g->yields());
    write_file(m.proc() / "50/stat", "50 (x) S 1 50 7 0 -1\n");
    g = find_process_group(m.proc(), 50, CgroupRoots{{}, m.cgroup2()});
    ASSERT_TRUE(g);
    EXPECT_FALSE(g->own);
}

// Placing a process: a cgroup right below the root of the cpu hierarchy, made, idle, holding
// the process (v1 here; the files are what the kernel would take).
TEST(ProbeGroup, PlacingMakesAnIdleCgroupBelowTheRoot) {
    Machine m("", "1\n", "");
    const auto v1 = m.dir.path() / "cpu";
    std::filesystem::create_directories(v1);
    write_file(m.proc() / "77/cgroup", "3:cpu,cpuacct:/monitord.probes\n0::/\n");
    auto g = place_in_idle_cgroup(m.proc(), 77, CgroupRoots{v1, {}}, "monitord.probes");
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(read(v1 / "monitord.probes/cpu.idle"), "1");
    EXPECT_EQ(read(v1 / "monitord.probes/cgroup.procs"), "77");
    EXPECT_TRUE(g->yields());
    EXPECT_EQ(g->top, "/monitord.probes");
    remove_idle_cgroup(CgroupRoots{v1, {}}, "monitord.probes");
    EXPECT_TRUE(std::filesystem::exists(v1 / "monitord.probes")) << "a cgroup with files stays";
}

// Under cgroup v2, only where the root gives its children the cpu controller already:
// enabling it would put every process of the machine under it.
TEST(ProbeGroup, PlacingUnderV2NeedsTheCpuControllerOnAlready) {
    Machine m("", "1\n", "");
    write_file(m.cgroup2() / "cgroup.subtree_control", "memory pids\n");
    auto g = place_in_idle_cgroup(m.proc(), 77, CgroupRoots{{}, m.cgroup2()}, "monitord.probes");
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().status, Status::BadState);
    EXPECT_NE(g.error().message.find("enabling it would put every process under it"),
              std::string::npos)
        << g.error().message;
    EXPECT_FALSE(std::filesystem::exists(m.cgroup2() / "monitord.probes"));
    g = place_in_idle_cgroup(m.proc(), 77, CgroupRoots{}, "monitord.probes");
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().status, Status::BadState);
}

TEST(ProbeGroup, AMalformedAutogroupFileIsAnErrorNamingIt) {
    for (const char* text : {"garbage\n", "/autogroup-3 nice x\n", " nice 0\n"}) {
        Machine m(kV2Only, "1\n", text);
        auto g = lower_probe_group(m.proc(), m.cgroup2(), true);
        ASSERT_FALSE(g) << text;
        EXPECT_EQ(g.error().status, Status::BadData);
        EXPECT_NE(g.error().message.find("self/autogroup"), std::string::npos) << g.error().message;
    }
}

}  // namespace
}  // namespace monitor
