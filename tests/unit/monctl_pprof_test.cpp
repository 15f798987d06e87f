// monctl perf profile --pprof: profiles made by hand, written in pprof's format, gunzipped and
// read back with the classes protoc made of pprof's profile.proto; the sampling period known
// and not; files that cannot be opened or written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "pprof_output.hpp"
#include "profile.pb.h"

namespace monctl {
namespace {

namespace pb = perftools::profiles;
using monitor::protocol::ProfileMessage;
using monitor::protocol::ProfileRequest;

// 2023-11-14 22:13:20 UTC, in nanoseconds: a start of whole seconds.
constexpr std::int64_t kStartNs = 1'700'000'000'000'000'000;
const std::chrono::system_clock::time_point kStart{
    std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::nanoseconds(kStartNs))};

// `data` inflated from gzip (what pprof does first); "" when it is not gzip.
std::string gunzip(const std::string& data) {
    z_stream z{};
    if (inflateInit2(&z, 16 + 15) != Z_OK) return {};  // 16: gzip's header only
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    std::string out;
    char chunk[4096];
    int r = Z_OK;
    while (r == Z_OK) {
        z.next_out = reinterpret_cast<Bytef*>(chunk);
        z.avail_out = sizeof chunk;
        r = inflate(&z, Z_NO_FLUSH);
        out.append(chunk, sizeof chunk - z.avail_out);
    }
    inflateEnd(&z);
    return r == Z_STREAM_END ? out : std::string{};
}

// The bytes of a file, read with read(2) (g++ 12 at -O2 sees null dereferences in
// istreambuf_iterator's reads).
std::string file_bytes(const std::string& path) {
    std::string bytes;
    monitor::UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return bytes;
    char chunk[4096];
    for (ssize_t n; (n = ::read(fd.get(), chunk, sizeof chunk)) > 0;) {
        bytes.append(chunk, static_cast<std::size_t>(n));
    }
    return bytes;
}

pb::Profile read_back(const std::string& bytes) {
    const std::string raw = gunzip(bytes);
    EXPECT_FALSE(raw.empty()) << "not gzip";
    pb::Profile p;
    EXPECT_TRUE(p.ParseFromString(raw)) << "not a profile.proto Profile";
    return p;
}

const std::string& str(const pb::Profile& p, std::int64_t i) {
    return p.string_table(static_cast<int>(i));
}

const pb::Function& function_of(const pb::Profile& p, std::uint64_t location_id) {
    const auto& l = p.location(static_cast<int>(location_id - 1));
    EXPECT_EQ(l.id(), location_id) << "ids are 1, 2, ... in order";
    EXPECT_EQ(l.line_size(), 1);
    const auto& f = p.function(static_cast<int>(l.line(0).function_id() - 1));
    EXPECT_EQ(f.id(), l.line(0).function_id());
    return f;
}

// The function names of a sample's locations, in the sample's order.
std::vector<std::string> names_of(const pb::Profile& p, const pb::Sample& s) {
    std::vector<std::string> names;
    for (auto id : s.location_id()) names.push_back(str(p, function_of(p, id).name()));
    return names;
}

ProfileMessage flat_message() {
    ProfileMessage m;
    m.event = "perf::CPU-CLOCK";
    m.target = "process 42";
    m.elapsed = 2.5;
    m.final = true;
    m.ended = "process 42 exited";
    m.report.samples = 421;
    m.report.functions = {{"burn_three (/usr/bin/app)", 300, 71.4},
                          {"burn_one (/usr/bin/app)", 100, 23.8},
                          {"[no symbol] (/usr/lib/x86_64-linux-gnu/libc.so.6)", 10, 2.4},
                          {"[no symbol] (/usr/lib/x86_64-linux-gnu/libm.so.6)", 5, 1.2},
                          {"schedule ([kernel.kallsyms])", 4, 1.0},
                          {"[no symbol] ([vdso])", 1, 0.2},
                          {"[idle]", 1, 0.2}};
    return m;
}

TEST(PprofOutput, WithoutStacksASampleIsAFunctionOfTheTable) {
    const PprofContext c{.start = kStart, .period = 250'000, .clock = true};
    const auto p = read_back(pprof_bytes(flat_message(), c));
    ASSERT_GE(p.string_table_size(), 1);
    EXPECT_EQ(p.string_table(0), "") << "pprof's rule: string 0 is empty";
    ASSERT_EQ(p.sample_type_size(), 2);
    EXPECT_EQ(str(p, p.sample_type(0).type()), "samples");
    EXPECT_EQ(str(p, p.sample_type(0).unit()), "count");
    EXPECT_EQ(str(p, p.sample_type(1).type()), "cpu");
    EXPECT_EQ(str(p, p.sample_type(1).unit()), "nanoseconds");
    EXPECT_EQ(p.duration_nanos(), 2'500'000'000);
    EXPECT_EQ(p.time_nanos(), kStartNs);
    EXPECT_EQ(str(p, p.period_type().type()), "cpu");
    EXPECT_EQ(str(p, p.period_type().unit()), "nanoseconds");
    EXPECT_EQ(p.period(), 250'000);

    ASSERT_EQ(p.sample_size(), 7) << "a sample per line of the table";
    const std::vector<std::pair<std::string, std::string>> expected{
        {"burn_three", "/usr/bin/app"},
        {"burn_one", "/usr/bin/app"},
        {"[libc.so.6]", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
        {"[libm.so.6]", "/usr/lib/x86_64-linux-gnu/libm.so.6"},
        {"schedule", "[kernel.kallsyms]"},
        {"[vdso]", "[vdso]"},  // a mapping without a file: as its frames are named
        {"[idle]", ""}};
    const std::vector<std::int64_t> samples{300, 100, 10, 5, 4, 1, 1};
    for (int i = 0; i < p.sample_size(); ++i) {
        const auto& s = p.sample(i);
        ASSERT_EQ(s.location_id_size(), 1) << i;
        const auto& f = function_of(p, s.location_id(0));
        EXPECT_EQ(str(p, f.name()), expected[i].first) << i;
        EXPECT_EQ(str(p, f.system_name()), expected[i].first) << i;
        EXPECT_EQ(str(p, f.filename()), expected[i].second) << i;
        ASSERT_EQ(s.value_size(), 2) << i;
        EXPECT_EQ(s.value(0), samples[i]) << i;
        EXPECT_EQ(s.value(1), samples[i] * 250'000) << "samples x the period in ns: " << i;
    }
    EXPECT_EQ(p.function_size(), 7);
    EXPECT_EQ(p.location_size(), 7);
    std::set<std::string> strings(p.string_table().begin(), p.string_table().end());
    EXPECT_EQ(strings.size(), static_cast<std::size_t>(p.string_table_size()))
        << "each string once";
    ASSERT_EQ(p.comment_size(), 2);
    EXPECT_EQ(str(p, p.comment(0)), "monctl perf profile: perf::CPU-CLOCK of process 42");
    EXPECT_EQ(str(p, p.comment(1)), "process 42 exited");
}

// With call chains a sample is a folded stack, its locations leaf first; a function that is a
// frame of several stacks is one function and one location.
TEST(PprofOutput, WithStacksASampleIsAStackLeafFirst) {
    ProfileMessage m = flat_message();
    m.report.stacks = {{"app;main;work;burn_three", 30, 60.0},
                       {"app;main;burn_one", 15, 30.0},
                       {"app;main;work;schedule_[k]", 4, 8.0},
                       {"app;[libc.so.6]", 1, 2.0}};
    const PprofContext c{.start = kStart, .period = 1'000'000, .clock = true};
    const auto p = read_back(pprof_bytes(m, c));
    ASSERT_EQ(p.sample_size(), 4) << "a sample per stack, not per function";
    EXPECT_EQ(names_of(p, p.sample(0)),
              (std::vector<std::string>{"burn_three", "work", "main", "app"}));
    EXPECT_EQ(names_of(p, p.sample(1)), (std::vector<std::string>{"burn_one", "main", "app"}));
    EXPECT_EQ(names_of(p, p.sample(2)),
              (std::vector<std::string>{"schedule_[k]", "work", "main", "app"}));
    EXPECT_EQ(names_of(p, p.sample(3)), (std::vector<std::string>{"[libc.so.6]", "app"}));
    EXPECT_EQ(p.sample(0).value(0), 30);
    EXPECT_EQ(p.sample(0).value(1), 30'000'000);
    EXPECT_EQ(p.sample(3).value(0), 1);
    // app, main, work, burn_three, burn_one, schedule_[k], [libc.so.6]
    EXPECT_EQ(p.function_size(), 7);
    EXPECT_EQ(p.location_size(), 7);
    EXPECT_EQ(p.sample(0).location_id(3), p.sample(1).location_id(2)) << "app is one location";
    EXPECT_EQ(p.period(), 1'000'000);
}

// The sampling period not known (another event at a frequency): the samples alone, no period;
// known for another event (-c N): a period of that event's counts, still no CPU time.
TEST(PprofOutput, CpuTimeOnlyForAClockOfKnownPeriod) {
    ProfileMessage m = flat_message();
    m.event = "perf::CYCLES";
    auto p = read_back(pprof_bytes(m, {.start = kStart}));
    ASSERT_EQ(p.sample_type_size(), 1);
    EXPECT_EQ(str(p, p.sample_type(0).type()), "samples");
    EXPECT_EQ(p.sample(0).value_size(), 1);
    EXPECT_FALSE(p.has_period_type());
    EXPECT_EQ(p.period(), 0);

    p = read_back(pprof_bytes(m, {.start = kStart, .period = 100'000, .clock = false}));
    ASSERT_EQ(p.sample_type_size(), 1);
    EXPECT_EQ(p.sample(0).value_size(), 1);
    EXPECT_EQ(str(p, p.period_type().type()), "perf::CYCLES");
    EXPECT_EQ(str(p, p.period_type().unit()), "count");
    EXPECT_EQ(p.period(), 100'000);

    // A clock whose period is not known: no CPU time either.
    p = read_back(pprof_bytes(flat_message(), {.start = kStart, .clock = true}));
    EXPECT_EQ(p.sample_type_size(), 1);
}

// The kernel's rules for a sampled clock: a frequency is a fixed period of 1e9 / frequency
// ns, never under 10 us; another event's period is known only when asked for.
TEST(PprofOutput, ContextFollowsTheKernelsClockPeriods) {
    monitor::perf::EventSpec clock{.type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK};
    monitor::perf::EventSpec task{.type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK};
    monitor::perf::EventSpec cycles{.type = PERF_TYPE_HARDWARE, .config = PERF_COUNT_HW_CPU_CYCLES};
    struct Row {
        const monitor::perf::EventSpec& event;
        ProfileRequest request;
        std::optional<std::int64_t> period;
        bool clock;
    };
    const std::vector<Row> rows{
        {clock, {}, 250'000, true},  // the default 4000 a second
        {clock, {.frequency = 1000}, 1'000'000, true},
        {task, {.frequency = 3}, 333'333'333, true},
        {clock, {.period = 2'000'000}, 2'000'000, true},
        {clock, {.period = 500}, 10'000, true},  // the hrtimer's least
        {clock, {.frequency = 1'000'000}, 10'000, true},
        {cycles, {.frequency = 1000}, std::nullopt, false},
        {cycles, {.period = 100'000}, 100'000, false},
    };
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto c = pprof_context(rows[i].event, rows[i].request, kStart);
        EXPECT_EQ(c.period, rows[i].period) << "row " << i;
        EXPECT_EQ(c.clock, rows[i].clock) << "row " << i;
        EXPECT_EQ(c.start, kStart);
    }
}

TEST(PprofFile, WritesTheBytesAndSaysWhichFileItCannotWrite) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("monctl-pprof-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "profile.pb.gz").string();
    const PprofContext c{.start = kStart, .period = 250'000, .clock = true};
    {
        std::ofstream(path) << "an older file, longer than nothing";
        auto f = PprofFile::open(path);
        ASSERT_TRUE(f) << f.error().to_string();
        EXPECT_EQ(std::filesystem::file_size(path), 0u) << "emptied at the open";
        ASSERT_TRUE(f->write(flat_message(), c));
        const std::string written = file_bytes(path);
        EXPECT_EQ(written, pprof_bytes(flat_message(), c));
        EXPECT_EQ(read_back(written).sample_size(), 7);
    }
    std::filesystem::remove_all(dir);

    auto missing = PprofFile::open((dir / "profile.pb.gz").string());
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().status, monitor::Status::BadArg);
    EXPECT_EQ(missing.error().message,
              "--pprof " + path + ": cannot write it: No such file or directory");

    // A device that takes no byte: the open works, the write says why it failed.
    if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to fill";
    auto full = PprofFile::open("/dev/full");
    ASSERT_TRUE(full) << full.error().to_string();
    auto written = full->write(flat_message(), c);
    ASSERT_FALSE(written);
    EXPECT_EQ(written.error().status, monitor::Status::IoErr);
    EXPECT_EQ(written.error().message,
              "--pprof /dev/full: cannot write it: No space left on device");
}

}  // namespace
}  // namespace monctl
