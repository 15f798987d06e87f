// perf's own event syntax: PMU/term=value,.../ placed as the PMU's sysfs format files say,
// events/ aliases, raw rHEX codes and the modifiers :u :k :h :p, on described sysfs trees (a
// core PMU with Intel's formats, PMUs without precise events) and, through the real sysfs of
// the machine running the tests, a software event counted end to end.
#include "monitor/perf/perf_event_syntax.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>

#include "monitor/perf/count_plan.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/event_name.hpp"
#include "monitor/perf/perf_session.hpp"
#include "perf_events_probe.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

using test_support::DescribedMachine;
using test_support::write_file;
using ::testing::HasSubstr;

// A machine whose sysfs has: cpu (type 4) with Intel's core formats, a split-range term
// (evsel, AMD's event layout), events/ aliases and caps/max_precise 3; software (type 1,
// no formats); an uncore PMU (type 20) and a PMU whose caps/max_precise is 1.
class PerfSyntax : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto d = machine_.sys() / "bus/event_source/devices";
        write_file(d / "cpu/type", "4\n");
        write_file(d / "cpu/format/event", "config:0-7\n");
        write_file(d / "cpu/format/umask", "config:8-15\n");
        write_file(d / "cpu/format/edge", "config:18\n");
        write_file(d / "cpu/format/inv", "config:23\n");
        write_file(d / "cpu/format/cmask", "config:24-31\n");
        write_file(d / "cpu/format/ldlat", "config1:0-15\n");
        write_file(d / "cpu/format/evsel", "config:0-7,32-35\n");
        write_file(d / "cpu/format/frontend", "config2:0-23\n");
        write_file(d / "cpu/events/cpu-cycles", "event=0x3c\n");
        write_file(d / "cpu/events/mem-loads", "event=0xcd,umask=0x1,ldlat=3\n");
        write_file(d / "cpu/events/broken", "event=0x3c,,umask=1\n");
        write_file(d / "cpu/events/cpu-cycles.scale", "1\n");
        write_file(d / "cpu/caps/max_precise", "3\n");
        write_file(d / "software/type", "1\n");
        write_file(d / "uncore_imc_0/type", "20\n");
        write_file(d / "uncore_imc_0/format/event", "config:0-7\n");
        write_file(d / "uncore_imc_0/format/umask", "config:8-15\n");
        write_file(d / "uncore_imc_0/events/cas_count_read", "event=0x04,umask=0x03\n");
        write_file(d / "ibs_fetch/type", "11\n");
        write_file(d / "ibs_fetch/format/rand_en", "config:57\n");
        write_file(d / "ibs_fetch/caps/max_precise", "1\n");
        write_file(d / "notype/format/event", "config:0-7\n");
        write_file(d / "badformat/type", "30\n");
        write_file(d / "badformat/format/event", "config7:0-7\n");
        auto c = EventCatalog::create(machine_.proc(), machine_.sys());
        ASSERT_TRUE(c) << c.error().to_string();
        catalog_.emplace(std::move(*c));
    }

    Result<EventSpec> resolve(std::string_view name) const { return catalog_->resolve(name); }

    // The error for `name`, which must not resolve.
    std::string error_of(std::string_view name) const {
        auto e = resolve(name);
        EXPECT_FALSE(e) << name << " resolved to type " << (e ? e->type : 0) << " config "
                        << (e ? e->config : 0);
        return e ? std::string{} : e.error().message;
    }

    DescribedMachine machine_{"", true};
    std::optional<EventCatalog> catalog_;
};

struct Encoded {
    const char* name;
    std::uint32_t type;
    std::uint64_t config;
    std::uint64_t config1 = 0;
    std::uint64_t config2 = 0;
    bool exclude_user = false;
    bool exclude_kernel = false;
    bool exclude_hv = false;
    unsigned precise = 0;
};

