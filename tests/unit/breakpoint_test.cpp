// Breakpoint counting: the names `mem:ADDR[/LEN][:ACCESS]` and their rules on a described
// machine (the breakpoint module with a given number of registers), the plan's limit of one
// register per breakpoint, and real breakpoints on this thread through perf_event_open: a
// variable written K times and a function called K times count K.
#include <elf.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "breakpoint_probe.hpp"
#include "monitor/perf/breakpoint_pmu.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/process_symbols.hpp"

namespace monitor::perf {
namespace {

// A catalog of the breakpoint module alone, for a machine with `slots` registers.
EventCatalog breakpoints(int slots, std::string why_none = {}) {
    std::shared_ptr<const PmuModule> m = breakpoint_pmu({slots, std::move(why_none)});
    return EventCatalog::of_modules({m}, Processor{});
}

std::string hex(const volatile void* p) {
    return fmt::format("{:#x}", reinterpret_cast<std::uintptr_t>(p));
}

TEST(BreakpointNames, DefaultsAreReadsAndWritesOfFourBytes) {
    auto c = breakpoints(4);
    auto s = c.resolve("mem:0x1000");
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(s->type, static_cast<std::uint32_t>(PERF_TYPE_BREAKPOINT));
    EXPECT_EQ(s->bp_type, static_cast<std::uint32_t>(HW_BREAKPOINT_R | HW_BREAKPOINT_W));
    EXPECT_EQ(s->config1, 0x1000u);  // bp_addr
    EXPECT_EQ(s->config2, 4u);       // bp_len
    EXPECT_EQ(s->canonical, "mem:0x1000/4:rw");
    EXPECT_EQ(s->pmu, kBreakpointPmu);
    EXPECT_EQ(s->counters, 0u) << "a breakpoint takes a debug register, not a counter";
    EXPECT_FALSE(s->exclude_user);
    EXPECT_FALSE(s->exclude_kernel);
    EXPECT_EQ(s->description, "reads and writes of the 4 bytes at 0x1000");
}

TEST(BreakpointNames, LengthAccessAndModeAsPerfWritesThem) {
    auto c = breakpoints(4);
    auto w = c.resolve("mem:4096/8:w:u");
    ASSERT_TRUE(w) << w.error().to_string();
    EXPECT_EQ(w->bp_type, static_cast<std::uint32_t>(HW_BREAKPOINT_W));
    EXPECT_EQ(w->config1, 4096u);
    EXPECT_EQ(w->config2, 8u);
    EXPECT_TRUE(w->exclude_kernel);
    EXPECT_FALSE(w->exclude_user);
    EXPECT_EQ(w->name, "mem:4096/8:w:u");

    // An execute breakpoint covers one instruction: the length of a long.
    auto x = c.resolve("mem:0x401157:x");
    ASSERT_TRUE(x) << x.error().to_string();
    EXPECT_EQ(x->bp_type, static_cast<std::uint32_t>(HW_BREAKPOINT_X));
    EXPECT_EQ(x->config2, sizeof(long));
    EXPECT_EQ(x->description, fmt::format("executions of the {} bytes at 0x401157", sizeof(long)));

    auto one = c.resolve("mem:0x1003/1:rw:k");
    ASSERT_TRUE(one) << one.error().to_string();
    EXPECT_EQ(one->config2, 1u);
    EXPECT_TRUE(one->exclude_user);
}

// Each bad name is BADARG naming the name, what is wrong and the syntax.
TEST(BreakpointNames, BadNamesSayWhatIsWrong) {
    auto c = breakpoints(4);
    struct Case {
        const char* name;
        const char* says;
    };
    const Case cases[] = {
        {"mem:", "'' is neither an address (a number: 0x7ffd1000, 4096) nor a symbol"},
        {"mem:0xzz", "'0xzz' is neither an address"},
        {"mem:1counter", "'1counter' is neither an address"},
        {"mem:a-b:w", "'a-b' is neither an address"},
        {"mem:counter+zz:w", "offset 'zz': a number of bytes"},
        {"mem:0x1000/3", "length '3': a breakpoint covers 1, 2, 4 or 8 bytes"},
        {"mem:0x1000/", "length ''"},
        {"mem:0x1000:rx", "executions or data accesses, not both"},
        {"mem:0x1000:ww", "unknown modifier ':ww'"},
        {"mem:0x1000:w:q", "unknown modifier ':q'"},
    };
    for (const auto& k : cases) {
        auto s = c.resolve(k.name);
        ASSERT_FALSE(s) << k.name;
        EXPECT_EQ(s.error().status, Status::BadArg) << k.name;
        EXPECT_NE(s.error().message.find(k.says), std::string::npos)
            << k.name << ": " << s.error().message;
        EXPECT_NE(s.error().message.find(k.name), std::string::npos) << s.error().message;
    }
}

// A symbol of the target, with an offset, is placed when the session knows the target.
TEST(BreakpointNames, SymbolsWaitForTheirTarget) {
    auto c = breakpoints(4);
    auto s = c.resolve("mem:counter+8/8:w");
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(s->bp_symbol, "counter");
    EXPECT_EQ(s->bp_offset, 8u);
    EXPECT_EQ(s->config1, 0u) << "not placed yet";
    EXPECT_EQ(s->canonical, "mem:counter+0x8/8:w");
    EXPECT_EQ(s->description, "writes of the 8 bytes at counter+0x8");
    auto versioned = c.resolve("mem:memcpy@GLIBC_2.14:x");
    ASSERT_TRUE(versioned) << versioned.error().to_string();
    EXPECT_EQ(versioned->bp_symbol, "memcpy@GLIBC_2.14");

    ASSERT_TRUE(place_breakpoint(*s, 0x404030, "/usr/bin/app"));
    EXPECT_EQ(s->config1, 0x404038u);
    EXPECT_EQ(s->description, "writes of the 8 bytes at counter+0x8 (0x404038 in /usr/bin/app)");
#if defined(__x86_64__) || defined(__i386__)
    auto unaligned = place_breakpoint(*s, 0x404034, "/usr/bin/app");
    ASSERT_FALSE(unaligned);
    EXPECT_NE(unaligned.error().message.find(
                  "the address 0x40403c (of counter) is not a multiple of the length 8"),
              std::string::npos)
        << unaligned.error().message;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
// What the x86 debug registers cannot do is refused by name, not by the kernel's bare EINVAL.
TEST(BreakpointNames, X86RulesAreExplained) {
    auto c = breakpoints(4);
    auto r = c.resolve("mem:0x1000:r");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("cannot count reads alone: use :rw"), std::string::npos)
        << r.error().message;
    auto x = c.resolve("mem:0x1000/4:x");
    ASSERT_FALSE(x);
    EXPECT_NE(x.error().message.find("covers one instruction"), std::string::npos)
        << x.error().message;
    auto unaligned = c.resolve("mem:0x1002/4:w");
    ASSERT_FALSE(unaligned);
    EXPECT_NE(unaligned.error().message.find("not a multiple of the length 4"), std::string::npos)
        << unaligned.error().message;
    EXPECT_NE(unaligned.error().message.find("0x1000/4 holds it"), std::string::npos)
        << unaligned.error().message;
}
#endif

// The real catalog gives `mem:` names to the breakpoint module before libpfm4, lists the PMU
// with its registers, and suggests no breakpoint for an unknown event.
TEST(BreakpointNames, TheCatalogKnowsTheBreakpointPmu) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    auto s = c->resolve("mem:0x2000:w");
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(s->pmu, kBreakpointPmu);
    const PmuInfo* pmu = c->find_pmu(kBreakpointPmu);
    ASSERT_NE(pmu, nullptr);
    EXPECT_EQ(pmu->source, kKernelSource);
    EXPECT_EQ(pmu->counters, probe_breakpoint_slots().count);
    auto listed = c->list(kBreakpointPmu);
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name, "mem:ADDR[/LEN][:ACCESS]");
    // Names without "PMU::" in the list do not upset the suggestions.
    auto unknown = c->resolve("mem_loads");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().status, Status::NoEvent);
}

