// Breakpoint counting end to end: the real monctl against the real monitord, and perf stat
// beside it, counting the breakpoints of a process that writes a variable and calls a
// function a known number of times.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "breakpoint_probe.hpp"
#include "daemon_process.hpp"
#include "test_support.hpp"

namespace itest {
namespace {

constexpr std::uint32_t kTimes = 20'000;

}  // namespace
}  // namespace itest

// What the target writes and calls, by these names (monctl) and at these addresses (perf
// stat): a forked child has them where the test has them.
extern "C" {
[[gnu::used]] volatile std::uint32_t itest_breakpoint_written = 0;
[[gnu::noinline, gnu::used]] void itest_breakpoint_called() {
    asm volatile("" ::: "memory");
}
}

namespace itest {
namespace {

std::string hex(std::uintptr_t a) {
    std::ostringstream s;
    s << "0x" << std::hex << a;
    return s.str();
}

// A child that, told to go, writes g_written and calls called() kTimes each, says it is
// done, and exits when told to.
class Target {
  public:
    Target() {
        int go[2];
        int done[2];
        // Close-on-exec: a program the test starts (perf) must not hold them open.
        if (::pipe2(go, O_CLOEXEC) < 0 || ::pipe2(done, O_CLOEXEC) < 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(go[1]);
            ::close(done[0]);
            char byte = 0;
            if (::read(go[0], &byte, 1) != 1) ::_exit(1);
            for (std::uint32_t i = 0; i < kTimes; ++i) {
                itest_breakpoint_written = i;
                itest_breakpoint_called();
            }
            (void)::write(done[1], "d", 1);
            while (::read(go[0], &byte, 1) > 0) {
            }
            ::_exit(0);
        }
        ::close(go[0]);
        ::close(done[1]);
        go_ = go[1];
        done_ = done[0];
    }
    ~Target() {
        finish();
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    // Runs the loop; true once it is done.
    bool run() {
        char byte = 'g';
        if (::write(go_, &byte, 1) != 1) return false;
        return ::read(done_, &byte, 1) == 1;
    }
    // Lets it exit, and waits for that.
    void finish() {
        if (go_ >= 0) ::close(go_);
        if (done_ >= 0) ::close(done_);
        go_ = done_ = -1;
        if (pid_ > 0 && ::waitpid(pid_, nullptr, 0) == pid_) pid_ = -1;
    }

  private:
    pid_t pid_ = -1;
    int go_ = -1;
    int done_ = -1;
};

class PerfBreakpoints : public SharedDaemonTest {
  protected:
    PerfBreakpoints() : SharedDaemonTest("counting another process needs root") {}
    void SetUp() override {
        SharedDaemonTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        auto info = daemon_->call("GetPmuInfo");
        for (const auto& p : info["pmus"]) {
            if (p["name"] != "breakpoint") continue;
            if (p["unavailable"].is_string()) {
                GTEST_SKIP() << "no breakpoints here: " << p["unavailable"].get<std::string>();
            }
            slots_ = p["counters"].get<int>();
        }
        ASSERT_GT(slots_, 0) << "GetPmuInfo lists no breakpoint PMU: " << info.dump();
    }

