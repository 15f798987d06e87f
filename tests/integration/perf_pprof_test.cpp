// monctl perf profile --pprof end to end: the real monctl and monitord profile a command of
// known profile (bench/profile_burner: two functions burning 3:1), and go tool pprof (Debian's
// golang-go; without it the tests that need it skip) reads the file monctl wrote: the same
// functions with the same counts as monctl's table of the same run, every function when the
// table shows fewer, and with call chains the same stacks as the --folded file, leaf first.
// A file that cannot be made is refused before the sampling; one that cannot be written is
// said after the table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "monitor/text_file.hpp"
#include "test_support.hpp"

namespace itest {
namespace {

class PerfPprof : public SharedDaemonTest {
  protected:
    PerfPprof() : SharedDaemonTest("sampling a command through the daemon needs root") {}
};

// How often `needle` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

// "1,234" (a locale's separators) as 1234.
std::uint64_t count_in(std::string digits) {
    std::erase_if(digits, [](char c) { return c < '0' || c > '9'; });
    return digits.empty() ? 0 : std::stoull(digits);
}

// monctl's table of functions: each line's name as pprof names it ("burn (/usr/bin/app)" is
// "burn"; "[no symbol] (/usr/lib/libc.so.6)" is "[libc.so.6]", "[no symbol] ([vdso])"
// "[vdso]") and its samples; and the
// profile's samples ("  2,001 samples: user ...").
struct Table {
    std::map<std::string, std::uint64_t> functions;
    std::size_t lines = 0;  // of functions
    std::uint64_t samples = 0;

    static std::string pprof_name(const std::string& line) {
        const auto open = line.rfind(" (");
        if (open == std::string::npos || line.back() != ')') return line;
        const std::string name = line.substr(0, open);
        if (name != "[no symbol]") return name;
        // A file by its name in brackets, a mapping without one ("[vdso]") as it is.
        const std::string file = line.substr(open + 2, line.size() - open - 3);
        return file.starts_with('/') ? "[" + file.substr(file.rfind('/') + 1) + "]" : file;
    }
    static Table of(const std::string& text) {
        Table t;
        std::smatch m;
        if (std::regex_search(text, m, std::regex(R"(\n  ([0-9,.']+) samples:)"))) {
            t.samples = count_in(m[1]);
        }
        std::istringstream in(text);
        bool in_functions = false;
        static const std::regex row(R"(^\s+[0-9.]+%\s+([0-9,.']+)\s+(.+)$)");
        for (std::string line; std::getline(in, line);) {
            if (line.ends_with("samples  function")) {
                in_functions = true;
            } else if (in_functions && std::regex_match(line, m, row)) {
                t.functions[pprof_name(m[2])] += count_in(m[1]);
                ++t.lines;
            } else {
                in_functions = false;
            }
        }
        return t;
    }
};

// go tool pprof -top's rows ("      1500 74.96% 74.96%       1500 74.96%  main"): each
// function's flat and cumulative counts, and the total ("of 2001 total").
struct PprofTop {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> functions;
    std::uint64_t total = 0;

    static PprofTop of(const std::string& text) {
        PprofTop t;
        std::smatch m;
        if (std::regex_search(text, m, std::regex(R"(of ([0-9]+) total)"))) {
            t.total = std::stoull(m[1]);
        }
        static const std::regex row(
            R"(^\s*([0-9]+)\s+[0-9.]+%\s+[0-9.]+%\s+([0-9]+)\s+[0-9.]+%\s+(.+)$)");
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            if (std::regex_match(line, m, row)) {
                t.functions[m[3]] = {std::stoull(m[1]), std::stoull(m[2])};
            }
        }
        return t;
    }
};

// Stacks as folded lines ("app;main;burn" -> samples), outermost first.
using Stacks = std::map<std::string, std::uint64_t>;

// monctl's --folded file.
Stacks folded_stacks(const std::string& text) {
    Stacks s;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto space = line.rfind(' ');
        if (space != std::string::npos)
            s[line.substr(0, space)] += std::stoull(line.substr(space + 1));
    }
    return s;
}

// go tool pprof -traces: blocks between "-----------+----" lines, the first line the count
// and the leaf, then one frame a line towards the root.
Stacks pprof_traces(const std::string& text) {
    Stacks s;
    std::vector<std::string> frames;  // leaf first
    std::uint64_t n = 0;
    auto end_trace = [&] {
        if (frames.empty()) return;
        std::string folded;
        for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
            folded += (folded.empty() ? "" : ";") + *it;
        }
        s[folded] += n;
        frames.clear();
    };
    static const std::regex first(R"(^\s*([0-9]+)\s{3}(.+)$)");
    static const std::regex next(R"(^\s{13}(\S.*)$)");
    std::smatch m;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("-----------+")) {
            end_trace();
        } else if (frames.empty() && std::regex_match(line, m, first)) {
            n = std::stoull(m[1]);
            frames.push_back(m[2]);
        } else if (!frames.empty() && std::regex_match(line, m, next)) {
            frames.push_back(m[1]);
        }
    }
    end_trace();
    return s;
}

