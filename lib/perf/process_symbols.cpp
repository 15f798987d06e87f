#include "monitor/perf/process_symbols.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#if MONITOR_HAVE_LIBDW
#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#endif

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "monitor/perf/mapped_files.hpp"
#include "monitor/perf/minidebuginfo.hpp"
#include "monitor/status.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

#if MONITOR_HAVE_LIBDW
// Separate debugging information only where the system's packages put it, by build ID: not
// next to the object (a directory its owner writes), nor from a debuginfod server.
char kDebugPath[] = "/usr/lib/debug";
char* debug_path = kDebugPath;

// The files of one process's map, for find_object: every module's userdata points at it.
struct ObjectSource {
    pid_t pid = -1;  // -1: the process is gone
    std::vector<MappedFile> files;
    // The object files open, of all the sources that share the budget, and this one's.
    std::shared_ptr<int> budget;
    int opened = 0;

    ObjectSource() = default;
    ObjectSource(const ObjectSource&) = delete;
    ObjectSource& operator=(const ObjectSource&) = delete;
    ~ObjectSource() {
        if (budget) *budget -= opened;
    }
};

// Whether every string table of `elf` ends its last string: libdwfl 0.188 hands out a
// symbol's name from its table without looking for the end (tests/fuzz/regressions/
// elf_symbols), and a file that leaves it out would have the daemon read past the table.
// A file without a readable table of symbols among its sections is refused too: libdwfl would
// take its symbols from its dynamic segment, with no end to their strings either.
bool strings_terminated(Elf* elf, bool need_table = true) {
    std::size_t sections = 0;
    if (elf_getshdrnum(elf, &sections) != 0 || sections == 0) return !need_table;
    std::size_t tables = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr header;
        if (gelf_getshdr(scn, &header) == nullptr) return false;
        // A table of strings, or whatever a table of symbols takes for its strings.
        Elf_Scn* strings = scn;
        if (header.sh_type == SHT_SYMTAB || header.sh_type == SHT_DYNSYM) {
            ++tables;
            strings = elf_getscn(elf, header.sh_link);
            if (strings == nullptr || gelf_getshdr(strings, &header) == nullptr) return false;
        } else if (header.sh_type != SHT_STRTAB) {
            continue;
        }
        if (header.sh_size == 0) continue;
        const Elf_Data* data = elf_rawdata(strings, nullptr);
        if (data == nullptr || data->d_buf == nullptr || data->d_size == 0) return false;
        if (static_cast<const char*>(data->d_buf)[data->d_size - 1] != '\0') return false;
    }
    return tables > 0 || !need_table;
}

// Why libdwfl may not unpack the file's MiniDebugInfo (minidebuginfo.hpp) as it will, or ""
// when it may. It looks for it in a file without a .symtab, by section name: the one section
// of that name must be xz that unpacks within bounds, into an ELF file whose strings end, as
// libdwfl reads the names of its symbols from it as from any file.
std::string minidebuginfo_refusal(Elf* elf) {
    std::size_t names = 0;
    if (elf_getshdrstrndx(elf, &names) != 0) return {};  // libdwfl finds no section by name
    bool symtab = false;
    std::vector<Elf_Scn*> packed;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr header;
        if (gelf_getshdr(scn, &header) == nullptr) return "a section header cannot be read";
        symtab = symtab || header.sh_type == SHT_SYMTAB;
        const char* name = elf_strptr(elf, names, header.sh_name);
        if (name != nullptr && std::strcmp(name, ".gnu_debugdata") == 0) packed.push_back(scn);
    }
    if (symtab) return {};
    // No distribution makes two: a file with many would be unpacked many times.
    if (packed.size() > 1) {
        return fmt::format("it has {} .gnu_debugdata sections, where there is one", packed.size());
    }
    for (Elf_Scn* scn : packed) {
        const Elf_Data* data = elf_rawdata(scn, nullptr);
        if (data == nullptr || data->d_buf == nullptr) continue;  // libdwfl skips it too
        auto inner = unpack_xz({static_cast<const unsigned char*>(data->d_buf), data->d_size});
        if (!inner) return "its .gnu_debugdata section: " + inner.error().message;
        Elf* aux = elf_memory(inner->data(), inner->size());
        if (aux == nullptr) continue;  // not ELF: libdwfl takes nothing from it
        const bool ok = elf_kind(aux) != ELF_K_ELF || strings_terminated(aux, false);
        elf_end(aux);
        if (!ok) return "its .gnu_debugdata section holds a table of strings without an end";
    }
    return {};
}

