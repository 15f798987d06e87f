// Where each CPU sits, from injected /sys trees: SMT siblings, two sockets whose core ids
// repeat, dies, NUMA nodes, an offline CPU, a kernel without die_id or nodes, a value that is
// not a number; and the groups perf stat's --per-core, --per-die, --per-socket and --per-node
// would show.
#include "monitor/loading/cpu_topology.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "monitor/loading/cpu_list.hpp"
#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::ScratchDir;
using test_support::write_file;

struct Cpu {
    int cpu, package, die, core;
};

// A sysfs with `cpus` placed (a die of -1: no die_id file) and `nodes` ("0-3", ...).
void make_sys(const std::filesystem::path& sys, const std::vector<Cpu>& cpus,
              const std::vector<std::string>& nodes) {
    for (const auto& c : cpus) {
        const auto dir =
            sys / "devices/system/cpu" / ("cpu" + std::to_string(c.cpu)) / "topology";
        write_file(dir / "physical_package_id", std::to_string(c.package) + "\n");
        write_file(dir / "core_id", std::to_string(c.core) + "\n");
        if (c.die >= 0) write_file(dir / "die_id", std::to_string(c.die) + "\n");
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        write_file(sys / "devices/system/node" / ("node" + std::to_string(n)) / "cpulist",
                   nodes[n] + "\n");
    }
    if (!nodes.empty()) write_file(sys / "devices/system/node/has_cpu", "0-7\n");
}

std::vector<std::string> ids(const std::vector<CpuGroup>& groups) {
    std::vector<std::string> out;
    for (const auto& g : groups) out.push_back(g.id);
    return out;
}

// Two sockets of two dies... of two cores of two threads: cpu N and N+4 are siblings (as x86
// numbers them), socket 1's core ids repeat socket 0's; cpu 7 offline (no topology).
TEST(CpuTopology, TwoSocketsOfSmtCoresAndAnOfflineCpu) {
    ScratchDir dir;
    make_sys(dir.path(),
             {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 1, 0, 0}, {3, 1, 0, 1}, {4, 0, 0, 0}, {5, 0, 0, 1},
              {6, 1, 0, 0}},
             {"0-1,4-5", "2-3,6-7"});
    const std::vector<int> cpus{0, 1, 2, 3, 4, 5, 6, 7};
    auto t = CpuTopology::read(dir.path(), cpus);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    EXPECT_FALSE(t->place(7).has_value()) << "offline: no topology directory";
    ASSERT_TRUE(t->place(6).has_value());
    EXPECT_EQ(t->place(6)->package, 1);
    EXPECT_EQ(t->place(6)->node, 1);

    const auto cores = group_cpus(*t, cpus, CpuLevel::Core);
    EXPECT_EQ(ids(cores),
              (std::vector<std::string>{"S0-D0-C0", "S0-D0-C1", "S1-D0-C0", "S1-D0-C1", "cpu7"}));
    EXPECT_EQ(cores[0].cpus, (std::vector<int>{0, 4}));
    EXPECT_EQ(cores[2].cpus, (std::vector<int>{2, 6})) << "core 0 of socket 1 is not socket 0's";
    EXPECT_EQ(cores[3].cpus, (std::vector<int>{3}));
    EXPECT_EQ(cores[4].cpus, (std::vector<int>{7}));

    const auto sockets = group_cpus(*t, cpus, CpuLevel::Socket);
    EXPECT_EQ(ids(sockets), (std::vector<std::string>{"S0", "S1", "cpu7"}));
    EXPECT_EQ(sockets[0].cpus, (std::vector<int>{0, 1, 4, 5}));
    EXPECT_EQ(sockets[1].cpus, (std::vector<int>{2, 3, 6}));

    const auto nodes = group_cpus(*t, cpus, CpuLevel::Node);
    EXPECT_EQ(ids(nodes), (std::vector<std::string>{"N0", "N1", "cpu7"}));
    EXPECT_EQ(nodes[1].cpus, (std::vector<int>{2, 3, 6}));

    const auto each = group_cpus(*t, cpus, CpuLevel::Cpu);
    ASSERT_EQ(each.size(), 8u);
    EXPECT_EQ(each[5].id, "cpu5");
    EXPECT_EQ(each[5].cpus, (std::vector<int>{5}));

    // Only the CPUs asked about are grouped.
    const std::vector<int> some{4, 0, 3};
    EXPECT_EQ(group_cpus(*t, some, CpuLevel::Core),
              (std::vector<CpuGroup>{{"S0-D0-C0", {0, 4}}, {"S1-D0-C1", {3}}}));
}

