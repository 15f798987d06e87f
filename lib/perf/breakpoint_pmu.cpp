#include "monitor/perf/breakpoint_pmu.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_name.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {
namespace {

constexpr std::string_view kPrefix = "mem:";
constexpr std::string_view kSyntax = "mem:ADDR[/LEN][:ACCESS]";
// More than any processor has (x86 4, arm64 up to 16): where probing stops.
constexpr int kMostSlots = 32;

// The x86 debug registers' rules (arch/x86/kernel/hw_breakpoint.c), which the kernel enforces
// with a bare EINVAL: no breakpoint on reads alone, an execute breakpoint is one instruction
// (its length is that of a long), and a data breakpoint's address is a multiple of its length.
#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86Rules = true;
#else
constexpr bool kX86Rules = false;
#endif

struct Access {
    bool read = false;
    bool write = false;
    bool execute = false;

    std::uint32_t bp_type() const {
        std::uint32_t t = 0;
        if (read) t |= HW_BREAKPOINT_R;
        if (write) t |= HW_BREAKPOINT_W;
        if (execute) t |= HW_BREAKPOINT_X;
        return t;
    }
    std::string letters() const {
        return std::string(read ? "r" : "") + (write ? "w" : "") + (execute ? "x" : "");
    }
    std::string_view what() const {
        if (execute) return "executions";
        if (read && write) return "reads and writes";
        return read ? "reads" : "writes";
    }
};

// An access modifier, "rw", "x": nullopt when `s` is not one (it may be :u or :k).
std::optional<Access> parse_access(std::string_view s) {
    if (s.empty()) return std::nullopt;
    Access a;
    for (char c : s) {
        bool* bit = c == 'r' ? &a.read : c == 'w' ? &a.write : c == 'x' ? &a.execute : nullptr;
        if (bit == nullptr || *bit) return std::nullopt;
        *bit = true;
    }
    return a;
}

class BreakpointPmu final : public PmuModule {
  public:
    explicit BreakpointPmu(BreakpointSlots slots) : slots_(std::move(slots)) {}

    std::vector<PmuInfo> pmus() const override {
        PmuInfo p;
        p.name = kBreakpointPmu;
        p.description = fmt::format("hardware breakpoints (debug registers), as {}", kSyntax);
        p.counters = slots_.count;
        p.events = 1;
        p.source = kKernelSource;
        return {std::move(p)};
    }
    bool owns_name(std::string_view name) const override { return is_breakpoint_name(name); }
    Result<EventSpec> resolve(const EventName& name) const override;
    void list(std::string_view, std::vector<EventInfo>& out) const override {
        out.push_back(
            {.name = std::string(kSyntax),
             .description =
                 "Counts the target's accesses to LEN bytes at ADDR (a number, 0x for "
                 "hex, or a symbol of the target process with an offset: counter, "
                 "counter+8): ACCESS r reads, w writes, rw both (the default), x executions "
                 "of the instruction there; LEN 1, 2, 4 (the default) or 8. Each takes "
                 "one of the breakpoints the PMU line gives as counters.",
             .pmu = std::string(kBreakpointPmu)});
    }
    std::string counter_name(std::string_view, int counter) const override {
        return fmt::format("breakpoint {}", counter + 1);
    }
    Result<void> counts_on(const Processor&) const override {
        if (slots_.count > 0) return {};
        return fail(Status::NoPmu, slots_.why_none);
    }
    std::string note(const PmuInfo&) const override {
        if (slots_.count <= 0) return {};
        return fmt::format(
            "{} breakpoint register{} free when the daemon started; each breakpoint event ({}) "
            "holds one while it counts",
            slots_.count, slots_.count == 1 ? "" : "s", kSyntax);
    }
    // The kernel holds a debug register for each breakpoint open on a CPU and never
    // multiplexes them.
    bool holds_while_open() const override { return true; }
    Result<void> fits(std::span<const EventSpec* const> events) const override;
    Result<void> refuse_unprivileged(const EventSpec& event, std::string_view why) const override {
        return refuse_kernel_breakpoint(event, why);
    }
    Result<void> place(EventSpec& event, const CountTarget& target) const override;
    std::optional<Error> explain_open_error(int err, const EventSpec& event,
                                            std::string_view what) const override;

