// The sampling calls' messages: address ranges as users write them, the one mapping of a
// request onto a profile's options with its refusals, and the report as it travels, held to
// the interface file.
#include "monitor/protocol/profile_messages.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "interface_check.hpp"
#include "monitor/perf/kernel_symbols.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "test_support.hpp"

namespace {

using monitor::Status;
namespace perf = monitor::perf;
namespace protocol = monitor::protocol;

TEST(AddressRange, IsParsedAsUsersWriteIt) {
    auto r = protocol::parse_address_range("0x401000-0x402000");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(*r, (protocol::AddressRange{0x401000, 0x402000, 4}));
    r = protocol::parse_address_range("4096-8192/16");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(*r, (protocol::AddressRange{4096, 8192, 16}));
    r = protocol::parse_address_range("0xffffffff81000000-0xffffffff82000000/0x1000");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->start, 0xffffffff81000000u) << "kernel addresses fit";
    EXPECT_EQ(r->bucket, 0x1000u);
    for (const char* bad : {"0x401000", "main-0x10", "0x10-", "1-2/x", "0x-0x10", ""}) {
        auto e = protocol::parse_address_range(bad);
        ASSERT_FALSE(e) << bad;
        EXPECT_EQ(e.error().status, Status::BadArg);
        EXPECT_NE(e.error().message.find(std::string("'") + bad + "'"), std::string::npos)
            << e.error().message;
        EXPECT_NE(e.error().message.find("START-END/BUCKET"), std::string::npos);
    }
}

TEST(AddressRange, EmptyZeroAndHugeRangesAreRefusedSayingWhatWouldDo) {
    auto e = protocol::check_range({0x2000, 0x2000, 4});
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("is empty"), std::string::npos) << e.error().message;
    e = protocol::check_range({0x1000, 0x2000, 0});
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("a bucket of 0 bytes"), std::string::npos);
    // A terabyte in 4-byte buckets.
    e = protocol::check_range({0, std::uint64_t{1} << 40, 4});
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("buckets of 1048576 bytes or more"), std::string::npos)
        << e.error().message;
    EXPECT_TRUE(protocol::check_range({0, std::uint64_t{1} << 40, 1 << 20}));
}

