#include "perf_commands.hpp"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "duration.hpp"
#include "exit_status.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/caller_rights.hpp"
#include "monitor/perf/derived_metrics.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/daemon_client.hpp"
#include "monitor/protocol/profile_messages.hpp"
#include "monitor/runtime/counter_run.hpp"
#include "monitor/status.hpp"
#include "perf_stat_views.hpp"
#include "perf_views.hpp"
#include "pprof_output.hpp"

namespace monctl {

using monitor::fail;
using monitor::Result;
using monitor::Status;
using monitor::protocol::DaemonClient;
using nlohmann::json;
namespace protocol = monitor::protocol;

namespace {

int report_error(const monitor::Error& e) {
    std::fprintf(stderr, "monctl: %s\n", e.message.c_str());
    return kExitError;
}

protocol::CounterRequest request_of(const PerfOptions& o) {
    protocol::CounterRequest r;
    r.events = o.events;
    using enum protocol::TargetRequest::Kind;
    auto& t = r.target;
    if (o.per_cpu) t.kind = Each;
    t.per = o.per;
    if (o.cpus.size() == 1 && !o.per_cpu) {
        t.kind = Cpu;
        t.cpu = o.cpus.front();
    } else {
        t.cpus = o.cpus;  // perf stat -C 0,2: those CPUs added up, or each with -A
    }
    if (o.pids.size() == 1) {
        t.kind = Process;
        t.pid = o.pids.front();
    } else if (!o.pids.empty()) {
        t.kind = Process;
        t.pids.assign(o.pids.begin(), o.pids.end());  // perf stat -p 42,43: added up
    }
    if (!o.cgroup.empty()) {
        t.kind = Cgroup;
        t.cgroup = o.cgroup;
    }
    if (!o.unit.empty()) {
        t.kind = Unit;
        t.unit = o.unit;
    }
    // --mux takes only these names (CLI11 checks them).
    r.mux = monitor::value_named(protocol::kMuxModeNames, o.mux).value_or(r.mux);
    if (o.slice_ms) r.slice_ms = *o.slice_ms;
    if (o.counters) r.counter_budget = *o.counters;
    r.sample_every = o.sample_every;
    r.metrics = o.metrics;
    return r;
}

// Counting needs events, or metrics that bring theirs.
bool no_events(const PerfOptions& o) {
    if (!o.events.empty() || !o.metrics.empty()) return false;
    std::fprintf(stderr,
                 "monctl: nothing to count: give events (-e task-clock,...) or metrics (-M "
                 "sched); monctl perf list [--metrics] lists them\n");
    return true;
}

// The words for the processes of -p: "its"/"it starts" for one, "their"/"they start" for
// several.
struct ProcessWords {
    std::string_view its;
    std::string_view starts;
};
ProcessWords process_words(const PerfOptions& o) {
    if (o.pids.size() <= 1) return {"its", "it starts"};
    return {"their", "they start"};
}

// `threads`: how many threads of a process the daemon counts from the start (`perf read` and
// `perf stop` are not told the pid of the session they show).
std::string target_text(const PerfOptions& o, std::optional<int> threads = std::nullopt) {
    // "each of cpu0, cpu2", "each core of cpu0, cpu2"; "each CPU", "each core".
    const std::string level{
        o.per == monitor::CpuLevel::Cpu ? "" : name_of(monitor::kCpuLevelNames, o.per)};
    if (!o.cpus.empty()) {
        return fmt::format("{}cpu{}",
                           o.per_cpu ? "each " + (level.empty() ? "" : level + " ") + "of " : "",
                           fmt::join(o.cpus, ", cpu"));
    }
    const std::string processes =
        o.pids.empty()
            ? std::string{"a process"}
            : fmt::format("process{} {}", o.pids.size() == 1 ? "" : "es", fmt::join(o.pids, ", "));
    const auto words = process_words(o);
    if (threads) {
        return fmt::format("{} ({} {} thread{}, and the threads and children {})", processes,
                           words.its, format_count(static_cast<std::uint64_t>(*threads)),
                           *threads == 1 ? "" : "s", words.starts);
    }
    if (!o.pids.empty()) {
        return fmt::format("{} and the threads and children {}", processes, words.starts);
    }
    if (!o.cgroup.empty()) return fmt::format("cgroup {}", o.cgroup);
    if (!o.unit.empty()) return fmt::format("unit {}", o.unit);
    return o.per_cpu ? "each " + (level.empty() ? std::string{"CPU"} : level) : "all CPUs";
}

// The file execvp() runs for `name`: `name` itself when it has a '/', else the first
// executable of that name in $PATH; empty when there is none (exec will say so).
std::filesystem::path executable_for(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): one thread
    std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        const auto colon = dirs.find(':');
        std::filesystem::path file =
            std::filesystem::path(colon == 0 ? "." : std::string(dirs.substr(0, colon))) / name;
        if (::access(file.c_str(), X_OK) == 0) return file;
        if (colon == std::string_view::npos) return {};
        dirs.remove_prefix(colon + 1);
    }
}

