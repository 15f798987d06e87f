// Shell completion: the bash script (tools/monctl/completions/monctl.bash) run by a real bash
// as it runs at a tab, against the real monctl and monitord; fish's and zsh's where those
// shells are installed (scripts/bootstrap --test installs them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_process.hpp"

namespace itest {
namespace {

std::filesystem::path completions_dir() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, before any thread
    const char* dir = std::getenv("MONCTL_COMPLETIONS");
    return dir != nullptr ? dir : "tools/monctl/completions";
}

// The single-quoted shell word of `s`.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
    return q + "'";
}

std::set<std::string> lines(const std::string& text) {
    std::set<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        if (!l.empty()) out.insert(l);
    }
    return out;
}

class Completion : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        conf_dir_ = new ScratchDir{ScratchDir::Everyone};
        const auto conf = *conf_dir_ / "monitord.conf";
        test_support::write_file(conf,
                                 "[[counters]]\nname = \"clock\"\nevents = \"perf::TASK-CLOCK\"\n");
        daemon_ = Daemon::start({.args = {"--probe", "off", "--config", conf.string()}}).release();
    }
    static void TearDownTestSuite() {
        delete daemon_;
        daemon_ = nullptr;
        delete conf_dir_;
        conf_dir_ = nullptr;
    }
    void SetUp() override {
        ASSERT_TRUE(daemon_) << "the daemon did not start";
        if (find_in_path("bash").empty()) GTEST_SKIP() << "no bash";
    }

    // What bash offers at the end of `line` (after "monctl "), as at a tab: COMP_LINE,
    // COMP_POINT and bash's own COMP_WORDS/COMP_CWORD (split at COMP_WORDBREAKS, as
    // readline does) set, the script's function run, COMPREPLY printed a line each.
    static std::set<std::string> bash(const std::string& line) {
        const std::string full = monctl_bin() + " --socket " + daemon_->socket() + " " + line;
        const std::string script =
            "source " + quoted((completions_dir() / "monctl.bash").string()) +
            "\nCOMP_LINE=" + quoted(full) + "\nCOMP_POINT=${#COMP_LINE}\n" +
            // bash's words: the line split at blanks, and at ':' and '=' kept as words.
            "words=()\nrest=$COMP_LINE\n"
            "while [[ -n $rest ]]; do\n"
            "  if [[ $rest =~ ^[[:space:]]+ ]]; then rest=${rest:${#BASH_REMATCH}}; continue; fi\n"
            "  if [[ $rest =~ ^[:=]+ ]]; then words+=(\"$BASH_REMATCH\");"
            " rest=${rest:${#BASH_REMATCH}}; continue; fi\n"
            "  [[ $rest =~ ^[^[:space:]:=]+ ]]; words+=(\"$BASH_REMATCH\");"
            " rest=${rest:${#BASH_REMATCH}}\n"
            "done\n"
            "[[ $COMP_LINE =~ [[:space:]]$ ]] && words+=('')\n"
            "COMP_WORDS=(\"${words[@]}\")\nCOMP_CWORD=$((${#words[@]} - 1))\n"
            "_monctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n";
        auto r = run({find_in_path("bash"), "--norc", "-c", script});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return lines(r.out);
    }

    static Daemon* daemon_;
    static ScratchDir* conf_dir_;
};
Daemon* Completion::daemon_ = nullptr;
ScratchDir* Completion::conf_dir_ = nullptr;

TEST_F(Completion, BashOffersTheCommandsThenTheirSubcommands) {
    EXPECT_EQ(bash(""), (std::set<std::string>{"loading", "perf", "status", "top", "watchdog"}));
    EXPECT_EQ(bash("pe"), (std::set<std::string>{"perf"}));
    const auto perf = bash("perf ");
    for (const char* sub : {"collect", "info", "list", "overflows", "plan", "profile", "read",
                            "pause", "reset", "resume", "show", "start", "stat", "stop"}) {
        EXPECT_TRUE(perf.contains(sub)) << sub;
    }
    EXPECT_EQ(bash("perf co"), (std::set<std::string>{"collect"}));
}

TEST_F(Completion, BashOffersTheOptionsOfTheCommandAndMonctlsOwn) {
    const auto collect = bash("perf collect --");
    for (const char* o : {"--events", "--duration", "--interval", "--per-cpu", "--unit", "--mux",
                          "--csv", "--socket", "--json", "--help"}) {
        EXPECT_TRUE(collect.contains(o)) << o;
    }
    EXPECT_FALSE(collect.contains("--watch")) << "loading's, not collect's";
    EXPECT_EQ(bash("loading --hi"), (std::set<std::string>{"--history"}));
}

