#include "monitor/perf/process_symbols.hpp"

#include <elfutils/libdwfl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace monitor::perf {
namespace {

// A running process: its modules as /proc/PID/maps maps them, their files found there.
const Dwfl_Callbacks kProcessCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

// A file that is not running.
const Dwfl_Callbacks kFileCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

struct DwflEnd {
    void operator()(Dwfl* d) const { dwfl_end(d); }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflEnd>;

// A function or a variable (what a breakpoint can be placed on), defined in its module.
bool placeable(const GElf_Sym& sym) {
    if (sym.st_shndx == SHN_UNDEF) return false;
    switch (GELF_ST_TYPE(sym.st_info)) {
        case STT_FUNC:
        case STT_OBJECT:
        case STT_NOTYPE:
        case STT_GNU_IFUNC:
            return true;
        default:  // sections, files, thread-local variables (one address per thread)
            return false;
    }
}

// `name` in one module, or nullopt.
std::optional<SymbolAddress> find_in(Dwfl_Module* module, std::string_view name,
                                     const char* object) {
    const int n = dwfl_module_getsymtab(module);
    for (int i = 0; i < n; ++i) {
        GElf_Sym sym;
        GElf_Addr address = 0;
        const char* s =
            dwfl_module_getsym_info(module, i, &sym, &address, nullptr, nullptr, nullptr);
        if (s == nullptr || name != s || !placeable(sym)) continue;
        return SymbolAddress{address, sym.st_size, object != nullptr ? object : ""};
    }
    return std::nullopt;
}

struct Search {
    std::string_view name;
    std::string executable;  // the process's, as its map names it
    std::optional<SymbolAddress> in_executable;
    std::vector<SymbolAddress> in_libraries;
    std::size_t libraries = 0;
};

int visit(Dwfl_Module* module, void**, const char* object, Dwarf_Addr, void* arg) {
    auto& s = *static_cast<Search*>(arg);
    const bool executable = object != nullptr && s.executable == object;
    if (!executable) ++s.libraries;
    if (auto found = find_in(module, s.name, object)) {
        if (executable) {
            s.in_executable = std::move(found);
        } else {
            s.in_libraries.push_back(std::move(*found));
        }
    }
    return DWARF_CB_OK;
}

std::string executable_of(pid_t pid) {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
    return ec ? std::string{} : exe.string();
}

}  // namespace

Result<SymbolAddress> find_process_symbol(pid_t pid, std::string_view name) {
    DwflPtr dwfl{dwfl_begin(&kProcessCallbacks)};
    if (!dwfl) return fail(Status::AllocMem, fmt::format("libdwfl: {}", dwfl_errmsg(-1)));
    dwfl_report_begin(dwfl.get());
    const int r = dwfl_linux_proc_report(dwfl.get(), pid);
    dwfl_report_end(dwfl.get(), nullptr, nullptr);
    if (r == ENOENT || r == ESRCH) {
        return fail(Status::NoDev, fmt::format("symbol '{}': no such process {}", name, pid));
    }
    if (r == EACCES || r == EPERM) {
        return fail(Status::Perm, fmt::format("symbol '{}': the memory map of process {} "
                                              "cannot be read (/proc/{}/maps: {})",
                                              name, pid, pid, std::strerror(r)));
    }
    if (r != 0) {
        return fail(Status::IoErr,
                    fmt::format("symbol '{}': reading the memory map of process {}: {}", name, pid,
                                r > 0 ? std::strerror(r) : dwfl_errmsg(-1)));
    }
    Search s{.name = name, .executable = executable_of(pid)};
    dwfl_getmodules(dwfl.get(), &visit, &s, 0);
    if (s.in_executable) return std::move(*s.in_executable);
    if (s.in_libraries.size() == 1) return std::move(s.in_libraries.front());
    if (s.in_libraries.size() > 1) {
        std::vector<std::string> objects;
        for (const auto& f : s.in_libraries) objects.push_back(f.object);
        return fail(Status::BadArg,
                    fmt::format("symbol '{}' of process {} is defined in {} shared objects ({}), "
                                "not in its executable: give the address instead",
                                name, pid, objects.size(), fmt::join(objects, ", ")));
    }
    return fail(Status::NoEvent,
                fmt::format("process {} has no function or variable '{}' (searched: {} and the "
                            "{} shared objects it maps; a stripped file keeps only the symbols "
                            "it exports)",
                            pid, name, s.executable.empty() ? "its executable" : s.executable,
                            s.libraries));
}

Result<SymbolAddress> find_program_symbol(const std::filesystem::path& program,
                                          std::string_view name) {
    DwflPtr dwfl{dwfl_begin(&kFileCallbacks)};
    if (!dwfl) return fail(Status::AllocMem, fmt::format("libdwfl: {}", dwfl_errmsg(-1)));
    dwfl_report_begin(dwfl.get());
    Dwfl_Module* module = dwfl_report_offline(dwfl.get(), program.c_str(), program.c_str(), -1);
    dwfl_report_end(dwfl.get(), nullptr, nullptr);
    if (module == nullptr) {
        return fail(Status::BadArg, fmt::format("symbol '{}': {} cannot be read as an ELF "
                                                "file: {}",
                                                name, program.string(), dwfl_errmsg(-1)));
    }
    GElf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(module, &bias);
    GElf_Ehdr header;
    if (elf == nullptr || gelf_getehdr(elf, &header) == nullptr) {
        return fail(Status::BadArg, fmt::format("symbol '{}': {} cannot be read as an ELF "
                                                "file: {}",
                                                name, program.string(), dwfl_errmsg(-1)));
    }
    if (header.e_type != ET_EXEC) {
        return fail(Status::BadArg,
                    fmt::format("symbol '{}': {} is position-independent, so where its symbols "
                                "are is known only once it runs: count it by pid once it runs "
                                "(monctl perf collect -p PID), or build it with -no-pie",
                                name, program.string()));
    }
    if (auto found = find_in(module, name, program.c_str())) return std::move(*found);
    return fail(Status::NoEvent,
                fmt::format("{} has no function or variable '{}' (a stripped file keeps only "
                            "the symbols it exports)",
                            program.string(), name));
}

}  // namespace monitor::perf