  private:
    BreakpointSlots slots_;
};

// A symbol as ELF files name them: "counter", "_ZN3app5stateE", "memcpy@GLIBC_2.14".
bool symbol_name(std::string_view s) {
    if (s.empty() || (std::isdigit(static_cast<unsigned char>(s[0])) != 0)) return false;
    return std::ranges::all_of(s, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' ||
               c == '$' || c == '@';
    });
}

Result<void> bad_breakpoint(std::string_view name, std::string why) {
    return fail(Status::BadArg,
                fmt::format("{}: {} (breakpoints are named {})", name, std::move(why), kSyntax));
}

// What the address of a placed breakpoint must be.
Result<void> check_address(const EventSpec& spec) {
    const std::uint64_t addr = spec.config1;
    const std::uint64_t len = spec.config2;
    if (kX86Rules && (spec.bp_type & HW_BREAKPOINT_X) == 0 && addr % len != 0) {
        return bad_breakpoint(
            spec.name, fmt::format("the address {:#x}{} is not a multiple of the length {}: x86 "
                                   "watches aligned ranges only ({:#x}/{} holds it)",
                                   addr,
                                   spec.bp_symbol.empty() ? std::string{}
                                                          : fmt::format(" (of {})", spec.bp_symbol),
                                   len, addr & ~(len - 1), len));
    }
    return {};
}

std::string describe(const Access& access, std::uint64_t len, std::string_view where) {
    return fmt::format("{} of the {} byte{} at {}", access.what(), len, len == 1 ? "" : "s", where);
}

Access access_of(const EventSpec& spec) {
    return {.read = (spec.bp_type & HW_BREAKPOINT_R) != 0,
            .write = (spec.bp_type & HW_BREAKPOINT_W) != 0,
            .execute = (spec.bp_type & HW_BREAKPOINT_X) != 0};
}

Result<EventSpec> BreakpointPmu::resolve(const EventName& name) const {
    const std::string_view full = name.full;
    auto bad = [&](std::string why) -> Result<EventSpec> {
        return std::unexpected(bad_breakpoint(full, std::move(why)).error());
    };
    if (!is_breakpoint_name(full)) return bad("not a breakpoint");
    std::string_view rest = full.substr(kPrefix.size());
    const auto colon = rest.find(':');
    const std::string_view where = rest.substr(0, colon);
    std::string_view mods = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    const auto slash = where.find('/');
    const std::string_view at = where.substr(0, slash);

    // An address, or a symbol of the target with an offset from it.
    std::optional<std::uint64_t> addr = parse_number(at);
    std::string_view symbol;
    std::uint64_t offset = 0;
    if (!addr) {
        const auto plus = at.find('+');
        symbol = at.substr(0, plus);
        if (!symbol_name(symbol)) {
            return bad(
                fmt::format("'{}' is neither an address (a number: 0x7ffd1000, 4096) nor "
                            "a symbol of the target (counter, counter+8)",
                            at));
        }
        if (plus != std::string_view::npos) {
            const auto o = parse_number(at.substr(plus + 1));
            if (!o) {
                return bad(
                    fmt::format("offset '{}': a number of bytes (8, 0x10)", at.substr(plus + 1)));
            }
            offset = *o;
        }
    }
    // The access, when given, comes first among the modifiers; :u and :k may follow.
    Access access{.read = true, .write = true};
    {
        const auto next = mods.find(':');
        if (auto a = parse_access(mods.substr(0, next))) {
            access = *a;
            mods = next == std::string_view::npos ? "" : mods.substr(next + 1);
        }
    }
    if (access.execute && (access.read || access.write)) {
        return bad("a breakpoint counts executions or data accesses, not both: use two events");
    }
    std::uint64_t len = access.execute ? sizeof(long) : 4;
    if (slash != std::string_view::npos) {
        const std::string_view len_text = where.substr(slash + 1);
        const auto l = parse_number(len_text);
        if (!l || (*l != 1 && *l != 2 && *l != 4 && *l != 8)) {
            return bad(
                fmt::format("length '{}': a breakpoint covers 1, 2, 4 or 8 bytes", len_text));
        }
        len = *l;
    }
    if (kX86Rules) {
        if (access.read && !access.write) {
            return bad(
                "x86 breakpoints cannot count reads alone: use :rw (reads and writes) or "
                ":w");
        }
        if (access.execute && len != sizeof(long)) {
            return bad(
                fmt::format("an execute breakpoint covers one instruction: leave out the "
                            "length, or give /{}",
                            sizeof(long)));
        }
    }
    auto m = parse_modifiers(mods, full);
    if (!m) return std::unexpected(m.error());

    EventSpec spec;
    spec.name = full;
    spec.pmu = kBreakpointPmu;
    spec.counter_pmu = kBreakpointPmu;
    spec.type = PERF_TYPE_BREAKPOINT;
    spec.bp_type = access.bp_type();
    spec.config2 = len;  // bp_len
    m->apply_to(spec);
    if (addr) {
        spec.config1 = *addr;  // bp_addr
        spec.canonical = fmt::format("mem:{:#x}/{}:{}", *addr, len, access.letters());
        spec.description = describe(access, len, fmt::format("{:#x}", *addr));
        if (auto ok = check_address(spec); !ok) return std::unexpected(ok.error());
    } else {
        spec.bp_symbol = symbol;
        spec.bp_offset = offset;
        const std::string at_symbol =
            offset == 0 ? std::string(symbol) : fmt::format("{}+{:#x}", symbol, offset);
        spec.canonical = fmt::format("mem:{}/{}:{}", at_symbol, len, access.letters());
        spec.description = describe(access, len, at_symbol);
    }
    return spec;
}

