// The kernel's breakpoint PMU as a module of the catalog: events `mem:ADDR[/LEN][:ACCESS]`,
// named as perf names them, that count a target's accesses to an address (reads, writes or
// instruction fetches) on the processor's debug registers, like the seeds' instruction and
// data breakpoint counts; and how many of those registers a task may hold at once. ADDR may
// also be a symbol of the target, with an offset (`mem:counter+8:w`): the session places it
// once its target is known (process_symbols.hpp).
//
// A breakpoint takes no performance counter: the kernel reserves one of its debug registers
// when the event is opened (never multiplexed), so a session holds at most as many as the
// machine has, and the catalog's PmuInfo for `breakpoint` says how many that is.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

inline constexpr std::string_view kBreakpointPmu = "breakpoint";
// PmuInfo::source of a PMU the kernel describes and no table.
inline constexpr std::string_view kKernelSource = "kernel";

// How many breakpoints a task may hold at once here; 0 with the reason when none can open.
struct BreakpointSlots {
    int count = 0;
    std::string why_none;
};

// Opens disabled breakpoints on the calling thread until the kernel refuses one (ENOSPC when
// the registers are all taken), closes them, and says how many opened. Those held elsewhere
// (another session, a debugger's watchpoints) are not counted: it is what is free now.
BreakpointSlots probe_breakpoint_slots();

// Whether `name` is a breakpoint event (it starts with "mem:").
bool is_breakpoint_name(std::string_view name);

// Whether breakpoint `spec` watches kernel memory, which the kernel lets only a caller with
// CAP_SYS_ADMIN watch (hw_breakpoint_parse: arch_check_bp_in_kernelspace). The kernel's half
// of the address space: the upper half on 64-bit processors (x86-64, arm64, powerpc64), from
// 0xc0000000 on 32-bit ones (the default split of x86 and powerpc).
bool watches_kernel(const EventSpec& spec);
// PERM when breakpoint `spec` watches kernel memory, for a caller without privilege (why:
// CallerRights::kernel_breakpoint_refusal()).
Result<void> refuse_kernel_breakpoint(const EventSpec& spec, std::string_view why);

// Places a breakpoint named by a symbol (spec.bp_symbol) at the address its target has the
// symbol at, in file `object`: its address and description. BADARG when that address does
// not suit it (unaligned for its length on x86).
Result<void> place_breakpoint(EventSpec& spec, std::uint64_t symbol_address,
                              std::string_view object);

// The module with the slots found by probe_breakpoint_slots().
Result<std::unique_ptr<PmuModule>> make_breakpoint_pmu();
// The module for a machine with these slots (tests describe one).
std::unique_ptr<PmuModule> breakpoint_pmu(BreakpointSlots slots);

}  // namespace monitor::perf