// A command started stopped before its exec: it execs when go() is called, and its exec's
// failure is known after that.
class WaitingCommand {
  public:
    static Result<WaitingCommand> start(const std::vector<std::string>& command) {
        WaitingCommand c;
        // Close-on-exec: `go` closes at the exec, `failed` carries errno when exec fails.
        if (::pipe2(c.go_, O_CLOEXEC) < 0 || ::pipe2(c.failed_, O_CLOEXEC) < 0) {
            return fail(Status::IoErr, fmt::format("pipe: {}", monitor::errno_message(errno)));
        }
        std::vector<char*> argv;
        argv.reserve(command.size() + 1);
        for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        c.pid_ = ::fork();
        if (c.pid_ < 0) return fail(Status::TskSpawn, monitor::errno_message(errno));
        if (c.pid_ == 0) {
            ::close(c.go_[1]);
            ::close(c.failed_[0]);
            char byte = 0;
            if (::read(c.go_[0], &byte, 1) != 1) ::_exit(127);
            ::execvp(argv[0], argv.data());
            int err = errno;
            (void)::write(c.failed_[1], &err, sizeof err);
            ::_exit(127);
        }
        ::close(c.go_[0]);
        ::close(c.failed_[1]);
        c.go_[0] = c.failed_[1] = -1;
        return c;
    }
    WaitingCommand(WaitingCommand&& o) noexcept
        : pid_(std::exchange(o.pid_, -1)),
          go_{std::exchange(o.go_[0], -1), std::exchange(o.go_[1], -1)},
          failed_{std::exchange(o.failed_[0], -1), std::exchange(o.failed_[1], -1)} {}
    WaitingCommand& operator=(WaitingCommand&&) = delete;
    ~WaitingCommand() {
        for (int fd : {go_[0], go_[1], failed_[0], failed_[1]}) {
            if (fd >= 0) ::close(fd);
        }
        if (pid_ > 0) {  // never started, or not waited for: not left behind
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    // Lets it exec; 0, or the errno of a failed exec.
    int go() {
        (void)::write(go_[1], "x", 1);
        ::close(go_[1]);
        go_[1] = -1;
        int err = 0;
        const bool failed = ::read(failed_[0], &err, sizeof err) == sizeof err;
        ::close(failed_[0]);
        failed_[0] = -1;
        return failed ? err : 0;
    }
    // It was waited for elsewhere.
    void reaped() { pid_ = -1; }
    // Waits for its end: its wait status.
    int wait() {
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        return status;
    }

  private:
    WaitingCommand() = default;
    pid_t pid_ = -1;
    int go_[2] = {-1, -1};
    int failed_[2] = {-1, -1};
};

int exit_code_of(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return kExitError;
}

// Waits for `child` to end while doing what `run` asks when it asks (a failure is said and
// the counting goes on as it can), calling `period` when a period ended; returns the child's
// wait status and fills `usage` with its resources (its user and system time).
int wait_for_command(WaitingCommand& cmd, monitor::CounterRun& run, rusage& usage,
                     const std::function<void()>& period) {
    const pid_t child = cmd.pid();
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
    int status = 0;
    auto advance = [&] {
        auto r = run.advance(std::chrono::steady_clock::now());
        if (!r) {
            report_error(r.error());
        } else if (r->period_ended) {
            period();
        }
    };
    for (;;) {
        const auto due = run.next_due();
        if (pidfd >= 0 && due != std::chrono::steady_clock::time_point::max()) {
            // Readable when the child has ended.
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
                due - std::chrono::steady_clock::now());
            pollfd p{pidfd, POLLIN, 0};
            const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, wait.count())));
            if (n == 0 || (n < 0 && errno == EINTR)) {
                advance();
                continue;
            }
        } else if (pidfd < 0 && due != std::chrono::steady_clock::time_point::max()) {
            // No pidfd (a kernel before 5.3): look at the child between the run's turns.
            const pid_t r = ::wait4(child, &status, WNOHANG, &usage);
            if (r == child) break;
            if (r < 0 && errno != EINTR) break;
            std::this_thread::sleep_until(due);
            advance();
            continue;
        }
        const pid_t r = ::wait4(child, &status, 0, &usage);
        if (r == child || (r < 0 && errno != EINTR)) break;
    }
    if (pidfd >= 0) ::close(pidfd);
    cmd.reaped();
    return status;
}

