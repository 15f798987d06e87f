// Tests of the PowerPC 750 event table against the selects of the MPC750 manual, of the raw
// code encoding and decoding, and of the module that serves the table to the catalog.
#include "monitor/perf/ppc750_events.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/ppc750_pmu.hpp"

namespace monitor::perf {
namespace {

// One expected row: pmc 0 for the selects common to all counters.
struct Expected {
    unsigned pmc;
    std::uint8_t select;
    std::string_view name;
};

// Written out from the select lists of ppc750-pmu.md, in the table's order.
const std::vector<Expected> kExpected = {
    {0, 0x01, "CYCLES"},
    {0, 0x02, "INSTRUCTIONS_COMPLETED"},
    {0, 0x03, "TBL_TRANSITIONS"},
    {0, 0x04, "INSTRUCTIONS_DISPATCHED"},

    {1, 0x05, "EIEIO_COMPLETED"},
    {1, 0x06, "ITLB_SEARCH_CYCLES"},
    {1, 0x07, "L2_HITS"},
    {1, 0x08, "INSTR_EA_DELIVERED"},
    {1, 0x09, "IABR_MATCHES"},
    {1, 0x0A, "L1_LOAD_MISSES_OVER_THRESHOLD"},
    {1, 0x0B, "UNRESOLVED_BRANCHES"},
    {1, 0x0C, "SECOND_BRANCH_DISPATCH_STALL_CYCLES"},

    {2, 0x05, "L1_ICACHE_MISSES"},
    {2, 0x06, "ITLB_MISSES"},
    {2, 0x07, "L2_INSTRUCTION_MISSES"},
    {2, 0x08, "BRANCHES_NOT_TAKEN"},
    {2, 0x09, "MSR_PR_TOGGLES"},
    {2, 0x0A, "LWARX_COMPLETED"},
    {2, 0x0B, "LOADS_STORES_COMPLETED"},
    {2, 0x0C, "L1_L2_SNOOPS"},
    {2, 0x0D, "L1_CASTOUTS_TO_L2"},
    {2, 0x0E, "SYSTEM_UNIT_INSTRUCTIONS_COMPLETED"},
    {2, 0x0F, "L1_IFETCH_MISSES"},
    {2, 0x10, "OOO_BRANCHES_RESOLVED_CORRECTLY"},

    {3, 0x05, "L1_DCACHE_MISSES"},
    {3, 0x06, "DTLB_MISSES"},
    {3, 0x07, "L2_DATA_MISSES"},
    {3, 0x08, "BRANCHES_TAKEN"},
    {3, 0x09, "MSR_PM_TOGGLES_USER"},
    {3, 0x0A, "STWCX_COMPLETED"},
    {3, 0x0B, "FPU_INSTRUCTIONS_COMPLETED"},
    {3, 0x0C, "L2_SNOOP_CASTOUTS"},
    {3, 0x0D, "L2_CACHE_OP_HITS"},
    {3, 0x0F, "L1_LOAD_MISS_CYCLES"},
    {3, 0x10, "SECOND_STREAM_BRANCHES_RESOLVED_CORRECTLY"},
    {3, 0x11, "BPU_LR_CR_STALL_CYCLES"},

    {4, 0x05, "L2_CASTOUTS"},
    {4, 0x06, "DTLB_SEARCH_CYCLES"},
    {4, 0x08, "BRANCHES_MISPREDICTED"},
    {4, 0x09, "MSR_PM_TOGGLES_SUPERVISOR"},
    {4, 0x0A, "STWCX_RESERVATION_INTACT"},
    {4, 0x0B, "SYNC_COMPLETED"},
    {4, 0x0C, "SNOOP_RETRIES"},
    {4, 0x0D, "INTEGER_OPS_COMPLETED"},
    {4, 0x0E, "BPU_TWO_UNRESOLVED_STALL_CYCLES"},
};

CounterMask expected_counters(unsigned pmc) {
    return pmc == 0 ? 0xFU : 1U << (pmc - 1);
}

std::uint64_t expected_raw(const Expected& e) {
    return (std::uint64_t{e.pmc} << 8) | e.select;
}

// The message of a rejected code, or a note that it was accepted.
std::string rejection(std::uint64_t config) {
    auto r = decode_ppc750_raw(config);
    if (r) return "accepted";
    EXPECT_EQ(r.error().status, Status::BadArg) << r.error().message;
    return r.error().message;
}

TEST(Ppc750Events, TableMatchesTheManual) {
    auto events = ppc750_events();
    ASSERT_EQ(events.size(), kExpected.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        const auto& x = kExpected[i];
        SCOPED_TRACE(std::string{x.name});
        EXPECT_EQ(e.name, x.name);
        EXPECT_EQ(e.select, x.select);
        EXPECT_EQ(e.counters, expected_counters(x.pmc));
        EXPECT_EQ(ppc750_raw_code(e), expected_raw(x));
        EXPECT_EQ(e.pinned, x.name == "CYCLES" || x.name == "INSTRUCTIONS_COMPLETED");
        EXPECT_EQ(e.uses_threshold, x.pmc == 1 && x.select == 0x0A);
        EXPECT_FALSE(e.description.empty());
        EXPECT_EQ(e.description.back(), '.');
    }
}

TEST(Ppc750Events, NamesAreUniqueAndUpperCase) {
    std::set<std::string> seen;
    for (const auto& e : ppc750_events()) {
        std::string lower;
        for (char c : e.name) {
            EXPECT_TRUE((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') << e.name;
            lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        EXPECT_TRUE(seen.insert(lower).second) << "duplicate name " << e.name;
    }
}

TEST(Ppc750Events, SelectsAreUniquePerCounter) {
    std::set<std::pair<int, int>> seen;
    for (const auto& e : ppc750_events()) {
        for (int c = 0; c < kPpc750Counters; ++c) {
            if ((e.counters & (1U << c)) == 0) continue;
            EXPECT_TRUE(seen.insert({c, e.select}).second)
                << ppc750_counter_name(c) << " select " << int{e.select};
        }
    }
}

TEST(Ppc750Events, FindIsCaseInsensitive) {
    for (const auto& e : ppc750_events()) {
        EXPECT_EQ(find_ppc750_event(e.name), &e);
        std::string lower;
        for (char c : e.name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
        EXPECT_EQ(find_ppc750_event(lower), &e);
    }
    const auto* icache = find_ppc750_event("l1_Icache_Misses");
    ASSERT_NE(icache, nullptr);
    EXPECT_EQ(icache->select, 0x05);
    EXPECT_EQ(icache->counters, 0x2U);
}

TEST(Ppc750Events, FindRejectsUnknownNames) {
    EXPECT_EQ(find_ppc750_event(""), nullptr);
    EXPECT_EQ(find_ppc750_event("NO_SUCH_EVENT"), nullptr);
    EXPECT_EQ(find_ppc750_event("ppc750::CYCLES"), nullptr);
    EXPECT_EQ(find_ppc750_event("CYCLE"), nullptr);
    EXPECT_EQ(find_ppc750_event("CYCLES "), nullptr);
}

TEST(Ppc750Events, RawCodesRoundTrip) {
    for (const auto& e : ppc750_events()) {
        SCOPED_TRACE(std::string{e.name});
        auto r = decode_ppc750_raw(ppc750_raw_code(e));
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->event, &e);
        EXPECT_EQ(r->counters, e.counters);
        EXPECT_EQ(r->threshold, 0U);
    }
}

TEST(Ppc750Events, DecodesCounterSpecificSelect) {
    auto r = decode_ppc750_raw(0x205);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_NE(r->event, nullptr);
    EXPECT_EQ(r->event->name, "L1_ICACHE_MISSES");
    EXPECT_EQ(r->counters, 0x2U);
}

TEST(Ppc750Events, DecodesCommonSelectOnAnyOrOneCounter) {
    auto any = decode_ppc750_raw(0x001);
    ASSERT_TRUE(any) << any.error().message;
    ASSERT_NE(any->event, nullptr);
    EXPECT_EQ(any->event->name, "CYCLES");
    EXPECT_EQ(any->counters, 0xFU);

    auto on_pmc2 = decode_ppc750_raw(0x201);
    ASSERT_TRUE(on_pmc2) << on_pmc2.error().message;
    EXPECT_EQ(on_pmc2->event, any->event);
    EXPECT_EQ(on_pmc2->counters, 0x2U);

    for (unsigned pmc = 1; pmc <= 4; ++pmc) {
        for (std::uint64_t select = 1; select <= 4; ++select) {
            auto r = decode_ppc750_raw((std::uint64_t{pmc} << 8) | select);
            ASSERT_TRUE(r) << r.error().message;
            EXPECT_EQ(r->event->select, select);
            EXPECT_EQ(r->counters, 1U << (pmc - 1));
        }
    }
}

TEST(Ppc750Events, Threshold) {
    const auto* e = find_ppc750_event("L1_LOAD_MISSES_OVER_THRESHOLD");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(ppc750_raw_code(*e, 20), (20U << 12) | 0x10AU);
    EXPECT_EQ(ppc750_raw_code(*e, 63), (63U << 12) | 0x10AU);

    auto r = decode_ppc750_raw((20U << 12) | 0x10AU);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->event, e);
    EXPECT_EQ(r->counters, 0x1U);
    EXPECT_EQ(r->threshold, 20U);

    auto max = decode_ppc750_raw((63U << 12) | 0x10AU);
    ASSERT_TRUE(max) << max.error().message;
    EXPECT_EQ(max->threshold, 63U);

    // Events without a threshold ignore the argument.
    const auto* cycles = find_ppc750_event("CYCLES");
    ASSERT_NE(cycles, nullptr);
    EXPECT_EQ(ppc750_raw_code(*cycles, 20), 0x001U);
}

TEST(Ppc750Events, RejectsReservedSelects) {
    auto pmc3 = rejection(0x30E);
    EXPECT_NE(pmc3.find("PMC3"), std::string::npos) << pmc3;
    EXPECT_NE(pmc3.find("0x0E"), std::string::npos) << pmc3;
    EXPECT_NE(pmc3.find("reserved"), std::string::npos) << pmc3;
    EXPECT_NE(pmc3.find("0x01-0x0D, 0x0F-0x11"), std::string::npos) << pmc3;

    auto pmc4 = rejection(0x407);
    EXPECT_NE(pmc4.find("PMC4"), std::string::npos) << pmc4;
    EXPECT_NE(pmc4.find("0x07"), std::string::npos) << pmc4;
    EXPECT_NE(pmc4.find("0x01-0x06, 0x08-0x0E"), std::string::npos) << pmc4;

    // Past the last select of each counter.
    for (std::uint64_t code : {0x10DU, 0x211U, 0x312U, 0x40FU, 0x17FU}) {
        EXPECT_NE(rejection(code), "accepted") << code;
    }
}

TEST(Ppc750Events, RejectsHold) {
    auto any = rejection(0x000);
    EXPECT_NE(any.find("hold"), std::string::npos) << any;
    EXPECT_NE(rejection(0x200).find("hold"), std::string::npos);
}

TEST(Ppc750Events, RejectsPmcAbove4) {
    for (std::uint64_t pmc = 5; pmc <= 7; ++pmc) {
        auto msg = rejection((pmc << 8) | 0x01);
        EXPECT_NE(msg.find("PMC" + std::to_string(pmc)), std::string::npos) << msg;
    }
}

TEST(Ppc750Events, RejectsCounterSpecificSelectOnAnyCounter) {
    auto msg = rejection(0x005);
    EXPECT_NE(msg.find("0x05"), std::string::npos) << msg;
    EXPECT_NE(msg.find("PMC"), std::string::npos) << msg;
    EXPECT_NE(rejection(0x00A), "accepted");
}

TEST(Ppc750Events, RejectsStrayBits) {
    EXPECT_NE(rejection(0x80), "accepted");
    EXPECT_NE(rejection(0x80 | 0x201), "accepted");
    EXPECT_NE(rejection(0x800 | 0x201), "accepted");
    EXPECT_NE(rejection((std::uint64_t{1} << 20) | 0x205), "accepted");
    EXPECT_NE(rejection((std::uint64_t{1} << 18) | 0x10A), "accepted");
    EXPECT_NE(rejection((std::uint64_t{1} << 63) | 0x001), "accepted");
}

TEST(Ppc750Events, RejectsThresholdOnOtherEvents) {
    auto msg = rejection((20U << 12) | 0x205);
    EXPECT_NE(msg.find("threshold"), std::string::npos) << msg;
    EXPECT_NE(rejection((1U << 12) | 0x001), "accepted");
    EXPECT_NE(rejection((1U << 12) | 0x20A), "accepted");
}

TEST(Ppc750Events, CounterNames) {
    EXPECT_EQ(ppc750_counter_name(0), "PMC1");
    EXPECT_EQ(ppc750_counter_name(1), "PMC2");
    EXPECT_EQ(ppc750_counter_name(2), "PMC3");
    EXPECT_EQ(ppc750_counter_name(3), "PMC4");
    EXPECT_EQ(ppc750_counter_name(4), "PMC?");
    EXPECT_EQ(ppc750_counter_name(-1), "PMC?");
}

// The module says what its events measure, by name and by raw code alike: the derived metrics
// (the MON manual's instruction-cache miss ratio among them) take it from there.
TEST(Ppc750Pmu, SaysWhatItsEventsMeasure) {
    auto pmu = make_ppc750_pmu();
    ASSERT_TRUE(pmu) << pmu.error().to_string();
    struct Row {
        std::string_view name;
        std::string_view raw;
        Measure measure;
    };
    for (const auto& row : std::vector<Row>{
             {"ppc750::CYCLES", "ppc750::r001", Measure::Cycles},
             {"ppc750::CYCLES", "ppc750::r301", Measure::Cycles},
             {"ppc750::INSTRUCTIONS_COMPLETED", "ppc750::r402", Measure::Instructions},
             {"ppc750::INSTR_EA_DELIVERED", "ppc750::r108", Measure::InstructionFetches},
             {"ppc750::L1_ICACHE_MISSES", "ppc750::r205", Measure::L1IcacheMisses},
             {"ppc750::ITLB_MISSES", "ppc750::r206", Measure::ItlbMisses},
             {"ppc750::L2_INSTRUCTION_MISSES", "ppc750::r207", Measure::L2InstructionMisses},
             {"ppc750::L1_DCACHE_MISSES", "ppc750::r305", Measure::L1DcacheMisses},
             {"ppc750::DTLB_MISSES", "ppc750::r306", Measure::DtlbMisses},
             {"ppc750::L2_DATA_MISSES", "ppc750::r307", Measure::L2DataMisses},
             {"ppc750::BRANCHES_MISPREDICTED", "ppc750::r408", Measure::MispredictedBranches},
             {"ppc750::BRANCHES_TAKEN", "ppc750::r308", Measure::Other},
             {"ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=20", "ppc750::r1410a",
              Measure::Other},
         }) {
        for (auto name : {row.name, row.raw}) {
            auto spec = (*pmu)->resolve(split_event_name(name));
            ASSERT_TRUE(spec) << name << ": " << spec.error().to_string();
            EXPECT_EQ(spec->measure, row.measure) << name;
            EXPECT_TRUE(spec->per_counter_selects) << name;
            EXPECT_EQ(spec->counter_pmu, kPpc750Pmu) << name;
        }
    }
    EXPECT_EQ((*pmu)->counter_name(kPpc750Pmu, 1), "PMC2");
    auto unknown = (*pmu)->resolve(split_event_name("ppc750::NO_SUCH_EVENT"));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().status, Status::NoEvent);
}

}  // namespace
}  // namespace monitor::perf