// Event names come from the running daemon, each item of a list in turn, through bash's
// splitting of the word at each ':'.
TEST_F(Completion, BashOffersTheDaemonsEventNames) {
    const auto events = bash("perf collect -e ");
    EXPECT_TRUE(events.contains("perf::TASK-CLOCK")) << events.size() << " names";
    EXPECT_TRUE(events.contains("perf::CONTEXT-SWITCHES"));
    // Bash replaces its own last word, the part after the last ':'.
    EXPECT_EQ(bash("perf collect -e perf::TASK-C"), (std::set<std::string>{"TASK-CLOCK"}));
    EXPECT_EQ(bash("perf stat --events perf::TASK-CLOCK,perf::CONTEXT-S"),
              (std::set<std::string>{"CONTEXT-SWITCHES"}));
    EXPECT_EQ(bash("perf profile -e perf::CPU-CL"), (std::set<std::string>{"CPU-CLOCK"}));
}

// -M offers the groups and metrics that can count on the daemon's machine, a list's last item
// in turn.
TEST_F(Completion, BashOffersTheMetricsThatCountHere) {
    const auto metrics = bash("perf collect -M ");
    EXPECT_TRUE(metrics.contains("sched")) << metrics.size() << " names";
    EXPECT_TRUE(metrics.contains("cpus_utilized"));
    EXPECT_EQ(bash("perf collect -M ipc,sch"), (std::set<std::string>{"ipc,sched"}));
    EXPECT_EQ(bash("perf plan --metrics context_switches_per_s"),
              (std::set<std::string>{"context_switches_per_second"}));
}

TEST_F(Completion, BashOffersValuesFromTheDaemonAndTheMachine) {
    EXPECT_EQ(bash("perf show "), (std::set<std::string>{"clock"})) << "the standing sessions";
    EXPECT_TRUE(bash("perf list ").contains("perf")) << "the PMUs";
    EXPECT_EQ(bash("perf collect --mux "), (std::set<std::string>{"daemon", "kernel"}));
    EXPECT_EQ(bash("perf profile --call-graph "), (std::set<std::string>{"fp", "dwarf"}));
    EXPECT_TRUE(bash("perf collect -C ").contains("0")) << "the online CPUs";
    // A file name where one is wanted.
    const auto files = bash("perf profile --folded /et");
    EXPECT_TRUE(files.contains("/etc")) << files.size();
    EXPECT_EQ(bash("perf profile --pp"), (std::set<std::string>{"--pprof"}));
    const auto pprof_files = bash("perf profile --pprof /et");
    EXPECT_TRUE(pprof_files.contains("/etc")) << pprof_files.size();
    // Nothing for a number.
    EXPECT_TRUE(bash("perf collect -d ").empty());
}

// A unit that runs something has a cgroup of its name: a made-up one in the cpu controller's
// hierarchy is offered, as the units of a systemd machine are.
TEST_F(Completion, BashOffersTheUnitsWithACgroup) {
    const std::filesystem::path cpu = "/sys/fs/cgroup/cpu";
    if (::geteuid() != 0 || !std::filesystem::is_directory(cpu)) {
        GTEST_SKIP() << "needs root and a cgroup hierarchy at " << cpu;
    }
    const auto unit = cpu / ("monctl-completion-" + std::to_string(::getpid()) + ".service");
    std::error_code ec;
    std::filesystem::create_directory(unit, ec);
    if (ec) GTEST_SKIP() << "cannot make " << unit << ": " << ec.message();
    const auto offered = bash("perf collect --unit monctl-completion");
    std::filesystem::remove(unit, ec);
    EXPECT_EQ(offered, (std::set<std::string>{unit.filename().string()}));
}

// Without a daemon, commands and options still complete, and event names are simply not
// offered (no error on the terminal).
TEST_F(Completion, WithoutADaemonTheNamesAreJustNotOffered) {
    auto r = run({monctl_bin(), "__complete", "--socket", "/nonexistent/socket", "perf", "collect",
                  "-e", ""});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
    auto subs = run({monctl_bin(), "__complete", "--socket", "/nonexistent/socket", "perf", "st"});
    EXPECT_TRUE(lines(subs.out).contains("stat")) << subs.out;
}

TEST_F(Completion, FishOffersTheSame) {
    const auto fish = find_in_path("fish");
    if (fish.empty())
        GTEST_SKIP() << "fish is not installed (scripts/bootstrap --test installs it)";
    const std::string script =
        "source " + quoted((completions_dir() / "monctl.fish").string()) + "; complete -c " +
        quoted(monctl_bin()) + " -f -a '(__monctl_complete)'; complete -C " +
        quoted(monctl_bin() + " --socket " + daemon_->socket() + " perf collect -e perf::TASK-C");
    auto r = run({fish, "--no-config", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(lines(r.out).contains("perf::TASK-CLOCK")) << r.out;
}

TEST_F(Completion, ZshReadsTheScript) {
    const auto zsh = find_in_path("zsh");
    if (zsh.empty()) GTEST_SKIP() << "zsh is not installed (scripts/bootstrap --test installs it)";
    auto r = run({zsh, "-n", (completions_dir() / "_monctl").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace itest
