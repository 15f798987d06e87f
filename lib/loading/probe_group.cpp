#include "monitor/loading/probe_group.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <ranges>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/text_file.hpp"

namespace monitor {

namespace {

constexpr int kLowestNice = 19;

// The hierarchy directory of a cgroup path: v1's cpu one, or v2's.
std::filesystem::path cgroup_dir(const CgroupRoots& roots, bool v1, std::string_view path) {
    const auto& root = v1 ? roots.cpu_v1 : roots.v2;
    if (root.empty()) return {};
    return root / std::string(path.substr(path.starts_with('/') ? 1 : 0));
}

// Fills in the top of a cgroup group: its first path element, and what that weighs.
void read_top(ProbeGroup& g, const CgroupRoots& roots, bool v1) {
    const std::string_view path = g.name;
    const auto end = path.find('/', 1);
    g.top = std::string(path.substr(0, end));
    const auto dir = cgroup_dir(roots, v1, g.top);
    if (dir.empty()) return;
    if (auto idle = read_text_file(dir / "cpu.idle", 64)) g.top_idle = trim_space(*idle) == "1";
    // v1: cpu.shares 2 is the lowest; v2: cpu.weight 1.
    if (auto w = read_text_file(dir / (v1 ? "cpu.shares" : "cpu.weight"), 64)) {
        const auto v = trim_space(*w);
        g.top_lowest_weight = v == (v1 ? "2" : "1");
    }
}

// The cgroup whose task group the process is in, if a cgroup under the cpu controller: the
// path in a v1 hierarchy with the cpu controller (and true), or the v2 path of the nearest
// cgroup with cpu.weight (and false). nullopt for the root group (or no cgroups at all).
std::optional<std::pair<std::string, bool>> cpu_cgroup(std::string_view self_cgroup,
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
                return std::pair{std::string(path), true};
            }
        }
    }
    // On v2 a cgroup without the cpu controller (no cpu.weight: its parent does not give it)
    // is in the task group of its nearest ancestor that has it, as a scope in a slice whose
    // children need no controller of their own.
    for (std::filesystem::path p = v2.value_or("/"); p != "/" && !p.empty(); p = p.parent_path()) {
        std::error_code ec;
        if (std::filesystem::exists(cgroup2_root / p.relative_path() / "cpu.weight", ec)) {
            return std::pair{p.string(), false};
        }
    }
    return std::nullopt;
}