TEST(ProfileRequest, MapsOntoTheSessionsOptions) {
    protocol::ProfileRequest r;
    auto o = protocol::profile_options(r, "/sys/fs/cgroup");
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_EQ(o->event, perf::kDefaultProfileEvent);
    EXPECT_EQ(o->rate.frequency, perf::kDefaultProfileFrequency);
    EXPECT_EQ(o->target.kind, perf::TargetKind::AllCpus);
    EXPECT_TRUE(o->user && o->kernel);

    r.event = "perf::TASK-CLOCK";
    r.period = 100'000;
    r.mode = protocol::SampledModes::User;
    r.target = {.kind = protocol::TargetRequest::Kind::Process, .pid = 42};
    r.start_at_exec = true;
    r.callchain = true;
    o = protocol::profile_options(r, "/sys/fs/cgroup");
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_TRUE(o->callchain);
    EXPECT_EQ(o->event, "perf::TASK-CLOCK");
    EXPECT_EQ(o->rate.period, 100'000u);
    EXPECT_EQ(o->rate.frequency, 0u);
    EXPECT_TRUE(o->user);
    EXPECT_FALSE(o->kernel);
    EXPECT_EQ(o->target.kind, perf::TargetKind::Process);
    EXPECT_EQ(o->target.pid, 42);
    EXPECT_TRUE(o->target.enable_on_exec);

    r = {};
    r.mode = protocol::SampledModes::Kernel;
    r.target = {.kind = protocol::TargetRequest::Kind::Each};
    o = protocol::profile_options(r, "/sys/fs/cgroup");
    ASSERT_TRUE(o);
    EXPECT_FALSE(o->user);
    EXPECT_TRUE(o->kernel);
    EXPECT_FALSE(o->callchain);
    EXPECT_EQ(o->target.kind, perf::TargetKind::EachCpu);
}

TEST(ProfileRequest, BadRequestsAreRefusedNamingWhatIsWrong) {
    struct Case {
        protocol::ProfileRequest request;
        std::string says;
    };
    std::vector<Case> cases;
    cases.push_back({{.period = 0}, "a period of 0 events: give 1 or more"});
    cases.push_back({{.frequency = -5}, "a frequency of -5 a second"});
    cases.push_back({{.period = 10, .frequency = 10}, "not both"});
    cases.push_back({{.top = -1}, "top -1"});
    cases.push_back({{.range = protocol::AddressRange{0x10, 0x10, 4}}, "is empty"});
    cases.push_back({{.target = {.kind = protocol::TargetRequest::Kind::Process}},
                     "target 'process' needs a pid"});
    cases.push_back(
        {{.target = {.kind = protocol::TargetRequest::Kind::Cpu, .cpu = -1}}, "no cpu -1"});
    cases.push_back({{.start_at_exec = true}, "start_at_exec is for a process target"});
    cases.push_back({{.target = {.kind = protocol::TargetRequest::Kind::Process, .pids = {4, 3}}},
                     "a profile samples one process, and this target is processes 3, 4"});
    cases.push_back(
        {{.stack_size = 4096}, "stack_size 4096: the stack is copied for call_graph dwarf only"});
    cases.push_back({{.call_graph = perf::CallGraph::Dwarf, .stack_size = 100},
                     "stack_size 100: give a multiple of 8 bytes from 8 to 65528"});
    cases.push_back({{.call_graph = perf::CallGraph::Dwarf, .stack_size = 65536},
                     "stack_size 65536: give a multiple of 8"});
    for (const auto& c : cases) {
        auto o = protocol::profile_options(c.request, "/sys/fs/cgroup");
        ASSERT_FALSE(o) << c.says;
        EXPECT_EQ(o.error().status, Status::BadArg) << c.says;
        EXPECT_NE(o.error().message.find(c.says), std::string::npos) << o.error().message;
    }
    // A mode the interface does not name does not get this far: reading the call refuses it.
    try {
        (void)protocol::profile_request_from_json(nlohmann::json{{"mode", "hypervisor"}});
        ADD_FAILURE() << "mode 'hypervisor' was read";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "mode 'hypervisor': sample user, kernel or both");
    }
    try {
        (void)protocol::profile_request_from_json(nlohmann::json{{"call_graph", "lbr"}});
        ADD_FAILURE() << "call_graph 'lbr' was read";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "call_graph 'lbr': make call chains by fp or dwarf");
    }
}

// call_graph dwarf asks for chains (callchain need not be given) unwound from a stack copy of
// the size asked; fp is the frame pointers of callchain alone.
TEST(ProfileRequest, DwarfCallGraphAsksForChainsAndItsStack) {
    protocol::ProfileRequest r{.call_graph = perf::CallGraph::Dwarf, .stack_size = 16384};
    auto o = protocol::profile_options(r, "/sys/fs/cgroup");
#if defined(__x86_64__)
    if (!perf::dwarf_unwinding_refusal().empty()) {
        ASSERT_FALSE(o);
        EXPECT_NE(o.error().message.find("libdw"), std::string::npos) << o.error().message;
        return;
    }
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_TRUE(o->callchain);
    EXPECT_EQ(o->call_graph, perf::CallGraph::Dwarf);
    EXPECT_EQ(o->user_stack, 16384u);
#else
    ASSERT_FALSE(o);
    EXPECT_NE(o.error().message.find("x86-64"), std::string::npos) << o.error().message;
#endif
    r = {.call_graph = perf::CallGraph::FramePointers};
    o = protocol::profile_options(r, "/sys/fs/cgroup");
    ASSERT_TRUE(o) << o.error().to_string();
    EXPECT_TRUE(o->callchain);
    EXPECT_EQ(o->call_graph, perf::CallGraph::FramePointers);
}

