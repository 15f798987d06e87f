// Profiles end to end: the real monctl against the real monitord sampling a workload of known
// profile (bench/profile_burner: two functions burning 3:1), with perf record sampling the same
// process at the same time, also with call chains (perf record -g); a command's profile;
// streamed intervals that add up to the whole; an address histogram; each CPU's profile; a
// process of 16 threads; bad requests refused clearly while the daemon serves on.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "daemon_process.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/text_file.hpp"
#include "test_support.hpp"

namespace itest {
namespace {

class PerfProfile : public SharedDaemonTest {
  protected:
    PerfProfile() : SharedDaemonTest("sampling another process needs root") {}
};

// How often `needle` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

// The fields of /proc/PID/stat after the command name: state, ppid, ... (empty when gone).
std::vector<std::string> stat_fields(pid_t pid) {
    auto text = monitor::read_text_file("/proc/" + std::to_string(pid) + "/stat");
    if (!text) return {};
    const auto paren = text->rfind(')');
    if (paren == std::string::npos) return {};
    std::istringstream fields(text->substr(paren + 1));
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    return f;
}

// utime + stime of a process, in seconds (clock ticks of 10 ms); also of a zombie.
double process_cpu_seconds(pid_t pid) {
    const auto f = stat_fields(pid);
    if (f.size() < 13) return -1;
    return static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) /
           static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The state letter of /proc/PID/stat ('R', 'S', 'T' stopped, 'Z' exited).
char process_state(pid_t pid) {
    const auto f = stat_fields(pid);
    return f.empty() ? '?' : f[0][0];
}

// Where the burner's two functions are in process `pid`.
struct BurnerCode {
    monitor::perf::SymbolAddress three, one;

    // Found once the process has them mapped (within 5 s), else nullopt.
    static std::optional<BurnerCode> of(pid_t pid) {
        std::optional<BurnerCode> code;
        test_support::wait_until(
            [&] {
                auto a = monitor::perf::find_process_symbol(pid, "profile_burner_three");
                auto b = monitor::perf::find_process_symbol(pid, "profile_burner_one");
                if (a && b) code = BurnerCode{*a, *b};
                return code.has_value();
            },
            5s);
        return code;
    }
    // Whether the address ("0x...") is in one of them.
    bool holds(const std::string& address) const {
        const auto ip = std::stoull(address, nullptr, 16);
        for (const auto& f : {three, one}) {
            if (ip >= f.address && ip < f.address + f.size) return true;
        }
        return false;
    }
};

// The share of `function` in a ProfileReport's functions, or -1.
double share_of(const nlohmann::json& report, const std::string& function) {
    for (const auto& l : report["functions"]) {
        if (l["name"].get<std::string>().starts_with(function + " (")) {
            return l["percent"].get<double>();
        }
    }
    return -1;
}

// The last line of `out` that is a JSON object: a stream's final report.
nlohmann::json last_json(const std::string& out) {
    std::istringstream in(out);
    nlohmann::json last;
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("{")) last = nlohmann::json::parse(line);
    }
    return last;
}

// perf report's share of `function` ("    74.17%  [.] profile_burner_three"), or -1.
double perf_share(const std::string& report, const std::string& function) {
    std::istringstream in(report);
    for (std::string line; std::getline(in, line);) {
        if (line.find("] " + function) == std::string::npos) continue;
        try {
            return std::stod(line);
        } catch (const std::exception&) {
            return -1;
        }
    }
    return -1;
}

// A burner sampled by monctl (through the daemon) and by perf record at the same time.
struct SampledTwice {
    pid_t pid = -1;
    RunResult monctl;
    std::string perf;  // perf's path; empty when there is none
    std::string perf_data;
};

// Runs the burner with `burner_args`, held (SIGSTOP) until perf record (with `perf_args`) and
// `monctl perf profile -p PID` (with `monctl_args`) both sample it, so that both see all of
// it, and waits for both to end with it.
void sample_twice(Daemon& daemon, const ScratchDir& dir, std::vector<std::string> burner_args,
                  const std::vector<std::string>& perf_args,
                  const std::vector<std::string>& monctl_args, SampledTwice& out) {
    burner_args.insert(burner_args.begin(), profile_burner_bin());
    auto burner = Process::start(burner_args);
    ASSERT_TRUE(burner);
    out.pid = burner->pid();
    const std::string pid = std::to_string(out.pid);
    // Held after its exec: a process stopped before it is AProcessThatExecsIsNamedAfterIt's.
    ASSERT_TRUE(BurnerCode::of(out.pid)) << "process " << pid << " did not run the burner";
    ::kill(out.pid, SIGSTOP);
    ASSERT_TRUE(test_support::wait_until([&] { return process_state(out.pid) == 'T'; }, 5s));
    out.perf = find_in_path("perf");
    std::unique_ptr<Process> recorder;
    out.perf_data = (dir / "perf.data").string();
    if (!out.perf.empty()) {
        std::vector<std::string> argv{out.perf, "record"};
        argv.insert(argv.end(), perf_args.begin(), perf_args.end());
        argv.insert(argv.end(), {"-p", pid, "-o", out.perf_data});
        recorder = Process::start(argv);
        if (!test_support::wait_until([&] { return perf_event_fds(recorder->pid()) >= 1; }, 10s)) {
            ADD_FAILURE() << "perf record did not start sampling: " << recorder->log();
        }
    }
    const std::size_t started = count_of(daemon.log(), "Profile started");
    std::vector<std::string> argv{monctl_bin(), "--socket", daemon.socket(), "perf", "profile",
                                  "-p",         pid,        "--duration",    "30s"};
    argv.insert(argv.end(), monctl_args.begin(), monctl_args.end());
    auto profiler = Process::start(argv);
    ASSERT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon.log(), "Profile started") > started; }, 10s))
        << daemon.log();
    ::kill(out.pid, SIGCONT);
    ASSERT_TRUE(test_support::wait_until([&] { return !profiler->alive(); }, 30s))
        << "the profile ends when the process exits";
    out.monctl = {.exit_code = profiler->stop(SIGKILL).value_or(-1), .out = profiler->log()};
    if (recorder) {
        ASSERT_TRUE(test_support::wait_until([&] { return !recorder->alive(); }, 20s))
            << "perf record did not end with the process";
    } else {
        out.perf.clear();
    }
}