// The group of the process whose /proc directory is `process` ("self" or the pid).
Result<ProbeGroup> find_group(const std::filesystem::path& proc_root, const std::string& process,
                              const CgroupRoots& roots, bool leads_session) {
    ProbeGroup group;
    if (auto self = read_text_file(proc_root / process / "cgroup")) {
        if (auto path = cpu_cgroup(*self, roots.v2)) {
            group.kind = ProbeGroup::Kind::Cgroup;
            group.name = std::move(path->first);
            read_top(group, roots, path->second);
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
    const auto file = proc_root / process / "autogroup";
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

}  // namespace

bool ProbeGroup::yields() const {
    return kind == Kind::Root || (kind == Kind::Autogroup && nice.value_or(0) >= kLowestNice) ||
           (kind == Kind::Cgroup && (top_idle || top_lowest_weight));
}

CgroupRoots find_cgroup_roots(const std::filesystem::path& mountinfo) {
    CgroupRoots roots;
    auto text = read_text_file(mountinfo);
    if (!text) return roots;
    for (auto line : *text | std::views::split('\n')) {
        // ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - TYPE SOURCE OPTIONS
        const std::string_view l(line.begin(), line.end());
        const auto dash = l.find(" - ");
        if (dash == l.npos) continue;
        std::vector<std::string_view> head;
        for (auto f : l.substr(0, dash) | std::views::split(' '))
            head.emplace_back(f.begin(), f.end());
        std::vector<std::string_view> tail;
        for (auto f : l.substr(dash + 3) | std::views::split(' '))
            tail.emplace_back(f.begin(), f.end());
        if (head.size() < 5 || tail.size() < 3) continue;
        if (tail[0] == "cgroup2" && roots.v2.empty()) roots.v2 = std::string(head[4]);
        if (tail[0] != "cgroup") continue;
        for (auto o : tail[2] | std::views::split(',')) {
            if (std::string_view(o.begin(), o.end()) == "cpu" && roots.cpu_v1.empty()) {
                roots.cpu_v1 = std::string(head[4]);
            }
        }
    }
    return roots;
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
    return find_group(proc_root, "self", CgroupRoots{{}, cgroup2_root}, leads_session);
}

Result<ProbeGroup> find_process_group(const std::filesystem::path& proc_root, pid_t pid,
                                      const CgroupRoots& roots) {
    const std::string process = pid == 0 ? "self" : std::to_string(pid);
    // The session id is the sixth field of stat, after the command in parentheses.
    bool leads = false;
    if (auto stat = read_text_file(proc_root / process / "stat")) {
        const auto close = stat->rfind(')');
        std::vector<std::string_view> fields;
        if (close != std::string::npos) {
            for (auto f : std::string_view(*stat).substr(close + 2) | std::views::split(' ')) {
                fields.emplace_back(f.begin(), f.end());
            }
        }
        // state ppid pgrp session: the session is the fourth after the command.
        const std::string self = pid == 0 ? std::to_string(::getpid()) : process;
        leads = fields.size() > 3 && fields[3] == self;
    }
    return find_group(proc_root, process, roots, leads);
}

Result<ProbeGroup> place_in_idle_cgroup(const std::filesystem::path& proc_root, pid_t pid,
                                        const CgroupRoots& roots, const std::string& name) {
    const bool v1 = !roots.cpu_v1.empty();
    const auto root = v1 ? roots.cpu_v1 : roots.v2;
    if (root.empty()) return fail(Status::BadState, "no cgroup hierarchy with the cpu controller");
    if (!v1) {
        // The root must give its children the cpu controller already.
        auto enabled = read_text_file(root / "cgroup.subtree_control", 4096);
        bool cpu = false;
        if (enabled) {
            for (auto c : *enabled | std::views::split(' ')) {
                cpu = cpu || trim_space(std::string_view(c.begin(), c.end())) == "cpu";
            }
        }
        if (!cpu) {
            return fail(Status::BadState,
                        fmt::format("{}: the cpu controller is not given to the root's "
                                    "children, and enabling it would put every process under "
                                    "it",
                                    (root / "cgroup.subtree_control").string()));
        }
    }
    const auto dir = root / name;
    std::error_code ec;
    std::filesystem::create_directory(dir, ec);
    if (ec) return fail_errno(ec.value(), fmt::format("make the cgroup {}", dir.string()));
    auto write = [](const std::filesystem::path& file, const std::string& text) -> Result<void> {
        std::ofstream out(file);
        out << text;
        out.flush();
        if (!out) return fail_errno(errno, fmt::format("write {} to {}", text, file.string()));
        return {};
    };
    // cpu.idle where the kernel has it (5.15), else the lowest weight.
    if (auto r = write(dir / "cpu.idle", "1"); !r) {
        if (auto w = write(dir / (v1 ? "cpu.shares" : "cpu.weight"), v1 ? "2" : "1"); !w) {
            return std::unexpected(w.error());
        }
    }
    if (auto r = write(dir / "cgroup.procs", std::to_string(pid)); !r) {
        return std::unexpected(r.error());
    }
    return find_process_group(proc_root, pid, roots);
}

void remove_idle_cgroup(const CgroupRoots& roots, const std::string& name) {
    const auto& root = roots.cpu_v1.empty() ? roots.v2 : roots.cpu_v1;
    if (root.empty()) return;
    ::rmdir((root / name).c_str());
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
            if (group.top_idle) {
                return fmt::format(
                    "the idle probes are in cgroup {}, below {} with cpu.idle=1: they yield to "
                    "the busy threads of every other group",
                    group.name, group.top);
            }
            if (group.top_lowest_weight) {
                return fmt::format(
                    "the idle probes are in cgroup {}, below {} with the lowest weight: they "
                    "yield to busy threads of other groups but for at most 0.2 % of a CPU",
                    group.name, group.top);
            }
            return fmt::format(
                "the idle probes are in cgroup {} under the cpu controller: a busy thread of "
                "another cgroup loses CPU time to them by the cgroups' weights, which they read "
                "as idle; monitord, as root, runs its spinning probes in a cgroup of their own "
                "with cpu.idle=1 (under systemd: monitord.slice, CPUWeight=idle)",
                group.name);
    }
    return {};
}

}  // namespace monitor
