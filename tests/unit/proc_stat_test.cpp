// Tests of the /proc/stat parser and of ProcStatReader, on fixtures from several kernel
// generations (tests/fixtures/proc_stat/) and on files written to a temporary proc root.
#include "monitor/loading/proc_stat.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::ScratchDir;
using test_support::write_file;

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(FIXTURES_DIR) / "proc_stat";

std::string read_fixture(const std::string& name) {
    std::ifstream in(kFixtures / name, std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot open fixture " << (kFixtures / name);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

ProcStatSnapshot parse_fixture(const std::string& name) {
    auto r = parse_proc_stat(read_fixture(name));
    EXPECT_TRUE(r.has_value()) << name << ": " << r.error().to_string();
    return r.value_or(ProcStatSnapshot{});
}

std::vector<int> cpu_ids(const ProcStatSnapshot& snap) {
    std::vector<int> ids;
    for (const auto& line : snap.cpus) ids.push_back(line.cpu);
    return ids;
}

CpuTimes times_of(std::initializer_list<std::uint64_t> values) {
    CpuTimes t;
    std::size_t i = 0;
    for (auto v : values) t.ticks[i++] = v;
    return t;
}

// --- CpuTimes ---------------------------------------------------------------------------

TEST(CpuTimes, IndexesByState) {
    CpuTimes t = times_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    EXPECT_EQ(t[CpuState::User], 1u);
    EXPECT_EQ(t[CpuState::Nice], 2u);
    EXPECT_EQ(t[CpuState::System], 3u);
    EXPECT_EQ(t[CpuState::Idle], 4u);
    EXPECT_EQ(t[CpuState::IoWait], 5u);
    EXPECT_EQ(t[CpuState::Irq], 6u);
    EXPECT_EQ(t[CpuState::SoftIrq], 7u);
    EXPECT_EQ(t[CpuState::Steal], 8u);
    EXPECT_EQ(t[CpuState::Guest], 9u);
    EXPECT_EQ(t[CpuState::GuestNice], 10u);

    t[CpuState::Steal] = 80;
    EXPECT_EQ(t.ticks[7], 80u);
}

TEST(CpuTimes, IdleTotalBusy) {
    // user nice system idle iowait irq softirq steal guest guest_nice
    CpuTimes t = times_of({100, 20, 30, 400, 50, 5, 7, 3, 60, 10});
    EXPECT_EQ(t.idle(), 450u);   // idle + iowait
    EXPECT_EQ(t.total(), 615u);  // every column but guest and guest_nice
    EXPECT_EQ(t.busy(), 165u);   // 615 - 450
    EXPECT_EQ(t.busy() + t.idle(), t.total());
}

TEST(CpuTimes, GuestTimeIsNotAddedToTotal) {
    CpuTimes without = times_of({100, 20, 30, 400, 50, 5, 7, 3, 0, 0});
    CpuTimes with = without;
    with[CpuState::Guest] = 90;
    with[CpuState::GuestNice] = 15;
    EXPECT_EQ(with.total(), without.total());
    EXPECT_EQ(with.busy(), without.busy());
    EXPECT_EQ(with.idle(), without.idle());
}

TEST(CpuTimes, ZeroByDefault) {
    CpuTimes t;
    EXPECT_EQ(t.total(), 0u);
    EXPECT_EQ(t.idle(), 0u);
    EXPECT_EQ(t.busy(), 0u);
}

// --- parse_proc_stat on fixtures ---------------------------------------------------------

TEST(ParseProcStat, ModernKernelEveryColumn) {
    auto snap = parse_fixture("modern_4cpu.stat");
    EXPECT_EQ(snap.columns, 10u);
    ASSERT_EQ(cpu_ids(snap), (std::vector<int>{0, 1, 2, 3}));

    // cpu  4023482 11482 1215164 18783113 64780 0 51453 122 6410 46
    const CpuTimes& m = snap.machine;
    EXPECT_EQ(m[CpuState::User], 4023482u);
    EXPECT_EQ(m[CpuState::Nice], 11482u);
    EXPECT_EQ(m[CpuState::System], 1215164u);
    EXPECT_EQ(m[CpuState::Idle], 18783113u);
    EXPECT_EQ(m[CpuState::IoWait], 64780u);
    EXPECT_EQ(m[CpuState::Irq], 0u);
    EXPECT_EQ(m[CpuState::SoftIrq], 51453u);
    EXPECT_EQ(m[CpuState::Steal], 122u);
    EXPECT_EQ(m[CpuState::Guest], 6410u);
    EXPECT_EQ(m[CpuState::GuestNice], 46u);

    // cpu0 1013215 2906 308471 4682848 16683 0 25195 31 1756 12
    const CpuTimes& c0 = snap.cpus[0].times;
    EXPECT_EQ(c0[CpuState::User], 1013215u);
    EXPECT_EQ(c0[CpuState::Nice], 2906u);
    EXPECT_EQ(c0[CpuState::System], 308471u);
    EXPECT_EQ(c0[CpuState::Idle], 4682848u);
    EXPECT_EQ(c0[CpuState::IoWait], 16683u);
    EXPECT_EQ(c0[CpuState::Irq], 0u);
    EXPECT_EQ(c0[CpuState::SoftIrq], 25195u);
    EXPECT_EQ(c0[CpuState::Steal], 31u);
    EXPECT_EQ(c0[CpuState::Guest], 1756u);
    EXPECT_EQ(c0[CpuState::GuestNice], 12u);

    // cpu3 987123 2855 305661 4710233 14985 0 7954 29 1490 11
    const CpuTimes& c3 = snap.cpus[3].times;
    EXPECT_EQ(c3[CpuState::User], 987123u);
    EXPECT_EQ(c3[CpuState::Idle], 4710233u);
    EXPECT_EQ(c3[CpuState::GuestNice], 11u);
}

TEST(ParseProcStat, ModernKernelDerivedTimes) {
    auto snap = parse_fixture("modern_4cpu.stat");
    ASSERT_EQ(snap.cpus.size(), 4u);
    EXPECT_EQ(snap.machine.idle(), 18847893u);
    EXPECT_EQ(snap.machine.total(), 24149596u);
    EXPECT_EQ(snap.machine.busy(), 5301703u);
    EXPECT_EQ(snap.cpus[0].times.idle(), 4699531u);
    EXPECT_EQ(snap.cpus[0].times.total(), 6049349u);
    EXPECT_EQ(snap.cpus[0].times.busy(), 1349818u);

    // The machine line is the sum of the CPU lines, column by column.
    for (std::size_t col = 0; col < kCpuStateCount; ++col) {
        std::uint64_t sum = 0;
        for (const auto& line : snap.cpus) sum += line.times.ticks[col];
        EXPECT_EQ(snap.machine.ticks[col], sum) << "column " << col;
    }
}

TEST(ParseProcStat, OfflineCpusAreAbsent) {
    auto snap = parse_fixture("offline_cpu1.stat");
    EXPECT_EQ(snap.columns, 10u);
    ASSERT_EQ(cpu_ids(snap), (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(snap.cpus[1].times[CpuState::User], 1024410u);  // cpu2's line
    EXPECT_EQ(snap.machine[CpuState::User], 3024748u);
}

TEST(ParseProcStat, Kernel26With7Columns) {
    auto snap = parse_fixture("kernel_2_6_0.stat");
    EXPECT_EQ(snap.columns, 7u);
    ASSERT_EQ(cpu_ids(snap), (std::vector<int>{0, 1}));

    // cpu  81078 610 21567 1746422 4197 203 1152
    const CpuTimes& m = snap.machine;
    EXPECT_EQ(m[CpuState::User], 81078u);
    EXPECT_EQ(m[CpuState::Nice], 610u);
    EXPECT_EQ(m[CpuState::System], 21567u);
    EXPECT_EQ(m[CpuState::Idle], 1746422u);
    EXPECT_EQ(m[CpuState::IoWait], 4197u);
    EXPECT_EQ(m[CpuState::Irq], 203u);
    EXPECT_EQ(m[CpuState::SoftIrq], 1152u);
    EXPECT_EQ(m[CpuState::Steal], 0u);
    EXPECT_EQ(m[CpuState::Guest], 0u);
    EXPECT_EQ(m[CpuState::GuestNice], 0u);
    EXPECT_EQ(m.idle(), 1746422u + 4197u);
    EXPECT_EQ(m.total(), 81078u + 610u + 21567u + 1746422u + 4197u + 203u + 1152u);

    // cpu1 39877 298 11023 874112 1987 98 512
    const CpuTimes& c1 = snap.cpus[1].times;
    EXPECT_EQ(c1[CpuState::SoftIrq], 512u);
    EXPECT_EQ(c1[CpuState::Steal], 0u);
}

TEST(ParseProcStat, Kernel24With4Columns) {
    auto snap = parse_fixture("kernel_2_4.stat");
    EXPECT_EQ(snap.columns, 4u);
    ASSERT_EQ(cpu_ids(snap), (std::vector<int>{0, 1}));

    // cpu  35755 96 12107 1025346
    const CpuTimes& m = snap.machine;
    EXPECT_EQ(m[CpuState::User], 35755u);
    EXPECT_EQ(m[CpuState::Nice], 96u);
    EXPECT_EQ(m[CpuState::System], 12107u);
    EXPECT_EQ(m[CpuState::Idle], 1025346u);
    for (auto s : {CpuState::IoWait, CpuState::Irq, CpuState::SoftIrq, CpuState::Steal,
                   CpuState::Guest, CpuState::GuestNice}) {
        EXPECT_EQ(m[s], 0u) << "state " << static_cast<int>(s);
    }
    EXPECT_EQ(m.idle(), 1025346u);
    EXPECT_EQ(m.total(), 35755u + 96u + 12107u + 1025346u);
    EXPECT_EQ(snap.cpus[0].times[CpuState::Idle], 512344u);
    EXPECT_EQ(snap.cpus[1].times[CpuState::Idle], 513002u);
}

TEST(ParseProcStat, CountersAbove32Bits) {
    auto snap = parse_fixture("large_counters.stat");
    EXPECT_EQ(snap.columns, 10u);
    ASSERT_EQ(cpu_ids(snap), (std::vector<int>{0, 1}));

    // cpu  10100000000 8589934591 12100000003 181000000000 8589934595 16 17179869185 0
    //      8589934601 11
    const CpuTimes& m = snap.machine;
    EXPECT_EQ(m[CpuState::User], 10100000000ull);
    EXPECT_EQ(m[CpuState::Nice], 8589934591ull);
    EXPECT_EQ(m[CpuState::System], 12100000003ull);
    EXPECT_EQ(m[CpuState::Idle], 181000000000ull);
    EXPECT_EQ(m[CpuState::IoWait], 8589934595ull);
    EXPECT_EQ(m[CpuState::Irq], 16ull);
    EXPECT_EQ(m[CpuState::SoftIrq], 17179869185ull);
    EXPECT_EQ(m[CpuState::Steal], 0ull);
    EXPECT_EQ(m[CpuState::Guest], 8589934601ull);
    EXPECT_EQ(m[CpuState::GuestNice], 11ull);
    EXPECT_EQ(m.idle(), 189589934595ull);
    EXPECT_EQ(m.total(), 237559738390ull);
    EXPECT_EQ(m.busy(), 47969803795ull);

    EXPECT_EQ(snap.cpus[0].times[CpuState::Nice], 4294967296ull);  // exactly 2^32
    EXPECT_EQ(snap.cpus[1].times[CpuState::Nice], 4294967295ull);  // 2^32 - 1
}

// --- parse_proc_stat on text -------------------------------------------------------------

TEST(ParseProcStat, CpuLinesAreSortedById) {
    auto r = parse_proc_stat(
        "cpu  40 0 0 400\n"
        "cpu3 13 0 0 100\n"
        "cpu0 10 0 0 100\n"
        "cpu10 20 0 0 0\n"
        "cpu2 12 0 0 100\n"
        "cpu1 11 0 0 100\n");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    ASSERT_EQ(cpu_ids(*r), (std::vector<int>{0, 1, 2, 3, 10}));
    EXPECT_EQ(r->cpus[0].times[CpuState::User], 10u);
    EXPECT_EQ(r->cpus[1].times[CpuState::User], 11u);
    EXPECT_EQ(r->cpus[2].times[CpuState::User], 12u);
    EXPECT_EQ(r->cpus[3].times[CpuState::User], 13u);
    EXPECT_EQ(r->cpus[4].times[CpuState::User], 20u);
}

TEST(ParseProcStat, MachineLineAloneIsEnough) {
    auto r = parse_proc_stat("cpu  1 2 3 4 5\n");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_TRUE(r->cpus.empty());
    EXPECT_EQ(r->columns, 5u);
    EXPECT_EQ(r->machine[CpuState::IoWait], 5u);
    EXPECT_EQ(r->machine[CpuState::Irq], 0u);
}

TEST(ParseProcStat, OtherLinesAreIgnored) {
    auto r = parse_proc_stat(
        "intr 12 0 0 x\n"
        "cpu  1 2 3 4\n"
        "ctxt abc\n"
        "cpu0 1 2 3 4\n"
        "btime 1718102754\n"
        "\n"
        "processes 5\n");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(cpu_ids(*r), (std::vector<int>{0}));
    EXPECT_EQ(r->machine[CpuState::Idle], 4u);
}

TEST(ParseProcStat, NoTrailingNewline) {
    auto r = parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->cpus.size(), 1u);
    EXPECT_EQ(r->cpus[0].times[CpuState::Idle], 4u);
}

TEST(ParseProcStat, ExtraColumnsOfAFutureKernelAreIgnored) {
    auto r = parse_proc_stat("cpu  1 2 3 4 5 6 7 8 9 10 11 12\ncpu0 1 2 3 4 5 6 7 8 9 10 11\n");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->columns, 10u);
    EXPECT_EQ(r->machine[CpuState::GuestNice], 10u);
    EXPECT_EQ(r->cpus[0].times[CpuState::GuestNice], 10u);
}

TEST(ParseProcStat, LargestUnsigned64BitValue) {
    auto r = parse_proc_stat("cpu  18446744073709551615 0 0 1\n");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->machine[CpuState::User], 18446744073709551615ull);
}

// Asserts that `text` is BADDATA and that the message contains every one of `parts`.
void expect_bad(const std::string& text, std::initializer_list<std::string> parts) {
    auto r = parse_proc_stat(text);
    ASSERT_FALSE(r.has_value()) << "accepted:\n" << text;
    EXPECT_EQ(r.error().status, Status::BadData) << r.error().to_string();
    for (const auto& part : parts) {
        EXPECT_NE(r.error().message.find(part), std::string::npos)
            << "message '" << r.error().message << "' lacks '" << part << "'";
    }
}

TEST(ParseProcStatMalformed, EmptyText) {
    expect_bad("", {"'cpu'"});
}

TEST(ParseProcStatMalformed, NoMachineLine) {
    expect_bad("intr 1 2 3\nctxt 4\nbtime 5\n", {"'cpu'"});
    expect_bad("cpu0 1 2 3 4\ncpu1 1 2 3 4\n", {"'cpu'"});
}

TEST(ParseProcStatMalformed, NonNumericValue) {
    expect_bad("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 x3 4\n",
               {"line 3", "cpu1 1 2 x3 4", "'x3'", "column 3"});
    expect_bad("cpu  1 2 3 4a\n", {"line 1", "'4a'"});
}

TEST(ParseProcStatMalformed, NegativeValue) {
    expect_bad("cpu  1 -2 3 4\n", {"line 1", "'-2'"});
}

TEST(ParseProcStatMalformed, ValueAbove64Bits) {
    expect_bad("cpu  18446744073709551616 0 0 1\n", {"line 1", "'18446744073709551616'"});
}

TEST(ParseProcStatMalformed, FewerThanFourColumns) {
    expect_bad("cpu  1 2 3\n", {"line 1", "cpu  1 2 3", "3 columns"});
    expect_bad("cpu\n", {"line 1", "0 columns"});
    expect_bad("ctxt 5\ncpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2\n",
               {"line 4", "cpu1 1 2", "2 columns"});
}

TEST(ParseProcStatMalformed, DuplicateCpuLine) {
    expect_bad("cpu  2 4 6 8\ncpu0 1 2 3 4\ncpu2 1 2 3 4\ncpu0 1 2 3 4\n", {"cpu0", "twice"});
}

TEST(ParseProcStatMalformed, BadCpuLabel) {
    expect_bad("cpu  1 2 3 4\ncpuX 1 2 3 4\n", {"line 2", "cpuX 1 2 3 4"});
    expect_bad("cpu  1 2 3 4\ncpu1a 1 2 3 4\n", {"line 2", "cpu1a"});
    expect_bad("cpu  1 2 3 4\ncpu-1 1 2 3 4\n", {"line 2", "cpu-1"});
}

// --- ProcStatReader ----------------------------------------------------------------------

TEST(ProcStatReader, ReadsAndRereadsTheFile) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    const fs::path stat = proc.path() / "stat";
    write_file(stat, read_fixture("modern_4cpu.stat"));

    auto reader = ProcStatReader::open(proc.path());
    ASSERT_TRUE(reader.has_value()) << reader.error().to_string();
    EXPECT_EQ(reader->path(), stat);

    auto first = reader->read();
    ASSERT_TRUE(first.has_value()) << first.error().to_string();
    EXPECT_EQ(cpu_ids(*first), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(first->machine[CpuState::User], 4023482u);

    // The same file, shorter and with new values: read() must see only the new content.
    write_file(stat, "cpu  500 0 0 700\ncpu0 200 0 0 300\ncpu2 300 0 0 400\n");
    auto second = reader->read();
    ASSERT_TRUE(second.has_value()) << second.error().to_string();
    EXPECT_EQ(cpu_ids(*second), (std::vector<int>{0, 2}));
    EXPECT_EQ(second->columns, 4u);
    EXPECT_EQ(second->machine[CpuState::User], 500u);
    EXPECT_EQ(second->machine[CpuState::Idle], 700u);
    EXPECT_EQ(second->cpus[1].times[CpuState::Idle], 400u);

    // Reading twice without a change gives the same values.
    auto third = reader->read();
    ASSERT_TRUE(third.has_value()) << third.error().to_string();
    EXPECT_EQ(third->machine.ticks, second->machine.ticks);
}

TEST(ProcStatReader, RereadsAFileLargerThanItsBuffer) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    const fs::path stat = proc.path() / "stat";
    write_file(stat, "cpu  1 2 3 4\n");
    auto reader = ProcStatReader::open(proc.path());
    ASSERT_TRUE(reader.has_value()) << reader.error().to_string();
    ASSERT_TRUE(reader->read().has_value());

    // 256 CPUs: well above the first 4 KiB read.
    std::string text = "cpu  256000 0 0 512000 0 0 0 0 0 0\n";
    for (int cpu = 0; cpu < 256; ++cpu) {
        text +=
            "cpu" + std::to_string(cpu) + " 1000 0 0 2000 0 0 0 0 0 " + std::to_string(cpu) + "\n";
    }
    ASSERT_GT(text.size(), 8192u);
    write_file(stat, text);

    auto snap = reader->read();
    ASSERT_TRUE(snap.has_value()) << snap.error().to_string();
    ASSERT_EQ(snap->cpus.size(), 256u);
    EXPECT_EQ(snap->cpus.back().cpu, 255);
    EXPECT_EQ(snap->cpus.back().times[CpuState::GuestNice], 255u);
    EXPECT_EQ(snap->machine[CpuState::Idle], 512000u);
}

