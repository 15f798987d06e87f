// Test support: real cgroups in the cgroup2 hierarchy (perf_event_open counts a cgroup only
// given a directory of the hierarchy that holds the perf_event controller), and a child
// process to put in one.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace itest {

namespace fs = std::filesystem;

// The daemon takes cgroup paths, and looks for units, below this directory.
inline const std::filesystem::path kCgroupRoot = "/sys/fs/cgroup";

// Where cgroup2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a host that mixes
// cgroup v1 and v2), from /proc/self/mountinfo; empty when it is not.
fs::path cgroup2_mount();

// Why perf cannot count cgroup2 directories here, or "" when it can: the perf_event
// controller has to be on the unified hierarchy (hierarchy 0 in /proc/cgroups), not bound to
// a v1 one.
std::string perf_event_off_cgroup2();

// This process's own cgroup2 directory, which can hold processes; the mount point when it
// cannot be told.
fs::path own_cgroup(const fs::path& mount);

// Writes `text` to a cgroup or /proc file in one write(2), as the kernel takes it; "" or why
// not.
std::string write_kernel_file(const fs::path& file, const std::string& text);

// A cgroup made for a test and removed at the end of the scope. Processes still in it go back
// to `home` first, since a cgroup that holds processes cannot be removed.
class CgroupDir {
  public:
    CgroupDir(fs::path path, fs::path home) : path_(std::move(path)), home_(std::move(home)) {
        if (::mkdir(path_.c_str(), 0755) != 0) error_ = errno;
    }
    ~CgroupDir() {
        if (error_ != 0) return;
        for (pid_t pid : procs()) {
            (void)write_kernel_file(home_ / "cgroup.procs", std::to_string(pid));
        }
        // A process killed a moment ago can keep the cgroup busy until it is fully gone.
        int err = 0;
        const bool removed = test_support::wait_until(
            [&] {
                err = ::rmdir(path_.c_str()) == 0 ? 0 : errno;
                return err == 0 || err == ENOENT;
            },
            std::chrono::seconds(5));
        if (!removed) {
            ADD_FAILURE() << "cannot remove the cgroup " << path_ << ": " << std::strerror(err);
        }
    }
    CgroupDir(const CgroupDir&) = delete;
    CgroupDir& operator=(const CgroupDir&) = delete;

    // errno of the mkdir, 0 when the cgroup was made.
    int error() const { return error_; }
    const fs::path& path() const { return path_; }

    // Moves a process into the cgroup; "" or why not.
    std::string add(pid_t pid) const {
        return write_kernel_file(path_ / "cgroup.procs", std::to_string(pid));
    }
    std::vector<pid_t> procs() const {
        std::vector<pid_t> pids;
        std::ifstream in(path_ / "cgroup.procs");
        for (pid_t pid = 0; in >> pid;) pids.push_back(pid);
        return pids;
    }
    // The CPU time of the cgroup's tasks so far (cpu.stat, which cgroup2 keeps for every
    // cgroup, with or without the cpu controller).
    std::optional<double> usage_ns() const {
        std::ifstream in(path_ / "cpu.stat");
        std::string key;
        std::uint64_t value = 0;
        while (in >> key >> value) {
            if (key == "usage_usec") return static_cast<double>(value) * 1e3;
        }
        return std::nullopt;
    }

  private:
    fs::path path_;
    fs::path home_;
    int error_ = 0;
};

// A child process that spins or sleeps until the end of the scope, when it is killed and
// reaped.
class Child {
  public:
    enum class Does { Spin, Sleep };
    explicit Child(Does what) {
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ != 0) return;
        // It dies with the test, should the test crash before this destructor runs.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(0);
        if (what == Does::Spin) {
            // A session of its own, so that the scheduler's autogroup of it can be given
            // priority apart from the test's.
            ::setsid();
            volatile std::uint64_t loops = 0;
            for (;;) loops = loops + 1;
        }
        for (;;) ::pause();
    }
    ~Child() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }

  private:
    pid_t pid_ = -1;
};

// A cgroup under the cpu controller, made for a test directly below the root of the
// hierarchy that has the controller (cgroup v1's cpu hierarchy, or cgroup2 with +cpu in the
// root's subtree_control), so that the scheduler weighs it against every other group of the
// machine; removed at the end of the scope. Needs root.
class CpuCgroup {
  public:
    // nullptr, with `why_not` set, when no such cgroup can be made here.
    static std::unique_ptr<CpuCgroup> make(const std::string& name, std::string& why_not);
    ~CpuCgroup() = default;

    const fs::path& path() const { return dir_->path(); }
    bool v2() const { return v2_; }
    // Moves a process (all its threads) into the cgroup; "" or why not.
    std::string add(pid_t pid) const { return dir_->add(pid); }
    // cpu.idle = 1 (kernel 5.15 and later): the group's tasks run only when its siblings'
    // do not, as SCHED_IDLE tasks do within a group; "" or why not.
    std::string set_idle() const { return write_kernel_file(path() / "cpu.idle", "1"); }

  private:
    CpuCgroup(std::unique_ptr<CgroupDir> dir, bool v2) : dir_(std::move(dir)), v2_(v2) {}
    std::unique_ptr<CgroupDir> dir_;
    bool v2_ = false;
};

// A child that spins at the highest priority (in `cg` when given), so that on two or more CPUs
// it has one to itself even while other work keeps the machine busy. With autogroups
// (kernel.sched_autogroup_enabled) the nice value only counts within the child's session,
// and the sessions share the CPUs equally, so its session's autogroup gets -20 too.
std::unique_ptr<Child> spin_at_top_priority(const CgroupDir* cg);

}  // namespace itest
