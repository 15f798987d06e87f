// Test support: the real monitord as a child process on a temporary socket, with its own
// NOTIFY_SOCKET so tests see what it tells systemd, and the real monctl.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "interface_check.hpp"
#include "monitor/protocol/varlink_client.hpp"
#include "monitor/unique_fd.hpp"
#include "test_support.hpp"

namespace itest {

using namespace std::chrono_literals;
using test_support::check_reply;
using test_support::ScratchDir;

std::string monitord_bin();
std::string monctl_bin();
// bench-duty-cycle: LOAD_PERCENT SECONDS [MEAN_PERIOD_MS], on every CPU.
std::string duty_cycle_bin();
// bench/profile_burner: two functions burning the CPU 3:1.
std::string profile_burner_bin();

struct RunResult {
    int exit_code = -1;  // -N when killed by signal N
    std::string out;
    std::string err;
};

struct SpawnOptions {
    std::vector<std::string> env;        // "NAME=value" added to (or replacing in) the environment
    std::vector<std::string> unset_env;  // names removed from the environment
    std::optional<uid_t> uid;            // setgid/setuid to this user (and its gid) in the child
    int pass_fd = -1;              // handed over as fd 3 with LISTEN_FDS=1 (socket activation)
    bool new_session = false;      // setsid() in the child, as systemd starts a service
    std::optional<rlim_t> nofile;  // RLIMIT_NOFILE, soft and hard, in the child (LimitNOFILE=)
    // A cgroup directory the child moves itself into (its cgroup.procs) before it drops
    // privileges, as systemd starts a service in its unit's cgroup.
    std::string cgroup;
};

// Runs a program to completion, capturing stdout and stderr. After `timeout` it is killed and
// the test fails, unless `stop_at_timeout`: then it gets SIGTERM, as for a program that runs
// until interrupted.
RunResult run(const std::vector<std::string>& argv, const SpawnOptions& opts = {},
              std::chrono::milliseconds timeout = 30s, bool stop_at_timeout = false);

// The uid of "nobody" (65534 on Debian).
uid_t nobody_uid();

// The perf_event descriptors process `pid` holds (perf stat and perf record have theirs open
// once they count).
int perf_event_fds(pid_t pid);

// `name` in the directories of $PATH, or "" (run() and Process do not search $PATH).
std::string find_in_path(const std::string& name);

// Another program running in the background (monitord-exporter, prometheus), its output in
// files of its own directory; killed when destroyed.
class Process {
  public:
    // Its output goes to `dir`, or to a directory of its own.
    static std::unique_ptr<Process> start(const std::vector<std::string>& argv,
                                          const SpawnOptions& opts = {},
                                          std::unique_ptr<ScratchDir> dir = nullptr);
    ~Process();

    pid_t pid() const { return pid_; }
    const ScratchDir& dir() const { return *dir_; }
    bool alive();
    // Sends `sig` and waits for the exit: the exit code, -N when killed by signal N, or
    // nullopt after `timeout`.
    std::optional<int> stop(int sig, std::chrono::milliseconds timeout = 10s);
    void signal(int sig) { ::kill(pid_, sig); }
    std::string log() const;

  private:
    Process() = default;
    std::unique_ptr<ScratchDir> dir_;
    pid_t pid_ = -1;
    std::optional<int> exit_code_;
};

class Daemon {
  public:
    struct Options {
        std::vector<std::string> args;  // besides --socket
        std::string socket;             // default: <temp dir>/io.monitord.Monitor
        bool pass_socket = true;        // add --socket
        bool wait_ready = true;         // wait for READY=1 (fails the test if it never comes)
        // Add --watchdog none, so that a test daemon never arms the machine's own watchdog.
        bool no_watchdog = true;
        // A program and its arguments that runs the daemon by exec ({"setpriv",
        // "--bounding-set=-syslog"}: a daemon without CAP_SYSLOG).
        std::vector<std::string> wrapper;
        SpawnOptions spawn;
    };

    // Starts monitord. Returns nullptr (after recording a test failure) when it does not
    // become ready within 10 s.
    static std::unique_ptr<Daemon> start(Options opts);
    static std::unique_ptr<Daemon> start() { return start(Options{}); }
    ~Daemon() = default;  // the process is killed if still running

    const std::string& socket() const { return socket_; }
    pid_t pid() const { return process_->pid(); }
    const ScratchDir& dir() const { return process_->dir(); }

    // Waits until a notification containing `needle` arrives (or was already seen).
    bool wait_notification(const std::string& needle, std::chrono::milliseconds timeout = 10s);
    const std::vector<std::string>& notifications();

    // Whether the process is still running.
    bool alive() { return process_->alive(); }
    // Sends `sig` and waits for the exit; returns the exit code, -N when killed by signal N,
    // or std::nullopt after `timeout`.
    std::optional<int> stop(int sig, std::chrono::milliseconds timeout = 10s) {
        return process_->stop(sig, timeout);
    }
    void signal(int sig) { process_->signal(sig); }
    // Everything monitord wrote to stdout and stderr so far.
    std::string log() const { return process_->log(); }

    monitor::varlink::Client connect() const;
    // monctl --socket <socket> ARGS...
    RunResult monctl(std::vector<std::string> args) const;
    // Calls io.monitord.Monitor.<method> and checks the reply against the interface file,
    // strictly (no undeclared fields). Records a test failure on error.
    nlohmann::json call(const std::string& method,
                        const nlohmann::json& params = nlohmann::json::object()) const;
    // Polls GetLoading until it reports at least `samples` machine samples.
    bool wait_samples(std::size_t samples, std::chrono::milliseconds timeout = 10s) const;

  private:
    Daemon() = default;
    void drain_notifications(int timeout_ms);

    std::unique_ptr<Process> process_;
    std::string socket_;
    monitor::UniqueFd notify_fd_;
    std::vector<std::string> notifications_;
};

// A suite whose tests share one daemon, started before the first with the probes off (the
// loading goes unmeasured: these suites measure the perf half) and stopped after the last.
// SetUp() fails a test when the daemon did not start, and skips it without root, saying why
// the suite needs root (its `why_root`).
class SharedDaemonTest : public ::testing::Test {
  protected:
    explicit SharedDaemonTest(std::string why_root) : why_root_(std::move(why_root)) {}
    static void SetUpTestSuite();
    static void TearDownTestSuite();
    void SetUp() override;

    static Daemon* daemon_;

  private:
    std::string why_root_;
};

}  // namespace itest
