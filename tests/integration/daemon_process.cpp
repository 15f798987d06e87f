#include "daemon_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace itest {
namespace {

std::string env_or_fail(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') {
        ADD_FAILURE() << name << " is not set; run the tests with meson test";
        return "/nonexistent";
    }
    return v;
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int decode_status(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1;
}

// fork + exec with stdout/stderr to files. Only async-signal-safe calls after fork.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& opts,
            const std::filesystem::path& out, const std::filesystem::path& err) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        std::string_view kv{*e};
        auto name = kv.substr(0, kv.find('='));
        bool drop = name == "LISTEN_FDS" || name == "LISTEN_PID" || name == "NOTIFY_SOCKET";
        for (const auto& u : opts.unset_env) drop = drop || name == u;
        for (const auto& s : opts.env) drop = drop || name == s.substr(0, s.find('='));
        if (!drop) env_strings.emplace_back(kv);
    }
    for (const auto& s : opts.env) env_strings.push_back(s);
    if (opts.pass_fd >= 0) env_strings.emplace_back("LISTEN_FDS=1");
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    // LISTEN_PID must be the child's pid: a slot filled in after fork.
    std::string listen_pid(32, '\0');
    if (opts.pass_fd >= 0) envp.push_back(listen_pid.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    gid_t gid = 0;
    if (opts.uid) {
        const passwd* pw = ::getpwuid(*opts.uid);
        gid = pw != nullptr ? pw->pw_gid : *opts.uid;
    }

    const std::string cgroup_procs = opts.cgroup.empty() ? "" : opts.cgroup + "/cgroup.procs";
    int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out_fd, STDOUT_FILENO);
        ::dup2(err_fd, STDERR_FILENO);
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, STDIN_FILENO);
        if (opts.pass_fd >= 0) {
            if (opts.pass_fd == 3) {
                ::fcntl(3, F_SETFD, 0);  // already in place: just let it survive exec
            } else {
                ::dup2(opts.pass_fd, 3);  // dup2 clears FD_CLOEXEC on the copy
            }
            std::snprintf(listen_pid.data(), listen_pid.size(), "LISTEN_PID=%d", ::getpid());
        }
        if (opts.new_session) ::setsid();
        if (!cgroup_procs.empty()) {
            const int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);  // "0": the writer itself
            ::close(fd);
        }
        if (opts.nofile) {
            const rlimit limit{*opts.nofile, *opts.nofile};
            if (::setrlimit(RLIMIT_NOFILE, &limit) < 0) ::_exit(127);
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (opts.uid) {
            if (::setgroups(0, nullptr) < 0 || ::setgid(gid) < 0 || ::setuid(*opts.uid) < 0) {
                ::_exit(126);
            }
        }
        // A test that dies (a crash, std::terminate) takes what it started with it: a daemon
        // left behind would spin or hold the CPUs while every later test measures them. Set
        // last: a change of credentials clears it.
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(127);
        ::execve(argp[0], argp.data(), envp.data());
        ::_exit(127);
    }
    ::close(out_fd);
    ::close(err_fd);
    return pid;
}

}  // namespace

std::string monitord_bin() {
    return env_or_fail("MONITORD_BIN");
}
std::string monctl_bin() {
    return env_or_fail("MONCTL_BIN");
}
std::string duty_cycle_bin() {
    return env_or_fail("DUTY_CYCLE_BIN");
}

int perf_event_fds(pid_t pid) {
    int n = 0;
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        auto link = std::filesystem::read_symlink(e.path(), ec);
        if (!ec && link.string().find("perf_event") != std::string::npos) ++n;
    }
    return n;
}

std::string profile_burner_bin() {
    return env_or_fail("PROFILE_BURNER_BIN");
}

uid_t nobody_uid() {
    const passwd* pw = ::getpwnam("nobody");
    return pw != nullptr ? pw->pw_uid : 65534;
}

std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const auto file = std::filesystem::path(dir.empty() ? "." : dir) / name;
        if (::access(file.c_str(), X_OK) == 0) return file.string();
    }
    return {};
}

RunResult run(const std::vector<std::string>& argv, const SpawnOptions& opts,
              std::chrono::milliseconds timeout, bool stop_at_timeout) {
    ScratchDir dir{ScratchDir::Everyone};
    pid_t pid = spawn(argv, opts, dir / "out", dir / "err");
    RunResult r;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, stop_at_timeout ? SIGTERM : SIGKILL);
            ::waitpid(pid, &status, 0);
            if (!stop_at_timeout) {
                ADD_FAILURE() << argv[0] << " did not finish within " << timeout.count() << " ms";
            }
            break;
        }
        std::this_thread::sleep_for(5ms);
    }
    r.exit_code = decode_status(status);
    r.out = slurp(dir / "out");
    r.err = slurp(dir / "err");
    return r;
}

