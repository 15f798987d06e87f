#include "cgroups.hpp"

#include <fcntl.h>

#include <sstream>

#include "monitor/loading/probe_group.hpp"

namespace itest {

// Where cgroup2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a host that mixes
// cgroup v1 and v2), from /proc/self/mountinfo; empty when it is not.
fs::path cgroup2_mount() {
    return monitor::find_cgroup_roots("/proc/self/mountinfo").v2;
}

// Why perf cannot count cgroup2 directories here, or "" when it can: the perf_event
// controller has to be on the unified hierarchy (hierarchy 0 in /proc/cgroups), not bound to
// a v1 one.
std::string perf_event_off_cgroup2() {
    std::ifstream in("/proc/cgroups");
    if (!in) return "";
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string name;
        int hierarchy = -1;
        if (!(fields >> name >> hierarchy) || name != "perf_event") continue;
        if (hierarchy == 0) return "";
        return "the perf_event controller is bound to cgroup v1 hierarchy " +
               std::to_string(hierarchy);
    }
    return "the kernel has no perf_event cgroup controller";
}

// This process's own cgroup2 directory, which can hold processes; the mount point when it
// cannot be told.
fs::path own_cgroup(const fs::path& mount) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("0::/")) continue;
        const fs::path dir = mount / line.substr(4);
        std::error_code ec;
        if (fs::is_directory(dir, ec)) return dir;
    }
    return mount;
}

// Writes `text` to a cgroup or /proc file in one write(2), as the kernel takes it; "" or why
// not.
std::string write_kernel_file(const fs::path& file, const std::string& text) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return file.string() + ": " + std::strerror(errno);
    const ssize_t n = ::write(fd, text.data(), text.size());
    const int err = errno;
    ::close(fd);
    if (n == static_cast<ssize_t>(text.size())) return "";
    return file.string() + ": " + std::strerror(err);
}

// The mount point of the cgroup v1 hierarchy with the cpu controller; empty when there is
// none.
fs::path cpu_v1_mount() {
    return monitor::find_cgroup_roots("/proc/self/mountinfo").cpu_v1;
}

std::unique_ptr<CpuCgroup> CpuCgroup::make(const std::string& name, std::string& why_not) {
    if (::geteuid() != 0) {
        why_not = "making a cgroup under the cpu controller needs root";
        return nullptr;
    }
    fs::path root = cpu_v1_mount();
    const bool v2 = root.empty();
    if (v2) {
        root = cgroup2_mount();
        if (root.empty()) {
            why_not = "no cgroup hierarchy with the cpu controller is mounted";
            return nullptr;
        }
        std::ifstream controllers(root / "cgroup.controllers");
        bool cpu = false;
        for (std::string c; controllers >> c;) cpu = cpu || c == "cpu";
        if (!cpu) {
            why_not = "the kernel's cgroup2 has no cpu controller";
            return nullptr;
        }
        // The root cgroup may hold processes and enable controllers for its children.
        if (auto e = write_kernel_file(root / "cgroup.subtree_control", "+cpu"); !e.empty()) {
            why_not = "cannot enable the cpu controller: " + e;
            return nullptr;
        }
    }
    auto dir = std::make_unique<CgroupDir>(root / name, root);
    if (dir->error() != 0) {
        why_not = "mkdir " + (root / name).string() + ": " + std::strerror(dir->error());
        return nullptr;
    }
    return std::unique_ptr<CpuCgroup>(new CpuCgroup(std::move(dir), v2));
}

using test_support::steal_ns;

std::unique_ptr<Child> spin_at_top_priority(const CgroupDir* cg) {
    using namespace std::chrono_literals;
    auto child = std::make_unique<Child>(Child::Does::Spin);
    const pid_t pid = child->pid();
    EXPECT_GT(pid, 0) << "fork: " << std::strerror(errno);
    if (pid <= 0) return child;
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), -20);
    // Not before the child has its own session, or this would raise the test's.
    if (test_support::wait_until([&] { return ::getsid(pid) == pid; }, 2s)) {
        (void)write_kernel_file(fs::path("/proc") / std::to_string(pid) / "autogroup", "-20");
    }
    if (cg != nullptr) {
        EXPECT_EQ(cg->add(pid), "");
    }
    return child;
}

}  // namespace itest
