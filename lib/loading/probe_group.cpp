#include "monitor/loading/probe_group.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <ranges>
#include <string_view>

#include "monitor/text_file.hpp"

namespace monitor {

namespace {

constexpr int kLowestNice = 19;

// The cgroup whose task group the process is in, if a cgroup under the cpu controller: the
// path in a v1 hierarchy with the cpu controller, or the v2 path when it has cpu.weight.
// nullopt for the root group (or no cgroups at all).
std::optional<std::string> cpu_cgroup(std::string_view self_cgroup,
                                      const std::filesystem::path& cgroup2_root) {
    std::optional<std::string> v2;
    for (auto line : self_cgroup | std::views::split('\n')) {
        std::string_view l(line.begin(), line.end());
        const auto first = l.find(':');
        const auto second = first == l.npos ? l.npos : l.find(':', first + 1);
        if (second == l.npos) continue;
        const auto controllers = l.substr(first + 1, second - first - 1);
        const auto path = l.substr(second + 1);
        if (controllers.empty()) {
            v2 = std::string(path);
            continue;
        }
        for (auto c : controllers | std::views::split(',')) {
            if (std::string_view(c.begin(), c.end()) == "cpu") {
                // The cpu controller is on v1: v2 cannot have it too.
                if (path == "/") return std::nullopt;
                return std::string(path);
            }
        }
    }
    if (!v2 || *v2 == "/") return std::nullopt;
    std::error_code ec;
    if (std::filesystem::exists(cgroup2_root / v2->substr(1) / "cpu.weight", ec)) return v2;
    return std::nullopt;
}

}  // namespace

bool ProbeGroup::yields() const {
    return kind == Kind::Root || (kind == Kind::Autogroup && nice.value_or(0) >= kLowestNice);
}

std::string_view probe_group_kind_name(ProbeGroup::Kind kind) noexcept {
    switch (kind) {
        case ProbeGroup::Kind::Root:
            return "root";
        case ProbeGroup::Kind::Autogroup:
            return "autogroup";
        case ProbeGroup::Kind::Cgroup:
            return "cgroup";
    }
    return "root";
}

Result<ProbeGroup> find_probe_group(const std::filesystem::path& proc_root,
                                    const std::filesystem::path& cgroup2_root, bool leads_session) {
    ProbeGroup group;
    if (auto self = read_text_file(proc_root / "self/cgroup")) {
        if (auto path = cpu_cgroup(*self, cgroup2_root)) {
            group.kind = ProbeGroup::Kind::Cgroup;
            group.name = std::move(*path);
            return group;
        }
    } else if (self.error().status != Status::NoDev) {
        return std::unexpected(self.error());
    }

    // Autogroups: a kernel without them has neither file.
    auto enabled = read_text_file(proc_root / "sys/kernel/sched_autogroup_enabled");
    if (!enabled) {
        if (enabled.error().status == Status::NoDev) return group;
        return std::unexpected(enabled.error());
    }
    if (trim_space(*enabled) == "0") return group;
    const auto file = proc_root / "self/autogroup";
    auto text = read_text_file(file);
    if (!text) {
        if (text.error().status == Status::NoDev) return group;
        return std::unexpected(text.error());
    }
    // "/autogroup-42 nice 0"
    const std::string_view line = trim_space(*text);
    const auto space = line.find(" nice ");
    int nice = 0;
    const auto number = space == line.npos ? std::string_view{} : line.substr(space + 6);
    if (space == 0 || space == line.npos ||
        std::from_chars(number.data(), number.data() + number.size(), nice).ec != std::errc{}) {
        return fail(
            Status::BadData,
            fmt::format("{}: expected \"/autogroup-N nice K\", read \"{}\"", file.string(), line));
    }
    group.kind = ProbeGroup::Kind::Autogroup;
    group.name = std::string(line.substr(0, space));
    group.nice = nice;
    group.own = leads_session;
    return group;
}

Result<ProbeGroup> lower_probe_group(const std::filesystem::path& proc_root,
                                     const std::filesystem::path& cgroup2_root,
                                     bool leads_session) {
    auto group = find_probe_group(proc_root, cgroup2_root, leads_session);
    if (!group || group->kind != ProbeGroup::Kind::Autogroup || !group->own ||
        group->nice == kLowestNice) {
        return group;
    }
    const auto file = proc_root / "self/autogroup";
    {
        std::ofstream out(file);
        out << kLowestNice << '\n';
        out.flush();
        if (!out) {
            const int err = errno;
            return fail_errno(err, fmt::format("set the autogroup's nice in {}", file.string()));
        }
    }
    // The kernel refuses a value it does not take: the write succeeding is the group's new nice.
    group->nice = kLowestNice;
    return group;
}

std::string describe_probe_group(const ProbeGroup& group) {
    switch (group.kind) {
        case ProbeGroup::Kind::Root:
            return "the idle probes are in the root task group: they yield to every busy thread";
        case ProbeGroup::Kind::Autogroup:
            if (group.yields()) {
                return fmt::format(
                    "the idle probes are in autogroup {} at nice {}: they yield to busy threads "
                    "of other sessions but for at most 1.5 % of a CPU",
                    group.name, *group.nice);
            }
            if (!group.own) {
                return fmt::format(
                    "the idle probes share autogroup {} (nice {}) with the session monitord was "
                    "started from: a busy thread of another session loses CPU time to them, "
                    "which they read as idle; run monitord as a service or under setsid",
                    group.name, group.nice.value_or(0));
            }
            return fmt::format(
                "the idle probes are in autogroup {} at nice {}: a busy thread of another session "
                "loses CPU time to them, which they read as idle",
                group.name, group.nice.value_or(0));
        case ProbeGroup::Kind::Cgroup:
            return fmt::format(
                "the idle probes are in cgroup {} under the cpu controller: a busy thread of "
                "another cgroup loses CPU time to them by the cgroups' weights, which they read "
                "as idle; give monitord's cgroup the least weight (CPUWeight=1)",
                group.name);
    }
    return {};
}

}  // namespace monitor