Result<DaemonClient> connect(const PerfOptions& o) {
    return DaemonClient::connect(o.socket);
}

// How a stream of reports is shown: what was counted, in perf's words, and the time of the
// periods so far (perf stat -I's time column).
struct ReportState {
    std::string what;
    bool first = true;
    double time = 0;
};

// One report as -x, --csv or the text ask.
void print_report(const PerfOptions& o, const protocol::CounterReport& report, ReportState& state,
                  std::ostream& out, const RunSpread* spread = nullptr) {
    StatLayout layout{.spread = spread};
    if (report.period) {
        state.time += report.elapsed;
        layout.time = state.time;
        layout.time_header = state.first;
    }
    if (o.csv) {
        out << format_counter_csv(report, state.first, std::chrono::system_clock::now());
    } else if (o.separator) {
        out << format_counter_separated(report, *o.separator, layout);
    } else if (report.threads) {
        // A process: how many of its threads were there to be opened (of several: theirs).
        const bool process = state.what.starts_with("process");
        const auto words = process_words(o);
        out << format_counter_report(
            report,
            fmt::format("{} ({}{} {} thread{} at the start, and those {})", state.what,
                        process ? "" : "a process: ", words.its,
                        format_count(static_cast<std::uint64_t>(*report.threads)),
                        *report.threads == 1 ? "" : "s", words.starts),
            layout);
    } else {
        out << format_counter_report(report, state.what, layout);
    }
    out.flush();
    state.first = false;
}

// A reply that carries a report (CollectOut, ReportOut).
template <typename Out>
void show_report(const PerfOptions& o, const Out& reply, ReportState& state, std::ostream& out) {
    if (o.json) {
        out << protocol::to_json(reply).dump() << std::endl;
        return;
    }
    print_report(o, reply.report, state, out);
}

// Where the counts go: -o FILE, with perf's header line, or `otherwise`.
class CountsOutput {
  public:
    static Result<CountsOutput> open(const PerfOptions& o, std::ostream& otherwise) {
        CountsOutput c(otherwise);
        if (o.output.empty()) return c;
        c.file_ = std::make_unique<std::ofstream>(o.output, std::ios::trunc);
        if (!*c.file_) {
            return fail(Status::BadArg, fmt::format("-o {}: cannot write it: {}", o.output,
                                                    monitor::errno_message(errno)));
        }
        if (!o.json && !o.csv) {
            // perf stat's: "# started on Sun Nov 29 19:20:33 2026", then a blank line.
            const std::time_t now = std::time(nullptr);
            std::tm tm{};
            ::localtime_r(&now, &tm);
            *c.file_ << fmt::format("# started on {:%a %b %e %H:%M:%S %Y}\n\n", tm);
        }
        return c;
    }
    std::ostream& stream() { return file_ ? *file_ : *otherwise_; }

  private:
    explicit CountsOutput(std::ostream& otherwise) : otherwise_(&otherwise) {}
    std::ostream* otherwise_;
    std::unique_ptr<std::ofstream> file_;
};

// --interval or perf's -I (a bare number in milliseconds, as perf's); empty for neither.
Result<std::string> interval_of(const PerfOptions& o) {
    if (o.interval_print.empty()) return o.interval;
    if (!o.interval.empty()) {
        return fail(Status::BadArg, "-I and --interval: give one (they say the same)");
    }
    const bool digits =
        std::ranges::all_of(o.interval_print, [](char c) { return c >= '0' && c <= '9'; });
    return digits ? o.interval_print + "ms" : o.interval_print;
}

// The modes sampled, as --user and --kernel ask.
Result<protocol::SampledModes> sampled_mode(const PerfOptions& o) {
    if (o.user && o.kernel) {
        return fail(Status::BadArg,
                    "--user and --kernel: give one (both modes are sampled when "
                    "neither is given)");
    }
    using enum protocol::SampledModes;
    return o.user ? User : o.kernel ? Kernel : Both;
}

// `text` (a duration) in milliseconds; nullopt for an empty text.
Result<std::optional<std::chrono::milliseconds>> optional_duration(const std::string& text) {
    if (text.empty()) return std::nullopt;
    auto ms = parse_duration_ms(text);
    if (!ms) return std::unexpected(ms.error());
    return std::chrono::milliseconds(*ms);
}

}  // namespace

