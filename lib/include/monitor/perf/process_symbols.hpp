// Symbols of the programs being counted, as elfutils' libdwfl reads them: the address a
// running process has a function or variable at (its executable and the shared objects it
// maps, relocated as /proc/PID/maps places them), and the address of a symbol of an
// executable that is about to run. Breakpoints named by symbol (`mem:counter:w`) are placed
// with them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "monitor/perf/kernel_symbols.hpp"
#include "monitor/perf/sample_ring.hpp"
#include "monitor/status.hpp"

// libdwfl's session of one process's code (elfutils/libdwfl.h), which DwarfUnwinder shares.
struct Dwfl;

namespace monitor::perf {

// Whether this libmonitor reads symbols: built with elfutils' libdw. Without it (a board's
// build), code is named by the object it belongs to, and breakpoints take addresses.
bool reads_symbols() noexcept;

struct SymbolAddress {
    std::uint64_t address = 0;
    std::uint64_t size = 0;  // st_size: 0 when the symbol does not say
    std::string object;      // the file that defines it
};

// Symbol `name` (a function or a variable) in process `pid`: in its executable if defined
// there, else in the one shared object that defines it. NOEVENT naming what was searched
// for an unknown symbol (and that a stripped file keeps only its dynamic symbols), BADARG
// when several shared objects define it, NODEV for a process that is gone, PERM when its
// memory map cannot be read.
Result<SymbolAddress> find_process_symbol(pid_t pid, std::string_view name);

// Symbol `name` of the executable `program` before it runs: only an executable linked at
// fixed addresses (not position-independent) has it where it says; BADARG for a
// position-independent one, saying how to count it instead.
Result<SymbolAddress> find_program_symbol(const std::filesystem::path& program,
                                          std::string_view name);

// Names the code at sampled addresses: the function and the object at an address of a
// process, as the process has them mapped. One libdwfl session per process, made at its first
// address and kept, so that a process that exits later is still named; its map is read again
// (at most once a second) when an address falls outside every object it knew, as after a
// dlopen(). A process already gone at its first address is named by what the kernel told of
// it (its code mappings, its parent at a fork), if it was told. Kernel addresses are named
// from `kallsyms`, read at the first one.
class AddressNames {
  public:
    struct Name {
        std::string function;  // empty when no symbol covers the address (stripped code)
        std::string object;    // the file mapped there; "[unknown]" when nothing is
        std::uint64_t function_address = 0;
    };

    explicit AddressNames(std::filesystem::path kallsyms = "/proc/kallsyms");
    ~AddressNames();
    AddressNames(const AddressNames&) = delete;
    AddressNames& operator=(const AddressNames&) = delete;

    // The code at `ip` in process `pid`. A process whose map could not be read gives
    // "[process N exited]" (or "[process N: its map is unreadable]") as its object.
    Name name(pid_t pid, std::uint64_t ip);
    // The kernel function at `ip`: object "[kernel.kallsyms]" or a module's "[name]"; no
    // function and object "[kernel]" when the kernel's symbols cannot be read.
    Name kernel(std::uint64_t ip);
    // The libdwfl session of process `pid`'s code with a module at `ip`, its map read again
    // as name() reads it when `ip` is outside every module it knew; null when it has none there
    // (or this library has no libdw). Valid until the next call of another member.
    Dwfl* modules(pid_t pid, std::uint64_t ip);
    // Reads the kernel's symbols now rather than at the first kernel address (so that a
    // profile does not sample its own reading of them).
    void load_kernel();
    // What the kernel told of a sampled process (a sample ring's TaskRecord): code it mapped,
    // a new program it exec()ed (what was known of the pid is forgotten), a fork.
    void mapped(const TaskRecord& record);
    void exec(pid_t pid);
    void forked(pid_t pid, pid_t parent);
    // Names kernel addresses with `symbols`, read already, instead of reading `kallsyms`.
    void use_kernel(std::shared_ptr<const KernelSymbols> symbols) { kernel_ = std::move(symbols); }

    // What is kept is bounded: the maps of at most kMaxProcessesRead processes at once (the
    // least recently named one forgotten first, read again when it is named again), and at
    // most kMaxObjectFiles object files open (past it, code is named by its object alone).
    static constexpr std::size_t kMaxProcessesRead = 128;
    static constexpr int kMaxObjectFiles = 256;
    // Forgets the processes found gone at the call before and still gone now (two calls
    // apart, so that samples a ring still held when they exited are named first).
    void forget_gone();
    // The processes known (named or told of), and the object files open now.
    std::size_t processes() const;
    int object_files() const { return *object_files_; }

  private:
    struct Process;
    struct Recorded;
    // `depth`: parents asked so far.
    Name name(pid_t pid, std::uint64_t ip, int depth);
    // Makes room for one more process with its map read.
    void make_room(pid_t keep);
    // How far below the code that `record` tells of its file starts, as libdwfl places it:
    // the file's program headers say, read once per file and offset.
    std::uint64_t below_code(const TaskRecord& record);
    std::map<pid_t, std::unique_ptr<Process>> processes_;
    std::map<pid_t, Recorded> recorded_;
    std::set<pid_t> gone_;  // found gone by the last forget_gone()
    // below_code() by file (device, inode) and offset.
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t, std::uint64_t>, std::uint64_t>
        below_code_;
    std::uint64_t uses_ = 0;
    // Shared with the modules' file sources, which outlive no AddressNames.
    std::shared_ptr<int> object_files_ = std::make_shared<int>(0);
    std::filesystem::path kallsyms_;
    std::shared_ptr<const KernelSymbols> kernel_;
};

}  // namespace monitor::perf