    int slots_ = 0;
};

// The count perf stat -x, printed for `event` ("20000,,mem:0x4010:w:u,..."), if any.
std::optional<std::uint64_t> perf_count(const std::string& csv, const std::string& event) {
    std::istringstream in(csv);
    for (std::string line; std::getline(in, line);) {
        if (line.find("," + event + ",") == std::string::npos) continue;
        try {
            return std::stoull(line.substr(0, line.find(',')));
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

TEST_F(PerfBreakpoints, InfoSaysHowManyBreakpointsTheMachineHas) {
    auto r = daemon_->monctl({"perf", "info"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("breakpoint: " + std::to_string(slots_) + " breakpoint register"),
              std::string::npos)
        << r.out;
    auto list = daemon_->monctl({"perf", "list", "breakpoint"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_NE(list.out.find("mem:ADDR[/LEN][:ACCESS]"), std::string::npos) << list.out;
}

// A write breakpoint on a variable written K times counts K, an execute breakpoint on a
// function called K times counts K, and perf stat, counting the same process at the same
// time, says the same. monctl names them by symbol (the daemon finds them in the
// position-independent process where the loader put them), perf stat by address.
TEST_F(PerfBreakpoints, WritesAndCallsCountExactlyAsPerfStatCountsThem) {
    if (slots_ < 4) GTEST_SKIP() << "monctl and perf stat need 2 breakpoints each";
    if (auto why = test_support::breakpoints_do_not_fire(); !why.empty()) GTEST_SKIP() << why;
    const std::string write = "mem:itest_breakpoint_written:w:u";
    const std::string exec = "mem:itest_breakpoint_called:x:u";
    const std::string events = write + "," + exec;
    const std::string perf_write =
        "mem:" + hex(reinterpret_cast<std::uintptr_t>(&itest_breakpoint_written)) + ":w:u";
    const std::string perf_exec =
        "mem:" + hex(reinterpret_cast<std::uintptr_t>(&itest_breakpoint_called)) + ":x:u";
    Target target;
    ASSERT_GT(target.pid(), 0);
    const std::string pid = std::to_string(target.pid());

    std::unique_ptr<Process> perf;
    if (const std::string perf_bin = find_in_path("perf"); !perf_bin.empty()) {
        perf = Process::start(
            {perf_bin, "stat", "-x,", "-p", pid, "-e", perf_write + "," + perf_exec});
        // Counting once its two breakpoints are open.
        if (!test_support::wait_until([&] { return perf_event_fds(perf->pid()) >= 2; }, 10s)) {
            perf->stop(SIGINT);
            ADD_FAILURE() << "perf stat did not open its breakpoints: " << perf->log();
            perf.reset();
        }
    }
    auto start = daemon_->monctl({"perf", "start", "-p", pid, "-e", events});
    ASSERT_EQ(start.exit_code, 0) << start.err;
    ASSERT_TRUE(target.run());
    auto stop = daemon_->monctl({"perf", "stop", "--json"});
    ASSERT_EQ(stop.exit_code, 0) << stop.err;
    target.finish();

    auto j = nlohmann::json::parse(stop.out);
    EXPECT_EQ(check_reply("StopCounters", j), "");
    const auto& counted = j["report"]["events"];
    ASSERT_EQ(counted.size(), 2u) << stop.out;
    EXPECT_EQ(counted[0]["name"], write);
    EXPECT_EQ(counted[0]["value"]["count"].get<std::uint64_t>(), kTimes) << stop.out;
    EXPECT_EQ(counted[1]["name"], exec);
    EXPECT_EQ(counted[1]["value"]["count"].get<std::uint64_t>(), kTimes) << stop.out;

    if (!perf) GTEST_SKIP() << "no perf in $PATH (Debian's linux-perf): monctl alone checked";
    ASSERT_TRUE(test_support::wait_until([&] { return !perf->alive(); }, 10s))
        << "perf stat did not end with the process";
    const std::string out = perf->log();
    EXPECT_EQ(perf_count(out, perf_write), kTimes) << out;
    EXPECT_EQ(perf_count(out, perf_exec), kTimes) << out;
    std::printf("%u writes and calls: monctl counted %s and %s, perf stat %s and %s\n", kTimes,
                counted[0]["value"]["count"].dump().c_str(),
                counted[1]["value"]["count"].dump().c_str(),
                std::to_string(perf_count(out, perf_write).value_or(0)).c_str(),
                std::to_string(perf_count(out, perf_exec).value_or(0)).c_str());
}

// A program that writes `counted` and calls called() as often as its argument says.
constexpr std::string_view kCountingProgram = R"(
volatile int counted;
__attribute__((noinline)) void called(void) { __asm__ volatile(""); }
int main(int argc, char** argv) {
    int k = 0;
    for (const char* p = argc > 1 ? argv[1] : "0"; *p; ++p) k = 10 * k + (*p - '0');
    for (int i = 0; i < k; ++i) { counted = i; called(); }
    return 0;
}
)";

// A command's symbols are placed before it runs, from its executable: it must be linked at
// fixed addresses; a position-independent one is refused saying what to do instead.
TEST_F(PerfBreakpoints, ACommandsSymbolsArePlacedBeforeItRuns) {
    if (slots_ < 2) GTEST_SKIP() << "2 breakpoints needed";
    const std::string cc = find_in_path("cc");
    if (cc.empty()) GTEST_SKIP() << "no C compiler (cc) to build the command with";
    ScratchDir dir{"breakpoints"};
    test_support::write_file(dir / "counting.c", std::string(kCountingProgram));
    const std::string fixed = (dir / "fixed").string();
    const std::string pie = (dir / "pie").string();
    auto built = run({cc, "-O1", "-no-pie", "-o", fixed, (dir / "counting.c").string()});
    ASSERT_EQ(built.exit_code, 0) << built.err;
    built = run({cc, "-O1", "-fPIE", "-pie", "-o", pie, (dir / "counting.c").string()});
    ASSERT_EQ(built.exit_code, 0) << built.err;

    auto r = daemon_->monctl(
        {"perf", "stat", "-e", "mem:counted:w:u,mem:called:x:u", "--", fixed, "777"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Where breakpoints do not fire, the refusals are still checked, and the test is reported
    // as skipped at its end.
    const std::string no_counts = test_support::breakpoints_do_not_fire();
    if (no_counts.empty()) {
        EXPECT_NE(r.err.find("777      mem:counted:w:u"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("777      mem:called:x:u"), std::string::npos) << r.err;
    }

    auto refused = daemon_->monctl({"perf", "stat", "-e", "mem:counted:w:u", "--", pie, "7"});
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_NE(refused.err.find(pie + " is position-independent"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("monctl perf collect -p PID"), std::string::npos) << refused.err;

    auto unknown = daemon_->monctl({"perf", "stat", "-e", "mem:uncounted:w", "--", fixed, "7"});
    EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
    EXPECT_NE(unknown.err.find("has no function or variable 'uncounted'"), std::string::npos)
        << unknown.err;
    if (!no_counts.empty()) GTEST_SKIP() << "counts not checked: " << no_counts;
}

// Each mistake is a clear error naming the event, and the daemon serves on.
TEST_F(PerfBreakpoints, BadBreakpointsAreRefusedClearly) {
    struct Case {
        std::string events;
        std::string says;
    };
    std::string named;
    for (int i = 0; i <= slots_; ++i) {
        named += (i == 0 ? "mem:" : ",mem:") + hex(0x1000u * (i + 1)) + ":w";
    }
    std::vector<Case> cases = {
        {"mem:2nd", "mem:2nd: '2nd' is neither an address"},
        {"mem:main", "a symbol names an address in one program, and this target is whole CPUs"},
        {"mem:0x1000/16:w", "length '16': a breakpoint covers 1, 2, 4 or 8 bytes"},
        {named, "count at most " + std::to_string(slots_) + " at once"},
    };
#if defined(__x86_64__) || defined(__i386__)
    cases.push_back({"mem:0x1000:r", "x86 breakpoints cannot count reads alone: use :rw"});
    cases.push_back({"mem:0x1001/2:w", "not a multiple of the length 2"});
#endif
    for (const auto& c : cases) {
        auto r = daemon_->monctl({"perf", "collect", "-e", c.events, "--duration", "100ms"});
        EXPECT_EQ(r.exit_code, 1) << c.events;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << c.events << ": " << r.err;
    }
    EXPECT_EQ(daemon_->monctl({"status"}).exit_code, 0) << "the daemon serves on";
}

}  // namespace
}  // namespace itest