int perf_info(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    auto reply = c->call(monitor::protocol::method::GetPmuInfo);
    if (!reply) return report_error(reply.error());
    if (o.json) {
        std::cout << protocol::to_json(*reply).dump(2) << '\n';
        return kExitOk;
    }
    std::cout << format_pmus(reply->pmus, reply->paranoid);
    return kExitOk;
}

int perf_list(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    if (o.list_metrics) {
        auto reply = c->call(monitor::protocol::method::ListMetrics, protocol::NoInput{});
        if (!reply) return report_error(reply.error());
        if (o.json) {
            std::cout << protocol::to_json(*reply).dump(2) << '\n';
            return kExitOk;
        }
        std::cout << (o.list_all ? format_all_metric_definitions(reply->metrics)
                                 : format_metric_definitions(reply->metrics));
        return kExitOk;
    }
    protocol::ListEventsIn in;
    if (!o.pmu.empty()) in.pmu = o.pmu;
    auto reply = c->call(monitor::protocol::method::ListEvents, in);
    if (!reply) return report_error(reply.error());
    if (o.json) {
        std::cout << protocol::to_json(*reply).dump(2) << '\n';
        return kExitOk;
    }
    std::cout << format_events(reply->events);
    return kExitOk;
}

int perf_plan(const PerfOptions& o) {
    if (no_events(o)) return kExitUsage;
    auto c = connect(o);
    if (!c) return report_error(c.error());
    auto reply =
        c->call(monitor::protocol::method::PlanCounters, protocol::CounterRequestIn{request_of(o)});
    if (!reply) return report_error(reply.error());
    if (o.json) {
        std::cout << protocol::to_json(*reply).dump(2) << '\n';
        return kExitOk;
    }
    std::cout << format_plan(reply->plan);
    return kExitOk;
}

int perf_collect(const PerfOptions& o) {
    if (no_events(o)) return kExitUsage;
    auto duration = parse_duration_ms(o.duration);
    if (!duration) return report_error(duration.error());
    auto interval_text = interval_of(o);
    if (!interval_text) return report_error(interval_text.error());
    auto interval = optional_duration(*interval_text);
    if (!interval) return report_error(interval.error());
    const protocol::CollectCountersIn in{.request = request_of(o),
                                         .duration = std::chrono::milliseconds(*duration),
                                         .interval = *interval};
    auto output = CountsOutput::open(o, std::cout);
    if (!output) return report_error(output.error());
    std::ostream& out = output->stream();
    auto c = connect(o);
    if (!c) return report_error(c.error());
    c->set_timeout(std::chrono::milliseconds(0));  // the reply comes when the duration ends
    ReportState state{.what = stat_target_words(in.request.target)};
    if (in.interval) {
        auto r = c->stream(monitor::protocol::method::CollectCounters, in,
                           [&](const protocol::CollectOut& reply) {
                               show_report(o, reply, state, out);
                               return static_cast<bool>(out);
                           });
        return r ? kExitOk : report_error(r.error());
    }
    auto reply = c->call(monitor::protocol::method::CollectCounters, in);
    if (!reply) return report_error(reply.error());
    show_report(o, *reply, state, out);
    return kExitOk;
}

int perf_start(const PerfOptions& o) {
    if (no_events(o)) return kExitUsage;
    auto c = connect(o);
    if (!c) return report_error(c.error());
    auto reply = c->call(monitor::protocol::method::StartCounters,
                         protocol::CounterRequestIn{request_of(o)});
    if (!reply) return report_error(reply.error());
    if (o.json) {
        std::cout << protocol::to_json(*reply).dump(2) << '\n';
        return kExitOk;
    }
    std::cout << "Counting on " << target_text(o, reply->threads)
              << "; `monctl perf stop` ends it.\n"
              << format_plan(reply->plan);
    return kExitOk;
}

int perf_read(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    auto reply = c->call(monitor::protocol::method::ReadCounters);
    if (!reply) return report_error(reply.error());
    ReportState state{.what = "the running session"};
    show_report(o, *reply, state, std::cout);
    return kExitOk;
}

int perf_stop(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    auto reply = c->call(monitor::protocol::method::StopCounters);
    if (!reply) return report_error(reply.error());
    ReportState state{.what = "the running session"};
    show_report(o, *reply, state, std::cout);
    return kExitOk;
}