// The issue's test: 75 % +- 5 on the first function, 25 % +- 5 on the second, as perf record
// and perf report find on the very same process at the very same time.
TEST_F(PerfProfile, ThreeToOneBurnerSplitsAsPerfRecordSplitsIt) {
    ScratchDir dir{"profile"};
    SampledTwice t;
    sample_twice(*daemon_, dir, {"3"}, {"-F", "1000"}, {"-F", "1000", "--json"}, t);
    if (HasFatalFailure()) return;
    const auto& r = t.monctl;
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto j = last_json(r.out);
    EXPECT_EQ(check_reply("Profile", j), "") << r.out;
    const auto& report = j["report"];
    EXPECT_EQ(report["ended"], "process " + std::to_string(t.pid) + " exited")
        << "it ends with the process";
    EXPECT_TRUE(report["final"].get<bool>());
    const auto samples = report["samples"].get<std::uint64_t>();
    EXPECT_GT(samples, 2000u) << "3 s of CPU at 1000 Hz";
    EXPECT_EQ(report["lost"], 0);
    const double three = share_of(report, "profile_burner_three");
    const double one = share_of(report, "profile_burner_one");
    EXPECT_NEAR(three, 75, 5) << r.out;
    EXPECT_NEAR(one, 25, 5) << r.out;
    EXPECT_GT(report["modes"]["user"].get<std::uint64_t>(), samples * 9 / 10);
    EXPECT_EQ(report["modes"]["idle"], 0);

    if (t.perf.empty())
        GTEST_SKIP() << "no perf in $PATH (Debian's linux-perf): monctl alone checked";
    auto shown = run({t.perf, "report", "-i", t.perf_data, "--stdio", "--sort", "sym"});
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    const double perf_three = perf_share(shown.out, "profile_burner_three");
    const double perf_one = perf_share(shown.out, "profile_burner_one");
    EXPECT_NEAR(perf_three, 75, 5) << shown.out;
    EXPECT_NEAR(perf_one, 25, 5) << shown.out;
    EXPECT_NEAR(three, perf_three, 3) << "the same process sampled at the same time";
    EXPECT_NEAR(one, perf_one, 3);
    std::printf("%llu samples: monctl %.1f %% and %.1f %%, perf record %.1f %% and %.1f %%\n",
                static_cast<unsigned long long>(samples), three, one, perf_three, perf_one);
}

// Folded stacks ("a;b;c N" lines, outermost first) and the shares of the stacks that end in
// `leaf` with `caller` somewhere above it, in percent of all the stacks' samples.
struct Stacks {
    std::vector<std::pair<std::vector<std::string>, std::uint64_t>> stacks;
    std::uint64_t samples = 0;

    void add(std::vector<std::string> frames, std::uint64_t n) {
        samples += n;
        stacks.emplace_back(std::move(frames), n);
    }
    double share(const std::string& leaf, const std::string& caller) const {
        std::uint64_t n = 0;
        for (const auto& [frames, count] : stacks) {
            if (frames.empty() || frames.back() != leaf) continue;
            if (std::ranges::find(frames, caller) != frames.end()) n += count;
        }
        return samples == 0 ? -1 : 100.0 * static_cast<double>(n) / static_cast<double>(samples);
    }

    // monctl's --folded file.
    static Stacks folded(const std::string& text) {
        Stacks s;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            const auto space = line.rfind(' ');
            if (space == std::string::npos) continue;
            std::vector<std::string> frames;
            std::istringstream parts(line.substr(0, space));
            for (std::string f; std::getline(parts, f, ';');) frames.push_back(f);
            s.add(std::move(frames), std::stoull(line.substr(space + 1)));
        }
        return s;
    }
    // perf script -F ip,sym: each sample's chain innermost first ("\t  55d4c3a0b1c9 main"),
    // samples apart by blank lines; the first frame stands for the process's name.
    static Stacks perf_script(const std::string& text) {
        Stacks s;
        std::istringstream in(text);
        std::vector<std::string> chain;
        auto end_sample = [&] {
            if (chain.empty()) return;
            std::vector<std::string> frames{"[process]"};
            frames.insert(frames.end(), chain.rbegin(), chain.rend());
            s.add(std::move(frames), 1);
            chain.clear();
        };
        for (std::string line; std::getline(in, line);) {
            std::istringstream fields(line);
            std::string ip, sym;
            if (!(fields >> ip)) {
                end_sample();
                continue;
            }
            std::getline(fields >> std::ws, sym);
            chain.push_back(sym);
        }
        end_sample();
        return s;
    }
};