TEST(BreakpointNames, AMachineWithoutBreakpointsSaysWhy) {
    auto c = breakpoints(0, "this kernel has no breakpoint PMU");
    auto s = c.resolve("mem:0x1000:w");
    ASSERT_TRUE(s) << "breakpoints resolve for planning anywhere";
    auto ok = c.countable(*s);
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().status, Status::NoPmu);
    EXPECT_EQ(ok.error().message, "mem:0x1000:w: this kernel has no breakpoint PMU");
    EXPECT_EQ(c.pmus()[0].unavailable, "this kernel has no breakpoint PMU");
}

SessionOptions on_this_thread(std::string_view events) {
    SessionOptions o;
    o.events = *parse_event_list(events);
    o.target.kind = TargetKind::Thread;
    o.target.pid = static_cast<pid_t>(::syscall(SYS_gettid));
    return o;
}

// A breakpoint holds a register while it counts, so a plan holds no more than there are; a
// counter budget, which makes other events take turns, leaves them alone.
TEST(BreakpointPlans, NoMoreBreakpointsThanRegisters) {
    auto c = breakpoints(2);
    auto three = make_plan(c, on_this_thread("mem:0x1000:w,mem:0x2000:w,mem:0x3000:w"));
    ASSERT_FALSE(three);
    EXPECT_EQ(three.error().status, Status::BadArg);
    EXPECT_EQ(three.error().message,
              "3 breakpoints (mem:0x1000:w, mem:0x2000:w, mem:0x3000:w), but this machine has 2 "
              "breakpoint registers free, and a breakpoint holds one for as long as it counts "
              "(they never take turns): count at most 2 at once");
    auto two = make_plan(c, on_this_thread("mem:0x1000:w,mem:0x2000:w"));
    ASSERT_TRUE(two) << two.error().to_string();

    auto budget = on_this_thread("mem:0x1000:w,mem:0x2000:w");
    budget.counter_budget = 1;
    auto p = make_plan(c, budget);
    ASSERT_TRUE(p) << p.error().to_string();
    for (const auto& e : p->events) EXPECT_EQ(e.counters, 0u) << e.name;
}

