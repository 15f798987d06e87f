#include "monitor/loading/cpu_topology.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <string_view>
#include <tuple>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/text_file.hpp"

namespace monitor {
namespace {

// A topology value: a decimal number, -1 where the platform does not know it.
Result<int> topology_value(const std::filesystem::path& file) {
    auto text = read_text_file(file, 64);
    if (!text) return std::unexpected(text.error());
    const std::string_view s = trim_space(*text);
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) {
        return fail(Status::BadData,
                    file.string() + ": '" + std::string{s} + "' is not a number");
    }
    return v;
}

// Each CPU's node, from <sys_root>/devices/system/node/nodeM/cpulist; empty without nodes.
Result<std::map<int, int>> nodes_of_cpus(const std::filesystem::path& sys_root) {
    std::map<int, int> node_of;
    const auto dir = sys_root / "devices/system/node";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("node", 0) != 0) continue;
        const auto n = parse_unsigned(std::string_view{name}.substr(4));
        if (!n || *n > 1u << 16) continue;  // "node" files that are not nodes (has_cpu, ...)
        const auto list_file = entry.path() / "cpulist";
        auto text = read_text_file(list_file, 1 << 16);
        if (!text) continue;  // a node without CPUs' list: none of ours
        auto cpus = parse_cpu_list(*text);
        if (!cpus) return fail(Status::BadData, list_file.string() + ": " + cpus.error().message);
        for (int c : *cpus) node_of[c] = static_cast<int>(*n);
    }
    return node_of;
}

}  // namespace

CpuTopology::CpuTopology(std::vector<CpuPlace> places) : places_(std::move(places)) {
    std::ranges::sort(places_, {}, &CpuPlace::cpu);
}

Result<CpuTopology> CpuTopology::read(const std::filesystem::path& sys_root,
                                      std::span<const int> cpus) {
    auto nodes = nodes_of_cpus(sys_root);
    if (!nodes) return std::unexpected(nodes.error());
    std::vector<CpuPlace> places;
    for (int cpu : cpus) {
        const auto dir = sys_root / "devices/system/cpu" / ("cpu" + std::to_string(cpu)) / "topology";
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) continue;  // offline
        CpuPlace p{.cpu = cpu};
        auto package = topology_value(dir / "physical_package_id");
        auto core = topology_value(dir / "core_id");
        if (!package || !core) {
            const Error& e = !package ? package.error() : core.error();
            if (e.status == Status::BadData) return std::unexpected(e);
            continue;  // went offline while read
        }
        p.package = *package;
        p.core = *core;
        if (std::filesystem::exists(dir / "die_id", ec)) {
            auto die = topology_value(dir / "die_id");
            if (!die && die.error().status == Status::BadData) return std::unexpected(die.error());
            if (die) p.die = *die;
        }
        if (auto n = nodes->find(cpu); n != nodes->end()) p.node = n->second;
        places.push_back(p);
    }
    return CpuTopology{std::move(places)};
}

std::optional<CpuPlace> CpuTopology::place(int cpu) const {
    auto it = std::ranges::lower_bound(places_, cpu, {}, &CpuPlace::cpu);
    if (it == places_.end() || it->cpu != cpu) return std::nullopt;
    return *it;
}

std::vector<CpuGroup> group_cpus(const CpuTopology& topology, std::span<const int> cpus,
                                 CpuLevel level) {
    // The key orders the groups: placed CPUs by their numbers, the others last by CPU.
    using Key = std::tuple<bool, int, int, int>;
    std::map<Key, CpuGroup> groups;
    std::vector<int> sorted(cpus.begin(), cpus.end());
    std::ranges::sort(sorted);
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (int cpu : sorted) {
        const auto p = topology.place(cpu);
        Key key{true, cpu, 0, 0};
        std::string id = "cpu" + std::to_string(cpu);
        if (p) {
            switch (level) {
                case CpuLevel::Cpu:
                    key = {false, cpu, 0, 0};
                    break;
                case CpuLevel::Core:
                    key = {false, p->package, p->die, p->core};
                    id = "S" + std::to_string(p->package) + "-D" + std::to_string(p->die) + "-C" +
                         std::to_string(p->core);
                    break;
                case CpuLevel::Die:
                    key = {false, p->package, p->die, 0};
                    id = "S" + std::to_string(p->package) + "-D" + std::to_string(p->die);
                    break;
                case CpuLevel::Socket:
                    key = {false, p->package, 0, 0};
                    id = "S" + std::to_string(p->package);
                    break;
                case CpuLevel::Node:
                    key = {false, p->node, 0, 0};
                    id = "N" + std::to_string(p->node);
                    break;
            }
        }
        auto& g = groups[key];
        g.id = std::move(id);
        g.cpus.push_back(cpu);
    }
    std::vector<CpuGroup> out;
    out.reserve(groups.size());
    for (auto& [key, g] : groups) out.push_back(std::move(g));
    return out;
}

}  // namespace monitor
