// monctl top against the real daemon: --once as text, and the live view in a real terminal,
// tmux's, driven with send-keys and read with capture-pane: every CPU, the keys, a smaller
// window, the daemon's restart, quitting, the terminal restored, stepping back in the history;
// 256 CPUs from a fixture /proc/stat scrolled through in 80x24.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "daemon_process.hpp"
#include "synthetic_machine.hpp"

namespace itest {
namespace {

using test_support::write_file;

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in{text};
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// Whether a line of `text` starts with `prefix` followed by a blank.
bool has_row(const std::string& text, const std::string& prefix) {
    for (const auto& l : lines_of(text)) {
        if (l.rfind(prefix + " ", 0) == 0) return true;
    }
    return false;
}

// Columns of a line: its characters, UTF-8 encoded.
std::size_t columns(const std::string& line) {
    std::size_t n = 0;
    for (unsigned char c : line) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
}

// The CPU rows of an 80x24 screen: 24 less the title, the watchdog's and the context's lines,
// the column titles, the machine's row and the keys.
constexpr int kPage = 18;

// The key line's "cpu 19-36 of 256" for a page of kPage rows from `first`.
std::string rows_shown(int first) {
    return "cpu " + std::to_string(first) + "-" + std::to_string(first + kPage - 1) + " of 256";
}

// The machine's row with its four figures.
const std::regex kMachineFigures{R"((^|\n)all +\[[^\]]*\] +\d+\.\d +\d+\.\d +\d+\.\d +\d+\.\d)"};

std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
    return out + "'";
}

std::optional<std::string> find_tmux() {
    const char* path = std::getenv("PATH");
    std::istringstream dirs{path != nullptr ? path : "/usr/bin:/bin"};
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const auto candidate = std::filesystem::path{dir} / "tmux";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return std::nullopt;
}

// A tmux server of the test's own (its socket in a scratch directory, no configuration file)
// with one window running `command` in a UTF-8 locale.
class Tmux {
  public:
    Tmux(std::string tmux, const std::string& command, int width, int height)
        : tmux_(std::move(tmux)) {
        auto r = tmux_run({"new-session", "-d", "-s", "top", "-x", std::to_string(width), "-y",
                           std::to_string(height), command});
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    ~Tmux() { tmux_run({"kill-server"}); }

    RunResult tmux_run(std::vector<std::string> args) const {
        args.insert(args.begin(), {tmux_, "-S", (dir_ / "tmux").string(), "-f", "/dev/null"});
        SpawnOptions o;
        o.env = {"LC_ALL=C.UTF-8"};
        return run(args, o, 10s);
    }
    void keys(const std::string& key) const {
        auto r = tmux_run({"send-keys", "-t", "top", key});
        EXPECT_EQ(r.exit_code, 0) << key << ": " << r.err;
    }
    std::string capture() const { return tmux_run({"capture-pane", "-p", "-t", "top"}).out; }
    // A tmux format of the pane: #{pane_dead}, #{alternate_on}, ...
    std::string show(const std::string& format) const {
        auto out = tmux_run({"display-message", "-p", "-t", "top", format}).out;
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return out;
    }
    // Waits until the screen satisfies `ok`; the last screen is in `screen`.
    bool wait_screen(const std::function<bool(const std::string&)>& ok, std::string& screen,
                     std::chrono::milliseconds timeout = 10s) const {
        return test_support::wait_until(
            [&] {
                screen = capture();
                return ok(screen);
            },
            timeout);
    }
    bool wait_text(const std::string& needle, std::string& screen,
                   std::chrono::milliseconds timeout = 10s) const {
        return wait_screen(
            [&](const std::string& s) { return s.find(needle) != std::string::npos; }, screen,
            timeout);
    }

  private:
    std::string tmux_;
    ScratchDir dir_{ScratchDir::Everyone};
};

class TopInTmux : public ::testing::Test {
  protected:
    void SetUp() override {
        auto t = find_tmux();
        if (!t) GTEST_SKIP() << "tmux is not installed (scripts/bootstrap --test installs it)";
        tmux_ = *t;
    }
    // monctl top in a shell that says how it ended and stays, to see the terminal monctl
    // leaves behind. (tmux's own #{pane_dead_status} is not used: tmux 3.3a may mark a pane
    // dead and leave its process unreaped, without a status, for seconds.)
    static std::string top_command(const Daemon& d, const std::string& extra = "") {
        return quoted(monctl_bin()) + " --socket " + quoted(d.socket()) + " top" + extra +
               "; echo \"monctl exited with $?\"; exec sleep 60";
    }
    // After q or a signal: monctl ended with 0 and gave the terminal back (the alternate
    // screen left, the cursor shown again).
    static void expect_clean_exit(const Tmux& t) {
        std::string screen;
        EXPECT_TRUE(t.wait_text("monctl exited with 0", screen)) << screen;
        EXPECT_EQ(t.show("#{alternate_on} #{cursor_flag}"), "0 1");
    }
    std::string tmux_;
};

// ---- --once and the options ---------------------------------------------------------------

TEST(Top, OncePrintsEveryCpuAndTheMachineAsPlainText) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    const auto status = d->call("GetStatus");
    SpawnOptions ascii;
    ascii.env = {"LC_ALL=C", "COLUMNS=80"};
    auto r = run({monctl_bin(), "--socket", d->socket(), "top", "--once"}, ascii);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("monitord ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("source procstat, by cpu"), std::string::npos) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, kMachineFigures)) << r.out;
    for (int cpu : status["cpus"])
        EXPECT_TRUE(has_row(r.out, "cpu" + std::to_string(cpu))) << r.out;
    for (const auto& l : lines_of(r.out)) EXPECT_LE(columns(l), 80u) << l;
    // Text for scripts: no escape sequences, no colour, and ASCII in the C locale.
    for (char c : r.out) {
        const auto u = static_cast<unsigned char>(c);
        EXPECT_TRUE(c == '\n' || (u >= 0x20 && u < 0x7F)) << "byte " << int(u) << " in\n" << r.out;
    }
    EXPECT_EQ(r.out.find("q quit"), std::string::npos) << "no keys in a printed frame";

    // Wider with $COLUMNS; the sparkline's column grows with it.
    ascii.env = {"LC_ALL=C", "COLUMNS=160"};
    auto wide = run({monctl_bin(), "--socket", d->socket(), "top", "--once"}, ascii);
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    std::size_t longest = 0;
    for (const auto& l : lines_of(wide.out)) longest = std::max(longest, columns(l));
    EXPECT_GT(longest, 80u) << wide.out;
    EXPECT_LE(longest, 160u) << wide.out;
}

TEST(Top, ABadIntervalIsAUsageError) {
    for (const char* bad : {"0", "0.05", "61", "abc", "-1", ""}) {
        auto r = run({monctl_bin(), "--socket", "/nonexistent", "top", "--interval", bad});
        EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
        EXPECT_NE(r.err.find("--interval takes seconds from 0.1 to 60"), std::string::npos)
            << bad << ": " << r.err;
    }
    // A good one gets as far as looking for the daemon.
    auto r = run({monctl_bin(), "--socket", "/nonexistent", "top", "--interval", "250ms"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("cannot reach monitord"), std::string::npos) << r.err;
    EXPECT_EQ(run({monctl_bin(), "--json", "top", "--once"}).exit_code, 2);
}

TEST(Top, WithoutATerminalOnlyOnceWorks) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    auto r = run({monctl_bin(), "--socket", d->socket(), "top"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("top needs a terminal"), std::string::npos) << r.err;
}

// ---- the live view ------------------------------------------------------------------------

TEST_F(TopInTmux, ShowsEveryCpuReactsToKeysShrinksSurvivesARestartAndQuits) {
    auto d = Daemon::start({.args = {"--probe", "spin"}});  // both sources
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    const auto status = d->call("GetStatus");
    ASSERT_EQ(status["sources"].size(), 2u) << status.dump();
    Tmux t(tmux_, top_command(*d, " --interval 0.5"), 100, 30);
    std::string screen;

    auto every_cpu = [&](const std::string& s) {
        if (!std::regex_search(s, kMachineFigures)) return false;
        for (int cpu : status["cpus"]) {
            if (!has_row(s, "cpu" + std::to_string(cpu))) return false;
        }
        return true;
    };
    ASSERT_TRUE(t.wait_screen(every_cpu, screen)) << screen;
    EXPECT_NE(screen.find("source procstat, by cpu"), std::string::npos) << screen;
    EXPECT_EQ(t.show("#{alternate_on}"), "1") << "curses has the screen";

    t.keys("s");
    EXPECT_TRUE(t.wait_text("source probe, by cpu", screen)) << screen;
    EXPECT_NE(screen.find("[load"), std::string::npos) << screen;
    t.keys("s");
    EXPECT_TRUE(t.wait_text("source procstat, by cpu", screen)) << screen;
    t.keys("o");
    EXPECT_TRUE(t.wait_text("source procstat, by load", screen)) << screen;
    t.keys("o");
    EXPECT_TRUE(t.wait_text("source procstat, by cpu", screen)) << screen;
    // The busiest units above the CPUs (or that none used CPU time), taken away by u.
    const std::regex units{R"((^|\n)(UNIT \(\d+ of \d+\) +last +user +sys +avg +max|units: ))"};
    EXPECT_TRUE(std::regex_search(screen, units)) << screen;
    t.keys("u");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) { return !std::regex_search(s, units) && every_cpu(s); }, screen))
        << screen;
    t.keys("u");
    EXPECT_TRUE(
        t.wait_screen([&](const std::string& s) { return std::regex_search(s, units); }, screen))
        << screen;
    // The CPUs' context under the watchdog's line, its rates from the daemon's second reading;
    // each CPU's in its row on c, gone again on c.
    const std::regex context{R"(\ntasks \d+ running, \d+ blocked.*  irq \d[\d,]*/s)"};
    EXPECT_TRUE(
        t.wait_screen([&](const std::string& s) { return std::regex_search(s, context); }, screen))
        << screen;
    const std::regex cpu_context{R"(\nCPU .* last +avg +min +max +wait +MHz +irq/s +sirq/s)"};
    t.keys("c");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) { return std::regex_search(s, cpu_context) && every_cpu(s); },
        screen))
        << screen;
    t.keys("c");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) { return !std::regex_search(s, cpu_context) && every_cpu(s); },
        screen))
        << screen;

    // Each CPU's busiest tasks on t, in the units' place (the spinning probes are busy: the
    // pane has rows once the daemon's second reading is in); > orders them by CPU, t takes
    // them away.
    const std::regex tasks{
        R"(\n cpu +pid +tid +comm +unit \(\d+ of \d+\) +LOAD +user +sys\n +\d+ +\d+ +\d+ \S)"};
    t.keys("t");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) {
            return std::regex_search(s, tasks) && !std::regex_search(s, units) && every_cpu(s);
        },
        screen))
        << screen;
    t.keys(">");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) {
            return std::regex_search(s, std::regex{R"(\n CPU +pid +tid +comm +unit .* load )"});
        },
        screen))
        << screen;
    t.keys("<");
    t.keys("t");
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) {
            return !std::regex_search(s, tasks) && std::regex_search(s, units);
        },
        screen))
        << screen;

    // 80x24: narrower, every figure still there.
    auto r = t.tmux_run({"resize-window", "-t", "top", "-x", "80", "-y", "24"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(t.wait_screen(
        [&](const std::string& s) {
            const auto lines = lines_of(s);
            return lines.size() == 24 && every_cpu(s) &&
                   std::regex_search(s, std::regex{R"(\nCPU +\[.*\] +last +avg +min +max)"});
        },
        screen))
        << screen;
    EXPECT_EQ(t.show("#{window_width}x#{window_height}"), "80x24");
    EXPECT_EQ(screen.rfind("monitord ", 0), 0u) << screen;
    EXPECT_NE(screen.find("source procstat, by cpu"), std::string::npos) << screen;

    // The daemon goes away: said on screen, the last figures kept.
    const std::string socket = d->socket();
    ASSERT_EQ(d->stop(SIGTERM), 0);
    EXPECT_TRUE(t.wait_screen(
        [](const std::string& s) {
            return s.find("daemon gone") != std::string::npos &&
                   s.find("reconnecting every 0.5 s") != std::string::npos;
        },
        screen))
        << screen;
    EXPECT_NE(screen.find("(stale)"), std::string::npos) << screen;

    // It comes back on the same socket: new figures (a younger daemon), no warning.
    Daemon::Options again;
    again.socket = socket;
    again.args = {"--probe", "spin"};
    auto d2 = Daemon::start(again);
    ASSERT_TRUE(d2);
    EXPECT_TRUE(t.wait_screen(
        [&](const std::string& s) {
            return s.find("daemon gone") == std::string::npos &&
                   s.find("(stale)") == std::string::npos && every_cpu(s);
        },
        screen))
        << screen;

    t.keys("q");
    expect_clean_exit(t);
}

// The keys htop's users press: h, ? and F1 show the help, any key takes it away, F10 quits.
// NO_COLOR (no-color.org) takes the colours away: the bar's legend says the letters instead.
TEST_F(TopInTmux, HelpKeysF10AndNoColor) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    for (bool no_color : {false, true}) {
        SCOPED_TRACE(no_color ? "NO_COLOR=1" : "colours");
        // Wide enough for the legend of the letters.
        Tmux t(tmux_, (no_color ? "NO_COLOR=1 " : "NO_COLOR= ") + top_command(*d), 160, 30);
        std::string screen;
        ASSERT_TRUE(t.wait_text("source procstat", screen)) << screen;
        ASSERT_TRUE(t.wait_screen(
            [](const std::string& s) { return std::regex_search(s, kMachineFigures); }, screen))
            << screen;
        // The legend: coloured words, or letters without colours.
        EXPECT_EQ(screen.find("u=user") != std::string::npos, no_color) << screen;
        const auto escapes = t.tmux_run({"capture-pane", "-p", "-e", "-t", "top"}).out;
        // A foreground colour: SGR 30-37, 90-97 or 38;5;N, alone or after other attributes.
        const std::regex colour{R"(\x1b\[([0-9;]*;)?(3[0-7]|9[0-7]|38;5;[0-9]+)(;[0-9;]*)?m)"};
        EXPECT_EQ(std::regex_search(escapes, colour), !no_color) << escapes;

        for (const char* key : {"h", "?", "F1"}) {
            t.keys(key);
            EXPECT_TRUE(t.wait_text("any key returns", screen)) << key << "\n" << screen;
            EXPECT_FALSE(has_row(screen, "all")) << screen;
            t.keys("o");  // takes the help away, sorts nothing
            EXPECT_TRUE(t.wait_screen(
                [](const std::string& s) {
                    return s.find("any key returns") == std::string::npos &&
                           std::regex_search(s, kMachineFigures);
                },
                screen))
                << key << "\n"
                << screen;
            EXPECT_NE(screen.find("source procstat, by cpu"), std::string::npos) << screen;
        }
        t.keys("F10");
        expect_clean_exit(t);
    }
}