constexpr Encoded kEncoded[] = {
    {"cpu/event=0x3c,umask=0x00/", 4, 0x3c},
    {"cpu/event=0xc0,cmask=1,inv/", 4, 0xc0 | 1ULL << 24 | 1ULL << 23},
    {"cpu/event=0xd0,umask=0x81,edge/", 4, 0xd0 | 0x81ULL << 8 | 1ULL << 18},
    {"cpu/event=60,umask=255,cmask=255/", 4, 0x3c | 0xffULL << 8 | 0xffULL << 24},
    {"cpu/event=0xcd,umask=0x1,ldlat=30/", 4, 0x1cd, 30},
    {"cpu/frontend=0x123456/", 4, 0, 0, 0x123456},
    // A split range: the value's low 8 bits into config 0-7, the next 4 into 32-35.
    {"cpu/evsel=0x123/", 4, 0x23 | 1ULL << 32},
    {"cpu/evsel=0xfff/", 4, 0xff | 0xfULL << 32},
    // A later term overrides an earlier one's bits.
    {"cpu/event=0xff,event=0x3c/", 4, 0x3c},
    {"cpu/config=0x1234,config1=5,config2=0xffffffffffffffff/", 4, 0x1234, 5, ~0ULL},
    {"cpu/config=0x1234,umask=0x56/", 4, 0x5634},
    {"cpu//", 4, 0},
    {"cpu/ event = 0x3c , umask = 1 /", 4, 0x13c},
    // sysfs aliases, and terms after them.
    {"cpu/cpu-cycles/", 4, 0x3c},
    {"cpu/CPU-CYCLES/", 4, 0x3c},
    {"cpu/mem-loads/", 4, 0x1cd, 3},
    {"cpu/mem-loads,ldlat=50/", 4, 0x1cd, 50},
    {"cpu/cpu-cycles,cmask=2/", 4, 0x3c | 2ULL << 24},
    {"uncore_imc_0/cas_count_read/", 20, 0x304},
    {"software/config=0/", 1, 0},
    {"software/config=1/", 1, 1},
    // Modifiers.
    {"cpu/event=0x3c/u", 4, 0x3c, 0, 0, false, true, true},
    {"cpu/event=0x3c/:u", 4, 0x3c, 0, 0, false, true, true},
    {"cpu/event=0x3c/k", 4, 0x3c, 0, 0, true, false, true},
    {"cpu/event=0x3c/h", 4, 0x3c, 0, 0, true, true, false},
    {"cpu/event=0x3c/uk", 4, 0x3c, 0, 0, false, false, true},
    {"cpu/event=0x3c/ku", 4, 0x3c, 0, 0, false, false, true},
    {"cpu/event=0x3c/:u:k", 4, 0x3c, 0, 0, false, false, true},
    {"cpu/event=0x3c/ukh", 4, 0x3c},
    {"cpu/event=0x3c/p", 4, 0x3c, 0, 0, false, false, false, 1},
    {"cpu/event=0x3c/pp", 4, 0x3c, 0, 0, false, false, false, 2},
    {"cpu/mem-loads/ppp", 4, 0x1cd, 3, 0, false, false, false, 3},
    {"cpu/event=0x3c/upp", 4, 0x3c, 0, 0, false, true, true, 2},
    {"cpu/event=0x3c/pku", 4, 0x3c, 0, 0, false, false, true, 1},
    {"ibs_fetch/rand_en/p", 11, 1ULL << 57, 0, 0, false, false, false, 1},
    {"software/config=0/k", 1, 0, 0, 0, true, false, true},
    // perf's raw codes of the core PMU: PERF_TYPE_RAW.
    {"r1a8", 4, 0x1a8},
    {"r003c", 4, 0x3c},
    {"rFFFFFFFFFFFFFFFF", 4, ~0ULL},
    {"r1a8:u", 4, 0x1a8, 0, 0, false, true, true},
    {"r1a8:pp", 4, 0x1a8, 0, 0, false, false, false, 2},
    {"r1a8:kp", 4, 0x1a8, 0, 0, true, false, true, 1},
};