TEST(ProcStatReader, MalformedFileIsBadDataNamingThePath) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    const fs::path stat = proc.path() / "stat";
    write_file(stat, "cpu  1 2 3 4\n");
    auto reader = ProcStatReader::open(proc.path());
    ASSERT_TRUE(reader.has_value()) << reader.error().to_string();

    write_file(stat, "cpu  1 2 zz 4\n");
    auto snap = reader->read();
    ASSERT_FALSE(snap.has_value());
    EXPECT_EQ(snap.error().status, Status::BadData);
    EXPECT_NE(snap.error().message.find("line 1"), std::string::npos) << snap.error().message;
    EXPECT_NE(snap.error().message.find(stat.string()), std::string::npos) << snap.error().message;

    // A good file afterwards reads again.
    write_file(stat, "cpu  9 2 3 4\n");
    auto good = reader->read();
    ASSERT_TRUE(good.has_value()) << good.error().to_string();
    EXPECT_EQ(good->machine[CpuState::User], 9u);
}

TEST(ProcStatReader, OpenOnMissingRootFails) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    auto reader = ProcStatReader::open(proc.path() / "does-not-exist");
    ASSERT_FALSE(reader.has_value());
    EXPECT_EQ(reader.error().status, Status::NoDev) << reader.error().to_string();
    EXPECT_NE(reader.error().message.find("does-not-exist"), std::string::npos)
        << reader.error().message;
}

TEST(ProcStatReader, OpenOnRootWithoutStatFails) {
    ScratchDir proc;
    ASSERT_FALSE(proc.path().empty());
    auto reader = ProcStatReader::open(proc.path());
    ASSERT_FALSE(reader.has_value());
    EXPECT_EQ(reader.error().status, Status::NoDev) << reader.error().to_string();
}

}  // namespace
}  // namespace monitor
