// The PowerPC 750 event table (selects of PMC1-PMC4 from the MPC750 User's Manual ch. 11), and
// the raw codes in the layout of Linux's mpc7450 PMU driver: encoding and validated decoding.
#include "monitor/perf/ppc750_events.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <string>

#include "monitor/perf/event_name.hpp"

namespace monitor::perf {
namespace {

constexpr CounterMask kAll = 0xF;
constexpr CounterMask kPmc1 = 1U << 0;
constexpr CounterMask kPmc2 = 1U << 1;
constexpr CounterMask kPmc3 = 1U << 2;
constexpr CounterMask kPmc4 = 1U << 3;

// Raw code layout.
constexpr std::uint64_t kSelectMask = 0x7F;  // bits 0-6
constexpr int kPmcShift = 8;                 // bits 8-10
constexpr std::uint64_t kPmcMask = 0x7;
constexpr int kThresholdShift = 12;  // bits 12-17
constexpr std::uint64_t kThresholdMask = 0x3F;
constexpr std::uint64_t kValidBits =
    kSelectMask | (kPmcMask << kPmcShift) | (kThresholdMask << kThresholdShift);

// The highest select common to every counter (0 is hold, 1-4 are events).
constexpr std::uint8_t kLastCommonSelect = 4;

constexpr std::array kEvents = {
    // Common to all four counters.
    Ppc750Event{"CYCLES", "Processor cycles.", 0x01, kAll, false, true, Measure::Cycles},
    Ppc750Event{"INSTRUCTIONS_COMPLETED", "Instructions completed, not counting folded branches.",
                0x02, kAll, false, true, Measure::Instructions},
    Ppc750Event{"TBL_TRANSITIONS",
                "Transitions from 0 to 1 of the time-base lower bit that MMCR0[TBSEL] selects.",
                0x03, kAll},
    Ppc750Event{"INSTRUCTIONS_DISPATCHED", "Instructions dispatched, zero to two per cycle.", 0x04,
                kAll},

    // PMC1.
    Ppc750Event{"EIEIO_COMPLETED", "eieio instructions completed.", 0x05, kPmc1},
    Ppc750Event{"ITLB_SEARCH_CYCLES", "Cycles spent searching the page table after ITLB misses.",
                0x06, kPmc1},
    Ppc750Event{"L2_HITS", "Accesses that hit in the L2, cache operations such as dcbz included.",
                0x07, kPmc1},
    Ppc750Event{"INSTR_EA_DELIVERED",
                "Valid instruction effective addresses delivered to the memory subsystem.", 0x08,
                kPmc1, false, false, Measure::InstructionFetches},
    Ppc750Event{"IABR_MATCHES",
                "Completing instructions that match the instruction address breakpoint.", 0x09,
                kPmc1},
    Ppc750Event{"L1_LOAD_MISSES_OVER_THRESHOLD",
                "L1 load misses whose latency is longer than MMCR0[THRESHOLD] cycles.", 0x0A, kPmc1,
                true},
    Ppc750Event{"UNRESOLVED_BRANCHES", "Branches that were still unresolved when processed.", 0x0B,
                kPmc1},
    Ppc750Event{"SECOND_BRANCH_DISPATCH_STALL_CYCLES",
                "Cycles dispatch stalls because a second branch is unresolved.", 0x0C, kPmc1},

    // PMC2.
    Ppc750Event{"L1_ICACHE_MISSES", "Instruction fetches that miss the L1 instruction cache.", 0x05,
                kPmc2, false, false, Measure::L1IcacheMisses},
    Ppc750Event{"ITLB_MISSES", "Instruction TLB misses.", 0x06, kPmc2, false, false,
                Measure::ItlbMisses},
    Ppc750Event{"L2_INSTRUCTION_MISSES", "Instruction fetches that miss the L2.", 0x07, kPmc2,
                false, false, Measure::L2InstructionMisses},
    Ppc750Event{"BRANCHES_NOT_TAKEN", "Branches predicted or resolved as not taken.", 0x08, kPmc2},
    Ppc750Event{"MSR_PR_TOGGLES",
                "Changes of MSR[PR] between user and supervisor state (reserved on IBM parts).",
                0x09, kPmc2},
    Ppc750Event{"LWARX_COMPLETED", "Load-and-reserve (lwarx) instructions completed.", 0x0A, kPmc2},
    Ppc750Event{"LOADS_STORES_COMPLETED", "Load and store instructions completed.", 0x0B, kPmc2},
    Ppc750Event{"L1_L2_SNOOPS", "Snoop requests to the L1 and L2 caches.", 0x0C, kPmc2},
    Ppc750Event{"L1_CASTOUTS_TO_L2", "Lines cast out of the L1 into the L2.", 0x0D, kPmc2},
    Ppc750Event{"SYSTEM_UNIT_INSTRUCTIONS_COMPLETED",
                "Instructions completed by the system register unit.", 0x0E, kPmc2},
    Ppc750Event{"L1_IFETCH_MISSES", "Instruction fetches that miss in the L1.", 0x0F, kPmc2},
    Ppc750Event{"OOO_BRANCHES_RESOLVED_CORRECTLY",
                "Branches that let execution go on out of order and were resolved correctly.", 0x10,
                kPmc2},

    // PMC3.
    Ppc750Event{"L1_DCACHE_MISSES", "Accesses that miss the L1 data cache.", 0x05, kPmc3, false,
                false, Measure::L1DcacheMisses},
    Ppc750Event{"DTLB_MISSES", "Data TLB misses.", 0x06, kPmc3, false, false, Measure::DtlbMisses},
    Ppc750Event{"L2_DATA_MISSES", "Data accesses that miss the L2.", 0x07, kPmc3, false, false,
                Measure::L2DataMisses},
    Ppc750Event{"BRANCHES_TAKEN", "Taken branches, predicted taken ones included.", 0x08, kPmc3},
    Ppc750Event{"MSR_PM_TOGGLES_USER",
                "Changes of MSR[PM] (the mark bit) in user state, on the MPC750 only.", 0x09,
                kPmc3},
    Ppc750Event{"STWCX_COMPLETED", "Store-conditional (stwcx.) instructions completed.", 0x0A,
                kPmc3},
    Ppc750Event{"FPU_INSTRUCTIONS_COMPLETED", "Floating-point instructions completed.", 0x0B,
                kPmc3},
    Ppc750Event{"L2_SNOOP_CASTOUTS", "L2 castouts caused by snoops that hit modified lines.", 0x0C,
                kPmc3},
    Ppc750Event{"L2_CACHE_OP_HITS", "Cache operations that hit in the L2.", 0x0D, kPmc3},
    Ppc750Event{"L1_LOAD_MISS_CYCLES", "Cycles spent waiting on L1 load misses.", 0x0F, kPmc3},
    Ppc750Event{"SECOND_STREAM_BRANCHES_RESOLVED_CORRECTLY",
                "Branches of the second speculative stream that were resolved correctly.", 0x10,
                kPmc3},
    Ppc750Event{"BPU_LR_CR_STALL_CYCLES",
                "Cycles the branch unit stalls on an unresolved LR or CR dependency.", 0x11, kPmc3},

    // PMC4.
    Ppc750Event{"L2_CASTOUTS", "Lines cast out of the L2.", 0x05, kPmc4},
    Ppc750Event{"DTLB_SEARCH_CYCLES", "Cycles spent searching the page table after DTLB misses.",
                0x06, kPmc4},
    Ppc750Event{"BRANCHES_MISPREDICTED", "Branches whose prediction was wrong.", 0x08, kPmc4, false,
                false, Measure::MispredictedBranches},
    Ppc750Event{"MSR_PM_TOGGLES_SUPERVISOR",
                "Changes of MSR[PM] (the mark bit) in supervisor state, on the MPC750 only.", 0x09,
                kPmc4},
    Ppc750Event{"STWCX_RESERVATION_INTACT",
                "stwcx. instructions completed whose reservation was still held.", 0x0A, kPmc4},
    Ppc750Event{"SYNC_COMPLETED", "sync instructions completed.", 0x0B, kPmc4},
    Ppc750Event{"SNOOP_RETRIES", "Snoop requests that had to be retried.", 0x0C, kPmc4},
    Ppc750Event{"INTEGER_OPS_COMPLETED", "Integer operations completed.", 0x0D, kPmc4},
    Ppc750Event{"BPU_TWO_UNRESOLVED_STALL_CYCLES",
                "Cycles the branch unit takes no new branch because two are still unresolved.",
                0x0E, kPmc4},
};

// "0x0E", "0x10A": upper-case hex, at least two digits.
std::string hex(std::uint64_t v) {
    std::array<char, 20> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, 16);
    std::string digits(buf.data(), end);
    for (auto& c : digits) {
        if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
    }
    if (digits.size() < 2) digits.insert(0, "0");
    return "0x" + digits;
}

std::string pmc_name(unsigned pmc) {
    return "PMC" + std::to_string(pmc);
}

// The event with `select` on counter `pmc` (1-4), common selects included; nullptr for none.
const Ppc750Event* find_on(unsigned pmc, std::uint64_t select) {
    const CounterMask bit = 1U << (pmc - 1);
    for (const auto& e : kEvents) {
        if (e.select == select && (e.counters & bit) != 0) return &e;
    }
    return nullptr;
}

// "0x01-0x0D, 0x0F-0x11": the selects that name an event on counter `pmc`, as ranges.
std::string valid_selects(unsigned pmc) {
    std::string out;
    unsigned s = 1;
    while (s <= kSelectMask) {
        if (find_on(pmc, s) == nullptr) {
            ++s;
            continue;
        }
        unsigned last = s;
        while (last + 1 <= kSelectMask && find_on(pmc, last + 1) != nullptr) ++last;
        if (!out.empty()) out += ", ";
        out += hex(s);
        if (last != s) out += "-" + hex(last);
        s = last + 1;
    }
    return out;
}

}  // namespace