TEST_F(PerfSyntax, TermsArePlacedAsTheFormatFilesSay) {
    for (const auto& row : kEncoded) {
        auto e = resolve(row.name);
        ASSERT_TRUE(e) << row.name << ": " << e.error().to_string();
        EXPECT_EQ(e->type, row.type) << row.name;
        EXPECT_EQ(e->config, row.config) << row.name << std::hex << " 0x" << e->config;
        EXPECT_EQ(e->config1, row.config1) << row.name;
        EXPECT_EQ(e->config2, row.config2) << row.name;
        EXPECT_EQ(e->exclude_user, row.exclude_user) << row.name;
        EXPECT_EQ(e->exclude_kernel, row.exclude_kernel) << row.name;
        EXPECT_EQ(e->exclude_hv, row.exclude_hv) << row.name;
        EXPECT_EQ(e->precise_ip, row.precise) << row.name;
        EXPECT_EQ(e->name, row.name);
        EXPECT_NE(e->module, nullptr) << row.name;
    }
}

TEST_F(PerfSyntax, CoreEventsTakeTheProcessorsCountersOthersNone) {
    auto cpu = resolve("cpu/event=0x3c/");
    ASSERT_TRUE(cpu) << cpu.error().to_string();
    EXPECT_EQ(cpu->pmu, "cpu");
    EXPECT_NE(cpu->counters, 0u);
    EXPECT_FALSE(cpu->counter_pmu.empty());
    auto raw = resolve("r1a8");
    ASSERT_TRUE(raw) << raw.error().to_string();
    EXPECT_EQ(raw->counter_pmu, cpu->counter_pmu);
    EXPECT_EQ(raw->counters, cpu->counters);
    auto sw = resolve("software/config=1/");
    ASSERT_TRUE(sw) << sw.error().to_string();
    EXPECT_EQ(sw->counters, 0u);
    EXPECT_EQ(sw->counter_pmu, "software");
    EXPECT_EQ(sw->canonical, "software/config=1/");
}

TEST_F(PerfSyntax, NameTermNamesTheEvent) {
    auto e = resolve("cpu/event=0x3c,name=cycles_seen/u");
    ASSERT_TRUE(e) << e.error().to_string();
    EXPECT_EQ(e->name, "cycles_seen");
    EXPECT_EQ(e->config, 0x3cu);
    EXPECT_TRUE(e->exclude_kernel);
}

TEST_F(PerfSyntax, EventListsKeepTheCommasBetweenSlashes) {
    auto l = parse_event_list(
        "cpu/event=0x3c,umask=0/u,{r1a8,cpu/event=0xc0,inv,cmask=1/},mem:0x10/4,b");
    ASSERT_TRUE(l) << l.error().to_string();
    ASSERT_EQ(l->size(), 5u);
    EXPECT_EQ((*l)[0].name, "cpu/event=0x3c,umask=0/u");
    EXPECT_EQ((*l)[1].name, "r1a8");
    EXPECT_EQ((*l)[2].name, "cpu/event=0xc0,inv,cmask=1/");
    EXPECT_EQ((*l)[2].group, 0);
    EXPECT_EQ((*l)[3].name, "mem:0x10/4");
    EXPECT_EQ((*l)[4].name, "b");
}

struct Refused {
    const char* name;
    std::vector<const char*> says;
};