// Ctrl-C and SIGTERM leave as q does: the screen is given back (the alternate screen left, the
// cursor shown again) and the exit status is 0.
TEST_F(TopInTmux, CtrlCAndSigtermRestoreTheTerminal) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    for (bool ctrl_c : {true, false}) {
        SCOPED_TRACE(ctrl_c ? "Ctrl-C" : "SIGTERM");
        Tmux t(tmux_, top_command(*d), 100, 30);
        std::string screen;
        ASSERT_TRUE(t.wait_text("source procstat", screen)) << screen;
        ASSERT_EQ(t.show("#{alternate_on} #{cursor_flag}"), "1 0");
        if (ctrl_c) {
            t.keys("C-c");
        } else {
            // monctl is the shell's child.
            const pid_t shell = std::stoi(t.show("#{pane_pid}"));
            pid_t monctl = -1;
            for (const auto& e : std::filesystem::directory_iterator("/proc")) {
                std::ifstream stat(e.path() / "stat");
                std::string pid, comm, state;
                pid_t ppid = 0;
                if (stat >> pid >> comm >> state >> ppid && ppid == shell) monctl = std::stoi(pid);
            }
            ASSERT_GT(monctl, 0);
            ASSERT_EQ(::kill(monctl, SIGTERM), 0);
        }
        expect_clean_exit(t);
    }
}