// libdwfl's find_elf: the module's file opened as its process sees it (mapped_files.hpp),
// read by libelf without mmap, so that a file truncated while it is read is an error and not
// a SIGBUS. No file name is left behind on failure: libdwfl would open that path itself.
int find_object(Dwfl_Module* module, void** userdata, const char* name, Dwarf_Addr,
                char** file_name, Elf** elfp) {
    auto* source = static_cast<ObjectSource*>(*userdata);
    if (source == nullptr || name == nullptr || name[0] != '/') return -1;
    if (source->budget && *source->budget >= AddressNames::kMaxObjectFiles) return -1;
    Dwarf_Addr start = 0;
    Dwarf_Addr end = 0;
    dwfl_module_info(module, nullptr, &start, &end, nullptr, nullptr, nullptr, nullptr);
    for (const auto& f : source->files) {
        if (f.path != name || f.end <= start || f.start >= end) continue;
        auto fd = open_mapped_file(source->pid, f);
        if (!fd) continue;  // this mapping is gone: another of the same file may do
        Elf* elf = elf_begin(fd->get(), ELF_C_READ, nullptr);
        if (elf == nullptr) return -1;
        // Code a process runs is a program or a shared object. libdwfl would lay out the
        // sections of any other type (a relocatable object) through the section_address
        // callback, which a process's modules have none of: a call to address 0.
        GElf_Ehdr header;
        if (elf_kind(elf) != ELF_K_ELF || gelf_getehdr(elf, &header) == nullptr ||
            (header.e_type != ET_EXEC && header.e_type != ET_DYN) || !strings_terminated(elf) ||
            !minidebuginfo_refusal(elf).empty()) {
            elf_end(elf);
            return -1;
        }
        char* copy = ::strdup(name);
        if (copy == nullptr) {
            elf_end(elf);
            return -1;
        }
        *file_name = copy;
        *elfp = elf;
        ++source->opened;
        if (source->budget) ++*source->budget;
        return fd->release();
    }
    return -1;
}

// A process's modules as its map places them, their files from find_object.
const Dwfl_Callbacks kProcessCallbacks = {
    .find_elf = find_object,
    .find_debuginfo = dwfl_build_id_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = &debug_path,
};

// A file that is not running, reported from memory.
const Dwfl_Callbacks kFileCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_build_id_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debug_path,
};

// A program about to run is read whole to find a symbol in it: at most this much.
constexpr std::size_t kMaxProgramBytes = std::size_t{256} << 20;

// Why libdwfl may not read `bytes` as a program, or "" when it may: they must start with an
// ELF header whole, as libelf reads it, end their strings and unpack within bounds.
std::string unreadable_program(std::string& bytes) {
    Elf* elf = elf_memory(bytes.data(), bytes.size());
    if (elf == nullptr) return "is not an ELF file";
    GElf_Ehdr header;
    std::string why;
    if (elf_kind(elf) != ELF_K_ELF || gelf_getehdr(elf, &header) == nullptr ||
        bytes.size() <
            (gelf_getclass(elf) == ELFCLASS32 ? sizeof(Elf32_Ehdr) : sizeof(Elf64_Ehdr)) ||
        !strings_terminated(elf)) {
        why = "is not an ELF file";
    } else if (auto refusal = minidebuginfo_refusal(elf); !refusal.empty()) {
        why = "cannot be read for symbols: " + refusal;
    }
    elf_end(elf);
    return why;
}