TEST(ProfileRequest, TravelsUnchangedAndMatchesTheInterface) {
    protocol::ProfileRequest r{
        .event = "perf::TASK-CLOCK:u",
        .period = 250'000,
        .target = {.kind = protocol::TargetRequest::Kind::Cpu, .cpu = 1},
        .mode = protocol::SampledModes::User,
        .top = 5,
        .range = protocol::AddressRange{0xffffffff81000000, 0xffffffff81100000, 4096},
        .callchain = true,
        .call_graph = perf::CallGraph::Dwarf,
        .stack_size = 32768};
    const auto j = protocol::to_json(r);
    EXPECT_EQ(protocol::profile_request_from_json(j), r) << j.dump();
    const auto* iface = monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface);
    const auto* m = iface->method("Profile");
    ASSERT_NE(m, nullptr);
    auto bad = iface->check(*m->input, nlohmann::json{{"request", j}, {"duration_ms", 100}},
                            monitor::varlink::Extra::Reject);
    EXPECT_FALSE(bad) << bad->path << ": " << bad->reason;
}

// A profile made of samples the test writes, as it goes out: top lines, modes, the
// histogram's buckets that have samples, kernel addresses whole.
TEST(ProfileMessage, CarriesTheProfileAndMatchesTheInterface) {
    test_support::ScratchDir dir{"profile-messages"};
    {
        std::ofstream k(dir / "kallsyms");
        k << "ffffffff81000000 T _stext\n"
             "ffffffff81000100 T schedule\n"
             "ffffffff81000200 d some_data\n"
             "ffffffff81000300 t do_idle\n"
             "ffffffffc0001000 t ext4_fill_super\t[ext4]\n";
    }
    perf::AddressNames names{dir / "kallsyms"};
    perf::Profile p;
    auto add = [&](std::uint64_t ip, pid_t pid, perf::SampleMode mode, int n) {
        for (int i = 0; i < n; ++i) {
            p.add(perf::Sample{.ip = ip, .pid = pid, .tid = pid, .mode = mode}, names);
        }
    };
    add(0xffffffff81000104, 7, perf::SampleMode::Kernel, 6);
    add(0xffffffffc0001010, 7, perf::SampleMode::Kernel, 3);
    add(0xffffffff81000308, 0, perf::SampleMode::Kernel, 1);
    auto m = protocol::make_profile_message(
        p, 2, protocol::AddressRange{0xffffffff81000000, 0xffffffff81001000, 0x100});
    m.event = "perf::CPU-CLOCK";
    m.target = "all CPUs";
    m.elapsed = 1.5;
    m.final = true;
    const auto& r = m.report;
    EXPECT_EQ(r.samples, 10u);
    EXPECT_EQ(r.modes.kernel, 9u);
    EXPECT_EQ(r.modes.idle, 1u);
    ASSERT_EQ(r.functions.size(), 2u) << "the top 2";
    EXPECT_EQ(r.functions[0].name, "schedule ([kernel.kallsyms])");
    EXPECT_DOUBLE_EQ(r.functions[0].percent, 60.0);
    EXPECT_EQ(r.functions[1].name, "ext4_fill_super ([ext4])");
    ASSERT_TRUE(m.histogram);
    EXPECT_EQ(m.histogram->samples, 7u) << "schedule's 6 and the idle sample";
    ASSERT_EQ(m.histogram->buckets.size(), 2u);
    EXPECT_EQ(m.histogram->buckets[0],
              (std::pair<std::uint64_t, std::uint64_t>{0xffffffff81000100, 6}));

    const auto j = protocol::to_json(m);
    EXPECT_EQ(test_support::check_reply("Profile", nlohmann::json{{"report", j}}), "") << j.dump();
    EXPECT_EQ(j["histogram"]["start"], "0xffffffff81000000");
    const auto back = protocol::profile_message_from_json(j);
    EXPECT_EQ(back.report.functions.size(), 2u);
    EXPECT_EQ(back.report.modes.idle, 1u);
    ASSERT_TRUE(back.histogram);
    EXPECT_EQ(back.histogram->buckets, m.histogram->buckets);
    EXPECT_EQ(back.histogram->range, m.histogram->range);
    EXPECT_TRUE(back.final);
    EXPECT_FALSE(j.contains("stacks")) << "no chains asked for";
    EXPECT_FALSE(j.contains("cpus")) << "not a profile of each CPU";
    EXPECT_FALSE(j.contains("kernel_symbols")) << "the kernel's functions were named";
    EXPECT_EQ(test_support::check_reply("Profile", nlohmann::json{{"started", true}}), "");

    // Kernel functions unnamed: the reason travels with the report.
    m.kernel_symbols = "/proc/kallsyms shows no addresses to this reader";
    const auto blind = protocol::to_json(m);
    EXPECT_EQ(test_support::check_reply("Profile", nlohmann::json{{"report", blind}}), "")
        << blind.dump();
    EXPECT_EQ(protocol::profile_message_from_json(blind).kernel_symbols, m.kernel_symbols);
}