// -g: the call chains of the burner (built with frame pointers) fold into stacks that put
// main above each burner, in the 3:1 of the functions; perf record -g and perf script on the
// same process at the same time find the same.
TEST_F(PerfProfile, CallChainsFoldAsPerfRecordFindsThem) {
    ScratchDir dir{"profile-g"};
    const std::string folded = (dir / "stacks.folded").string();
    SampledTwice t;
    sample_twice(*daemon_, dir, {"2"}, {"-g", "-F", "1000"},
                 {"-g", "-F", "1000", "-n", "3", "--folded", folded}, t);
    if (HasFatalFailure()) return;
    ASSERT_EQ(t.monctl.exit_code, 0) << t.monctl.out;
    EXPECT_NE(t.monctl.out.find("stack (outermost first)"), std::string::npos) << t.monctl.out;
    auto text = monitor::read_text_file(folded);
    ASSERT_TRUE(text) << text.error().to_string();
    const auto ours = Stacks::folded(*text);
    EXPECT_GT(ours.samples, 1500u) << "2 s of CPU at 1000 Hz";
    std::smatch samples;
    ASSERT_TRUE(std::regex_search(t.monctl.out, samples, std::regex(R"(\n  ([0-9,]+) samples:)")));
    std::string digits = samples[1];
    std::erase(digits, ',');
    EXPECT_EQ(ours.samples, std::stoull(digits)) << "the file holds every sample";
    for (const auto& [frames, n] : ours.stacks) {
        ASSERT_FALSE(frames.empty());
        EXPECT_EQ(frames.front(), "bench-profile-b") << "the process's name (15 letters) first";
    }
    const double three = ours.share("profile_burner_three", "main");
    const double one = ours.share("profile_burner_one", "main");
    EXPECT_NEAR(three, 75, 5) << *text;
    EXPECT_NEAR(one, 25, 5) << *text;

    if (t.perf.empty())
        GTEST_SKIP() << "no perf in $PATH (Debian's linux-perf): monctl alone checked";
    auto script = run({t.perf, "script", "-i", t.perf_data, "-F", "ip,sym"});
    ASSERT_EQ(script.exit_code, 0) << script.err;
    const auto perfs = Stacks::perf_script(script.out);
    const double perf_three = perfs.share("profile_burner_three", "main");
    const double perf_one = perfs.share("profile_burner_one", "main");
    const std::string perfs_start = script.out.substr(0, 1500);
    // Now and then on a busy machine (1 run in 12 of the thread sanitizer build) perf script
    // names none of its samples' frames as the burner's (perf's own lookup): nothing to
    // compare with, said so.
    if (perfs.samples > 0 && perf_three <= 0 && perf_one <= 0) {
        GTEST_SKIP() << "perf script found the burners in none of its " << perfs.samples
                     << " stacks; monctl alone checked. perf script began:\n"
                     << perfs_start;
    }
    EXPECT_NEAR(three, perf_three, 3) << "the same process sampled at the same time\n"
                                      << perfs_start;
    EXPECT_NEAR(one, perf_one, 3);
    std::printf(
        "main;...;burner stacks: monctl %.1f %% and %.1f %% of %llu, perf record -g "
        "%.1f %% and %.1f %% of %llu\n",
        three, one, static_cast<unsigned long long>(ours.samples), perf_three, perf_one,
        static_cast<unsigned long long>(perfs.samples));
}

// A process profiled before its exec is named as the program it becomes: held (SIGSTOP) in a
// shell that then execs the burner, its stacks after the exec are the burner's, 3:1. (A
// sample in the exec itself, between the kernel's telling of it and of the new program's
// code, once left the program unnamed for the rest of the profile: AddressNames' unit test.)
TEST_F(PerfProfile, AProcessThatExecsIsNamedAfterIt) {
    ScratchDir dir{"profile-exec"};
    const std::string folded = (dir / "stacks.folded").string();
    auto shell = Process::start(
        {find_in_path("sh"), "-c", "kill -STOP $$; exec \"$0\" 2", profile_burner_bin()});
    ASSERT_TRUE(shell);
    const pid_t pid = shell->pid();
    ASSERT_TRUE(test_support::wait_until([&] { return process_state(pid) == 'T'; }, 5s));
    const std::size_t started = count_of(daemon_->log(), "Profile started");
    auto profiler = Process::start({monctl_bin(), "--socket", daemon_->socket(), "perf", "profile",
                                    "-p", std::to_string(pid), "--duration", "30s", "-g", "-F",
                                    "1000", "--folded", folded});
    ASSERT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon_->log(), "Profile started") > started; }, 10s))
        << daemon_->log();
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(test_support::wait_until([&] { return !profiler->alive(); }, 30s))
        << "the profile ends when the process exits";
    ASSERT_EQ(profiler->stop(SIGKILL).value_or(-1), 0) << profiler->log();
    auto text = monitor::read_text_file(folded);
    ASSERT_TRUE(text) << text.error().to_string();
    const auto stacks = Stacks::folded(*text);
    EXPECT_GT(stacks.samples, 1500u) << "2 s of CPU at 1000 Hz";
    std::uint64_t burner = 0;
    for (const auto& [frames, n] : stacks.stacks) {
        if (!frames.empty() && frames.front() == "bench-profile-b") burner += n;
    }
    EXPECT_GT(burner, stacks.samples * 9 / 10) << "named by its new name after the exec\n" << *text;
    EXPECT_NEAR(stacks.share("profile_burner_three", "main"), 75, 5) << *text;
    EXPECT_NEAR(stacks.share("profile_burner_one", "main"), 25, 5) << *text;
}