struct DwflEnd {
    void operator()(Dwfl* d) const { dwfl_end(d); }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflEnd>;

// Points every module of `dwfl` at `source`, for find_object.
void attach_source(Dwfl* dwfl, ObjectSource* source) {
    dwfl_getmodules(
        dwfl,
        [](Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, void* arg) -> int {
            *userdata = arg;
            return DWARF_CB_OK;
        },
        source, 0);
}

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

// How far below an executable mapping of the object in `fd`, made from file offset `offset`,
// libdwfl puts the object's start: the first loadable segment's address (p_vaddr & -p_align,
// as libdwfl takes it) in the same placement as the executable segment that holds `offset`.
// bfd and gold give that segment its file offset for an address (code at 0x1000 from 0x1000),
// so the offset alone would do; lld puts it a page or more above (code at 0x21f0 from 0x11f0,
// mapped from offset 0x1000), and the offset alone is a page short.
std::optional<std::uint64_t> start_below_code(int fd, std::uint64_t offset) {
    elf_version(EV_CURRENT);  // libelf's start, which libdwfl makes too: maybe not yet
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    if (elf == nullptr) return std::nullopt;
    std::optional<std::uint64_t> first;  // the first loadable segment's address, aligned
    std::optional<std::uint64_t> code;   // the address the mapping's offset has
    std::size_t headers = 0;
    if (elf_kind(elf) == ELF_K_ELF && elf_getphdrnum(elf, &headers) == 0) {
        const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
        for (std::size_t i = 0; i < headers && !code; ++i) {
            GElf_Phdr h;
            if (gelf_getphdr(elf, static_cast<int>(i), &h) == nullptr) break;
            if (h.p_type != PT_LOAD) continue;
            if (!first) first = h.p_vaddr & -h.p_align;
            // The kernel maps a segment from its offset rounded down to a page.
            if ((h.p_flags & PF_X) != 0 && offset >= (h.p_offset & -page) &&
                offset < h.p_offset + h.p_filesz) {
                code = h.p_vaddr - h.p_offset + offset;
            }
        }
    }
    elf_end(elf);
    if (!first || !code || *code < *first) return std::nullopt;
    return *code - *first;
}

#endif  // MONITOR_HAVE_LIBDW

// A mapping of a process's map: what names the code libdwfl has no module for ([vdso],
// code generated at run time), and all code without libdwfl.
struct MapRange {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::string name;  // the path or [vdso]; "[anonymous]" for none
};

// The lines of a memory map's text (as /proc/PID/maps has it) that place modules, with its
// executable mappings appended to `ranges`. Left out: libelf maps the files it reads (the
// program's own, when it looks at itself) privately and writable at offset 0, where no loader
// puts a segment, and such a mapping would be taken for a second copy of the module at the
// wrong place; and shared mappings.
std::string module_lines(std::string_view maps, std::vector<MapRange>* ranges) {
    std::string kept;
    std::string_view rest = maps;
    while (!rest.empty()) {
        const auto end = rest.find('\n');
        const std::string_view line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        // "start-end perms offset dev inode path"
        const auto perms = line.find(' ');
        if (perms == std::string_view::npos) continue;
        const std::string_view rest_of_line = line.substr(perms + 1);
        const bool writable_at_zero =
            rest_of_line.starts_with("rw") && rest_of_line.substr(5).starts_with("00000000 ");
        const bool shared = rest_of_line.size() > 3 && rest_of_line[3] == 's';
        if (ranges != nullptr && rest_of_line.size() > 2 && rest_of_line[2] == 'x') {
            MapRange r;
            const auto dash = line.find('-');
            const std::string_view range = line.substr(0, perms);
            std::from_chars(range.data(), range.data() + dash, r.start, 16);
            std::from_chars(range.data() + dash + 1, range.data() + range.size(), r.end, 16);
            // The path is the sixth field: after perms, offset, dev and inode.
            std::string_view fields = rest_of_line;
            for (int i = 0; i < 4 && !fields.empty(); ++i) {
                fields = trim_space(fields);
                const auto space = fields.find(' ');
                fields =
                    space == std::string_view::npos ? std::string_view{} : fields.substr(space);
            }
            fields = trim_space(fields);
            r.name = fields.empty() ? std::string{"[anonymous]"} : std::string{fields};
            ranges->push_back(std::move(r));
        }
        if (writable_at_zero || shared) continue;
        kept.append(line);
        kept.push_back('\n');
    }
    return kept;
}

// Process `pid`'s memory map as text: 0, or an errno value.
int read_process_map(pid_t pid, std::string& out) {
    auto maps = read_text_file(fmt::format("/proc/{}/maps", pid), 64 << 20);
    if (!maps) {
        if (maps.error().status == Status::Perm) return EACCES;
        std::error_code unknown;  // ENOENT only when the process is known to be gone
        const bool gone = !std::filesystem::exists(fmt::format("/proc/{}", pid), unknown);
        return gone && !unknown ? ENOENT : EIO;
    }
    // A process that has exited but is not yet reaped (a zombie) has an empty map.
    if (maps->empty()) return ENOENT;
    out = std::move(*maps);
    return 0;
}

#if MONITOR_HAVE_LIBDW
// Reports the modules of a memory map's text to `dwfl`, with their files into `source`: 0, or
// an errno value.
int report_maps(Dwfl* dwfl, std::string_view maps, std::vector<MapRange>* ranges,
                ObjectSource& source) {
    std::string kept = module_lines(maps, ranges);
    source.files = mapped_files(kept);
    if (kept.empty()) return 0;
    FILE* f = ::fmemopen(kept.data(), kept.size(), "r");
    if (f == nullptr) return errno;
    const int r = dwfl_linux_proc_maps_report(dwfl, f);
    std::fclose(f);
    return r < 0 ? EIO : r;
}

// Reports the modules of process `pid` to `dwfl`, from its memory map: 0, or an errno value.
int report_process(Dwfl* dwfl, pid_t pid, ObjectSource& source,
                   std::vector<MapRange>* ranges = nullptr) {
    std::string maps;
    if (int r = read_process_map(pid, maps); r != 0) return r;
    source.pid = pid;
    return report_maps(dwfl, maps, ranges, source);
}

// A C++ symbol as its source names it ("(anonymous namespace)::burn(long)"); others as they
// are.
std::string demangled(const char* symbol) {
    if (symbol[0] != '_' || symbol[1] != 'Z') return symbol;
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d{
        abi::__cxa_demangle(symbol, nullptr, nullptr, &status), &std::free};
    return status == 0 && d ? std::string{d.get()} : std::string{symbol};
}

std::string executable_of(pid_t pid) {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
    return ec ? std::string{} : exe.string();
}
#endif  // MONITOR_HAVE_LIBDW

}  // namespace