int perf_reset(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    protocol::CounterSessionIn in;
    if (!o.session.empty()) in.session = o.session;
    auto reply = c->call(monitor::protocol::method::ResetCounters, in);
    if (!reply) return report_error(reply.error());
    if (!o.json && !o.csv && !o.separator) {
        std::cout << (o.session.empty() ? std::string{"The running session"}
                                        : fmt::format("Standing session '{}'", o.session))
                  << " counts from zero again; its counts up to the reset:\n";
    }
    ReportState state{.what = o.session.empty() ? std::string{"the running session"}
                                                : fmt::format("'{}'", o.session)};
    show_report(o, *reply, state, std::cout);
    return kExitOk;
}

int perf_pause(const PerfOptions& o, bool pause) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    protocol::CounterSessionIn in;
    if (!o.session.empty()) in.session = o.session;
    auto reply = c->call(pause ? monitor::protocol::method::PauseCounters
                               : monitor::protocol::method::ResumeCounters,
                         in);
    if (!reply) return report_error(reply.error());
    if (!o.json && !o.csv && !o.separator) {
        std::cout << (o.session.empty() ? std::string{"The running session"}
                                        : fmt::format("Standing session '{}'", o.session))
                  << (pause ? " is paused (`monctl perf resume` counts again); its counts up to "
                              "the pause:\n"
                            : " counts again; its counts so far:\n");
    }
    ReportState state{.what = o.session.empty() ? std::string{"the running session"}
                                                : fmt::format("'{}'", o.session)};
    show_report(o, *reply, state, std::cout);
    return kExitOk;
}

int perf_show(const PerfOptions& o) {
    auto c = connect(o);
    if (!c) return report_error(c.error());
    protocol::StandingCountersIn in;
    if (!o.session.empty()) in.name = o.session;
    auto reply = c->call(monitor::protocol::method::GetStandingCounters, in);
    if (!reply) return report_error(reply.error());
    if (o.json) {
        std::cout << protocol::to_json(*reply).dump(2) << '\n';
        return kExitOk;
    }
    const auto& sessions = reply->sessions;
    if (sessions.empty()) {
        std::cout << "No standing sessions: monitord.conf has no [[counters]] tables (see "
                     "monitord.conf(5)).\n";
        return kExitOk;
    }
    bool first = true;
    for (const auto& s : sessions) {
        if (!first) std::cout << '\n';
        first = false;
        std::cout << format_standing_session(s);
    }
    return kExitOk;
}

