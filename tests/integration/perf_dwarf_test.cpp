// Call chains without frame pointers, end to end: the real monctl and monitord profile a
// program built with -O2 -fomit-frame-pointer (tests/integration/qsort_burner.c) whose work is
// libc's qsort calling back into it, with --call-graph dwarf, and perf record --call-graph
// dwarf profiles the same program: both find the callback under libc's qsort, under
// burner_sort, under main. With -g (frame pointers) monctl's chains break in libc: the case
// dwarf is for. Each tool's top stacks, samples, times and bytes per sample are printed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

class PerfDwarf : public SharedDaemonTest {
  protected:
    PerfDwarf() : SharedDaemonTest("profiling a command through the daemon needs root") {}
};

std::string qsort_burner_bin() {
    const char* bin = std::getenv("QSORT_BURNER_BIN");
    return bin != nullptr ? bin : "";
}

// Folded stacks: frames outermost first, and their samples.
struct Stacks {
    std::map<std::vector<std::string>, std::uint64_t> stacks;
    std::uint64_t samples = 0;

    void add(std::vector<std::string> frames, std::uint64_t n) {
        samples += n;
        stacks[std::move(frames)] += n;
    }

    // monctl's --folded file: "a;b;c N" lines.
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
    // perf script -F ip,sym: each sample's chain innermost first, one "ip sym" line a frame,
    // samples apart by blank lines; "[process]" stands for the process's name.
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
            // "qsort_r+0x1f (/usr/lib/...)" or "qsort_r": the symbol alone.
            sym = sym.substr(0, sym.find_first_of("+ ("));
            chain.push_back(sym.empty() ? "[unknown]" : sym);
        }
        end_sample();
        return s;
    }

    // The share (percent of all samples) of the stacks that end in burner_compare, and of
    // those that have libc's qsort (qsort_r, which qsort jumps to), burner_sort and main above
    // it, in that order.
    struct Shares {
        double compare = 0;
        double whole = 0;  // of compare's
    };
    Shares shares() const {
        std::uint64_t compare = 0, whole = 0;
        for (const auto& [frames, n] : stacks) {
            if (frames.empty() || frames.back() != "burner_compare") continue;
            compare += n;
            // The frames after the process's name (itest-qsort-burner's has "qsort" in it).
            const auto at = [&](auto pred) {
                return std::find_if(frames.begin() + 1, frames.end(), pred) - frames.begin();
            };
            const auto main = at([](const std::string& f) { return f == "main"; });
            const auto sort = at([](const std::string& f) { return f == "burner_sort"; });
            const auto qsort =
                at([](const std::string& f) { return f.find("qsort") != std::string::npos; });
            const auto last = static_cast<std::ptrdiff_t>(frames.size()) - 1;
            if (main < sort && sort < qsort && qsort < last) whole += n;
        }
        const auto pct = [](std::uint64_t n, std::uint64_t of) {
            return of == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(of);
        };
        return {pct(compare, samples), pct(whole, compare)};
    }

    // The top `n` stacks with their samples, one a line, the frames between main and the
    // callback that are libc's own ("[libc.so.6]", msort_with_tmp...) shown as one "...".
    std::string top(std::size_t n) const {
        std::vector<std::pair<std::uint64_t, std::string>> lines;
        for (const auto& [frames, count] : stacks) {
            std::string text;
            std::string last;
            for (std::size_t i = 1; i < frames.size(); ++i) {  // the process's name left out
                const auto& f = frames[i];
                const bool libc =
                    f.find("qsort") == std::string::npos &&
                    (f.starts_with("[libc") || f.starts_with("msort") || f == "[unknown]");
                const std::string shown = libc ? "..." : f;
                if (shown == "..." && last == "...") continue;
                text += (text.empty() ? "" : ";") + shown;
                last = shown;
            }
            lines.emplace_back(count, text);
        }
        // The same stack with its libc frames apart counts as one.
        std::map<std::string, std::uint64_t> merged;
        for (const auto& [count, text] : lines) merged[text] += count;
        std::vector<std::pair<std::uint64_t, std::string>> sorted;
        for (const auto& [text, count] : merged) sorted.emplace_back(count, text);
        std::ranges::sort(sorted, std::greater{});
        std::string out;
        for (std::size_t i = 0; i < std::min(n, sorted.size()); ++i) {
            out += fmt::format("  {:6.1f} %  {}\n",
                               100.0 * static_cast<double>(sorted[i].first) /
                                   static_cast<double>(std::max<std::uint64_t>(samples, 1)),
                               sorted[i].second);
        }
        return out;
    }
};