TEST_F(PerfSyntax, ErrorsNameTheTextTheFaultAndWhatWorks) {
    const Refused rows[] = {
        {"cpu/umask=0x100/",
         {"cpu/umask=0x100/", "umask=0x100", "too wide", "config:8-15", "0xff"}},
        {"cpu/inv=2/", {"inv=2", "config:23", "0 to 0x1"}},
        {"cpu/evsel=0x1000/", {"evsel=0x1000", "config:0-7,32-35", "12 bits", "0xfff"}},
        {"cpu/ldlat=65536/", {"ldlat=65536", "config1:0-15", "0xffff"}},
        {"cpu/foo=1/",
         {"cpu/foo=1/", "unknown term 'foo'", "PMU 'cpu'",
          "cmask, edge, event, evsel, frontend, inv, ldlat, umask", "cpu-cycles, mem-loads",
          "config="}},
        {"software/event=1/", {"unknown term 'event'", "PMU 'software' has no format/ terms"}},
        {"cpu/nosuchalias/", {"unknown term 'nosuchalias'"}},
        {"cpu/umask/", {"term 'umask' needs a value", "umask=N", "0xff"}},
        {"cpu/event=0x3c", {"no closing '/'"}},
        {"cpu/event=0x3c,,umask=1/", {"term 2 is empty"}},
        {"cpu/event=0x3c,/", {"term 2 is empty"}},
        {"cpu/,event=0x3c/", {"term 1 is empty"}},
        {"cpu/event=/", {"'event' has '=' but no value"}},
        {"cpu/=3/", {"no term name before '='"}},
        {"cpu/event=0xzz/", {"event=0xzz", "not a number", "config:0-7"}},
        {"cpu/event=0x/", {"event=0x", "not a number"}},
        {"cpu/event=-1/", {"event=-1", "not a number"}},
        {"cpu/event=99999999999999999999999/", {"not a number of 64 bits at most"}},
        {"cpu/config=0x1ffffffffffffffff/", {"config=0x1ffffffffffffffff", "not a number"}},
        {"cpu/config/", {"config needs a value"}},
        {"cpu/name/", {"name needs a value"}},
        {"cpu/period=1000/", {"period=", "sampling", "--period"}},
        {"cpu/../", {"'..' is no term name"}},
        {"cpu/event=1/x", {"unknown modifier ':x'", ":u user mode only", ":p precise"}},
        {"cpu/event=1/pppp", {"precise level 4", ":ppp is the most"}},
        {"cpu/broken/", {"cpu/broken/", "events/broken", "term 2 is empty"}},
        {"nopmu/event=1/",
         {"no PMU 'nopmu' on this machine",
          "badformat, cpu, ibs_fetch, notype, software, "
          "uncore_imc_0"}},
        {"notype/event=1/", {"PMU 'notype' gives no type"}},
        {"badformat/event=1/", {"format/event", "config7:0-7", "config, config1 or config2"}},
        // Precise events only where the PMU takes them.
        {"software/config=0/p",
         {"software/config=0/p", "':p' asks for a precise event",
          "PMU 'software' takes no precise events", "leave the p out"}},
        {"uncore_imc_0/cas_count_read/pp", {"PMU 'uncore_imc_0' takes no precise events"}},
        {"ibs_fetch/rand_en/pp",
         {"precise level 2", "PMU 'ibs_fetch' takes precise levels up to 1", ":p is the most"}},
        {"r1a8:x", {"r1a8:x", "unknown modifier ':x'"}},
    };
    for (const auto& row : rows) {
        const std::string message = error_of(row.name);
        for (const char* s : row.says) EXPECT_THAT(message, HasSubstr(s)) << row.name;
    }
}

TEST(PerfSyntaxElsewhere, RawCodesWithoutACorePmuTakeNoPreciseLevel) {
    DescribedMachine machine("", false);
    auto c = EventCatalog::create(machine.proc(), machine.sys());
    ASSERT_TRUE(c) << c.error().to_string();
    auto raw = c->resolve("r1a8:u");
    ASSERT_TRUE(raw) << raw.error().to_string();
    EXPECT_EQ(raw->type, std::uint32_t{PERF_TYPE_RAW});
    auto p = c->resolve("r1a8:p");
    ASSERT_FALSE(p);
    EXPECT_THAT(p.error().message, HasSubstr("this machine has no PMU 'cpu'"));
}

TEST(PerfSyntaxElsewhere, ModifiersOfOtherModulesFollowPerfsRules) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    auto both = c->resolve("ppc750::CYCLES:uk");
    ASSERT_TRUE(both) << both.error().to_string();
    EXPECT_FALSE(both->exclude_user);
    EXPECT_FALSE(both->exclude_kernel);
    EXPECT_TRUE(both->exclude_hv);
    auto precise = c->resolve("ppc750::CYCLES:p");
    ASSERT_FALSE(precise);
    EXPECT_THAT(precise.error().message, HasSubstr("asks for a precise event"));
}

