// Call chains of code built without frame pointers (most of Debian's libraries), as perf
// record --call-graph dwarf makes them: each sample carries the thread's user-mode registers
// and a copy of the top of its user stack, and the chain is unwound from them afterwards by
// the call frame information of the code's files (.eh_frame, .debug_frame), through elfutils'
// libdwfl. The files are the process's own, read as AddressNames reads them to name its code:
// its libdwfl session, kept per process, serves both.
//
// Unwinding is x86-64's alone here (other processors: frame pointers), and needs libdw: the
// implementation is built only with it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "monitor/perf/sample_ring.hpp"

namespace monitor::perf {

class AddressNames;

// The user-mode registers a sample carries to be unwound (a sample_regs_user mask of
// PERF_REG_X86_* bits): the 16 general registers and the instruction pointer, which the kernel
// writes in the order of their bits. 0 where this library cannot unwind.
#if defined(__x86_64__)
inline constexpr std::uint64_t kUnwindRegisters = 0x1ff        // AX BX CX DX SI DI BP SP IP
                                                  | 0xff0000;  // R8 ... R15
#else
inline constexpr std::uint64_t kUnwindRegisters = 0;
#endif

class DwarfUnwinder {
  public:
    // The frames unwound per sample at most: perf's default (kernel.perf_event_max_stack).
    static constexpr std::size_t kMaxFrames = 127;

    DwarfUnwinder();
    ~DwarfUnwinder();
    DwarfUnwinder(const DwarfUnwinder&) = delete;
    DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

    // Appends the user-mode frames of `sample` to `chain`, innermost first: the address its
    // registers were at, then the return addresses found above it, until the call frame
    // information or the copied stack ends. `sample` must hold the registers of
    // kUnwindRegisters and its stack; the process's code is found through `names`. Returns the
    // frames appended: none when the sample has no user registers (a kernel thread's).
    std::size_t unwind(AddressNames& names, const Sample& sample,
                       std::vector<std::uint64_t>& chain);

    // What it did so far: the samples unwound and their frames.
    std::uint64_t samples() const { return samples_; }
    std::uint64_t frames() const { return frames_; }

    // What libdwfl's callbacks read: the sample being unwound.
    struct State;

  private:
    std::unique_ptr<State> state_;
    std::uint64_t samples_ = 0;
    std::uint64_t frames_ = 0;
};

}  // namespace monitor::perf
