#include "monitor/perf/dwarf_unwinder.hpp"

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <array>
#include <bit>
#include <cstring>
#include <span>

#include "monitor/perf/process_symbols.hpp"

namespace monitor::perf {

// What libdwfl's callbacks read while one sample is unwound. Every process's session is
// attached to this one state, which the unwinder fills before each sample.
struct DwarfUnwinder::State {
    pid_t tid = -1;
    std::uint64_t sp = 0;                    // where the copied stack starts
    std::span<const unsigned char> stack;    // the copy
    std::array<Dwarf_Word, 17> registers{};  // in DWARF's order
    std::vector<std::uint64_t>* chain = nullptr;
    std::size_t frames = 0;
};

namespace {

using State = DwarfUnwinder::State;

#if defined(__x86_64__)
// The sampled registers in DWARF's order for x86-64 (the System V ABI's numbers 0 to 16:
// rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8 to r15, then the return address column, rip),
// each as its PERF_REG_X86_* bit (asm/perf_regs.h), as perf's arch/x86/util/unwind-libdw.c
// gives them.
constexpr std::array<int, 17> kDwarfOrder = {0,  3,  2,  1,  4,  5,  6,  7, 16,
                                             17, 18, 19, 20, 21, 22, 23, 8};
constexpr int kStackPointer = 7;  // PERF_REG_X86_SP

// The sample's value of register `bit`: the kernel writes those of the mask in the order of
// their bits.
std::uint64_t sampled(std::span<const std::uint64_t> regs, int bit) {
    const auto below = std::uint64_t{1} << bit;
    return regs[static_cast<std::size_t>(std::popcount(kUnwindRegisters & (below - 1)))];
}
#endif

// One thread, the sample's.
pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    if (*thread_arg != nullptr) return 0;
    *thread_arg = arg;
    return static_cast<State*>(arg)->tid;
}

bool get_thread(Dwfl*, pid_t tid, void* arg, void** thread_arg) {
    if (tid != static_cast<State*>(arg)->tid) return false;
    *thread_arg = arg;
    return true;
}

// Memory of the process at the sample: its stack as copied, else the files mapped there, as
// their modules have them (what a CFI expression may read besides the stack). Nothing else:
// the process may be gone, and is never read while it runs.
bool memory_read(Dwfl* dwfl, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
    const auto* s = static_cast<const State*>(arg);
    if (addr + sizeof *result < addr) return false;
    if (addr >= s->sp && addr - s->sp + sizeof *result <= s->stack.size()) {
        std::memcpy(result, s->stack.data() + (addr - s->sp), sizeof *result);
        return true;
    }
    Dwfl_Module* module = dwfl_addrmodule(dwfl, addr);
    if (module == nullptr) return false;
    Dwarf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(module, &bias);
    if (elf == nullptr || addr < bias) return false;
    const std::uint64_t at = addr - bias;
    std::size_t headers = 0;
    if (elf_getphdrnum(elf, &headers) != 0) return false;
    for (std::size_t i = 0; i < headers; ++i) {
        GElf_Phdr h;
        if (gelf_getphdr(elf, static_cast<int>(i), &h) == nullptr || h.p_type != PT_LOAD) continue;
        if (at < h.p_vaddr || at - h.p_vaddr + sizeof *result > h.p_filesz) continue;
        Elf_Data* data =
            elf_getdata_rawchunk(elf, static_cast<std::int64_t>(h.p_offset + (at - h.p_vaddr)),
                                 sizeof *result, ELF_T_BYTE);
        if (data == nullptr || data->d_buf == nullptr) return false;
        std::memcpy(result, data->d_buf, sizeof *result);
        return true;
    }
    return false;
}

bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
    const auto* s = static_cast<const State*>(arg);
    return dwfl_thread_state_registers(thread, 0, static_cast<unsigned>(s->registers.size()),
                                       s->registers.data());
}

const Dwfl_Thread_Callbacks kCallbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = nullptr,
    .thread_detach = nullptr,
};

// Each frame's address: where the sample was, then the return addresses (fold() names those by
// the call before them, as it does a kernel's chain).
int on_frame(Dwfl_Frame* frame, void* arg) {
    auto* s = static_cast<State*>(arg);
    Dwarf_Addr pc = 0;
    if (!dwfl_frame_pc(frame, &pc, nullptr) || pc == 0) return DWARF_CB_ABORT;
    s->chain->push_back(pc);
    return ++s->frames >= DwarfUnwinder::kMaxFrames ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

DwarfUnwinder::DwarfUnwinder() : state_(std::make_unique<State>()) {}
DwarfUnwinder::~DwarfUnwinder() = default;

std::size_t DwarfUnwinder::unwind(AddressNames& names, const Sample& sample,
                                  std::vector<std::uint64_t>& chain) {
#if defined(__x86_64__)
    if (sample.user_regs.size() != static_cast<std::size_t>(std::popcount(kUnwindRegisters))) {
        return 0;
    }
    auto& s = *state_;
    s.tid = sample.tid;
    s.sp = sampled(sample.user_regs, kStackPointer);
    s.stack = sample.user_stack;
    for (std::size_t i = 0; i < kDwarfOrder.size(); ++i) {
        s.registers[i] = sampled(sample.user_regs, kDwarfOrder[i]);
    }
    const std::uint64_t ip = s.registers[16];
    const std::size_t start = chain.size();
    // The chain is unwound with the process's modules as known; when it ends at an address
    // outside all of them (a library mapped since they were read), it is unwound again once
    // with the map read again (at most once a second, as naming reads it).
    Dwfl* tried = nullptr;
    std::uint64_t outside = ip;
    for (int attempt = 0; attempt < 2; ++attempt) {
        Dwfl* dwfl = names.modules(sample.pid, outside);
        if (dwfl == nullptr || dwfl == tried) break;
        tried = dwfl;
        // A session is attached once, to this unwinder's state (its pid is the process's).
        if (dwfl_pid(dwfl) <= 0 && !dwfl_attach_state(dwfl, nullptr, sample.pid, &kCallbacks, &s)) {
            break;
        }
        chain.resize(start);
        s.chain = &chain;
        s.frames = 0;
        (void)dwfl_getthread_frames(dwfl, sample.tid, on_frame, &s);
        if (chain.size() == start) break;
        outside = chain.back();
        if (dwfl_addrmodule(dwfl, outside) != nullptr) break;
    }
    // At least where the sample was, as a chain the kernel could not make.
    if (chain.size() == start) chain.push_back(ip);
    ++samples_;
    frames_ += chain.size() - start;
    return chain.size() - start;
#else
    (void)names;
    (void)sample;
    (void)chain;
    return 0;
#endif
}

}  // namespace monitor::perf
