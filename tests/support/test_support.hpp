// Helpers the unit and integration tests share: a scratch directory, writing fixture files,
// a child process run as nobody, waiting for a condition, /proc/stat text made from per-CPU
// tick counts, a thread's context switches and the hypervisor's steal time.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <system_error>
#include <thread>

#include "monitor/unique_fd.hpp"

namespace test_support {

// Whether this program was built with the address or the thread sanitizer (the compilers' own
// macros). They slow the daemon and the tests several times over, so a test that measures
// time or shares of a CPU under load runs in the release build only (scripts/test runs that
// first): SKIP_UNDER_SANITIZERS() at its start.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif
#define SKIP_UNDER_SANITIZERS()                                                            \
    do {                                                                                   \
        if (test_support::kSanitized)                                                      \
            GTEST_SKIP() << "measures time under load, which the sanitizers stretch: the " \
                            "release build runs it";                                       \
    } while (false)

// A directory under gtest's temporary directory, removed with its contents at the end of the
// scope: every test's scratch space. path() is empty (and the test failed) when it could not
// be made. For Everyone it is open to all users (0777), for a test's programs that drop root
// (a daemon or a client run as nobody); otherwise only to its owner, as mkdtemp makes it.
class ScratchDir {
  public:
    enum Access { OwnerOnly, Everyone };