// A session counts at most as many breakpoints at once as the machine has registers free
// (found when the module was made).
Result<void> BreakpointPmu::fits(std::span<const EventSpec* const> events) const {
    if (slots_.count <= 0 || events.size() <= static_cast<std::size_t>(slots_.count)) return {};
    std::vector<std::string_view> names;
    names.reserve(events.size());
    for (const EventSpec* e : events) names.push_back(e->name);
    return fail(Status::BadArg,
                fmt::format("{} breakpoints ({}), but this machine has {} breakpoint registers "
                            "free, and a breakpoint holds one for as long as it counts (they "
                            "never take turns): count at most {} at once",
                            names.size(), fmt::join(names, ", "), slots_.count, slots_.count));
}

// A breakpoint named by a symbol, at the address its target has it: the running process's
// (its executable, then its shared objects), or the executable a command is about to run.
Result<void> BreakpointPmu::place(EventSpec& event, const CountTarget& target) const {
    if (event.bp_symbol.empty()) return {};
    Result<SymbolAddress> found = std::unexpected(Error{});
    if (target.kind == TargetKind::Process && target.pids.size() > 1) {
        return fail(Status::BadArg,
                    fmt::format("{}: a symbol names an address in one program, and this target "
                                "is {}, whose addresses may differ: count one process, or give "
                                "the address",
                                event.name, processes_text(target.pids)));
    }
    if ((target.kind == TargetKind::Process || target.kind == TargetKind::Thread) &&
        !target.enable_on_exec) {
        found = find_process_symbol(target.pid, event.bp_symbol);
    } else if (target.enable_on_exec && !target.program.empty()) {
        found = find_program_symbol(target.program, event.bp_symbol);
    } else {
        const char* what = target.enable_on_exec               ? "a command of unknown executable"
                           : target.kind == TargetKind::Cgroup ? "a cgroup"
                                                               : "whole CPUs";
        return fail(Status::BadArg,
                    fmt::format("{}: a symbol names an address in one program, and this target "
                                "is {}: count a process (-p PID) or a command, or give the "
                                "address",
                                event.name, what));
    }
    if (!found) {
        return fail(found.error().status, fmt::format("{}: {}", event.name, found.error().message));
    }
    return place_breakpoint(event, found->address, found->object);
}