bool reads_symbols() noexcept {
    return MONITOR_HAVE_LIBDW != 0;
}

#if MONITOR_HAVE_LIBDW
Result<SymbolAddress> find_process_symbol(pid_t pid, std::string_view name) {
    ObjectSource source;
    DwflPtr dwfl{dwfl_begin(&kProcessCallbacks)};
    if (!dwfl) return fail(Status::AllocMem, fmt::format("libdwfl: {}", dwfl_errmsg(-1)));
    dwfl_report_begin(dwfl.get());
    const int r = report_process(dwfl.get(), pid, source);
    dwfl_report_end(dwfl.get(), nullptr, nullptr);
    attach_source(dwfl.get(), &source);
    if (r == ENOENT || r == ESRCH) {
        return fail(Status::NoDev, fmt::format("symbol '{}': no such process {}", name, pid));
    }
    if (r == EACCES || r == EPERM) {
        return fail(Status::Perm, fmt::format("symbol '{}': the memory map of process {} "
                                              "cannot be read (/proc/{}/maps: {})",
                                              name, pid, pid, errno_message(r)));
    }
    if (r != 0) {
        return fail(Status::IoErr,
                    fmt::format("symbol '{}': reading the memory map of process {}: {}", name, pid,
                                r > 0 ? errno_message(r) : dwfl_errmsg(-1)));
    }
    Search s{.name = name, .executable = executable_of(pid)};
    dwfl_getmodules(dwfl.get(), &visit, &s, 0);
    if (s.in_executable) return std::move(*s.in_executable);
    if (s.in_libraries.size() == 1) return std::move(s.in_libraries.front());
    if (s.in_libraries.size() > 1) {
        std::vector<std::string> objects;
        objects.reserve(s.in_libraries.size());
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
    // Read whole and reported from memory: the file is the caller's to name, so it is opened
    // without blocking and not mapped (a file truncated while it is read is not a SIGBUS).
    auto fd = open_regular_file(program.string(), kMaxProgramBytes);
    if (!fd) {
        if (fd.error().status == Status::BadArg) {
            return fail(Status::BadArg, fmt::format("symbol '{}': {}", name, fd.error().message));
        }
        std::string_view why = fd.error().message;  // "PATH: what the system call said"
        if (why.starts_with(program.string() + ": "))
            why.remove_prefix(program.string().size() + 2);
        return fail(Status::BadArg,
                    fmt::format("symbol '{}': {} cannot be read: {}", name, program.string(), why));
    }
    std::string bytes;
    if (auto read = pread_whole(fd->get(), bytes, program, kMaxProgramBytes); !read) {
        return fail(Status::IoErr, fmt::format("symbol '{}': {}", name, read.error().message));
    }
    // libdwfl 0.188 takes bytes that are not a whole ELF header for one, and crashes on them
    // (tests/fuzz/regressions/elf_symbols): libelf looks first.
    if (auto why = unreadable_program(bytes); !why.empty()) {
        return fail(Status::BadArg, fmt::format("symbol '{}': {} {}", name, program.string(), why));
    }
    DwflPtr dwfl{dwfl_begin(&kFileCallbacks)};
    if (!dwfl) return fail(Status::AllocMem, fmt::format("libdwfl: {}", dwfl_errmsg(-1)));
    dwfl_report_begin(dwfl.get());
    Dwfl_Module* module = dwfl_report_offline_memory(dwfl.get(), program.c_str(), program.c_str(),
                                                     bytes.data(), bytes.size());
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

#else   // !MONITOR_HAVE_LIBDW
namespace {

Error no_symbols(std::string_view name) {
    return {Status::NoEvent,
            fmt::format("symbol '{}': this libmonitor was built without elfutils' libdw, so it "
                        "reads no symbols: give the address instead (mem:0xADDR)",
                        name)};
}

}  // namespace

Result<SymbolAddress> find_process_symbol(pid_t, std::string_view name) {
    return std::unexpected(no_symbols(name));
}

Result<SymbolAddress> find_program_symbol(const std::filesystem::path&, std::string_view name) {
    return std::unexpected(no_symbols(name));
}
#endif  // MONITOR_HAVE_LIBDW

namespace {

// The code of one process's map, by address: libdwfl's modules, which name the function and
// the object at an address; without libdw, the objects of the map alone.
class CodeModules {
  public:
    // Reads process `pid`'s map as it is now, or the map lines `recorded` when given, with its
    // executable mappings into `ranges`: 0, or an errno value. The object files it opens count
    // in `budget`.
    int read(pid_t pid, const std::string* recorded, std::vector<MapRange>& ranges,
             const std::shared_ptr<int>& budget);
    // The object and function at `ip`; nullopt when no module covers it.
    std::optional<AddressNames::Name> at(std::uint64_t ip) const;
#if MONITOR_HAVE_LIBDW
    // The session itself, for unwinding (DwarfUnwinder), and whether a module covers `ip`.
    Dwfl* dwfl() const {
        return dwfl_.get();
    }
    bool covers(std::uint64_t ip) const {
        return dwfl_addrmodule(dwfl_.get(), ip) != nullptr;
    }
#endif

  private:
#if MONITOR_HAVE_LIBDW
    std::unique_ptr<ObjectSource> source_;  // before dwfl_, which points at it
    DwflPtr dwfl_;
#else
    std::vector<MapRange> files_;  // the executable mappings of files
#endif
};

#if MONITOR_HAVE_LIBDW
int CodeModules::read(pid_t pid, const std::string* recorded, std::vector<MapRange>& ranges,
                      const std::shared_ptr<int>& budget) {
    auto source = std::make_unique<ObjectSource>();
    source->budget = budget;
    DwflPtr dwfl{dwfl_begin(&kProcessCallbacks)};
    if (!dwfl) return ENOMEM;
    dwfl_report_begin(dwfl.get());
    int r = 0;
    if (recorded != nullptr) {
        // The records of a process that may be gone: its files through it while it runs.
        source->pid = pid;
        r = report_maps(dwfl.get(), *recorded, &ranges, *source);
    } else {
        r = report_process(dwfl.get(), pid, *source, &ranges);
    }
    dwfl_report_end(dwfl.get(), nullptr, nullptr);
    if (r != 0) return r;
    dwfl_.reset();  // its files closed before its source gives back their count
    source_ = std::move(source);
    dwfl_ = std::move(dwfl);
    attach_source(dwfl_.get(), source_.get());
    return 0;
}

std::optional<AddressNames::Name> CodeModules::at(std::uint64_t ip) const {
    Dwfl_Module* module = dwfl_addrmodule(dwfl_.get(), ip);
    if (module == nullptr) return std::nullopt;
    const char* object =
        dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    AddressNames::Name n{.object = object != nullptr ? object : "[unknown]"};
    GElf_Off offset = 0;
    GElf_Sym sym;
    if (const char* f =
            dwfl_module_addrinfo(module, ip, &offset, &sym, nullptr, nullptr, nullptr)) {
        n.function = demangled(f);
        n.function_address = ip - offset;
    }
    return n;
}
#else
int CodeModules::read(pid_t pid, const std::string* recorded, std::vector<MapRange>& ranges,
                      const std::shared_ptr<int>&) {
    std::string maps;
    if (recorded == nullptr) {
        if (int r = read_process_map(pid, maps); r != 0) return r;
        recorded = &maps;
    }
    module_lines(*recorded, &ranges);
    files_.clear();
    std::ranges::copy_if(ranges, std::back_inserter(files_),
                         [](const MapRange& r) { return r.name.starts_with('/'); });
    return 0;
}

std::optional<AddressNames::Name> CodeModules::at(std::uint64_t ip) const {
    for (const auto& r : files_) {
        if (ip >= r.start && ip < r.end) return AddressNames::Name{.object = r.name};
    }
    return std::nullopt;
}
#endif

}  // namespace

struct AddressNames::Process {
    std::unique_ptr<CodeModules> modules;  // null when its map could not be read
    std::vector<MapRange> ranges;          // its executable mappings
    std::string missing;                   // then, the object its addresses are given
    std::chrono::steady_clock::time_point read_at;
    bool from_records = false;        // made from the kernel's records: the process had gone
    std::size_t records_at_read = 0;  // the size of its recorded maps when it was read
    std::uint64_t last_use = 0;       // AddressNames::uses_ when it was last named
};

struct AddressNames::Recorded {
    std::string maps;    // its code mappings the kernel told of, as /proc/PID/maps lines
    pid_t parent = -1;   // forked from, with the code the parent had then
    bool whole = false;  // seen to fork or exec: every mapping since is in `maps`
};

AddressNames::AddressNames(std::filesystem::path kallsyms) : kallsyms_(std::move(kallsyms)) {}
AddressNames::~AddressNames() = default;

namespace {

// The modules of process `pid`'s map as it is now (or as `recorded` says it was, when given),
// or the object to name its addresses with when the map cannot be read.
void read_map(pid_t pid, const std::shared_ptr<int>& budget, std::unique_ptr<CodeModules>& out,
              std::vector<MapRange>& ranges, std::string& missing,
              const std::string* recorded = nullptr) {
    auto modules = std::make_unique<CodeModules>();
    std::vector<MapRange> read;
    const int r = modules->read(pid, recorded, read, budget);
    if (r == 0) {
        out = std::move(modules);
        ranges = std::move(read);
        return;
    }
    if (r == ENOMEM) return;  // libdwfl could not start: "[unknown]"
    missing = r == EACCES || r == EPERM ? fmt::format("[process {}: its map is unreadable]", pid)
                                        : fmt::format("[process {} exited]", pid);
}

}  // namespace

AddressNames::Name AddressNames::name(pid_t pid, std::uint64_t ip) {
    return name(pid, ip, 0);
}

// NOLINTNEXTLINE(misc-no-recursion): through `parents`, at most 8 forks deep
AddressNames::Name AddressNames::name(pid_t pid, std::uint64_t ip, int depth) {
    auto& p = processes_[pid];
    const auto now = std::chrono::steady_clock::now();
    const auto found = recorded_.find(pid);
    const Recorded* recorded = found == recorded_.end() ? nullptr : &found->second;
    const std::size_t records = recorded != nullptr ? recorded->maps.size() : 0;
    // A process seen to fork or exec has all its code in the records, as it is at this point of
    // the profile; for the others, /proc/PID/maps says what they have now, and the records
    // what they mapped since the profile began, once they are gone.
    const bool whole = recorded != nullptr && recorded->whole;
    // Reads its map into `modules`: whether from the records.
    auto read = [&](std::unique_ptr<CodeModules>& modules, std::vector<MapRange>& ranges,
                    std::string& missing) {
        make_room(pid);
        if (!whole) read_map(pid, object_files_, modules, ranges, missing);
        if (modules || records == 0) return false;
        read_map(pid, object_files_, modules, ranges, missing, &recorded->maps);
        return modules != nullptr;
    };
    if (!p) {
        p = std::make_unique<Process>();
        p->last_use = ++uses_;
        p->read_at = now;
        p->records_at_read = records;
        p->from_records = read(p->modules, p->ranges, p->missing);
    }
    p->last_use = ++uses_;
    // A forked process has its parent's code where its own records do not say.
    auto parents = [&](Name n) -> Name {  // NOLINT(misc-no-recursion): as name()
        if (recorded == nullptr || recorded->parent <= 0 || depth >= 8 ||
            (p->modules && !p->from_records)) {
            return n;
        }
        return name(recorded->parent, ip, depth + 1);
    };
    // Mapped since the map was read (the libraries of a program read just after its exec, a
    // dlopen): read again when the kernel said so, or else at most once a second. A sample
    // taken in an exec between the kernel's telling of it and of the new program's code (the
    // system call's user frames) finds nothing to read yet: the code comes with the records.
    const bool told = records != p->records_at_read;
    if (!p->modules && told) {
        p->read_at = now;
        p->records_at_read = records;
        p->missing.clear();
        p->from_records = read(p->modules, p->ranges, p->missing);
    }
    if (!p->modules) return parents({.object = p->missing.empty() ? "[unknown]" : p->missing});
    // Code without an ELF file behind it (the vDSO, code generated at run time) is named by
    // its mapping: libdwfl may take it for the end of the module mapped before it.
    for (const auto& r : p->ranges) {
        if (ip >= r.start && ip < r.end && r.name.starts_with('[')) return {.object = r.name};
    }
    auto n = p->modules->at(ip);
    if (!n && (told || (!p->from_records && now - p->read_at >= std::chrono::seconds(1)))) {
        p->read_at = now;
        p->records_at_read = records;
        std::unique_ptr<CodeModules> again;
        std::vector<MapRange> ranges;
        std::string missing;
        const bool from_records = read(again, ranges, missing);
        if (again) {
            p->modules = std::move(again);
            p->ranges = std::move(ranges);
            p->from_records = from_records;
            n = p->modules->at(ip);
        }
    }
    if (n) return std::move(*n);
    for (const auto& r : p->ranges) {
        if (ip >= r.start && ip < r.end) return {.object = r.name};
    }
    return parents({.object = "[unknown]"});
}

Dwfl* AddressNames::modules(pid_t pid, std::uint64_t ip) {
#if MONITOR_HAVE_LIBDW
    // A process named already, with a module at `ip`: the unwinding of each of its samples
    // reads nothing more.
    const auto known = processes_.find(pid);
    if (known != processes_.end() && known->second && known->second->modules &&
        known->second->modules->covers(ip)) {
        known->second->last_use = ++uses_;
        return known->second->modules->dwfl();
    }
    (void)name(pid, ip);  // reads its map, or again when `ip` is new to it
    const auto found = processes_.find(pid);
    if (found == processes_.end() || !found->second || !found->second->modules) return nullptr;
    return found->second->modules->dwfl();
#else
    (void)pid;
    (void)ip;
    return nullptr;
#endif
}

void AddressNames::make_room(pid_t keep) {
    for (;;) {
        std::size_t read = 0;
        auto oldest = processes_.end();
        for (auto it = processes_.begin(); it != processes_.end(); ++it) {
            if (!it->second || !it->second->modules) continue;
            ++read;
            if (it->first != keep &&
                (oldest == processes_.end() || it->second->last_use < oldest->second->last_use)) {
                oldest = it;
            }
        }
        // Room for one more, and for its files (a process maps a few dozen).
        const bool full = read >= kMaxProcessesRead || *object_files_ > kMaxObjectFiles * 3 / 4;
        if (!full || oldest == processes_.end()) return;
        processes_.erase(oldest);  // its files closed
    }
}

void AddressNames::forget_gone() {
    std::set<pid_t> gone;
    auto check = [&](pid_t pid) {
        if (pid > 0 && ::kill(pid, 0) < 0 && errno == ESRCH) gone.insert(pid);
    };
    for (const auto& [pid, _] : processes_) check(pid);
    for (const auto& [pid, _] : recorded_) check(pid);
    // A parent gone still has the code of the children it forked that run on.
    std::set<pid_t> parents;
    for (const auto& [pid, r] : recorded_) {
        if (r.parent > 0 && !gone.contains(pid)) parents.insert(r.parent);
    }
    for (pid_t pid : gone) {
        if (!gone_.contains(pid) || parents.contains(pid)) continue;
        processes_.erase(pid);
        recorded_.erase(pid);
    }
    gone_ = std::move(gone);
}

std::size_t AddressNames::processes() const {
    std::set<pid_t> all;
    for (const auto& [pid, _] : processes_) all.insert(pid);
    for (const auto& [pid, _] : recorded_) all.insert(pid);
    return all.size();
}

std::uint64_t AddressNames::below_code(const TaskRecord& r) {
#if MONITOR_HAVE_LIBDW
    const std::tuple key{r.major, r.minor, r.inode, r.offset};
    if (const auto known = below_code_.find(key); known != below_code_.end()) return known->second;
    std::optional<std::uint64_t> below;
    const MappedFile file{.start = r.start,
                          .end = r.start + r.length,
                          .major = r.major,
                          .minor = r.minor,
                          .inode = r.inode,
                          .path = std::string(r.name)};
    if (auto fd = open_mapped_file(r.pid, file)) below = start_below_code(fd->get(), r.offset);
    if (below_code_.size() >= std::size_t{kMaxObjectFiles} * 4) below_code_.clear();
    // A file that cannot be read is taken to have its code at its offset, as bfd puts it.
    return below_code_[key] = below.value_or(r.offset);
#else
    return r.offset;
#endif
}

void AddressNames::mapped(const TaskRecord& r) {
    if (r.kind != TaskRecord::Kind::Mapped || r.length == 0) return;
    auto& maps = recorded_[r.pid].maps;
    if (maps.size() > (std::size_t{1} << 20)) return;  // a process mapping code without end
    std::string_view file = r.name;
    if (file == "//anon" || file.empty()) file = {};
    const std::uint64_t below = file.starts_with('/') ? below_code(r) : 0;
    if (below > 0 && below <= r.start) {
        // The file's start, where its first segment is: libdwfl places a module by where its
        // first mapping begins, and the kernel tells only of the executable one.
        maps += fmt::format("{:x}-{:x} r--p 00000000 {:02x}:{:02x} {} {}\n", r.start - below,
                            r.start, r.major, r.minor, r.inode, file);
    }
    maps += fmt::format("{:x}-{:x} r-xp {:08x} {:02x}:{:02x} {} {}\n", r.start, r.start + r.length,
                        r.offset, r.major, r.minor, r.inode, file);
}

void AddressNames::exec(pid_t pid) {
    recorded_[pid] = {.whole = true};
    processes_.erase(pid);
}

void AddressNames::forked(pid_t pid, pid_t parent) {
    recorded_[pid] = {.parent = parent, .whole = true};
    processes_.erase(pid);
}

void AddressNames::load_kernel() {
    if (!kernel_) kernel_ = std::make_shared<const KernelSymbols>(KernelSymbols::load(kallsyms_));
}

AddressNames::Name AddressNames::kernel(std::uint64_t ip) {
    load_kernel();
    auto found = kernel_->find(ip);
    if (!found) return {.object = "[kernel]"};
    return {.function = std::string(found->function),
            .object = std::string(found->object),
            .function_address = found->address};
}

}  // namespace monitor::perf