    explicit ScratchDir(const std::string& prefix = "monitord-test", Access access = OwnerOnly) {
        std::string tmpl =
            (std::filesystem::path(::testing::TempDir()) / (prefix + "-XXXXXX")).string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
            return;
        }
        path_ = tmpl;
        if (access == Everyone) {
            std::error_code ec;
            std::filesystem::permissions(path_, std::filesystem::perms::all, ec);
            EXPECT_FALSE(ec) << "chmod 0777 " << path_ << ": " << ec.message();
        }
    }
    explicit ScratchDir(Access access) : ScratchDir("monitord-test", access) {}
    ~ScratchDir() {
        std::error_code ec;
        if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

// A Unix stream socket listening at `path` (a stand-in for the daemon's, which nobody
// answers until the test accepts); a failure is the test's.
inline monitor::UniqueFd listening_socket(const std::string& path) {
    monitor::UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << path;
    EXPECT_EQ(::listen(fd.get(), 16), 0) << path;
    return fd;
}

// Writes `text` to `path`, creating the directories above it.
inline void write_file(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

// A /proc and a /sys root that describe a machine to the processor checks: its
// /proc/cpuinfo (none when `cpuinfo` is empty) and, with `core_pmu`, a core PMU under
// /sys/bus/event_source/devices/cpu, with caps/pmu_name when `pmu_name` is given.
class DescribedMachine {
  public:
    DescribedMachine(const std::string& cpuinfo, bool core_pmu, const std::string& pmu_name = "") {
        if (!cpuinfo.empty()) write_file(proc() / "cpuinfo", cpuinfo);
        std::filesystem::create_directories(sys() / "bus/event_source/devices/software");
        if (core_pmu) std::filesystem::create_directories(sys() / "bus/event_source/devices/cpu");
        if (!pmu_name.empty()) {
            write_file(sys() / "bus/event_source/devices/cpu/caps/pmu_name", pmu_name + "\n");
        }
    }
    std::filesystem::path proc() const { return dir_.path() / "proc"; }
    std::filesystem::path sys() const { return dir_.path() / "sys"; }

  private:
    ScratchDir dir_{"monitord-machine"};
};

// What Linux's /proc/cpuinfo says on a 750CXe, the processor the simulated PMU stands for.
inline constexpr const char* kPpc750CxeCpuinfo =
    "processor\t: 0\ncpu\t\t: 750CXe\nclock\t\t: 400.000000MHz\n"
    "revision\t: 2.2 (pvr 0008 2214)\nbogomips\t: 33.20\n";

// nobody and nogroup, as Debian numbers them: the unprivileged user tests switch to.
inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;

// What a child process of run_as_nobody() did: its exit code (-1 when it did not exit) and
// what it wrote to its `out`.
struct ChildResult {
    int code = -1;
    std::string out;
};

// A child process of start_as_nobody(), running.
struct NobodyChild {
    pid_t pid = -1;
    int out = -1;  // the read end of the pipe its `out` comes through
};

// Starts `body` in a child process that first drops root for nobody (uid kNobody, gid
// kNogroup, no supplementary groups) when it runs as root; code 100 when it could not. The
// child exits with what `body` returns, after handing what it put in `out` to the parent.
// Fork before starting threads of the test's own: a thread holding a lock of the allocator
// (the sanitizers') when the child is forked would leave the child waiting for it.
inline NobodyChild start_as_nobody(const std::function<int(std::string& out)>& body) {
    int fds[2];
    if (::pipe(fds) != 0) {
        ADD_FAILURE() << "pipe: " << std::strerror(errno);
        return {};
    }
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(fds[0]);
        if (::geteuid() == 0 &&
            (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0)) {
            ::_exit(100);
        }
        std::string out;
        const int code = body(out);
        for (std::size_t done = 0; done < out.size();) {
            const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
            if (n <= 0) break;
            done += static_cast<std::size_t>(n);
        }
        ::_exit(code);
    }
    ::close(fds[1]);
    return {child, fds[0]};
}

// Waits for the child's exit, and takes what it wrote.
inline ChildResult wait_for(const NobodyChild& child) {
    ChildResult r;
    if (child.out < 0) return r;
    char buf[4096];
    for (ssize_t n; (n = ::read(child.out, buf, sizeof buf)) > 0;)
        r.out.append(buf, std::size_t(n));
    ::close(child.out);
    int status = 0;
    if (child.pid < 0 || ::waitpid(child.pid, &status, 0) != child.pid || !WIFEXITED(status)) {
        ADD_FAILURE() << "the child died, status " << status;
        return r;
    }
    r.code = WEXITSTATUS(status);
    return r;
}

// start_as_nobody(), then wait_for() it.
inline ChildResult run_as_nobody(const std::function<int(std::string& out)>& body) {
    return wait_for(start_as_nobody(body));
}

// Polls `done` every 5 ms until it holds or `timeout` passed; returns its last value.
inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return done();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// Ticks a CPU spent busy (split between user and system) and idle since boot.
struct Ticks {
    std::uint64_t busy = 0;
    std::uint64_t idle = 0;
};

// /proc/stat text for `cpus`, with a machine line that is their sum.
inline std::string stat_text(const std::map<int, Ticks>& cpus) {
    auto line = [](const std::string& label, const Ticks& t) {
        const std::uint64_t system = t.busy / 4;
        return label + " " + std::to_string(t.busy - system) + " 0 " + std::to_string(system) +
               " " + std::to_string(t.idle) + " 0 0 0 0 0 0\n";
    };
    Ticks sum;
    for (const auto& [cpu, t] : cpus) {
        sum.busy += t.busy;
        sum.idle += t.idle;
    }
    std::string text = line("cpu ", sum);
    for (const auto& [cpu, t] : cpus) text += line("cpu" + std::to_string(cpu), t);
    return text + "intr 1234567 0 0\nctxt 7654321\nbtime 1718102754\nprocesses 4242\n";
}

// The fields of a /proc/PID/stat line that TaskUsage reads.
struct TaskFields {
    std::uint64_t utime = 0, stime = 0;
    int threads = 1;
    std::uint64_t start = 100;  // ticks after boot
    int cpu = 0;
};

// A /proc/PID/stat (or task/TID/stat) line as proc(5) writes it: 52 fields, those of `f` set.
inline std::string task_stat_line(int id, const std::string& comm, const TaskFields& f) {
    std::vector<std::string> v(53, "0");  // v[n]: field n (1-based)
    v[3] = "S";
    v[8] = "-1";
    v[14] = std::to_string(f.utime);
    v[15] = std::to_string(f.stime);
    v[20] = std::to_string(f.threads);
    v[22] = std::to_string(f.start);
    v[39] = std::to_string(f.cpu);
    std::string line = std::to_string(id) + " (" + comm + ")";
    for (std::size_t i = 3; i < v.size(); ++i) line += " " + v[i];
    return line + "\n";
}

// The calling thread's context switches so far, voluntary and not, as the scheduler counts
// them (proc(5)).
inline long thread_context_switches() {
    std::ifstream status("/proc/thread-self/status");
    long total = 0;
    for (std::string line; std::getline(status, line);) {
        if (line.find("ctxt_switches:") != std::string::npos) {
            total += std::stol(line.substr(line.find(':') + 1));
        }
    }
    return total;
}

// CPU time the hypervisor has taken from all of this machine's CPUs so far, in nanoseconds
// (/proc/stat's steal column). The task clock counts it, a thread's CPU time does not.
inline double steal_ns() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    std::uint64_t v[8] = {};
    in >> cpu;
    for (auto& x : v) in >> x;
    return static_cast<double>(v[7]) * 1e9 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace test_support