std::optional<Error> BreakpointPmu::explain_open_error(int err, const EventSpec&,
                                                       std::string_view what) const {
    switch (err) {
        case ENOENT:
        case EOPNOTSUPP:
            return Error{Status::NoPmu,
                         fmt::format("{}: this kernel has no breakpoint PMU "
                                     "(CONFIG_HAVE_HW_BREAKPOINT), so no breakpoint counts here",
                                     what)};
        case ENOSPC:
            return Error{Status::Busy,
                         fmt::format("{}: every breakpoint register is taken (by this session's "
                                     "other breakpoints, another session, a debugger's "
                                     "watchpoints or perf); `monctl perf info` says how many "
                                     "there are",
                                     what)};
        case EINVAL:
            return Error{Status::BadArg,
                         fmt::format("{}: the kernel refused this breakpoint: the address must "
                                     "be a multiple of the length, an execute breakpoint takes "
                                     "the length of a long, and a kernel address can neither "
                                     "be watched in user mode only (:u) nor in the kernel's "
                                     "entry code",
                                     what)};
        default:
            return std::nullopt;
    }
}

}  // namespace

bool is_breakpoint_name(std::string_view name) {
    return name.starts_with(kPrefix);
}

Result<void> place_breakpoint(EventSpec& spec, std::uint64_t symbol_address,
                              std::string_view object) {
    spec.config1 = symbol_address + spec.bp_offset;
    const std::string at = spec.bp_offset == 0
                               ? spec.bp_symbol
                               : fmt::format("{}+{:#x}", spec.bp_symbol, spec.bp_offset);
    spec.description = describe(access_of(spec), spec.config2,
                                fmt::format("{} ({:#x} in {})", at, spec.config1, object));
    return check_address(spec);
}

bool watches_kernel(const EventSpec& spec) {
    if (spec.type != PERF_TYPE_BREAKPOINT) return false;
    constexpr std::uint64_t kKernelStart =
        sizeof(void*) == 8 ? std::uint64_t{1} << 63 : std::uint64_t{0xc0000000};
    const std::uint64_t last = spec.config1 + std::max<std::uint64_t>(spec.config2, 1) - 1;
    return spec.config1 >= kKernelStart || last >= kKernelStart || last < spec.config1;
}

Result<void> refuse_kernel_breakpoint(const EventSpec& spec, std::string_view why) {
    if (!watches_kernel(spec)) return {};
    return fail(Status::Perm, fmt::format("{}: {:#x} is a kernel address, and {}; watch an "
                                          "address of the process's own, or ask root",
                                          spec.name, spec.config1, why));
}

BreakpointSlots probe_breakpoint_slots() {
    // Watched by breakpoints that are never enabled, on the calling thread.
    static std::uint32_t watched = 0;
    EventSpec probe;
    probe.name = "a breakpoint";
    probe.type = PERF_TYPE_BREAKPOINT;
    probe.bp_type = HW_BREAKPOINT_W;
    probe.config1 = reinterpret_cast<std::uintptr_t>(&watched);
    probe.config2 = HW_BREAKPOINT_LEN_4;
    probe.exclude_kernel = true;
    probe.exclude_hv = true;
    probe.module = std::make_shared<BreakpointPmu>(BreakpointSlots{});  // its open errors
    const OpenTarget self{.pid = static_cast<pid_t>(::syscall(SYS_gettid))};
    std::vector<UniqueFd> held;
    while (static_cast<int>(held.size()) < kMostSlots) {
        perf_event_attr attr = event_attr(probe, self);
        attr.disabled = 1;
        const long fd = open_event(attr, self, -1);
        if (fd < 0) {
            const int err = errno;
            if (!held.empty()) break;  // ENOSPC: the registers are all held now
            return {0, explain_open_error(err, probe, self).message};
        }
        held.emplace_back(static_cast<int>(fd));
    }
    return {static_cast<int>(held.size()), {}};
}

Result<std::unique_ptr<PmuModule>> make_breakpoint_pmu() {
    return std::make_unique<BreakpointPmu>(probe_breakpoint_slots());
}

std::unique_ptr<PmuModule> breakpoint_pmu(BreakpointSlots slots) {
    return std::make_unique<BreakpointPmu>(std::move(slots));
}

}  // namespace monitor::perf