// With call chains and by CPU: the stacks, and each CPU's own counts, travel whole.
TEST(ProfileMessage, CarriesStacksAndEachCpusProfile) {
    perf::Profile p(true);
    const perf::SampleLabel work{"work (/bin/app)", "/bin/app", "work"};
    for (int i = 0; i < 3; ++i) {
        p.add(perf::Sample{.ip = 0x1000, .pid = 7, .cpu = 1, .mode = perf::SampleMode::User}, work,
              "app;main;work");
    }
    p.add(perf::Sample{.ip = 0x1000, .pid = 7, .cpu = 0, .mode = perf::SampleMode::User}, work,
          "app;main;helper;work");
    p.add(perf::DrainStats{.lost = 2, .throttled = 1}, 1);
    const auto m = protocol::make_profile_message(p, 1, std::nullopt);
    ASSERT_EQ(m.report.stacks.size(), 2u) << "every stack, whatever the top";
    const auto j = protocol::to_json(m);
    EXPECT_EQ(test_support::check_reply("Profile", nlohmann::json{{"report", j}}), "") << j.dump();
    const auto back = protocol::profile_message_from_json(j);
    ASSERT_EQ(back.report.stacks.size(), 2u);
    EXPECT_EQ(back.report.stacks[0].name, "app;main;work");
    EXPECT_EQ(back.report.stacks[0].samples, 3u);
    EXPECT_DOUBLE_EQ(back.report.stacks[0].percent, 75.0);
    ASSERT_EQ(back.report.cpus.size(), 2u);
    EXPECT_EQ(back.report.cpus[1].cpu, 1);
    EXPECT_EQ(back.report.cpus[1].report.samples, 3u);
    EXPECT_EQ(back.report.cpus[1].report.lost, 2u);
    EXPECT_EQ(back.report.cpus[1].report.throttled, 1u);
    EXPECT_EQ(back.report.cpus[1].report.modes.user, 3u);
    ASSERT_EQ(back.report.cpus[0].report.functions.size(), 1u);
    EXPECT_DOUBLE_EQ(back.report.cpus[0].report.functions[0].percent, 100.0);
}

