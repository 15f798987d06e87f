// Which processor a machine has, read from a described /proc and /sys, and the ppc750 table's
// processor check on each kind of machine: the 750 family with and without a PMU driver in
// its kernel, other PowerPCs, x86, ARM, a machine that does not say. A ppc750 code opens only
// where it means what the table says; everywhere else it is NOPMU, naming the processor.
#include "monitor/perf/processor.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>

#include "../support/simulated_ppc750_pmu.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/ppc750_events.hpp"
#include "test_support.hpp"

namespace monitor::perf {
namespace {

using test_support::DescribedMachine;
using ::testing::HasSubstr;
using Simulated750 = testing::SimulatedPpc750Pmu;

constexpr const char* kXeon =
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
    "model name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\nflags\t\t: fpu vme\n\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n";
constexpr const char* kEpyc =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n";
constexpr const char* kArm64 =
    "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
    "CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n";
constexpr const char* kMpc7450 =
    "processor\t: 0\ncpu\t\t: 7450\nclock\t\t: 867.000000MHz\nrevision\t: 2.1 (pvr 8000 0201)\n";
constexpr const char* kMpc7400 = "processor\t: 0\ncpu\t\t: 7400\nrevision\t: 2.9 (pvr 000c 0209)\n";
constexpr const char* kQemu750 =  // qemu-system-ppc -M g3beige -cpu 750, Linux 6.1
    "processor\t: 0\ncpu\t\t: 740/750\ntemperature \t: 0-127 C (uncalibrated)\n"
    "clock\t\t: 266.000000MHz\nrevision\t: 3.1 (pvr 0008 0301)\nbogomips\t: 33.20\n";
constexpr const char* k750Fx = "processor\t: 0\ncpu\t\t: 750FX\nrevision\t: 2.2 (pvr 7000 0202)\n";
constexpr const char* k750Gx = "processor\t: 0\ncpu\t\t: 750GX\nrevision\t: 1.2 (pvr 7002 0102)\n";
constexpr const char* k755 = "processor\t: 0\ncpu\t\t: 745/755\nrevision\t: 3.2 (pvr 0008 3302)\n";

TEST(Processor, ReadsTheNameAndThePowerPcVersion) {
    DescribedMachine xeon(kXeon, true);
    auto p = read_processor(xeon.proc(), xeon.sys());
    EXPECT_EQ(p.name, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
    EXPECT_FALSE(p.pvr);
    EXPECT_TRUE(p.core_pmu);
    EXPECT_EQ(p.error, "");

    DescribedMachine cxe(test_support::kPpc750CxeCpuinfo, true, "ppc750");
    p = read_processor(cxe.proc(), cxe.sys());
    EXPECT_EQ(p.name, "750CXe");
    ASSERT_TRUE(p.pvr);
    EXPECT_EQ(*p.pvr, 0x00082214u);
    EXPECT_EQ(p.core_pmu_name, "ppc750");
    EXPECT_EQ(p.describe(), "750CXe (pvr 0008 2214)");

    DescribedMachine arm(kArm64, false);
    p = read_processor(arm.proc(), arm.sys());
    EXPECT_EQ(p.name, "an ARM core (implementer 0x41, part 0xd0c)");
    EXPECT_FALSE(p.core_pmu);

    DescribedMachine silent("", false);
    p = read_processor(silent.proc(), silent.sys());
    EXPECT_EQ(p.describe(), "an unknown processor");
    EXPECT_THAT(p.error, HasSubstr("cpuinfo"));
}

TEST(Processor, OnlyTheSevenFiftyFamilysVersionsAreSevenFifties) {
    for (std::uint32_t pvr : {0x00080301u, 0x00082214u, 0x00083302u, 0x70000202u, 0x70020102u}) {
        EXPECT_TRUE(is_ppc750_pvr(pvr)) << std::hex << pvr;
    }
    // 7400, 7410, 7450, 7455, 7447, 7448, 604e, 603e, e300, POWER9
    for (std::uint32_t pvr : {0x000c0209u, 0x800c1104u, 0x80000201u, 0x80010302u, 0x80020101u,
                              0x80040202u, 0x00090204u, 0x00070100u, 0x80830010u, 0x004e1202u}) {
        EXPECT_FALSE(is_ppc750_pvr(pvr)) << std::hex << pvr;
    }
}

struct MachineCase {
    const char* what;
    const char* cpuinfo;
    bool core_pmu;
    const char* pmu_name;
    bool counts;
    const char* says;  // in the refusal
};

void PrintTo(const MachineCase& c, std::ostream* os) {
    *os << c.what;
}

class Ppc750OnAMachine : public ::testing::TestWithParam<MachineCase> {};

TEST_P(Ppc750OnAMachine, CountsOnlyOnASevenFiftyWithAPmuDriver) {
    const auto& c = GetParam();
    DescribedMachine machine(c.cpuinfo, c.core_pmu, c.pmu_name);
    auto catalog = EventCatalog::create(machine.proc(), machine.sys());
    ASSERT_TRUE(catalog) << catalog.error().message;
    // Named, decoded and planned anywhere ...
    auto cycles = catalog->resolve("ppc750::CYCLES");
    ASSERT_TRUE(cycles) << cycles.error().message;
    auto raw = catalog->resolve("ppc750::r205");
    ASSERT_TRUE(raw) << raw.error().message;
    // ... counted only where they mean what the table says.
    const PmuInfo* pmu = catalog->find_pmu("ppc750");
    ASSERT_NE(pmu, nullptr);
    for (const auto& event : {*cycles, *raw}) {
        auto r = catalog->countable(event);
        EXPECT_EQ(static_cast<bool>(r), c.counts) << (r ? "counts" : r.error().message);
        if (!r) {
            EXPECT_EQ(r.error().status, Status::NoPmu);
            EXPECT_THAT(r.error().message, HasSubstr(event.name + ": "));
            EXPECT_THAT(r.error().message, HasSubstr(c.says));
        }
    }
    EXPECT_EQ(pmu->unavailable.empty(), c.counts) << pmu->unavailable;
    // The kernel's own events are not the table's business.
    auto clock = catalog->resolve("perf::TASK-CLOCK");
    ASSERT_TRUE(clock);
    EXPECT_TRUE(catalog->countable(*clock));
}

INSTANTIATE_TEST_SUITE_P(
    Machines, Ppc750OnAMachine,
    ::testing::Values(
        MachineCase{"an Intel Xeon", kXeon, true, "skylake", false,
                    "this machine has Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz: count its own "
                    "events instead"},
        MachineCase{"an AMD EPYC", kEpyc, true, "", false, "AMD EPYC 7763 64-Core Processor"},
        MachineCase{"an arm64 core", kArm64, false, "", false,
                    "an ARM core (implementer 0x41, part 0xd0c)"},
        MachineCase{"a 7450 with its PMU driver", kMpc7450, true, "MPC7450", false,
                    "this machine has 7450 (pvr 8000 0201)"},
        MachineCase{"a 7400", kMpc7400, true, "", false, "7400 (pvr 000c 0209)"},
        MachineCase{"a 750 without a PMU driver (mainline Linux)", kQemu750, false, "", false,
                    "this 740/750 (pvr 0008 0301) has no PMU driver in its kernel"},
        MachineCase{"a 750CXe without a PMU driver", test_support::kPpc750CxeCpuinfo, false, "",
                    false, "only the kernel's software events count here"},
        MachineCase{"a 750 whose core PMU is another driver's", kQemu750, true, "MPC7450", false,
                    "has a core PMU driver for MPC7450, not for the 750"},
        MachineCase{"a machine whose cpuinfo cannot be read", "", true, "", false,
                    "processor cannot be told"},
        MachineCase{"a 750 with a PMU driver", kQemu750, true, "", true, ""},
        MachineCase{"a 750CXe with a PMU driver", test_support::kPpc750CxeCpuinfo, true, "ppc750",
                    true, ""},
        MachineCase{"a 750FX with a PMU driver", k750Fx, true, "", true, ""},
        MachineCase{"a 750GX with a PMU driver", k750Gx, true, "PPC750", true, ""},
        MachineCase{"a 755 with a PMU driver", k755, true, "", true, ""}),
    [](const ::testing::TestParamInfo<MachineCase>& p) {
        std::string name;
        for (const char* c = p.param.what; *c != '\0'; ++c) {
            if (std::isalnum(static_cast<unsigned char>(*c))) name += *c;
        }
        return name;
    });

// A session refuses before anything is opened. The simulated 750 PMU stands for a kernel PMU
// that takes any raw code, as an x86 one does: without the check, the session would start and
// count whatever those numbers mean there, under 750 names.
TEST(Ppc750OnAMachine, ASessionRefusesBeforeOpeningAnything) {
    DescribedMachine xeon(kXeon, true, "skylake");
    auto catalog = EventCatalog::create(xeon.proc(), xeon.sys());
    ASSERT_TRUE(catalog);
    SessionOptions o;
    o.events = {{"ppc750::CYCLES"}, {"ppc750::L1_ICACHE_MISSES"}};
    o.target.kind = TargetKind::OneCpu;
    o.target.cpu = 0;
    o.cpus = {0};
    auto s = PerfSession::start(*catalog, std::make_unique<Simulated750>(), o);
    ASSERT_FALSE(s) << "a ppc750 session started on an Intel Xeon";
    EXPECT_EQ(s.error().status, Status::NoPmu);
    EXPECT_THAT(s.error().message, HasSubstr("ppc750::CYCLES: counts only on a PowerPC 750"));
    EXPECT_THAT(s.error().message, HasSubstr("Intel(R) Xeon(R) Gold 6248"));
    // Planning still works there.
    EXPECT_TRUE(make_plan(*catalog, o));
    // And on a 750 whose kernel takes the codes, the same session starts.
    DescribedMachine cxe(test_support::kPpc750CxeCpuinfo, true, "ppc750");
    auto on_750 = EventCatalog::create(cxe.proc(), cxe.sys());
    ASSERT_TRUE(on_750);
    auto started = PerfSession::start(*on_750, std::make_unique<Simulated750>(), o);
    EXPECT_TRUE(started) << started.error().message;
}

}  // namespace
}  // namespace monitor::perf