TEST(PerfSyntaxText, FormatsAndValues) {
    auto f = parse_format("config:0-7,32-35\n");
    ASSERT_TRUE(f) << f.error().to_string();
    EXPECT_EQ(f->field, 0);
    EXPECT_EQ(f->bits, 0xf000000ffULL);
    EXPECT_EQ(format_width(f->bits), 12);
    EXPECT_EQ(format_max(f->bits), 0xfffULL);
    EXPECT_EQ(describe_format(*f), "config:0-7,32-35");
    auto all = parse_format("config1:0-63");
    ASSERT_TRUE(all);
    EXPECT_EQ(all->field, 1);
    EXPECT_EQ(format_max(all->bits), ~0ULL);
    std::uint64_t v = ~0ULL;
    place_value(f->bits, 0x0a5, v);
    EXPECT_EQ(v, 0xfffffff0ffffffa5ULL);
    for (auto bad : {"", "config", "config:", "config:64", "config:7-3", "config:0-7,", "cfg:0",
                     "config3:0-7", "config:-1", "config:0--7", "config:a"}) {
        EXPECT_FALSE(parse_format(bad)) << bad;
    }
    EXPECT_EQ(parse_number("0x10"), 16u);
    EXPECT_EQ(parse_number("010"), 10u);
    EXPECT_EQ(parse_number("18446744073709551615"), ~0ULL);
    EXPECT_FALSE(parse_number("18446744073709551616"));
    EXPECT_FALSE(parse_number("0x"));
    EXPECT_FALSE(parse_number(""));
    EXPECT_FALSE(parse_number("1k"));
}

// Hostile input: whatever the text, resolving returns a value or an error, never crashes.
TEST_F(PerfSyntax, HostileTextNeverCrashes) {
    const std::string alphabet = "cpu/=,:0x1fevntumaskr.-_ pkh{}";
    std::mt19937 rng(33);
    for (int i = 0; i < 2000; ++i) {
        std::string s;
        const auto n = rng() % 24;
        for (unsigned j = 0; j < n; ++j) s += alphabet[rng() % alphabet.size()];
        (void)resolve(s);
        (void)parse_event_list(s);
    }
    (void)resolve("cpu/" + std::string(1 << 20, 'a') + "/");
    (void)resolve("cpu/event=" + std::string(1 << 20, '1') + "/");
    (void)resolve("cpu/" + std::string(1 << 16, ',') + "/");
    (void)resolve(std::string(1 << 16, 'a') + "/event=1/");
    (void)resolve("r" + std::string(1 << 16, 'f'));
    (void)resolve(std::string("cpu/event=\0/", 12));
}

// The real sysfs of the machine the tests run on: its software PMU (type 1), counted.
TEST(PerfSyntaxHere, SoftwarePmuOfThisMachineCounts) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    std::error_code ec;
    if (!std::filesystem::exists("/sys/bus/event_source/devices/software/type", ec)) {
        GTEST_SKIP() << "no software PMU in this machine's sysfs";
    }
    auto e = c->resolve("software/config=1/");  // PERF_COUNT_SW_TASK_CLOCK
    ASSERT_TRUE(e) << e.error().to_string();
    EXPECT_EQ(e->type, std::uint32_t{PERF_TYPE_SOFTWARE});
    EXPECT_EQ(e->config, std::uint64_t{PERF_COUNT_SW_TASK_CLOCK});

    SKIP_WITHOUT_PERF_EVENTS();
    SessionOptions o;
    o.events = *parse_event_list("software/config=1/u,software/config=0,name=cpu_clock/u");
    o.target.kind = TargetKind::Thread;
    o.target.pid = static_cast<pid_t>(::syscall(SYS_gettid));
    auto s = PerfSession::start(*c, std::make_unique<PerfEventDevice>(), o);
    if (!s && s.error().status == Status::Perm) GTEST_SKIP() << s.error().message;
    ASSERT_TRUE(s) << s.error().to_string();
    // 50 ms of this thread's CPU time, spun in user mode.
    auto cpu_ns = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    };
    const auto start = cpu_ns();
    volatile unsigned sink = 0;
    while (cpu_ns() - start < std::chrono::milliseconds(50)) {
        for (int i = 0; i < 1000; ++i) sink = sink + 1;
    }
    ASSERT_TRUE((*s)->stop());
    auto r = (*s)->read();
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->events.size(), 2u);
    EXPECT_EQ(r->events[0].name, "software/config=1/u");
    EXPECT_EQ(r->events[1].name, "cpu_clock");
    // Nanoseconds of task clock and of CPU clock in user mode: most of the 50 ms spun.
    EXPECT_GT(r->events[0].total.count, 25'000'000u);
    EXPECT_GT(r->events[1].total.count, 25'000'000u);
}

}  // namespace
}  // namespace monitor::perf