std::span<const Ppc750Event> ppc750_events() {
    return kEvents;
}

const Ppc750Event* find_ppc750_event(std::string_view name) {
    for (const auto& e : kEvents) {
        if (iequals(e.name, name)) return &e;
    }
    return nullptr;
}

std::uint64_t ppc750_raw_code(const Ppc750Event& event, unsigned threshold) {
    std::uint64_t code = event.select;
    // A single counter goes into the PMC field; the common selects keep 0, "any counter".
    if (event.counters != kAll) {
        for (unsigned pmc = 1; pmc <= kPpc750Counters; ++pmc) {
            if (event.counters == 1U << (pmc - 1)) code |= std::uint64_t{pmc} << kPmcShift;
        }
    }
    if (event.uses_threshold) {
        const unsigned t = threshold > kPpc750MaxThreshold ? kPpc750MaxThreshold : threshold;
        code |= std::uint64_t{t} << kThresholdShift;
    }
    return code;
}

Result<Ppc750Raw> decode_ppc750_raw(std::uint64_t config) {
    const std::string code = "ppc750 raw code " + hex(config);
    if ((config & ~kValidBits) != 0) {
        return fail(Status::BadArg,
                    code + " sets bits outside the layout (" + hex(config & ~kValidBits) +
                        "): only bits 0-6 (select), 8-10 (PMC 0-4) and 12-17 (threshold) may be "
                        "set");
    }
    const auto select = config & kSelectMask;
    const auto pmc = static_cast<unsigned>((config >> kPmcShift) & kPmcMask);
    const auto threshold = static_cast<unsigned>((config >> kThresholdShift) & kThresholdMask);

    if (pmc > kPpc750Counters) {
        return fail(Status::BadArg, code + " names " + pmc_name(pmc) +
                                        ", but a 750 has PMC1-PMC4 (bits 8-10 must be 0-4)");
    }
    if (select == 0) {
        return fail(Status::BadArg,
                    code + ": select 0x00 is hold (the counter counts nothing), not an event");
    }

    Ppc750Raw raw;
    if (pmc == 0) {
        if (select > kLastCommonSelect) {
            return fail(Status::BadArg,
                        code + ": select " + hex(select) +
                            " depends on the counter, so bits 8-10 must name PMC1-PMC4; PMC 0 "
                            "(any counter) takes only the common selects 0x01-0x04");
        }
        raw.event = find_on(1, select);
        raw.counters = kAll;
    } else {
        raw.event = find_on(pmc, select);
        if (raw.event == nullptr) {
            return fail(Status::BadArg, code + ": " + pmc_name(pmc) + " select " + hex(select) +
                                            " is reserved or unknown; valid selects on " +
                                            pmc_name(pmc) + ": " + valid_selects(pmc));
        }
        raw.counters = 1U << (pmc - 1);
    }
    if (threshold != 0 && !raw.event->uses_threshold) {
        return fail(Status::BadArg, code +
                                        ": threshold bits 12-17 are set, but only PMC1 select "
                                        "0x0A (L1_LOAD_MISSES_OVER_THRESHOLD) uses a threshold");
    }
    raw.threshold = threshold;
    return raw;
}