// -A: each CPU's own profile. The burner, held to the last CPU, is in that CPU's profile and
// in no other; the CPUs add up to the whole. Its share of its CPU is what it gets there: on a
// busy machine (the other tests, or the sanitizer builds' daemon naming the samples on that
// CPU) a third or less, so the test asks for a fifth of the second's samples at 500 Hz.
TEST_F(PerfProfile, EachCpuHasItsOwnProfile) {
    const auto online = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(online);
    const int last = online->back();
    auto burner = Process::start(
        {find_in_path("taskset"), "-c", std::to_string(last), profile_burner_bin(), "5"});
    ASSERT_TRUE(burner);
    ASSERT_TRUE(BurnerCode::of(burner->pid())) << "taskset did not run the burner";
    auto r = daemon_->monctl(
        {"perf", "profile", "-A", "--duration", "1s", "-F", "500", "-n", "5", "--json"});
    burner->stop(SIGKILL);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = last_json(r.out);
    EXPECT_EQ(check_reply("Profile", j), "") << r.out;
    const auto& report = j["report"];
    EXPECT_EQ(report["target"], "each CPU");
    ASSERT_EQ(report["cpus"].size(), online->size()) << r.out;
    std::uint64_t sum = 0;
    for (const auto& cpu : report["cpus"]) {
        sum += cpu["samples"].get<std::uint64_t>();
        const double burning = std::max(0.0, share_of(cpu, "profile_burner_three")) +
                               std::max(0.0, share_of(cpu, "profile_burner_one"));
        if (cpu["cpu"] == last) {
            EXPECT_GE(burning * cpu["samples"].get<double>() / 100, 100)
                << "the burner's CPU: " << cpu.dump();
        } else {
            EXPECT_EQ(burning, 0) << "the burner never ran here: " << cpu.dump();
        }
    }
    EXPECT_EQ(sum, report["samples"].get<std::uint64_t>());

    auto text = daemon_->monctl({"perf", "profile", "-A", "--duration", "300ms", "-n", "2"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("\n  cpu" + std::to_string(last) + ": "), std::string::npos)
        << text.out;
}

// A process of 16 threads, held until the profile is on it: every thread is sampled (the
// report says 16 threads, and the samples are its CPU time's since it was held), and the 3:1
// holds.
TEST_F(PerfProfile, AManyThreadedProcessIsSampledInEveryThread) {
    constexpr int kThreads = 16;
    auto burner = Process::start({profile_burner_bin(), "0.25", std::to_string(kThreads)});
    ASSERT_TRUE(burner);
    const pid_t pid = burner->pid();
    const auto tasks = [&] {
        std::size_t n = 0;
        std::error_code ec;
        for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec),
             end;
             !ec && it != end; it.increment(ec)) {
            ++n;
        }
        return n;
    };
    ASSERT_TRUE(test_support::wait_until([&] { return tasks() >= kThreads; }, 5s));
    ::kill(pid, SIGSTOP);
    ASSERT_TRUE(test_support::wait_until([&] { return process_state(pid) == 'T'; }, 5s));
    const std::size_t held = tasks();  // its threads, and a sanitizer's own
    // Its CPU time so far (a sanitizer's start-up, the threads' start) is not the profile's.
    const double before = process_cpu_seconds(pid);
    const std::size_t started = count_of(daemon_->log(), "Profile started");
    auto profiler =
        Process::start({monctl_bin(), "--socket", daemon_->socket(), "perf", "profile", "-p",
                        std::to_string(pid), "-F", "500", "--duration", "60s", "--json"});
    ASSERT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon_->log(), "Profile started") > started; }, 10s));
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(test_support::wait_until([&] { return !profiler->alive(); }, 60s));
    const double cpu = process_cpu_seconds(pid) - before;  // a zombie until stopped
    const auto out = profiler->log();
    ASSERT_EQ(profiler->stop(SIGKILL).value_or(-1), 0) << out;
    const auto report = last_json(out)["report"];
    EXPECT_EQ(report["threads"].get<std::size_t>(), held) << out;
    const auto samples = report["samples"].get<double>();
    EXPECT_GT(cpu, 2.0) << "most of 16 threads x 0.24 s (they start burning before the hold)";
    EXPECT_LT(cpu, 4.5);
    EXPECT_NEAR(samples, cpu * 500, cpu * 500 * 0.15) << "every thread's CPU time sampled";
    EXPECT_NEAR(share_of(report, "profile_burner_three"), 75, 5) << out;
    EXPECT_NEAR(share_of(report, "profile_burner_one"), 25, 5) << out;
    std::printf("%zu threads, %.2f s of CPU: %.0f samples at 500 Hz\n", held, cpu, samples);
}

