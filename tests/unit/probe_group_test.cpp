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
    EXPECT_NE(describe_probe_group(*g).find("CPUWeight=1"), std::string::npos);
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