namespace {

// One run of perf stat's command, counted from its exec to its exit.
struct CommandRun {
    int status = 0;
    protocol::CounterReport report;
    double user_seconds = 0;
    double system_seconds = 0;
};

double seconds_of(const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

// What the runs of a command so far have found.
struct RunsSoFar {
    bool exec_failed = false;     // the command could not be run
    bool told_user_only = false;  // the user was told that user mode only is counted
};

// Runs the command once, counted as `options` say; `period` is called with each period's report
// (with an interval). An exec that failed is the error 127 is returned for.
Result<CommandRun> run_counted(const PerfOptions& o, monitor::perf::EventCatalog& catalog,
                               monitor::perf::SessionOptions options,
                               std::optional<std::chrono::milliseconds> interval,
                               const std::function<void(const protocol::CounterReport&)>& period,
                               RunsSoFar& so_far) {
    // The command waits to exec until its counters are open.
    auto cmd = WaitingCommand::start(o.command);
    if (!cmd) return std::unexpected(cmd.error());
    options.target.kind = monitor::perf::TargetKind::Process;
    options.target.pid = cmd->pid();
    options.target.enable_on_exec = true;
    options.target.program = executable_for(o.command.front());
    auto start = [&] {
        return monitor::perf::PerfSession::start(
            catalog, std::make_unique<monitor::perf::PerfEventDevice>(), options);
    };
    auto session = start();
    if (!session && session.error().status == Status::Perm && ::geteuid() != 0) {
        // As perf stat does: a user the kernel lets count user mode only counts that, and is
        // told so (the events are named with ":u" added).
        const auto rights = monitor::perf::CallerRights::unprivileged(
            ::getuid(), ::getgid(), monitor::perf::read_perf_sysctls());
        if (!rights.kernel()) {
            options.user_only = rights.kernel_refusal();
            auto user = start();
            if (user && !std::exchange(so_far.told_user_only, true)) {
                std::fprintf(stderr, "monctl: counting user mode only: %s\n",
                             options.user_only.c_str());
            }
            if (user || user.error().status != Status::Perm) session = std::move(user);
        }
    }
    if (!session) return std::unexpected(session.error());
    const int err = cmd->go();
    if (err != 0) {
        so_far.exec_failed = true;
        return fail(Status::TskSpawn,
                    fmt::format("cannot run {}: {}", o.command[0], monitor::errno_message(err)));
    }
    // The run says when its counters need care (the sets' turns, the reads of narrow
    // counters, the periods' ends); in between, this waits for the command's end.
    monitor::CounterRun run(std::move(*session), {.interval = interval},
                            std::chrono::steady_clock::now());
    rusage usage{};
    CommandRun done;
    protocol::CounterReport shown;
    auto show_period = [&](const monitor::perf::PerfReport& counts, std::int64_t number) {
        // A process target: counted on no one CPU, so none is offline.
        protocol::make_report(run.session().plan(), counts, {}, number, false, {}, shown);
        shown.threads.reset();  // a command is counted from its exec: all its threads
        period(shown);
    };
    std::optional<monitor::perf::PerfReport> at_last_period;
    done.status = wait_for_command(*cmd, run, usage, [&] {
        show_period(run.period(), run.periods());
        at_last_period = run.totals();
    });
    if (auto r = run.finish(); !r) return std::unexpected(r.error());
    if (interval) {
        // As perf stat -I: the part of a period the command ran before it ended, the last.
        monitor::perf::PerfReport rest = run.totals();
        if (at_last_period) rest.subtract(*at_last_period);
        show_period(rest, run.periods() + 1);
    }
    done.report =
        protocol::make_report(run.session().plan(), run.totals(), {}, std::nullopt, true, {});
    done.report.threads.reset();
    done.user_seconds = seconds_of(usage.ru_utime);
    done.system_seconds = seconds_of(usage.ru_stime);
    return done;
}

}  // namespace

int perf_stat(const PerfOptions& o) {
    if (o.command.empty()) {
        return report_error({Status::BadArg,
                             "perf stat needs a command: monctl perf stat -- "
                             "CMD ARGS"});
    }
    auto interval_text = interval_of(o);
    if (!interval_text) return report_error(interval_text.error());
    auto interval = optional_duration(*interval_text);
    if (!interval) return report_error(interval.error());
    if (o.repeat < 1) {
        return report_error(
            {Status::BadArg, fmt::format("-r {}: the command runs at least once", o.repeat)});
    }
    if (o.repeat > 1 && *interval) {
        return report_error({Status::BadArg, "-r and -I: give one (perf stat takes one too)"});
    }
    auto catalog = monitor::perf::EventCatalog::create();
    if (!catalog) return report_error(catalog.error());
    PerfOptions counted = o;
    if (counted.events.empty()) {
        counted.events =
            "perf::TASK-CLOCK,perf::CONTEXT-SWITCHES,perf::CPU-MIGRATIONS,perf::PAGE-FAULTS";
    }
    auto options = protocol::counting_options(request_of(counted));
    if (!options) return report_error(options.error());
    // The counts go to stderr, as perf stat's do, so that the command's output stays its own;
    // or to -o's file.
    auto output = CountsOutput::open(o, std::cerr);
    if (!output) return report_error(output.error());
    std::ostream& out = output->stream();
    std::string what = "'";
    for (const auto& word : o.command) what += (what.size() > 1 ? " " : "") + word;
    what += "'";
    ReportState state{.what = what};

    // Like perf stat and time: ^C reaches the command, and the counts are still shown.
    struct sigaction ignore {
    }, old_int{}, old_quit{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, &ignore, &old_int);
    ::sigaction(SIGQUIT, &ignore, &old_quit);
    std::vector<CommandRun> runs;
    RunsSoFar so_far;
    std::optional<monitor::Error> error;
    for (int i = 0; i < o.repeat; ++i) {
        auto run = run_counted(
            o, *catalog, *options, *interval,
            [&](const protocol::CounterReport& period) {
                if (o.json) {
                    out << protocol::to_json(period).dump() << std::endl;
                } else {
                    print_report(o, period, state, out);
                }
            },
            so_far);
        if (!run) {
            error = run.error();
            break;
        }
        runs.push_back(std::move(*run));
    }
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    if (so_far.exec_failed) {
        std::fprintf(stderr, "monctl: %s\n", error->message.c_str());
        return 127;
    }
    if (error) return report_error(*error);

    std::vector<protocol::CounterReport> reports;
    reports.reserve(runs.size());
    for (const auto& r : runs) reports.push_back(r.report);
    if (o.json) {
        for (const auto& r : reports) out << protocol::to_json(r).dump(2) << '\n';
        return exit_code_of(runs.back().status);
    }
    if (*interval) {
        // As perf stat -I: the last period ends the output (the periods add up to the whole).
        out.flush();
        return exit_code_of(runs.back().status);
    }
    if (runs.size() == 1) {
        print_report(o, reports.front(), state, out);
        if (!o.csv && !o.separator) {
            // perf stat's last lines: the command's own time, from its resource usage.
            out << fmt::format("\n {:>17.9f} seconds user\n {:>17.9f} seconds sys\n\n",
                               runs.front().user_seconds, runs.front().system_seconds);
        }
    } else {
        const auto averaged = average_runs(reports);
        if (o.csv) {
            for (const auto& r : reports) print_report(o, r, state, out);
        } else if (averaged) {
            print_report(o, averaged->mean, state, out, &averaged->spread);
            if (!o.separator) out << '\n';
        }
    }
    out.flush();
    return exit_code_of(runs.back().status);
}

int perf_profile(const PerfOptions& o) {
    protocol::ProfileRequest request;
    request.event = o.events;
    request.period = o.period;
    request.frequency = o.frequency;
    auto mode = sampled_mode(o);
    if (!mode) return report_error(mode.error());
    request.mode = *mode;
    request.top = o.top;
    // The pprof file has every function, not only the table's: the daemon sends them all, and
    // the table is cut here to the lines asked for (keep_top).
    const bool pprof = !o.pprof.empty();
    if (pprof) request.top = 0;
    request.callchain = o.callchain || !o.folded.empty();
    if (!o.call_graph.empty()) {
        if (auto ok = protocol::parse_call_graph(o.call_graph, request); !ok) {
            return report_error(ok.error());
        }
    }
    if (!o.range.empty()) {
        auto range = protocol::parse_address_range(o.range);
        if (!range) return report_error(range.error());
        if (auto ok = protocol::check_range(*range); !ok) return report_error(ok.error());
        request.range = *range;
    }
    const auto where = request_of(o).target;
    request.target = where;
    const bool command = !o.command.empty();
    if (command && where.kind != protocol::TargetRequest::Kind::All) {
        return report_error({Status::BadArg, fmt::format("a command is its own target: give it "
                                                         "or {}, not both",
                                                         protocol::target_text(where))});
    }
    protocol::ProfileIn in;
    // A command runs until it exits; the other targets for 5 s unless told.
    const std::string duration = o.profile_duration.empty() && !command ? "5s" : o.profile_duration;
    auto ms = optional_duration(duration);
    if (!ms) return report_error(ms.error());
    in.duration = *ms;
    auto interval_text = interval_of(o);
    if (!interval_text) return report_error(interval_text.error());
    auto interval = optional_duration(*interval_text);
    if (!interval) return report_error(interval.error());
    in.interval = *interval;
    // The folded stacks' file, made before anything runs: a bad path is said at once.
    std::ofstream folded_file;
    if (!o.folded.empty() && o.folded != "-") {
        folded_file.open(o.folded, std::ios::trunc);
        if (!folded_file) {
            return report_error(
                {Status::BadArg, fmt::format("--folded {}: cannot write it: {}", o.folded,
                                             monitor::errno_message(errno))});
        }
    }
    // So is the pprof file's. A clock event's samples are CPU time there too (pprof_context):
    // the event is resolved as the daemon resolves it; one that does not resolve here gets
    // the samples alone.
    std::optional<PprofFile> pprof_file;
    monitor::perf::EventSpec sampled;
    if (pprof) {
        auto file = PprofFile::open(o.pprof);
        if (!file) return report_error(file.error());
        pprof_file.emplace(std::move(*file));
        if (auto catalog = monitor::perf::EventCatalog::create()) {
            auto spec = catalog->resolve(request.event.empty() ? monitor::perf::kDefaultProfileEvent
                                                               : request.event);
            if (spec) sampled = std::move(*spec);
        }
    }
    auto c = connect(o);
    if (!c) return report_error(c.error());
    c->set_timeout(std::chrono::milliseconds(0));  // the reply comes when the profile ends

    std::optional<WaitingCommand> cmd;
    if (command) {
        auto started = WaitingCommand::start(o.command);
        if (!started) return report_error(started.error());
        cmd.emplace(std::move(*started));
        request.target = {.kind = protocol::TargetRequest::Kind::Process, .pid = cmd->pid()};
        request.start_at_exec = true;
    }
    in.request = request;

    // Like perf record: ^C reaches the command, and its profile is still shown.
    struct sigaction ignore {
    }, old_int{}, old_quit{};
    if (cmd) {
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGINT, &ignore, &old_int);
        ::sigaction(SIGQUIT, &ignore, &old_quit);
    }
    int exec_error = 0;
    bool shown = false;
    bool went = false;  // the command was let go to its exec
    // The pprof file is written as the final message comes; an error is said after the table.
    std::optional<monitor::Error> pprof_error;
    auto r =
        c->stream(monitor::protocol::method::Profile, in, [&](const protocol::ProfileOut& reply) {
            if (reply.started) {
                // A command that cannot be run exits at once, which ends its profile.
                if (cmd) exec_error = cmd->go();
                went = true;
                return true;
            }
            if (exec_error != 0) return true;  // nothing ran: nothing to show
            // A command's profile goes to stderr, as perf stat's counts do, so that the command's
            // output stays its own; so does the profile whose stacks go to standard output.
            std::ostream& out = cmd || o.folded == "-" ? std::cerr : std::cout;
            if (!reply.report) return true;  // a reply of a newer daemon with neither
            const auto& m = *reply.report;
            if (pprof_file && m.final) {
                const auto start = std::chrono::system_clock::now() -
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::duration<double>(m.elapsed));
                auto written = pprof_file->write(
                    m,
                    pprof_context(
                        sampled, request,
                        std::chrono::time_point_cast<std::chrono::system_clock::duration>(start)));
                if (!written) pprof_error = written.error();
            }
            // With --pprof: the lines asked for (the daemon sent them all).
            const std::size_t top = pprof ? static_cast<std::size_t>(o.top) : 0;
            if (m.final && !o.folded.empty()) {
                // The whole run's stacks, "app;main;burn 42" a line, as flamegraph.pl reads them.
                std::ostream& f = o.folded == "-" ? std::cout : folded_file;
                for (const auto& s : m.report.stacks) f << s.name << ' ' << s.samples << '\n';
                if (!f.flush()) return false;
            }
            if (o.json) {
                auto j = protocol::to_json(reply);
                if (auto it = j.find("report"); it != j.end()) keep_top(*it, top);
                out << j.dump() << std::endl;
            } else {
                out << (shown || cmd ? "\n" : "") << format_profile(m, top) << std::flush;
            }
            shown = true;
            return static_cast<bool>(out);
        });
    int status = 0;
    if (cmd) {
        // A command never let go (the daemon refused the profile) is killed as it waits,
        // when `cmd` ends.
        if (went) status = cmd->wait();
        ::sigaction(SIGINT, &old_int, nullptr);
        ::sigaction(SIGQUIT, &old_quit, nullptr);
    }
    if (exec_error != 0) {
        std::fprintf(stderr, "monctl: cannot run %s: %s\n", o.command[0].c_str(),
                     monitor::errno_message(exec_error).c_str());
        return 127;
    }
    if (!r) return report_error(r.error());
    // The table is shown; a pprof file that cannot be written is an error of its own.
    if (pprof_error) return report_error(*pprof_error);
    return cmd ? exit_code_of(status) : kExitOk;
}