// go tool pprof ARGS, with its home and caches in `dir` and no network (GOPROXY=off: nothing
// is fetched; a local file needs nothing).
RunResult go_pprof(const std::string& go, const ScratchDir& dir, std::vector<std::string> args) {
    args.insert(args.begin(), {go, "tool", "pprof"});
    SpawnOptions o;
    o.env = {"HOME=" + dir.path().string(), "GOCACHE=" + (dir / "gocache").string(),
             "PPROF_TMPDIR=" + dir.path().string(), "GOPROXY=off", "GOFLAGS="};
    return run(args, o, 60s);
}

std::string go_or_skip_reason(std::string& go) {
    go = find_in_path("go");
    return go.empty() ? "no go in $PATH (Debian's golang-go, scripts/bootstrap --test): "
                        "nothing reads the pprof file"
                      : "";
}

// The burner's profile: go tool pprof -top lists each of the table's functions with the
// table's count, and every sample; by default it shows the CPU time (samples x 1 ms at
// 1000 Hz of cpu-clock).
TEST_F(PerfPprof, PprofTopAgreesWithMonctlsTable) {
    std::string go;
    if (auto why = go_or_skip_reason(go); !why.empty()) GTEST_SKIP() << why;
    ScratchDir dir{"pprof"};
    const std::string file = (dir / "burner.pb.gz").string();
    auto r = daemon_->monctl(
        {"perf", "profile", "-F", "1000", "--pprof", file, "--", profile_burner_bin(), "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto table = Table::of(r.err);  // a command's profile is on standard error
    ASSERT_TRUE(table.functions.contains("profile_burner_three")) << r.err;
    ASSERT_TRUE(table.functions.contains("profile_burner_one")) << r.err;
    EXPECT_GT(table.samples, 1500u) << "2 s of CPU at 1000 Hz";

    auto shown = go_pprof(
        go, dir, {"-sample_index=samples", "-top", "-nodefraction=0", "-nodecount=100000", file});
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    const auto top = PprofTop::of(shown.out);
    EXPECT_EQ(top.total, table.samples) << "every sample\n" << shown.out;
    for (const auto& [name, samples] : table.functions) {
        // pprof shortens C++ names (no parameters, no templates): C names are compared.
        if (name.find_first_of("(<{") != std::string::npos) continue;
        ASSERT_TRUE(top.functions.contains(name)) << name << "\n" << shown.out;
        EXPECT_EQ(top.functions.at(name).first, samples) << name << "\n" << shown.out;
    }
    // The table's first function is pprof's first.
    const auto most =
        std::ranges::max_element(top.functions, {}, [](const auto& f) { return f.second.first; });
    EXPECT_EQ(most->first, "profile_burner_three") << shown.out;

    auto cpu = go_pprof(go, dir, {"-top", "-unit=ms", file});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_NE(cpu.out.find("Type: cpu"), std::string::npos) << cpu.out;
    const std::string three_ms = std::to_string(table.functions.at("profile_burner_three")) + "ms ";
    EXPECT_NE(cpu.out.find(three_ms), std::string::npos)
        << "a sample at 1000 Hz is 1 ms of the CPU clock: " << three_ms << "\n"
        << cpu.out;
    std::printf("monctl's table:\n%s\ngo tool pprof -top:\n%s\n", r.err.c_str(), shown.out.c_str());
}

// -n 1 cuts the table, not the file: pprof finds the second burner function too, and every
// sample. (monctl asks the daemon for every line and cuts the table itself.)
TEST_F(PerfPprof, TheFileHasEveryFunctionWhatEverTheTableShows) {
    std::string go;
    if (auto why = go_or_skip_reason(go); !why.empty()) GTEST_SKIP() << why;
    ScratchDir dir{"pprof-n1"};
    const std::string file = (dir / "burner.pb.gz").string();
    auto r = daemon_->monctl({"perf", "profile", "-F", "1000", "-n", "1", "--pprof", file, "--",
                              profile_burner_bin(), "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto table = Table::of(r.err);
    EXPECT_EQ(table.lines, 1u) << r.err;
    EXPECT_TRUE(table.functions.contains("profile_burner_three")) << r.err;
    EXPECT_EQ(count_of(r.err, "profile_burner_one"), 0u) << "not in the table: " << r.err;

    auto shown = go_pprof(
        go, dir, {"-sample_index=samples", "-top", "-nodefraction=0", "-nodecount=100000", file});
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    const auto top = PprofTop::of(shown.out);
    EXPECT_EQ(top.total, table.samples) << shown.out;
    ASSERT_TRUE(top.functions.contains("profile_burner_one")) << shown.out;
    EXPECT_GT(top.functions.at("profile_burner_one").first, 100u) << "a quarter of 1 s at 1000 Hz";
    EXPECT_EQ(top.functions.at("profile_burner_three").first,
              table.functions.at("profile_burner_three"));
}

// -g: pprof's traces are the --folded file's stacks of the same run, leaf first; main and the
// process's name are above every burner sample (pprof -top -cum).
TEST_F(PerfPprof, CallChainsAreTheFoldedStacksLeafFirst) {
    std::string go;
    if (auto why = go_or_skip_reason(go); !why.empty()) GTEST_SKIP() << why;
    ScratchDir dir{"pprof-g"};
    const std::string file = (dir / "burner.pb.gz").string();
    const std::string folded = (dir / "burner.folded").string();
    auto r = daemon_->monctl({"perf", "profile", "-g", "-F", "1000", "-n", "3", "--folded", folded,
                              "--pprof", file, "--", profile_burner_bin(), "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto text = monitor::read_text_file(folded);
    ASSERT_TRUE(text) << text.error().to_string();
    const auto ours = folded_stacks(*text);
    ASSERT_FALSE(ours.empty()) << r.err;

    auto traces = go_pprof(go, dir, {"-sample_index=samples", "-traces", file});
    ASSERT_EQ(traces.exit_code, 0) << traces.err;
    const auto theirs = pprof_traces(traces.out);
    // pprof shortens C++ names (no parameters, no templates: "ns::f" for "ns::f<T>(int)"):
    // the stacks whose frames are C names are compared whole.
    for (const auto& [stack, samples] : ours) {
        if (stack.find_first_of("(<{") != std::string::npos) continue;
        auto it = theirs.find(stack);
        ASSERT_NE(it, theirs.end()) << stack << "\npprof -traces:\n" << traces.out.substr(0, 3000);
        EXPECT_EQ(it->second, samples) << stack;
    }
    // The leaf first, its callers under it down to main (an unoptimized build has frames
    // between them).
    const auto leaf = traces.out.find("   profile_burner_three\n");
    ASSERT_NE(leaf, std::string::npos) << traces.out.substr(0, 3000);
    const auto below = traces.out.find(" main\n", leaf);
    EXPECT_LT(below, traces.out.find("-----------", leaf)) << traces.out.substr(0, 3000);

    auto cum =
        go_pprof(go, dir, {"-sample_index=samples", "-top", "-cum", "-nodefraction=0", file});
    ASSERT_EQ(cum.exit_code, 0) << cum.err;
    const auto top = PprofTop::of(cum.out);
    const auto table = Table::of(r.err);
    EXPECT_EQ(top.total, table.samples) << cum.out;
    ASSERT_TRUE(top.functions.contains("main")) << cum.out;
    ASSERT_TRUE(top.functions.contains("bench-profile-b")) << cum.out;
    EXPECT_EQ(top.functions.at("bench-profile-b").second, top.total)
        << "the process's name is every stack's root\n"
        << cum.out;
    const auto burners = top.functions.at("profile_burner_three").first +
                         top.functions.at("profile_burner_one").first;
    EXPECT_GE(top.functions.at("main").second, burners) << "main calls both burners\n" << cum.out;
}

// A file that cannot be made is refused before anything is sampled; one that takes no byte
// (/dev/full) is said after the table, which is shown, and monctl exits with 1.
TEST_F(PerfPprof, FilesThatCannotBeWrittenAreSaid) {
    const std::size_t started = count_of(daemon_->log(), "Profile started");
    auto refused = daemon_->monctl(
        {"perf", "profile", "--duration", "5s", "--pprof", "/nonexistent/dir/p.pb.gz"});
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_NE(refused.err.find(
                  "--pprof /nonexistent/dir/p.pb.gz: cannot write it: No such file or directory"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(refused.out, "") << "no table: nothing was sampled";
    EXPECT_EQ(count_of(daemon_->log(), "Profile started"), started)
        << "refused before the profile started\n"
        << daemon_->log();

    auto full = daemon_->monctl(
        {"perf", "profile", "--duration", "300ms", "-F", "100", "--pprof", "/dev/full"});
    EXPECT_EQ(full.exit_code, 1) << full.err;
    EXPECT_NE(full.out.find("Profile of "), std::string::npos) << "the table still shows\n"
                                                               << full.out;
    EXPECT_NE(full.err.find("--pprof /dev/full: cannot write it: No space left on device"),
              std::string::npos)
        << full.err;
}

}  // namespace
}  // namespace itest