// ---- 256 CPUs -----------------------------------------------------------------------------

// ---- stepping back ------------------------------------------------------------------------

// A moment of the past, from the history on disk: --once --at, then the keys of the live view
// ([ or Left a minute back, before this daemon started: nothing kept; ] on to now; n now). A
// daemon without a history says so on the last line, and the view stays live.
TEST_F(TopInTmux, StepsBackInTheHistoryAndReturns) {
    ScratchDir state;
    auto d = Daemon::start({.args = {"--state-directory", state.path().string()}});
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(4));
    SpawnOptions ascii;
    ascii.env = {"LC_ALL=C", "COLUMNS=140"};
    auto r = run({monctl_bin(), "--socket", d->socket(), "top", "--once", "--at", "-1s"}, ascii);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(", history at 20"), std::string::npos) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, kMachineFigures)) << "the seconds on disk\n" << r.out;
    EXPECT_EQ(r.out.find("watchdog"), std::string::npos) << "the watchdog is live only\n" << r.out;
    auto bad = run({monctl_bin(), "--socket", d->socket(), "top", "--once", "--at", "teatime"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--at: "), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("teatime"), std::string::npos) << bad.err;

    auto live = [](const std::string& s) {
        return s.find("history at") == std::string::npos &&
               s.find("q quit  h help") != std::string::npos &&
               std::regex_search(s, kMachineFigures);
    };
    {
        Tmux t(tmux_, top_command(*d), 140, 30);
        std::string screen;
        ASSERT_TRUE(t.wait_screen(live, screen)) << screen;
        t.keys("[");
        EXPECT_TRUE(t.wait_text("nothing kept", screen)) << screen;
        EXPECT_NE(screen.find("history on disk: [ ] a minute back or on"), std::string::npos)
            << screen;
        t.keys("]");
        EXPECT_TRUE(t.wait_screen(live, screen)) << "a minute on is now\n" << screen;
        t.keys("Left");
        EXPECT_TRUE(t.wait_text("history at", screen)) << screen;
        t.keys("n");
        EXPECT_TRUE(t.wait_screen(live, screen)) << screen;
        t.keys("q");
        expect_clean_exit(t);
    }
    auto plain = Daemon::start();  // on a socket of its own: no history
    ASSERT_TRUE(plain);
    ASSERT_TRUE(plain->wait_samples(2));
    Tmux t(tmux_, top_command(*plain), 140, 30);
    std::string screen;
    ASSERT_TRUE(t.wait_screen(live, screen)) << screen;
    t.keys("[");
    EXPECT_TRUE(
        t.wait_text("no history there: since/until: this monitord keeps no history", screen))
        << screen;
    EXPECT_EQ(screen.find("history at"), std::string::npos) << "still live\n" << screen;
    t.keys("q");
    expect_clean_exit(t);
}

// A machine of 256 CPUs (SyntheticMachine): cpu200 busy all the time, cpu N N % 50 percent
// of it; now, and a second ago from the history on disk.
TEST_F(TopInTmux, TwoHundredFiftySixCpusScrollIn80x24) {
    SyntheticMachine machine(256);
    ScratchDir state;
    Daemon::Options o;
    o.args = machine.daemon_args();
    o.args.insert(o.args.end(), {"--state-directory", state.path().string()});
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    ASSERT_EQ(d->call("GetStatus")["cpus"].size(), 256u);

    // --once: every CPU, each line within 80 columns.
    SpawnOptions narrow;
    narrow.env = {"COLUMNS=80"};
    auto once = run({monctl_bin(), "--socket", d->socket(), "top", "--once"}, narrow);
    ASSERT_EQ(once.exit_code, 0) << once.err;
    for (int cpu = 0; cpu < 256; ++cpu) {
        EXPECT_TRUE(has_row(once.out, "cpu" + std::to_string(cpu))) << cpu;
    }
    for (const auto& l : lines_of(once.out)) EXPECT_LE(columns(l), 80u) << l;
    // cpu200, all busy: three quarters user, one system (as stat_text splits it).
    EXPECT_TRUE(std::regex_search(once.out, std::regex{R"(\ncpu200 +\[u{15}s{5}\] +100\.0)"}))
        << once.out;

    Tmux t(tmux_, top_command(*d), 80, 24);
    std::string screen;
    ASSERT_TRUE(t.wait_text(rows_shown(1), screen)) << screen;
    EXPECT_TRUE(has_row(screen, "cpu0"));
    EXPECT_FALSE(has_row(screen, "cpu255"));
    // The top stays while scrolling; PgDn reaches the last CPU.
    auto top_stays = [](const std::string& s) {
        const auto lines = lines_of(s);
        return lines.size() >= 5 && lines[0].rfind("monitord ", 0) == 0 &&
               lines[3].rfind("CPU ", 0) == 0 && lines[4].rfind("all ", 0) == 0;
    };
    int presses = 0;
    while (!has_row(screen, "cpu255") && presses < 20) {
        t.keys("NPage");
        ++presses;
        const std::string expected = rows_shown(std::min(kPage * presses, 256 - kPage) + 1);
        ASSERT_TRUE(t.wait_text(expected, screen)) << expected << " in\n" << screen;
        EXPECT_TRUE(top_stays(screen)) << screen;
    }
    EXPECT_TRUE(has_row(screen, "cpu255")) << screen;
    EXPECT_EQ(presses, 14);  // 256 rows, 18 a page
    t.keys("Home");
    EXPECT_TRUE(t.wait_text(rows_shown(1), screen)) << screen;
    t.keys("End");
    EXPECT_TRUE(t.wait_text(rows_shown(256 - kPage + 1), screen)) << screen;
    EXPECT_TRUE(has_row(screen, "cpu255")) << screen;

    // By load: the busiest first.
    t.keys("Home");
    t.keys("o");
    EXPECT_TRUE(t.wait_screen(
        [](const std::string& s) {
            const auto lines = lines_of(s);
            return lines.size() > 5 && lines[5].rfind("cpu200 ", 0) == 0;
        },
        screen))
        << screen;
    t.keys("q");
    expect_clean_exit(t);

    // The same from the history on disk: every CPU's second, and the rows scroll there too
    // (a second ago is kept once the writer has had it: a few seconds after the start).
    ASSERT_TRUE(d->wait_samples(5));
    once = run({monctl_bin(), "--socket", d->socket(), "top", "--once", "--at", "-1s"}, narrow);
    ASSERT_EQ(once.exit_code, 0) << once.err;
    EXPECT_TRUE(std::regex_search(once.out,
                                  std::regex{R"(, history at 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\n)"}))
        << "the moment whole, in 80 columns\n"
        << once.out;
    for (int cpu = 0; cpu < 256; ++cpu) {
        ASSERT_TRUE(has_row(once.out, "cpu" + std::to_string(cpu))) << cpu << "\n" << once.out;
    }
    // Its bar as wide as the sparkline leaves it: three quarters user, a quarter system.
    EXPECT_TRUE(std::regex_search(once.out, std::regex{R"(\ncpu200 +\[u{20,}s{5,}\] +100\.0)"}))
        << once.out;
    Tmux past(tmux_, top_command(*d, " --at -1s"), 80, 24);
    ASSERT_TRUE(past.wait_text(" of 256   history on disk:", screen)) << screen;
    EXPECT_TRUE(has_row(screen, "cpu0")) << screen;
    past.keys("End");
    ASSERT_TRUE(past.wait_screen([](const std::string& s) { return has_row(s, "cpu255"); }, screen))
        << screen;
    EXPECT_NE(screen.find("-256 of 256   history on disk:"), std::string::npos) << screen;
    EXPECT_NE(screen.find("history at"), std::string::npos) << "still in the past\n" << screen;
    past.keys("q");
    expect_clean_exit(past);
}

}  // namespace
}  // namespace itest