int perf_overflows(const PerfOptions& o) {
    protocol::OverflowRequest request;
    request.event = o.events;
    request.period = o.period.value_or(0);
    auto mode = sampled_mode(o);
    if (!mode) return report_error(mode.error());
    request.mode = *mode;
    request.target = request_of(o).target;
    protocol::WatchOverflowsIn in{.request = request};
    auto duration = optional_duration(o.profile_duration.empty() ? "5s" : o.profile_duration);
    if (!duration) return report_error(duration.error());
    in.duration = *duration;
    auto batch = optional_duration(o.batch);
    if (!batch) return report_error(batch.error());
    in.batch = *batch;
    auto c = connect(o);
    if (!c) return report_error(c.error());
    c->set_timeout(std::chrono::milliseconds(0));  // the replies come as overflows do
    auto r = c->stream(
        monitor::protocol::method::WatchOverflows, in, [&](const protocol::OverflowsOut& reply) {
            if (reply.started) {
                if (!o.json) {
                    std::cout << fmt::format(
                                     "Overflows of {} every {} events, {}:\n", request.event,
                                     format_count(static_cast<std::uint64_t>(request.period)),
                                     protocol::target_text(request.target))
                              << std::flush;
                }
                return true;
            }
            if (o.json) {
                std::cout << protocol::to_json(reply).dump() << std::endl;
            } else if (reply.batch) {
                std::cout << format_overflow_batch(*reply.batch) << std::flush;
            }
            return static_cast<bool>(std::cout);
        });
    return r ? kExitOk : report_error(r.error());
}

}  // namespace monctl