// A caller without privilege watches no kernel memory: the kernel refuses a breakpoint there to
// all but CAP_SYS_ADMIN, and the daemon, which has it, refuses it for them. The kernel's half
// of the address space, whole or in part; user addresses as before.
TEST(BreakpointPlans, KernelAddressesAreRefusedToACallerWithoutPrivilege) {
    constexpr bool k64 = sizeof(void*) == 8;
    const std::string kernel = k64 ? "0xffffffff81000000" : "0xc1000000";
    auto c = breakpoints(4);
    auto o = on_this_thread("mem:0x1000:w,mem:" + kernel + ":rw");
    o.no_kernel_addresses = "the caller may not";
    auto refused = make_plan(c, o);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().status, Status::Perm);
    EXPECT_EQ(refused.error().message,
              "mem:" + kernel + ":rw: " + kernel +
                  " is a kernel address, and the caller may not; watch an address of the "
                  "process's own, or ask root");
    const auto kernel_names =
        k64 ? std::vector<std::string>{"mem:0x8000000000000000:x", "mem:0xfffffffffffffff8/8:w"}
            : std::vector<std::string>{"mem:0xc0000000:x", "mem:0xfffffff8/8:w"};
    for (const auto& name : kernel_names) {
        auto spec = c.resolve(name);
        ASSERT_TRUE(spec) << spec.error().to_string();
        EXPECT_TRUE(watches_kernel(*spec)) << name;
    }
    const auto user_names = k64 ? std::vector<std::string>{"mem:0x7ffffffffff8/8:w", "mem:0x1000:x"}
                                : std::vector<std::string>{"mem:0xbffffff8/8:w", "mem:0x1000:x"};
    for (const auto& name : user_names) {
        auto spec = c.resolve(name);
        ASSERT_TRUE(spec) << spec.error().to_string();
        EXPECT_FALSE(watches_kernel(*spec)) << name;
    }
    o.no_kernel_addresses.clear();
    EXPECT_TRUE(make_plan(c, o)) << "root's";
    auto user = on_this_thread("mem:0x1000:w");
    user.no_kernel_addresses = "the caller may not";
    EXPECT_TRUE(make_plan(c, user));
}

}  // namespace
}  // namespace monitor::perf