std::unique_ptr<Process> Process::start(const std::vector<std::string>& argv,
                                        const SpawnOptions& opts, std::unique_ptr<ScratchDir> dir) {
    std::unique_ptr<Process> p{new Process};
    p->dir_ =
        dir ? std::move(dir)
            : std::make_unique<ScratchDir>(std::filesystem::path{argv.at(0)}.filename().string());
    p->pid_ = spawn(argv, opts, p->dir() / "stdout", p->dir() / "stderr");
    return p;
}

Process::~Process() {
    if (pid_ > 0 && !exit_code_) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }
}

bool Process::alive() {
    if (exit_code_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = decode_status(status);
        return false;
    }
    return true;
}

std::optional<int> Process::stop(int sig, std::chrono::milliseconds timeout) {
    if (!alive()) return exit_code_;
    ::kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (alive()) {
        if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
        std::this_thread::sleep_for(5ms);
    }
    return exit_code_;
}

std::string Process::log() const {
    return slurp(dir() / "stdout") + slurp(dir() / "stderr");
}

std::unique_ptr<Daemon> Daemon::start(Options opts) {
    std::unique_ptr<Daemon> d{new Daemon};
    auto dir = std::make_unique<ScratchDir>(ScratchDir::Everyone);
    d->socket_ = opts.socket.empty() ? (*dir / "io.monitord.Monitor").string() : opts.socket;

    auto notify_path = *dir / "notify";
    d->notify_fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, notify_path.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(d->notify_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
        ADD_FAILURE() << "bind " << notify_path << ": " << std::strerror(errno);
        return nullptr;
    }
    ::chmod(notify_path.c_str(), 0666);

    std::vector<std::string> argv = opts.wrapper;
    argv.push_back(monitord_bin());
    if (opts.pass_socket) {
        argv.push_back("--socket");
        argv.push_back(d->socket_);
    }
    if (opts.no_watchdog) {
        argv.push_back("--watchdog");
        argv.push_back("none");
    }
    argv.insert(argv.end(), opts.args.begin(), opts.args.end());
    opts.spawn.env.push_back("NOTIFY_SOCKET=" + notify_path.string());
    d->process_ = Process::start(argv, opts.spawn, std::move(dir));

    if (opts.wait_ready && !d->wait_notification("READY=1")) {
        ADD_FAILURE() << "monitord did not report READY=1 within 10 s; its log:\n" << d->log();
        return nullptr;
    }
    return d;
}

void Daemon::drain_notifications(int timeout_ms) {
    pollfd p{notify_fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(notify_fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0) return;
        notifications_.emplace_back(buf, static_cast<std::size_t>(n));
    }
}

const std::vector<std::string>& Daemon::notifications() {
    drain_notifications(0);
    return notifications_;
}

bool Daemon::wait_notification(const std::string& needle, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (const auto& n : notifications_) {
            if (n.find(needle) != std::string::npos) return true;
        }
        if (std::chrono::steady_clock::now() > deadline || !alive()) {
            drain_notifications(0);
            for (const auto& n : notifications_) {
                if (n.find(needle) != std::string::npos) return true;
            }
            return false;
        }
        drain_notifications(50);
    }
}

monitor::varlink::Client Daemon::connect() const {
    auto c = monitor::varlink::Client::connect(socket_);
    if (!c) throw std::runtime_error(c.error().message);
    c->set_timeout(10s);
    return std::move(*c);
}

RunResult Daemon::monctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {monctl_bin(), "--socket", socket_});
    return run(args);
}

nlohmann::json Daemon::call(const std::string& method, const nlohmann::json& params) const {
    auto client = connect();
    return test_support::call_checked(client, method, params);
}

bool Daemon::wait_samples(std::size_t samples, std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        auto j = call("GetLoading");
        const auto& p =
            j.value("machine", nlohmann::json::object()).value("procstat", nlohmann::json());
        if (p.is_object() && p.value("samples", 0u) >= samples) return true;
        std::this_thread::sleep_for(100ms);
    }
    return false;
}

Daemon* SharedDaemonTest::daemon_ = nullptr;

void SharedDaemonTest::SetUpTestSuite() {
    daemon_ = Daemon::start({.args = {"--probe", "off"}}).release();
    ASSERT_TRUE(daemon_);
}

void SharedDaemonTest::TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
}

void SharedDaemonTest::SetUp() {
    ASSERT_TRUE(daemon_) << "the daemon did not start";
    if (::geteuid() != 0) GTEST_SKIP() << why_root_;
}

}  // namespace itest
