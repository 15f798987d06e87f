#include "monitor/loading/proc_stat.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "monitor/text_file.hpp"

namespace monitor {
namespace {

constexpr std::size_t kMinColumns = 4;  // user nice system idle: every kernel since 2.4

std::string_view next_token(std::string_view& line) {
    auto b = line.find_first_not_of(' ');
    if (b == std::string_view::npos) {
        line = {};
        return {};
    }
    line.remove_prefix(b);
    auto e = line.find(' ');
    auto tok = line.substr(0, e);
    line.remove_prefix(e == std::string_view::npos ? line.size() : e);
    return tok;
}

std::unexpected<Error> bad_line(std::size_t lineno, std::string_view line, std::string_view why) {
    std::string shown{line.substr(0, 80)};
    return fail(Status::BadData, "/proc/stat line " + std::to_string(lineno) + " '" + shown +
                                     "': " + std::string{why});
}

}  // namespace

std::uint64_t CpuTimes::idle() const {
    return (*this)[CpuState::Idle] + (*this)[CpuState::IoWait];
}

std::uint64_t CpuTimes::total() const {
    std::uint64_t sum = 0;
    for (auto s : {CpuState::User, CpuState::Nice, CpuState::System, CpuState::Idle,
                   CpuState::IoWait, CpuState::Irq, CpuState::SoftIrq, CpuState::Steal}) {
        sum += (*this)[s];
    }
    return sum;
}

Result<ProcStatSnapshot> parse_proc_stat(std::string_view text, std::size_t expected_cpus) {
    ProcStatSnapshot snap;
    snap.cpus.reserve(expected_cpus);
    bool have_machine = false;
    std::size_t lineno = 0;
    while (!text.empty()) {
        ++lineno;
        auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (!line.starts_with("cpu")) continue;

        std::string_view rest = line;
        std::string_view label = next_token(rest);
        bool machine = label == "cpu";
        int cpu = -1;
        if (!machine) {
            auto id = label.substr(3);
            auto [p, ec] = std::from_chars(id.data(), id.data() + id.size(), cpu);
            if (ec != std::errc{} || p != id.data() + id.size() || cpu < 0) {
                return bad_line(lineno, line, "expected 'cpu' or 'cpuN'");
            }
        }

        CpuTimes times;
        std::size_t columns = 0;
        // Each column: spaces, then digits up to a space or the end of the line.
        const char* p = rest.data();
        const char* const end = rest.data() + rest.size();
        while (columns < kCpuStateCount) {  // a future kernel's extra columns are not read
            while (p != end && *p == ' ') ++p;
            if (p == end) break;
            std::uint64_t v = 0;
            auto [after, ec] = std::from_chars(p, end, v);
            if (ec != std::errc{} || (after != end && *after != ' ')) {
                const char* tok_end = std::find(p, end, ' ');
                return bad_line(lineno, line,
                                "column " + std::to_string(columns + 1) + " '" +
                                    std::string{p, tok_end} + "' is not an unsigned 64-bit number");
            }
            times.ticks[columns++] = v;
            p = after;
        }
        if (columns < kMinColumns) {
            return bad_line(lineno, line,
                            "has " + std::to_string(columns) + " columns, at least 4 expected");
        }
        if (machine) {
            snap.machine = times;
            snap.columns = columns;
            have_machine = true;
        } else {
            snap.cpus.push_back({cpu, times});
        }
    }
    if (!have_machine) return fail(Status::BadData, "/proc/stat has no 'cpu' line");
    auto by_cpu = [](const CpuStatLine& a, const CpuStatLine& b) { return a.cpu < b.cpu; };
    if (!std::is_sorted(snap.cpus.begin(), snap.cpus.end(), by_cpu)) {
        std::sort(snap.cpus.begin(), snap.cpus.end(), by_cpu);
    }
    auto dup = std::adjacent_find(snap.cpus.begin(), snap.cpus.end(),
                                  [](const auto& a, const auto& b) { return a.cpu == b.cpu; });
    if (dup != snap.cpus.end()) {
        return fail(Status::BadData, "/proc/stat lists cpu" + std::to_string(dup->cpu) + " twice");
    }
    return snap;
}

Result<ProcStatReader> ProcStatReader::open(const std::filesystem::path& proc_root) {
    auto path = proc_root / "stat";
    UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return fail_errno(errno, "open " + path.string());
    return ProcStatReader{std::move(path), std::move(fd)};
}

Result<ProcStatSnapshot> ProcStatReader::read() {
    if (auto r = pread_whole(fd_.get(), buffer_, path_); !r) return std::unexpected(r.error());
    auto snap = parse_proc_stat(buffer_, cpus_);
    if (snap) cpus_ = snap->cpus.size();
    if (!snap) {
        auto e = snap.error();
        if (path_ != "/proc/stat") e.message += " (read from " + path_.string() + ")";
        return std::unexpected(e);
    }
    return snap;
}

}  // namespace monitor