// A daemon that cannot read the kernel's addresses (no CAP_SYSLOG at kptr_restrict 0 and
// perf_event_paranoid 2, Debian's defaults, or kptr_restrict 1 or 2) says so where kernel code
// is counted under [kernel]; one that can names the kernel's functions and says nothing.
TEST_F(PerfProfile, KernelFunctionsUnnamedAreSaidWhy) {
    const std::string setpriv = find_in_path("setpriv");
    if (setpriv.empty()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
    const std::vector<std::string> copy{
        "perf",         "profile", "--",         "/bin/dd", "if=/dev/zero",
        "of=/dev/null", "bs=64k",  "count=40000"};  // most of its time in the kernel's copies
    auto named = daemon_->monctl(copy);
    ASSERT_EQ(named.exit_code, 0) << named.err;
    EXPECT_EQ(named.err.find("kernel functions unnamed"), std::string::npos) << named.err;
    EXPECT_NE(named.err.find("[kernel.kallsyms])"), std::string::npos) << named.err;

    auto blind =
        Daemon::start({.args = {"--probe", "off"}, .wrapper = {setpriv, "--bounding-set=-syslog"}});
    ASSERT_TRUE(blind);
    auto r = blind->monctl(copy);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("kernel functions unnamed: /proc/kallsyms shows no addresses to this "
                         "reader (kernel.kptr_restrict): kernel code is counted as [kernel]; "
                         "CAP_SYSLOG"),
              std::string::npos)
        << r.err;
    auto json = blind->monctl({"--json", "perf", "profile", "--duration", "300ms", "-a"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_NE(json.out.find("\"kernel_symbols\":\"/proc/kallsyms shows no addresses"),
              std::string::npos)
        << json.out.substr(0, 2000);
}

// A command is sampled from its exec to its exit: its exit code is monctl's, the profile goes
// to stderr, and its functions are named although it is gone when the profile ends.
TEST_F(PerfProfile, ACommandIsSampledUntilItExits) {
    auto r = daemon_->monctl(
        {"perf", "profile", "-n", "3", "--user", "--", profile_burner_bin(), "0.8", "2", "7"});
    EXPECT_EQ(r.exit_code, 7) << r.err;
    EXPECT_NE(r.err.find("Profile of process "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("exited)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(1 thread at the start"), std::string::npos)
        << "the command has one thread at its exec: " << r.err;
    // Its second thread, started after the exec, is sampled too: 2 x 0.8 s at 4000 Hz.
    std::smatch samples;
    ASSERT_TRUE(std::regex_search(r.err, samples, std::regex(R"(\n  ([0-9,]+) samples:)")))
        << r.err;
    std::string digits = samples[1];
    std::erase(digits, ',');
    EXPECT_GT(std::stoull(digits), 4000u) << "both threads sampled: " << r.err;
    EXPECT_NE(r.err.find("kernel 0.0%"), std::string::npos) << "--user: " << r.err;
    EXPECT_NE(r.err.find("lost 0 samples"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("profile_burner_three (" + profile_burner_bin() + ")"), std::string::npos)
        << r.err;

    auto missing = daemon_->monctl({"perf", "profile", "--", "/nonexistent/command"});
    EXPECT_EQ(missing.exit_code, 127) << missing.err;
    EXPECT_NE(missing.err.find("cannot run /nonexistent/command"), std::string::npos)
        << missing.err;
}

// A command that runs 30 short programs one after another (one round of the burner each: 30 ms
// and 10 ms of CPU), each gone (and reaped) soon after its last sample, most often before a
// drain could read its map: each is named from what the kernel told of it (its mappings, as
// perf record reads them), not "[process N exited]", and all their burning is found by name.
TEST_F(PerfProfile, ShortLivedProcessesAreNamedFromTheKernelsRecords) {
    const std::string loop = "for i in $(seq 30); do " + profile_burner_bin() + " 0.02; done";
    auto r = daemon_->monctl(
        {"perf", "profile", "-n", "0", "-F", "2000", "--json", "--", "/bin/sh", "-c", loop});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto report = last_json(r.err)["report"];
    ASSERT_TRUE(report.is_object()) << r.err;
    const auto samples = report["samples"].get<double>();
    double unnamed = 0;
    for (const auto& o : report["objects"]) {
        const auto name = o["name"].get<std::string>();
        if (name.starts_with("[process") || name == "[unknown]") {
            unnamed += o["samples"].get<double>();
        }
    }
    double burning = 0;
    for (const auto& f : report["functions"]) {
        const auto name = f["name"].get<std::string>();
        if (name.starts_with("profile_burner_three (") ||
            name.starts_with("profile_burner_one (")) {
            burning += f["samples"].get<double>();
        }
    }
    EXPECT_LT(unnamed, samples / 100) << "named although gone: " << report["objects"].dump();
    EXPECT_GT(burning, 0.8 * 30 * 0.04 * 2000) << "30 x 40 ms of CPU at 2000 Hz, all named";
    std::printf("%.0f samples of 30 programs: %.0f in the burners, %.0f unnamed\n", samples,
                burning, unnamed);
}

// With an interval each interval's profile comes as it ends, and they add up to the whole:
// nothing is lost between them.
TEST_F(PerfProfile, IntervalsAddUpToTheWhole) {
    auto burner = Process::start({profile_burner_bin(), "30"});
    ASSERT_TRUE(burner);
    auto r = daemon_->monctl({"perf", "profile", "-p", std::to_string(burner->pid()), "--duration",
                              "2s", "--interval", "500ms", "-F", "2000", "--json"});
    burner->stop(SIGKILL);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream in(r.out);
    std::uint64_t sum = 0;
    int intervals = 0;
    nlohmann::json final;
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        EXPECT_EQ(check_reply("Profile", j), "") << line;
        const auto& report = j["report"];
        if (report["final"].get<bool>()) {
            final = report;
            continue;
        }
        ++intervals;
        EXPECT_EQ(report["interval"], intervals);
        EXPECT_NEAR(report["elapsed"].get<double>(), 0.5, 0.1) << line;
        sum += report["samples"].get<std::uint64_t>();
    }
    EXPECT_GE(intervals, 3) << r.out;
    ASSERT_TRUE(final.is_object()) << r.out;
    // The last interval is cut short by the end; its samples are in the whole.
    EXPECT_GE(final["samples"].get<std::uint64_t>(), sum);
    EXPECT_LE(final["samples"].get<std::uint64_t>() - sum, 2000u / 2 + 100)
        << "at most what the unreported part of the last interval held";
    EXPECT_GT(sum, 2000u) << "three half seconds at 2000 Hz";
}

// A streamed profile whose reader stops reading: its replies (an interval every 10 ms, with
// the call chains of every depth) pile up until the daemon drops the connection, which ends
// the run as the reply is sent; the daemon lives on (under the address sanitizer too) and
// takes a new profile.
TEST_F(PerfProfile, AStreamNobodyReadsIsDroppedAndTheDaemonSamplesOn) {
    auto burner = Process::start({profile_burner_bin(), "--deep", "30"});
    ASSERT_TRUE(burner);
    const std::string pid = std::to_string(burner->pid());
    // Another profile runs meanwhile, so that the run that ends is not alone in the daemon's
    // table: a use of the ended run then reads freed memory (the sanitizers see it).
    auto other = daemon_->connect();
    const std::size_t started_before = count_of(daemon_->log(), "Profile started");
    std::string other_call = nlohmann::json{
        {"method", "io.monitord.Monitor.Profile"},
        {"parameters",
         {{"request", {{"target", {{"kind", "process"}, {"pid", burner->pid()}}}}},
          {"duration_ms",
           20000}}}}.dump();
    other_call.push_back('\0');
    ASSERT_TRUE(other.send_raw(other_call));
    ASSERT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon_->log(), "Profile started") > started_before; }, 10s))
        << daemon_->log();
    auto c = daemon_->connect();
    monitor::varlink::Call call{.method = "io.monitord.Monitor.Profile", .more = true};
    call.parameters = {{"request",
                        {{"target", {{"kind", "process"}, {"pid", burner->pid()}}},
                         {"callchain", true},
                         {"top", 0}}},
                       {"duration_ms", 20000},
                       {"interval_ms", 10}};
    const std::size_t ended = count_of(daemon_->log(), "its client went away");
    auto started = c.call(call);
    ASSERT_TRUE(started && !started->error) << (started ? started->parameters.dump() : "");
    ASSERT_TRUE(started->continues);
    // Not read for 3 s at least, and until the stream is dropped (4 MiB behind: about 2 s of
    // replies in the normal build, longer in the sanitizer builds).
    const auto unread_until = std::chrono::steady_clock::now() + 3s;
    EXPECT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon_->log(), "its client went away") > ended; }, 15s))
        << "the daemon still buffers the replies nobody reads\n"
        << daemon_->log();
    std::this_thread::sleep_until(unread_until);
    ASSERT_TRUE(daemon_->alive()) << daemon_->log();
    // What the socket held, then the end.
    c.set_timeout(5s);
    for (;;) {
        auto r = c.receive();
        if (!r) break;
        EXPECT_FALSE(r->error) << r->parameters.dump();
    }
    auto again = daemon_->monctl({"perf", "profile", "-p", pid, "--duration", "500ms"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("profile_burner_deep"), std::string::npos) << again.out;
    burner->stop(SIGKILL);
}

