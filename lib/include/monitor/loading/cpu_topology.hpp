// Where each CPU sits: its core, die, package (socket) and NUMA node, as sysfs tells them
// (/sys/devices/system/cpu/cpuN/topology/ and /sys/devices/system/node/nodeM/cpulist), and the
// CPUs grouped by one of these levels, named as perf stat names them (--per-core, --per-die,
// --per-socket, --per-node).
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/status.hpp"

namespace monitor {

struct CpuPlace {
    int cpu = 0;
    int package = 0;  // physical_package_id: the socket
    int die = 0;      // die_id; 0 where the kernel has none (before Linux 5.2)
    int core = 0;     // core_id: unique within its package and die, not across them
    int node = 0;     // the NUMA node whose cpulist holds it; 0 without nodes in sysfs
};

enum class CpuLevel { Cpu, Core, Die, Socket, Node };
inline constexpr std::array<EnumName<CpuLevel>, 5> kCpuLevelNames{{
    {CpuLevel::Cpu, "cpu"},
    {CpuLevel::Core, "core"},
    {CpuLevel::Die, "die"},
    {CpuLevel::Socket, "socket"},
    {CpuLevel::Node, "node"},
}};

class CpuTopology {
  public:
    // The places of `cpus` under `sys_root` ("/sys"). A CPU without a topology directory
    // (offline: the kernel takes it away then) has no place. BADDATA naming the file for a
    // value that is not a number.
    static Result<CpuTopology> read(const std::filesystem::path& sys_root,
                                    std::span<const int> cpus);
    // Made from known places (tests, and callers that have them).
    explicit CpuTopology(std::vector<CpuPlace> places);

    // nullopt for a CPU that has no place.
    std::optional<CpuPlace> place(int cpu) const;

  private:
    std::vector<CpuPlace> places_;  // by CPU, ascending
};

// A group of CPUs at one level, named as perf stat names it: "S0-D0-C1" a core, "S0-D0" a die,
// "S0" a socket, "N0" a node, "cpu3" one CPU; a CPU that has no place is a group of its own
// at every level, named as one CPU.
struct CpuGroup {
    std::string id;
    std::vector<int> cpus;  // ascending

    bool operator==(const CpuGroup&) const = default;
};

// The groups of `cpus` at `level`, ordered as their ids' numbers (socket, die, core; node),
// the CPUs without a place last.
std::vector<CpuGroup> group_cpus(const CpuTopology& topology, std::span<const int> cpus,
                                 CpuLevel level);

}  // namespace monitor