TEST(KernelSymbols, NameKernelAddressesByTheFunctionBelowThem) {
    test_support::ScratchDir dir{"kallsyms"};
    {
        std::ofstream k(dir / "kallsyms");
        k << "ffffffff81000300 t do_idle\n"  // out of order: the table sorts
             "ffffffff81000000 T _stext\n"
             "ffffffff81000100 W weak_function\n"
             "ffffffff81000200 D some_data\n"
             "ffffffffc0001000 t ext4_fill_super\t[ext4]\n"
             "garbage line\n";
    }
    auto k = perf::KernelSymbols::load(dir / "kallsyms");
    EXPECT_EQ(k.unavailable(), "");
    EXPECT_EQ(k.size(), 4u) << "text symbols only";
    auto f = k.find(0xffffffff81000250);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->function, "weak_function") << "data symbols are not functions";
    EXPECT_EQ(f->object, "[kernel.kallsyms]");
    f = k.find(0xffffffffc0001004);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->function, "ext4_fill_super");
    EXPECT_EQ(f->object, "[ext4]");
    EXPECT_FALSE(k.find(0x1000)) << "below every symbol";
}

TEST(KernelSymbols, HiddenOrMissingAddressesLeaveKernelSamplesNamedKernel) {
    test_support::ScratchDir dir{"kallsyms-hidden"};
    {
        std::ofstream k(dir / "kallsyms");
        k << "0000000000000000 T _stext\n0000000000000000 T schedule\n";
    }
    auto k = perf::KernelSymbols::load(dir / "kallsyms");
    EXPECT_EQ(k.size(), 0u);
    EXPECT_NE(k.unavailable().find("kernel.kptr_restrict"), std::string::npos) << k.unavailable();
    auto missing = perf::KernelSymbols::load(dir / "none");
    EXPECT_EQ(missing.size(), 0u);
    EXPECT_NE(missing.unavailable().find("none"), std::string::npos) << missing.unavailable();

    perf::AddressNames names{dir / "kallsyms"};
    const auto label = perf::Profile::label(
        perf::Sample{.ip = 0xffffffff81000104, .pid = 9, .mode = perf::SampleMode::Kernel}, names);
    EXPECT_EQ(label.function, "[kernel]");
    EXPECT_EQ(label.object, "[kernel]");
}

// The daemon's profiles share one reading of kallsyms, read again when a module comes or goes
// and once a minute; a session given it names with it and reads nothing itself.
TEST(KernelSymbolCache, KeepsTheSymbolsUntilTheModulesChangeOrAMinutePasses) {
    test_support::ScratchDir dir{"kallsyms-cache"};
    auto write = [&](const char* file, const char* text) { std::ofstream(dir / file) << text; };
    write("kallsyms", "ffffffff81000000 T _stext\nffffffff81000100 T schedule\n");
    write("modules", "ext4 1 0 - Live 0x0000000000000000\n");
    perf::KernelSymbolCache cache(dir / "kallsyms", dir / "modules", std::chrono::seconds(60));
    const auto t0 = std::chrono::steady_clock::now();
    const auto first = cache.get(t0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->size(), 2u);
    EXPECT_EQ(cache.get(t0 + std::chrono::seconds(30)), first) << "kept";
    EXPECT_EQ(cache.reads(), 1u);

    write("kallsyms",
          "ffffffff81000000 T _stext\nffffffff81000100 T schedule\n"
          "ffffffffc0001000 t xfs_fs_fill_super\t[xfs]\n");
    write("modules", "ext4 1 0 - Live 0x0000000000000000\nxfs 1 0 - Live 0x0000000000000000\n");
    const auto after_module = cache.get(t0 + std::chrono::seconds(31));
    EXPECT_EQ(after_module->size(), 3u) << "a module came: read again";
    EXPECT_EQ(cache.get(t0 + std::chrono::seconds(90)), after_module);
    EXPECT_NE(cache.get(t0 + std::chrono::seconds(92)), after_module) << "a minute passed";
    EXPECT_EQ(cache.reads(), 3u);

    perf::AddressNames names{dir / "none"};
    names.use_kernel(after_module);
    EXPECT_EQ(names.kernel(0xffffffffc0001010).function, "xfs_fs_fill_super");
}

}  // namespace