// A profiled program whose file stalls its readers (a FUSE file system standing in for a hung
// network one: the daemon's reads of it wait 3 s from its first). The samples are named on a thread
// of the profile's own, so that the daemon's loop answers every other call at once meanwhile;
// the profile comes once the file answers, named.
TEST_F(PerfProfile, AProgramWhoseFileStallsStallsOnlyItsOwnProfile) {
    const char* stalling_fs = std::getenv("STALLING_FS_BIN");
    if (stalling_fs == nullptr || *stalling_fs == '\0') {
        GTEST_SKIP() << "no stalling file system: libfuse3-dev was not found when the build was "
                        "configured (scripts/bootstrap --test installs it)";
    }
    if (::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/fuse here";
    test_support::ScratchDir dir(test_support::ScratchDir::Everyone);
    const auto mount = dir / "mnt";
    std::filesystem::create_directory(mount);
    auto fs = Process::start({stalling_fs, profile_burner_bin(), std::to_string(daemon_->pid()),
                              "3000", mount.string()});
    ASSERT_TRUE(fs);
    // Unmounted first when the test ends, before its file system's process is stopped.
    struct Unmount {
        std::filesystem::path at;
        ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
    } unmount{mount};
    const auto program = mount / "program";
    if (!test_support::wait_until([&] { return std::filesystem::exists(program); }, 10s)) {
        GTEST_SKIP() << "FUSE cannot mount here: " << fs->log();
    }
    auto burner = Process::start({program.string(), "30"});
    ASSERT_TRUE(burner);
    std::this_thread::sleep_for(200ms);  // running

    monitor::varlink::Reply profile;
    std::atomic<bool> done{false};
    const auto asked = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point answered;
    std::thread profiler([&] {
        auto c = daemon_->connect();
        c.set_timeout(30s);
        auto r = c.call("io.monitord.Monitor.Profile",
                        {{"request", {{"target", {{"kind", "process"}, {"pid", burner->pid()}}}}},
                         {"duration_ms", 1000}});
        answered = std::chrono::steady_clock::now();
        if (r) profile = *r;
        done = true;
    });
    // Another client's calls while the profile runs and its naming waits for the file.
    std::chrono::duration<double, std::milli> slowest{0};
    int calls = 0;
    while (!done) {
        const auto t = std::chrono::steady_clock::now();
        auto status = daemon_->call("GetStatus");
        slowest = std::max<std::chrono::duration<double, std::milli>>(
            slowest, std::chrono::steady_clock::now() - t);
        ++calls;
        EXPECT_FALSE(status.is_null());
        std::this_thread::sleep_for(10ms);
    }
    profiler.join();
    EXPECT_NE(fs->log().find("stalled thread"), std::string::npos)
        << "the daemon never read the program's file: the test proves nothing\n"
        << fs->log();
    EXPECT_LT(slowest.count(), 100)
        << "a GetStatus waited for the profile's naming (" << calls << " calls)";
    EXPECT_GE(calls, 20);
    // The reply waited for the file; its samples are named all the same.
    EXPECT_GE(answered - asked, 3s);
    ASSERT_FALSE(profile.error) << profile.parameters.dump();
    EXPECT_NE(profile.parameters.dump().find("profile_burner_three"), std::string::npos)
        << profile.parameters.dump();
    burner->stop(SIGKILL);
}

// An address histogram over the first function holds its samples, bucket by bucket; and
// asking for an impossible one is refused before anything is sampled.
TEST_F(PerfProfile, AnAddressRangeHistogramHoldsItsFunctionsSamples) {
    auto burner = Process::start({profile_burner_bin(), "30"});
    ASSERT_TRUE(burner);
    std::optional<monitor::perf::SymbolAddress> sym;
    ASSERT_TRUE(test_support::wait_until(
        [&] {
            auto s = monitor::perf::find_process_symbol(burner->pid(), "profile_burner_three");
            if (s) sym = *s;
            return s.has_value();
        },
        5s));
    ASSERT_GT(sym->size, 0u);
    char range[64];
    std::snprintf(range, sizeof range, "%#llx-%#llx", static_cast<unsigned long long>(sym->address),
                  static_cast<unsigned long long>(sym->address + sym->size));
    auto r = daemon_->monctl({"perf", "profile", "-p", std::to_string(burner->pid()), "--duration",
                              "1s", "--range", range, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto report = last_json(r.out)["report"];
    ASSERT_TRUE(report["histogram"].is_object()) << r.out;
    std::uint64_t in_buckets = 0;
    for (const auto& b : report["histogram"]["buckets"])
        in_buckets += b["samples"].get<std::uint64_t>();
    EXPECT_EQ(in_buckets, report["histogram"]["samples"].get<std::uint64_t>());
    EXPECT_EQ(report["histogram"]["bucket"], 4);
    std::uint64_t function_samples = 0;
    for (const auto& l : report["functions"]) {
        if (l["name"].get<std::string>().starts_with("profile_burner_three (")) {
            function_samples = l["samples"].get<std::uint64_t>();
        }
    }
    EXPECT_GT(function_samples, 0u) << r.out;
    EXPECT_EQ(in_buckets, function_samples) << "the range is exactly the function";

    auto text = daemon_->monctl({"perf", "profile", "-p", std::to_string(burner->pid()),
                                 "--duration", "300ms", "--range", range});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("in 4-byte buckets"), std::string::npos) << text.out;
    burner->stop(SIGKILL);
}

// The CPUs' profile splits by mode; an idle machine shows its idle task.
TEST_F(PerfProfile, AllCpusSplitByMode) {
    auto r =
        daemon_->monctl({"perf", "profile", "-a", "--duration", "500ms", "-F", "500", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = last_json(r.out);
    EXPECT_EQ(check_reply("Profile", j), "") << r.out;
    const auto& report = j["report"];
    const auto& m = report["modes"];
    EXPECT_EQ(m["idle"].get<std::uint64_t>() + m["user"].get<std::uint64_t>() +
                  m["kernel"].get<std::uint64_t>() + m["other"].get<std::uint64_t>(),
              report["samples"].get<std::uint64_t>());
    EXPECT_EQ(report["target"], "all CPUs");
    EXPECT_GT(report["samples"].get<std::uint64_t>(), 100u) << "2 CPUs x 0.5 s x 500 Hz";
}

// Each mistake is refused naming what is wrong, and the daemon serves on.
TEST_F(PerfProfile, BadRequestsAreRefusedClearly) {
    struct Case {
        std::vector<std::string> args;
        std::string says;
        int code = 1;
    };
    const std::vector<Case> cases = {
        {{"-c", "0"}, "a period of 0 events: give 1 or more"},
        {{"-e", "perf::CPU-CLOK"}, "perf::CPU-CLOK"},
        {{"--range", "0x2000-0x2000"}, "is empty"},
        {{"--range", "0x0-0x10000000000"}, "buckets of 1048576 bytes or more"},
        {{"--range", "main"}, "give START-END or START-END/BUCKET"},
        {{"-p", "999999999"}, "999999999"},
        {{"-C", "4096"}, "cpu4096 is not online"},
        {{"--duration", "0"}, "'0' is not a duration"},
        {{"--unit", "no-such.service"}, "no-such.service"},
        {{"-p", "1", "--", "true"}, "a command is its own target"},
        {{"--folded", "/nonexistent/dir/stacks"}, "--folded /nonexistent/dir/stacks: cannot write"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args{"perf", "profile"};
        if (c.args.front() != "--duration") args.insert(args.end(), {"--duration", "200ms"});
        args.insert(args.end(), c.args.begin(), c.args.end());
        auto r = daemon_->monctl(args);
        EXPECT_EQ(r.exit_code, c.code) << c.says << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << ": " << r.err;
    }
    auto events = daemon_->call("ListEvents");  // and it still answers
    EXPECT_TRUE(events.contains("events"));
}

// Overflows every 10 ms of a process's task clock come as often as its task clock says, in
// batches that add up to the total, each with the last one's address: in the code it runs.
// The burner is held (SIGSTOP) until the watch has started, and the watch lasts until it
// exits, so that its CPU time outside the watch is known.
TEST_F(PerfProfile, OverflowsComeEveryPeriodWithWhereTheLastOneWas) {
    auto burner = Process::start({profile_burner_bin(), "1.5"});
    ASSERT_TRUE(burner);
    const pid_t pid = burner->pid();
    const auto code = BurnerCode::of(pid);
    ASSERT_TRUE(code) << "the burner's functions were not found in process " << pid;
    ::kill(pid, SIGSTOP);
    ASSERT_TRUE(test_support::wait_until([&] { return process_state(pid) == 'T'; }, 5s));
    // The clock the burner reads: the vDSO's code, or the kernel's where the clock source has
    // no vDSO reading (as under some hypervisors: clock_gettime is then a system call).
    std::uint64_t vdso_start = 0;
    std::uint64_t vdso_end = 0;
    {
        std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
        for (std::string line; std::getline(maps, line);) {
            if (line.ends_with("[vdso]")) {
                vdso_start = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
                vdso_end = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
            }
        }
    }
    const auto in_clock = [&](const std::string& address) {
        const auto ip = std::stoull(address, nullptr, 16);
        return (ip >= vdso_start && ip < vdso_end) || ip >= 0xffff800000000000ULL;
    };
    const double cpu_before = process_cpu_seconds(pid);
    const std::size_t started_before = count_of(daemon_->log(), "Watch of overflows started");
    auto watch =
        Process::start({monctl_bin(), "--socket", daemon_->socket(), "perf", "overflows", "-e",
                        "perf::TASK-CLOCK", "-c", "10000000", "-p", std::to_string(pid),
                        "--duration", "30s", "-b", "200ms", "--json"});
    ASSERT_TRUE(test_support::wait_until(
        [&] { return count_of(daemon_->log(), "Watch of overflows started") > started_before; },
        10s))
        << daemon_->log();
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(test_support::wait_until([&] { return !watch->alive(); }, 30s))
        << "the watch ends when the process exits";
    const double cpu = process_cpu_seconds(pid) - cpu_before;  // a zombie until reaped
    const std::string out = watch->log();
    std::istringstream in(out);
    std::uint64_t sum = 0;
    int batches = 0;
    int in_burners = 0;
    int in_clock_code = 0;
    nlohmann::json final;
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        EXPECT_EQ(check_reply("WatchOverflows", j), "") << line;
        const auto& b = j["batch"];
        sum += b["overflows"].get<std::uint64_t>();
        if (b["final"].get<bool>()) {
            final = b;
            continue;
        }
        ++batches;
        ASSERT_TRUE(b["last"].is_object()) << line;
        EXPECT_EQ(b["last"]["pid"], pid);
        const auto address = b["last"]["address"].get<std::string>();
        if (code->holds(address)) ++in_burners;
        if (in_clock(address)) ++in_clock_code;
    }
    ASSERT_TRUE(final.is_object()) << out;
    EXPECT_EQ(final["ended"], "process " + std::to_string(pid) + " exited") << out;
    EXPECT_GE(batches, 4) << "a batch every 200 ms for 1.5 s of CPU: " << out;
    EXPECT_EQ(sum, final["total"].get<std::uint64_t>()) << "the batches add up to the total";
    EXPECT_EQ(final["count"].get<std::uint64_t>(), sum * 10'000'000);
    EXPECT_EQ(final["lost"], 0);
    // The task clock over the period: the process's CPU time (to a tick of 10 ms) in 10 ms.
    const double due = cpu / 0.010;
    EXPECT_NEAR(static_cast<double>(sum), due, due * 0.1 + 2)
        << "CPU time " << cpu << " s: " << out;
    // Where the burner runs: its loops, or the clock it reads in them (a batch's last sample,
    // 7 or so of them, falls in the clock's code about one time in five).
    EXPECT_GE((in_burners + in_clock_code) * 10, batches * 8)
        << "the sampled address is in the burners' code or the clock's";
    EXPECT_GT(in_burners * 2, batches) << "most in the burners' own code";
    std::printf(
        "%llu overflows every 10 ms of task clock, for %.2f s of CPU (%.0f due); of %d "
        "batches' last address, %d in the burners, %d in the clock's code\n",
        static_cast<unsigned long long>(sum), cpu, due, batches, in_burners, in_clock_code);

    auto zero = daemon_->monctl({"perf", "overflows", "-e", "perf::TASK-CLOCK", "-c", "0"});
    EXPECT_EQ(zero.exit_code, 1);
    EXPECT_NE(zero.err.find("a period of 0 events: give 1 or more"), std::string::npos) << zero.err;
}

// A session's last sampled address is the newest even when no record was asked for long
// enough for its rings to fill (50,000 samples a second of CPU; a ring holds about 10,000): the
// daemon reads them when they are half full, not only for a record. Read only at the record,
// the full rings would have lost every sample after the first phase's first quarter second.
TEST_F(PerfProfile, TheLastSampledAddressIsTheNewestAfterTheRingsFill) {
    auto burner = Process::start({profile_burner_bin(), "--phases", "1.5"});
    ASSERT_TRUE(burner);
    const pid_t pid = burner->pid();
    const auto code = BurnerCode::of(pid);
    ASSERT_TRUE(code) << "the burner's functions were not found in process " << pid;
    auto started = daemon_->monctl({"perf", "start", "-p", std::to_string(pid), "-e",
                                    "perf::TASK-CLOCK:u", "--sample-every", "20000"});
    ASSERT_EQ(started.exit_code, 0) << started.err;
    // Into the second phase (profile_burner_one), half a second of CPU deep.
    EXPECT_TRUE(test_support::wait_until([&] { return process_cpu_seconds(pid) >= 2.0; }, 20s))
        << "the burner never reached 2 s of CPU";
    auto r = daemon_->monctl({"perf", "read", "--json"});
    EXPECT_EQ(daemon_->monctl({"perf", "stop"}).exit_code, 0);
    burner->stop(SIGKILL);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& e = j["report"]["events"][0];
    ASSERT_TRUE(e["sampled_address"].is_string()) << r.out;
    const auto ip = std::stoull(e["sampled_address"].get<std::string>(), nullptr, 16);
    EXPECT_FALSE(ip >= code->three.address && ip < code->three.address + code->three.size)
        << "the last sampled address is in the first phase's function: a sample from before the "
           "rings filled, not the newest: "
        << r.out;
}

// A collect that samples its events as well gives each period's record the last sampled
// address of each event (the SIA): in the code the process runs.
TEST_F(PerfProfile, ACollectsRecordsCarryTheLastSampledAddress) {
    auto burner = Process::start({profile_burner_bin(), "30"});
    ASSERT_TRUE(burner);
    const pid_t pid = burner->pid();
    const auto code = BurnerCode::of(pid);
    ASSERT_TRUE(code) << "the burner's functions were not found in process " << pid;
    auto r = daemon_->monctl({"perf", "collect", "-p", std::to_string(pid), "-e",
                              "perf::TASK-CLOCK", "--sample-every", "1000000", "--duration",
                              "1500ms", "--interval", "250ms", "--json"});
    burner->stop(SIGKILL);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream in(r.out);
    int records = 0;
    int in_burners = 0;
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        EXPECT_EQ(check_reply("CollectCounters", j), "") << line;
        const auto& e = j["report"]["events"][0];
        ASSERT_TRUE(e["sampled_address"].is_string()) << "every 1 ms of task clock: " << line;
        ++records;
        if (code->holds(e["sampled_address"].get<std::string>())) ++in_burners;
    }
    EXPECT_GE(records, 6) << r.out;
    // Most in the burners' own code; the rest in the clock they read (about one in five on an
    // idle machine, up to two in five seen with a parallel test run beside it).
    EXPECT_GT(in_burners * 2, records)
        << "the last sampled address is in the burners' code (the rest in the clock it reads): "
        << r.out;

    auto zero = daemon_->monctl({"perf", "collect", "-e", "perf::TASK-CLOCK", "--sample-every", "0",
                                 "--duration", "100ms"});
    EXPECT_EQ(zero.exit_code, 1);
    EXPECT_NE(zero.err.find("sample every 0 events: give 1 or more"), std::string::npos)
        << zero.err;
}

// A stripped program has no symbols for its own functions: its samples are counted as its
// object's "[no symbol]", never lost or put elsewhere; the libraries it calls keep their names.
TEST_F(PerfProfile, AStrippedProgramIsCountedByItsObject) {
    const std::string cc = find_in_path("cc");
    if (cc.empty()) GTEST_SKIP() << "no C compiler (cc) to build the program with";
    ScratchDir dir{"stripped"};
    test_support::write_file(dir / "spin.c", R"(
volatile unsigned long sink;
__attribute__((noinline)) static void spin(long n) { for (long i = 0; i < n; ++i) sink += i; }
int main(void) { spin(400000000L); return 0; }
)");
    const std::string program = (dir / "spin").string();
    auto built = run({cc, "-O1", "-s", "-o", program, (dir / "spin.c").string()});
    ASSERT_EQ(built.exit_code, 0) << built.err;
    auto r = daemon_->monctl({"perf", "profile", "--user", "--json", "--", program});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = last_json(r.err);
    ASSERT_TRUE(j.is_object()) << r.err;
    const auto& report = j["report"];
    const std::string unnamed = "[no symbol] (" + program + ")";
    double share = -1;
    for (const auto& l : report["functions"]) {
        if (l["name"] == unnamed) share = l["percent"].get<double>();
    }
    EXPECT_GT(share, 90) << "its loop, without a name: " << r.err;
    EXPECT_GT(report["samples"].get<std::uint64_t>(), 100u) << r.err;
}

}  // namespace
}  // namespace itest