std::string_view ppc750_counter_name(int counter) {
    static constexpr std::array<std::string_view, kPpc750Counters> kNames = {"PMC1", "PMC2", "PMC3",
                                                                             "PMC4"};
    if (counter < 0 || counter >= kPpc750Counters) return "PMC?";
    return kNames[static_cast<std::size_t>(counter)];
}

bool is_ppc750_pvr(std::uint32_t pvr) {
    const std::uint32_t version = pvr >> 16;
    return version == 0x0008 || version == 0x7000 || version == 0x7002;
}

Result<void> ppc750_counts_on(const Processor& p) {
    if (!p.pvr && !p.error.empty()) {
        return fail(Status::NoPmu,
                    fmt::format("counts only on a PowerPC 750, and this machine's processor "
                                "cannot be told ({}); count the kernel's generic events "
                                "instead (perf::TASK-CLOCK, perf::CYCLES)",
                                p.error));
    }
    if (!p.pvr || !is_ppc750_pvr(*p.pvr)) {
        return fail(Status::NoPmu,
                    fmt::format("counts only on a PowerPC 750 (740/750, 745/755, 750CX, 750CXe, "
                                "750FX, 750GX); this machine has {}: count its own events "
                                "instead (monctl perf list; perf::CYCLES and perf::INSTRUCTIONS "
                                "on any processor with counters)",
                                p.describe()));
    }
    if (!p.core_pmu) {
        return fail(Status::NoPmu,
                    fmt::format("this {} has no PMU driver in its kernel (no cpu PMU under "
                                "/sys/bus/event_source/devices; mainline Linux has none for the "
                                "750): only the kernel's software events count here "
                                "(perf::TASK-CLOCK, perf::CONTEXT-SWITCHES, ...)",
                                p.describe()));
    }
    if (!p.core_pmu_name.empty() && p.core_pmu_name.find("750") == std::string::npos) {
        return fail(Status::NoPmu,
                    fmt::format("this {} has a core PMU driver for {}, not for the 750: its "
                                "codes would count other events",
                                p.describe(), p.core_pmu_name));
    }
    return {};
}

}  // namespace monitor::perf