// Two dies in one package: the core ids repeat in each die.
TEST(CpuTopology, DiesOfOnePackage) {
    ScratchDir dir;
    make_sys(dir.path(), {{0, 0, 0, 0}, {1, 0, 0, 1}, {2, 0, 1, 0}, {3, 0, 1, 1}}, {});
    const std::vector<int> cpus{0, 1, 2, 3};
    auto t = CpuTopology::read(dir.path(), cpus);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    EXPECT_EQ(ids(group_cpus(*t, cpus, CpuLevel::Core)),
              (std::vector<std::string>{"S0-D0-C0", "S0-D0-C1", "S0-D1-C0", "S0-D1-C1"}));
    const auto dies = group_cpus(*t, cpus, CpuLevel::Die);
    EXPECT_EQ(dies, (std::vector<CpuGroup>{{"S0-D0", {0, 1}}, {"S0-D1", {2, 3}}}));
    // No nodes in sysfs (a kernel without NUMA): one node.
    EXPECT_EQ(group_cpus(*t, cpus, CpuLevel::Node), (std::vector<CpuGroup>{{"N0", {0, 1, 2, 3}}}));
}

// A kernel before die_id (Linux 5.2): every CPU on die 0.
TEST(CpuTopology, WithoutDieIdEveryCpuIsOnDieZero) {
    ScratchDir dir;
    make_sys(dir.path(), {{0, 0, -1, 0}, {1, 0, -1, 0}}, {"0-1"});
    const std::vector<int> cpus{0, 1};
    auto t = CpuTopology::read(dir.path(), cpus);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    EXPECT_EQ(group_cpus(*t, cpus, CpuLevel::Core),
              (std::vector<CpuGroup>{{"S0-D0-C0", {0, 1}}}));
}

TEST(CpuTopology, AValueThatIsNotANumberIsNamed) {
    ScratchDir dir;
    make_sys(dir.path(), {{0, 0, 0, 0}}, {});
    write_file(dir.path() / "devices/system/cpu/cpu0/topology/core_id", "zero\n");
    const std::vector<int> cpus{0};
    auto t = CpuTopology::read(dir.path(), cpus);
    ASSERT_FALSE(t.has_value());
    EXPECT_EQ(t.error().status, Status::BadData);
    EXPECT_NE(t.error().message.find("cpu0/topology/core_id: 'zero' is not a number"),
              std::string::npos)
        << t.error().message;
    write_file(dir.path() / "devices/system/cpu/cpu0/topology/core_id", "0\n");
    write_file(dir.path() / "devices/system/node/node0/cpulist", "0-x\n");
    t = CpuTopology::read(dir.path(), cpus);
    ASSERT_FALSE(t.has_value());
    EXPECT_NE(t.error().message.find("node0/cpulist"), std::string::npos) << t.error().message;
}

// This machine's own sysfs: every online CPU has a place, and its cores hold them all.
TEST(CpuTopology, ThisMachine) {
    auto online = read_online_cpus("/sys");
    if (!online) GTEST_SKIP() << "no /sys/devices/system/cpu/online here";
    auto t = CpuTopology::read("/sys", *online);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    std::size_t grouped = 0;
    for (const auto& g : group_cpus(*t, *online, CpuLevel::Core)) {
        EXPECT_EQ(g.id.rfind("S", 0), 0u) << g.id << ": an online CPU without a place";
        grouped += g.cpus.size();
    }
    EXPECT_EQ(grouped, online->size());
}

}  // namespace
}  // namespace monitor