// Runs `argv`, timed: its result and its wall time in seconds.
std::pair<RunResult, double> timed(const std::vector<std::string>& argv) {
    const auto start = std::chrono::steady_clock::now();
    auto r = run(argv, {}, 60s);
    return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

TEST_F(PerfDwarf, DwarfChainsGoThroughLibcAsPerfRecordsDo) {
    const std::string burner = qsort_burner_bin();
    ASSERT_FALSE(burner.empty()) << "QSORT_BURNER_BIN is not set (tests/integration/meson.build)";
    ScratchDir dir{"profile-dwarf"};
    const std::string dwarf_file = (dir / "dwarf.folded").string();
    const std::string fp_file = (dir / "fp.folded").string();

    // monctl with dwarf: the callback under qsort_r, burner_sort and main.
    auto [dwarf, dwarf_seconds] =
        timed({monctl_bin(), "--socket", daemon_->socket(), "perf", "profile", "--call-graph",
               "dwarf", "-F", "1000", "-n", "3", "--folded", dwarf_file, "--", burner, "2"});
    if (dwarf.exit_code != 0 && dwarf.err.find("x86-64") != std::string::npos) {
        GTEST_SKIP() << dwarf.err;
    }
    ASSERT_EQ(dwarf.exit_code, 0) << dwarf.out << dwarf.err;
    auto text = monitor::read_text_file(dwarf_file);
    ASSERT_TRUE(text) << text.error().to_string();
    const auto ours = Stacks::folded(*text);
    EXPECT_GT(ours.samples, 1500u) << "2 s of CPU at 1000 Hz";
    std::smatch lost;
    if (std::regex_search(dwarf.out, lost, std::regex(R"(([0-9,]+) lost)"))) {
        std::printf("monctl says: %s\n", lost[0].str().c_str());
    }
    const auto our_shares = ours.shares();
    EXPECT_GT(our_shares.compare, 50) << "the callback does most of the work\n" << *text;
    EXPECT_GT(our_shares.whole, 90) << "main;burner_sort;qsort_r;...;burner_compare\n" << *text;

    // monctl with frame pointers: the chains break in libc, which has none.
    auto [fp, fp_seconds] =
        timed({monctl_bin(), "--socket", daemon_->socket(), "perf", "profile", "-g", "-F", "1000",
               "-n", "3", "--folded", fp_file, "--", burner, "2"});
    ASSERT_EQ(fp.exit_code, 0) << fp.out << fp.err;
    auto fp_text = monitor::read_text_file(fp_file);
    ASSERT_TRUE(fp_text) << fp_text.error().to_string();
    const auto fps = Stacks::folded(*fp_text);
    const auto fp_shares = fps.shares();
    EXPECT_GT(fp_shares.compare, 50) << *fp_text;
    EXPECT_LT(fp_shares.whole, 50) << "frame pointers end in libc's qsort\n" << *fp_text;

    std::printf(
        "monctl --call-graph dwarf: %llu samples in %.2f s (wall), %.1f %% in the "
        "callback, %.1f %% of those with qsort_r, burner_sort and main above; ring "
        "%d KiB per CPU, up to %u bytes of stack per sample\n%s",
        static_cast<unsigned long long>(ours.samples), dwarf_seconds, our_shares.compare,
        our_shares.whole, 4096, 8192u, ours.top(3).c_str());
    std::printf(
        "monctl -g (frame pointers): %llu samples in %.2f s, %.1f %% in the callback, "
        "%.1f %% of those with qsort_r, burner_sort and main above\n%s",
        static_cast<unsigned long long>(fps.samples), fp_seconds, fp_shares.compare,
        fp_shares.whole, fps.top(3).c_str());

    // perf record --call-graph dwarf on the same program.
    const std::string perf = find_in_path("perf");
    if (perf.empty())
        GTEST_SKIP() << "no perf in $PATH (Debian's linux-perf): monctl alone checked";
    const std::string data = (dir / "perf.data").string();
    auto [recorded, perf_seconds] = timed({perf, "record", "-e", "cpu-clock", "--call-graph",
                                           "dwarf", "-F", "1000", "-o", data, "--", burner, "2"});
    if (recorded.exit_code != 0) {
        GTEST_SKIP() << "perf record --call-graph dwarf cannot record here (exit "
                     << recorded.exit_code << "): " << recorded.err << "; monctl alone checked";
    }
    auto script = run({perf, "script", "-i", data, "-F", "ip,sym"}, {}, 120s);
    ASSERT_EQ(script.exit_code, 0) << script.err;
    const auto perfs = Stacks::perf_script(script.out);
    ASSERT_GT(perfs.samples, 1000u) << script.out.substr(0, 2000);
    const auto perf_shares = perfs.shares();
    std::error_code ec;
    const auto data_bytes = std::filesystem::file_size(data, ec);
    std::printf(
        "perf record --call-graph dwarf: %llu samples in %.2f s (wall), %.1f %% in the "
        "callback, %.1f %% of those with qsort_r, burner_sort and main above; perf.data "
        "%.0f bytes per sample\n%s",
        static_cast<unsigned long long>(perfs.samples), perf_seconds, perf_shares.compare,
        perf_shares.whole,
        ec ? 0.0 : static_cast<double>(data_bytes) / static_cast<double>(perfs.samples),
        perfs.top(3).c_str());
    EXPECT_GT(perf_shares.whole, 90) << script.out.substr(0, 3000);
    // The same program, the same profile: the callback's share, and its whole chains'.
    EXPECT_NEAR(our_shares.compare, perf_shares.compare, 10);
    EXPECT_NEAR(our_shares.whole, perf_shares.whole, 10);
}

}  // namespace
}  // namespace itest