// Written and called from this thread, K times each; named by address, and by symbol.
extern "C" {
[[gnu::used]] volatile std::uint32_t monitord_breakpoint_test_written = 0;
[[gnu::noinline, gnu::used]] void monitord_breakpoint_test_called() {
    asm volatile("" ::: "memory");
}
}

namespace monitor::perf {
namespace {

// Why this machine cannot count `needed` breakpoints at once; empty when it can.
std::string lacking_breakpoints(const EventCatalog& c, int needed) {
    const PmuInfo* pmu = c.find_pmu(kBreakpointPmu);
    if (pmu == nullptr) return "the catalog has no breakpoint PMU";
    if (!pmu->unavailable.empty()) return "no breakpoints here: " + pmu->unavailable;
    if (pmu->counters < needed) return fmt::format("only {} breakpoints free", pmu->counters);
    return {};
}

// Writes the variable and calls the function `times` times each, and expects `s` to have
// counted that many of each with its two events.
void expect_counts_of_a_loop(PerfSession& s, std::uint32_t times) {
    // The test goes on (what it checks besides counts), reported as skipped.
    if (auto why = test_support::breakpoints_do_not_fire(); !why.empty()) GTEST_SKIP() << why;
    for (std::uint32_t i = 0; i < times; ++i) {
        monitord_breakpoint_test_written = i;
        monitord_breakpoint_test_called();
    }
    ASSERT_TRUE(s.stop());
    auto r = s.read();
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->events.size(), 2u);
    EXPECT_EQ(r->events[0].total.count, times) << r->events[0].name;
    EXPECT_EQ(r->events[1].total.count, times) << r->events[1].name;
    EXPECT_DOUBLE_EQ(r->events[0].total.running_ratio(), 1.0) << "breakpoints never take turns";
}

std::unique_ptr<PerfSession> start_or_skip(const EventCatalog& c, const SessionOptions& o,
                                           std::string& why) {
    auto s = PerfSession::start(c, std::make_unique<PerfEventDevice>(), o);
    if (!s) {
        why = s.error().to_string();
        return nullptr;
    }
    return std::move(*s);
}

TEST(BreakpointCounting, AVariableWrittenKTimesAndAFunctionCalledKTimesCountK) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    if (auto lacking = lacking_breakpoints(*c, 2); !lacking.empty()) GTEST_SKIP() << lacking;
    const std::string events =
        fmt::format("mem:{}:w:u,mem:{}:x:u", hex(&monitord_breakpoint_test_written),
                    hex(reinterpret_cast<const void*>(&monitord_breakpoint_test_called)));
    std::string why;
    auto s = start_or_skip(*c, on_this_thread(events), why);
    if (!s) GTEST_SKIP() << "perf_event_open refused the breakpoints: " << why;
    expect_counts_of_a_loop(*s, 25'000);
}

// Symbols of this (position-independent) test program, found in its memory map where the
// loader put it, count like addresses; one it does not have, or a target that is no
// program, is refused saying so.
TEST(BreakpointCounting, SymbolsOfTheTargetProcessArePlacedWhereItHasThem) {
    auto c = EventCatalog::create();
    ASSERT_TRUE(c) << c.error().to_string();
    if (auto lacking = lacking_breakpoints(*c, 2); !lacking.empty()) GTEST_SKIP() << lacking;
    std::string why;
    auto s = start_or_skip(*c,
                           on_this_thread("mem:monitord_breakpoint_test_written:w:u,"
                                          "mem:monitord_breakpoint_test_called:x:u"),
                           why);
    if (!s && why.find("permission") != std::string::npos) GTEST_SKIP() << why;
    ASSERT_TRUE(s) << why;
    expect_counts_of_a_loop(*s, 10'000);
    const auto& placed = s->plan().events[0];
    EXPECT_EQ(placed.config1, reinterpret_cast<std::uintptr_t>(&monitord_breakpoint_test_written));
    EXPECT_NE(placed.description.find(fmt::format("monitord_breakpoint_test_written ({} in ",
                                                  hex(&monitord_breakpoint_test_written))),
              std::string::npos)
        << placed.description;

    auto unknown = start_or_skip(*c, on_this_thread("mem:no_such_symbol_here:w"), why);
    EXPECT_EQ(unknown, nullptr);
    EXPECT_NE(why.find("has no function or variable 'no_such_symbol_here'"), std::string::npos)
        << why;

    SessionOptions cpus;
    cpus.events = *parse_event_list("mem:monitord_breakpoint_test_written:w");
    cpus.target.kind = TargetKind::AllCpus;
    cpus.cpus = {0};
    auto whole = start_or_skip(*c, cpus, why);
    EXPECT_EQ(whole, nullptr);
    EXPECT_NE(why.find("a symbol names an address in one program, and this target is whole CPUs"),
              std::string::npos)
        << why;

    // Several processes (perf stat -p A,B): their addresses may differ.
    SessionOptions several;
    several.events = *parse_event_list("mem:monitord_breakpoint_test_written:w");
    several.target = {.kind = TargetKind::Process, .pid = ::getpid(), .pids = {::getpid(), 1}};
    EXPECT_EQ(start_or_skip(*c, several, why), nullptr);
    EXPECT_NE(why.find(fmt::format("this target is processes {}, 1, whose addresses may differ",
                                   ::getpid())),
              std::string::npos)
        << why;
}

// An executable about to run has its symbols where it says only when it is not
// position-independent (as Debian's compilers make programs, this one included).
TEST(BreakpointCounting, APositionIndependentCommandCannotBeAskedForSymbols) {
    auto exe = std::filesystem::read_symlink("/proc/self/exe");
    auto found = find_program_symbol(exe, "monitord_breakpoint_test_written");
    if (!reads_symbols()) {
        ASSERT_FALSE(found);
        EXPECT_EQ(found.error().status, Status::NoEvent);
        EXPECT_NE(found.error().message.find("give the address instead (mem:0xADDR)"),
                  std::string::npos)
            << found.error().message;
        GTEST_SKIP() << "this libmonitor was built without elfutils' libdw: it reads no symbols";
    }
    std::ifstream elf(exe, std::ios::binary);
    char header[18] = {};
    elf.read(header, sizeof header);
    if (header[16] == ET_EXEC) {  // e_type, little- or big-endian alike for values below 256
        ASSERT_TRUE(found) << found.error().to_string();
        EXPECT_EQ(found->address,
                  reinterpret_cast<std::uintptr_t>(&monitord_breakpoint_test_written));
    } else {
        ASSERT_FALSE(found);
        EXPECT_EQ(found.error().status, Status::BadArg);
        EXPECT_NE(found.error().message.find("is position-independent"), std::string::npos)
            << found.error().message;
    }
    auto missing = find_program_symbol("/nonexistent/program", "x");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("/nonexistent/program cannot be read"),
              std::string::npos)
        << missing.error().message;
}

// When the catalog thinks there are more registers than are free (a debugger took some
// since), opening says so instead of a bare ENOSPC.
TEST(BreakpointCounting, TooManyForTheRegistersIsAClearError) {
    const int free = probe_breakpoint_slots().count;
    if (free == 0) GTEST_SKIP() << "no breakpoints here";
    auto c = breakpoints(free + 1);
    std::string events;
    for (int i = 0; i <= free; ++i) {
        events +=
            fmt::format("{}mem:{}:w:u", i == 0 ? "" : ",", hex(&monitord_breakpoint_test_written));
    }
    std::string why;
    auto s = start_or_skip(c, on_this_thread(events), why);
    ASSERT_EQ(s, nullptr) << free + 1 << " breakpoints opened, with " << free << " free";
    EXPECT_NE(why.find("every breakpoint register is taken"), std::string::npos) << why;
    EXPECT_NE(why.find("monctl perf info"), std::string::npos) << why;
}

}  // namespace
}  // namespace monitor::perf
