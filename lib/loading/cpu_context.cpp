#include "monitor/loading/cpu_context.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "monitor/loading/pressure.hpp"
#include "monitor/text_file.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor {

namespace {

// The words of a line, split at spaces and tabs.
std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
}

// Calls fn(line, number) for each line of `text` (numbered from 1); stops when fn is false.
template <class Fn>
void each_line(std::string_view text, Fn fn) {
    std::size_t number = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        const auto line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        if (!fn(line, ++number)) return;
    }
}

std::string bad_line(std::string_view file, std::size_t number, std::string_view line,
                     std::string_view what) {
    return fmt::format("{}: line {} is not {}: \"{}\"", file, number, what,
                       line.substr(0, std::min<std::size_t>(line.size(), 80)));
}

// /proc/interrupts and /proc/softirqs: a header naming the CPUs of the columns, then a row
// per source with a count per column (some of /proc/interrupts' rows, ERR and MIS, have one
// count for the machine).
struct Table {
    struct Row {
        std::string source;
        std::string description;
        std::vector<std::uint64_t> counts;  // per column; one for a machine-wide row
    };
    std::vector<int> cpus;  // the CPU of each column
    std::vector<Row> rows;
};

struct Parsed {
    std::optional<std::uint64_t> running, blocked;
    std::optional<CpuPressureLine> psi;
    std::map<int, std::uint64_t> run_delay_ns;  // schedstat, per CPU
    std::map<int, double> frequency_mhz;
    std::optional<Table> interrupts, softirqs;
    std::vector<std::string> unavailable;
};

void parse_stat(std::string_view text, Parsed& out) {
    each_line(text, [&](std::string_view line, std::size_t number) {
        for (auto [key, field] :
             {std::pair{"procs_running", &out.running}, std::pair{"procs_blocked", &out.blocked}}) {
            if (!line.starts_with(key) || line.size() == std::string_view{key}.size() ||
                line[std::string_view{key}.size()] != ' ') {
                continue;
            }
            auto v = parse_unsigned(trim_space(line.substr(std::string_view{key}.size())));
            if (!v) {
                out.unavailable.push_back(bad_line("/proc/stat", number, line, "a count"));
                return false;
            }
            *field = *v;
        }
        return true;
    });
}

void parse_pressure(std::string_view text, Parsed& out) {
    if (text.empty()) return;  // a kernel without PSI: said when the file would not open
    auto psi = parse_cpu_pressure(text, "/proc/pressure/cpu");
    if (psi) {
        out.psi = *psi;
    } else {
        out.unavailable.push_back(std::move(psi.error().message));
    }
}

void parse_schedstat(std::string_view text, Parsed& out) {
    std::map<int, std::uint64_t> delays;
    bool ok = true;
    each_line(text, [&](std::string_view line, std::size_t number) {
        if (!line.starts_with("cpu")) return true;
        const auto w = words(line);
        int cpu = -1;
        auto [p, ec] = std::from_chars(w[0].data() + 3, w[0].data() + w[0].size(), cpu);
        // cpuN, then 9 fields (version 15 on): the eighth is the run-queue wait, in ns.
        auto delay = w.size() >= 10 ? parse_unsigned(w[8]) : std::nullopt;
        if (ec != std::errc{} || p != w[0].data() + w[0].size() || cpu < 0 || !delay) {
            out.unavailable.push_back(
                bad_line("/proc/schedstat", number, line, "\"cpuN\" and 9 counts"));
            ok = false;
            return false;
        }
        delays[cpu] = *delay;
        return true;
    });
    if (ok) out.run_delay_ns = std::move(delays);
}

std::optional<Table> parse_table(std::string_view text, std::string_view file,
                                 std::vector<std::string>& unavailable) {
    Table table;
    bool ok = true;
    each_line(text, [&](std::string_view line, std::size_t number) {
        if (number == 1) {
            for (auto w : words(line)) {
                int cpu = -1;
                auto [p, ec] = std::from_chars(w.data() + std::min<std::size_t>(3, w.size()),
                                               w.data() + w.size(), cpu);
                if (!w.starts_with("CPU") || ec != std::errc{} || p != w.data() + w.size() ||
                    cpu < 0) {
                    unavailable.push_back(bad_line(file, number, line, "a header of CPUn"));
                    ok = false;
                    return false;
                }
                table.cpus.push_back(cpu);
            }
            return true;
        }
        if (trim_space(line).empty()) return true;
        const auto colon = line.find(':');
        const auto source = colon == std::string_view::npos ? std::string_view{}
                                                            : trim_space(line.substr(0, colon));
        if (source.empty() || source.find(' ') != std::string_view::npos) {
            unavailable.push_back(bad_line(file, number, line, "\"SOURCE: counts\""));
            ok = false;
            return false;
        }
        Table::Row row{std::string(source), {}, {}};
        const auto w = words(line.substr(colon + 1));
        std::size_t i = 0;
        for (; i < w.size() && i < table.cpus.size(); ++i) {
            auto v = parse_unsigned(w[i]);
            if (!v) break;
            row.counts.push_back(*v);
        }
        if (row.counts.empty() ||
            (row.counts.size() != 1 && row.counts.size() != table.cpus.size())) {
            unavailable.push_back(bad_line(file, number, line, "a count per CPU"));
            ok = false;
            return false;
        }
        for (; i < w.size(); ++i) {
            if (!row.description.empty()) row.description += ' ';
            row.description += w[i];
        }
        table.rows.push_back(std::move(row));
        return true;
    });
    if (!ok) return std::nullopt;
    if (table.cpus.empty()) {
        if (!text.empty()) unavailable.push_back(fmt::format("{}: no header of CPUs", file));
        return std::nullopt;
    }
    return table;
}

// The texts of one reading, where they are (CpuContextText's, or the files' own buffers: a
// megabyte each at 1,024 CPUs, not copied).
struct TextViews {
    std::string_view stat, pressure, schedstat, interrupts, softirqs;
    std::vector<std::pair<int, std::string_view>> frequency_khz;
};

Parsed parse(const TextViews& text) {
    Parsed out;
    parse_stat(text.stat, out);
    parse_pressure(text.pressure, out);
    parse_schedstat(text.schedstat, out);
    out.interrupts = parse_table(text.interrupts, "/proc/interrupts", out.unavailable);
    out.softirqs = parse_table(text.softirqs, "/proc/softirqs", out.unavailable);
    for (const auto& [cpu, khz] : text.frequency_khz) {
        if (auto v = parse_unsigned(trim_space(khz))) {
            out.frequency_mhz[cpu] = static_cast<double>(*v) / 1000.0;
        }
    }
    return out;
}

Parsed parse(const CpuContextText& text) {
    TextViews v{text.stat, text.pressure, text.schedstat, text.interrupts, text.softirqs, {}};
    for (const auto& [cpu, khz] : text.frequency_khz) v.frequency_khz.emplace_back(cpu, khz);
    return parse(v);
}

// The growth of a count the kernel keeps in an unsigned int per CPU (and prints with %u):
// it wraps at 2^32. A count that went back otherwise (a counter reset) grew by nothing known.
std::uint64_t growth(std::uint64_t now, std::uint64_t before) {
    if (now >= before) return now - before;
    if (before <= 0xffffffffULL) return (std::uint64_t{1} << 32) - before + now;
    return 0;
}

// The rates of a table between two readings: per source (busiest first), per CPU, in all.
struct TableRates {
    std::vector<InterruptRate> sources;
    std::map<int, double> per_cpu;
    std::map<int, std::pair<double, std::string>> busiest;  // per CPU: its top source
    double total = 0;
};

TableRates rates(const Table& now, const Table& before, double seconds) {
    TableRates out;
    // Where each column of `now` was before (npos: a CPU that came online has no rate yet),
    // and the per-column sums: vectors, not maps, for the cells of 1,024 CPUs.
    constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::unordered_map<int, std::size_t> column_before;
    for (std::size_t c = 0; c < before.cpus.size(); ++c) column_before[before.cpus[c]] = c;
    std::vector<std::size_t> from(now.cpus.size(), kNone);
    for (std::size_t c = 0; c < now.cpus.size(); ++c) {
        if (auto b = column_before.find(now.cpus[c]); b != column_before.end()) from[c] = b->second;
    }
    std::vector<double> per_column(now.cpus.size(), 0.0);
    std::vector<std::pair<double, const std::string*>> top(now.cpus.size(), {0.0, nullptr});
    std::unordered_map<std::string_view, const Table::Row*> row_before;
    for (const auto& r : before.rows) row_before.emplace(r.source, &r);
    for (const auto& row : now.rows) {
        auto it = row_before.find(row.source);
        if (it == row_before.end()) continue;
        const auto& old = *it->second;
        std::uint64_t sum = 0;
        if (row.counts.size() == 1 && old.counts.size() == 1 && now.cpus.size() != 1) {
            sum = growth(row.counts[0], old.counts[0]);  // one count for the machine
        } else if (row.counts.size() == now.cpus.size() &&
                   old.counts.size() == before.cpus.size()) {
            for (std::size_t c = 0; c < row.counts.size(); ++c) {
                if (from[c] == kNone) continue;
                const std::uint64_t g = growth(row.counts[c], old.counts[from[c]]);
                if (g == 0) continue;
                sum += g;
                const double rate = static_cast<double>(g) / seconds;
                per_column[c] += rate;
                if (rate > top[c].first) top[c] = {rate, &row.source};
            }
        }
        if (sum == 0) continue;
        const double rate = static_cast<double>(sum) / seconds;
        out.total += rate;
        out.sources.push_back({row.source, row.description, rate});
    }
    for (std::size_t c = 0; c < now.cpus.size(); ++c) {
        out.per_cpu[now.cpus[c]] = per_column[c];
        if (top[c].second != nullptr) out.busiest[now.cpus[c]] = {top[c].first, *top[c].second};
    }
    std::stable_sort(out.sources.begin(), out.sources.end(),
                     [](const auto& a, const auto& b) { return a.per_second > b.per_second; });
    return out;
}

CpuContextSample combine(const Parsed& now, const Parsed* before, double seconds) {
    CpuContextSample out;
    out.procs_running = now.running;
    out.procs_blocked = now.blocked;
    out.unavailable = now.unavailable;
    if (now.psi) {
        out.pressure_avg10 = now.psi->avg10;
        out.pressure_avg60 = now.psi->avg60;
        out.pressure_avg300 = now.psi->avg300;
    }
    std::map<int, CpuContextFigures> cpus;
    auto cpu = [&](int n) -> CpuContextFigures& {
        auto& f = cpus[n];
        f.cpu = n;
        return f;
    };
    for (const auto& [n, mhz] : now.frequency_mhz) cpu(n).frequency_mhz = mhz;
    for (const auto& [n, delay] : now.run_delay_ns) (void)cpu(n);
    if (before != nullptr && seconds > 0) {
        out.seconds = seconds;
        if (now.psi && before->psi && now.psi->total_us >= before->psi->total_us) {
            out.pressure_some =
                std::min(1.0, static_cast<double>(now.psi->total_us - before->psi->total_us) / 1e6 /
                                  seconds);
        }
        if (!now.run_delay_ns.empty() && !before->run_delay_ns.empty()) {
            double sum = 0;
            for (const auto& [n, delay] : now.run_delay_ns) {
                auto b = before->run_delay_ns.find(n);
                if (b == before->run_delay_ns.end() || delay < b->second) continue;
                const double waiting = static_cast<double>(delay - b->second) / 1e9 / seconds;
                cpu(n).waiting = waiting;
                sum += waiting;
            }
            out.waiting = sum;
        }
        if (now.interrupts && before->interrupts) {
            auto r = rates(*now.interrupts, *before->interrupts, seconds);
            out.interrupts = r.total;
            for (const auto& [n, rate] : r.per_cpu) cpu(n).interrupts = rate;
            for (const auto& [n, top] : r.busiest) cpu(n).top_interrupt = top.second;
            out.interrupt_sources = std::move(r.sources);
        }
        if (now.softirqs && before->softirqs) {
            auto r = rates(*now.softirqs, *before->softirqs, seconds);
            out.softirqs = r.total;
            for (const auto& [n, rate] : r.per_cpu) cpu(n).softirqs = rate;
            out.softirq_kinds = std::move(r.sources);
        }
    }
    out.cpus.reserve(cpus.size());
    for (auto& [n, f] : cpus) out.cpus.push_back(std::move(f));
    return out;
}

}  // namespace

CpuContextSample CpuContext::figure(const CpuContextText& now, const CpuContextText* previous,
                                    double seconds) {
    const Parsed parsed = parse(now);
    if (previous == nullptr) return combine(parsed, nullptr, 0);
    const Parsed before = parse(*previous);
    return combine(parsed, &before, seconds);
}

struct CpuContext::State {
    struct File {
        std::string name;  // as the messages say it: "/proc/pressure/cpu"
        UniqueFd fd;
        std::string text;
    };
    File stat, pressure, schedstat, interrupts, softirqs;
    std::filesystem::path cpu_dir;  // <sys>/devices/system/cpu
    std::map<int, File> frequency;
    std::vector<std::string> missing;  // what the machine lacks, found at open
    std::vector<int> cpus_seen;        // the CPUs of the last reading, to look for cpufreq
    std::optional<Parsed> before;
    std::chrono::steady_clock::time_point before_at;
};

namespace {

// Opens `root/rel`; a file that is not there is said in `missing` with `why`.
UniqueFd open_or_note(const std::filesystem::path& root, std::string_view rel,
                      std::string_view shown, std::string_view why,
                      std::vector<std::string>& missing) {
    UniqueFd fd(::open((root / rel).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        missing.push_back(
            fmt::format("{}: {}{}{}", shown, errno_message(errno), why.empty() ? "" : " ", why));
    }
    return fd;
}

}  // namespace

Result<CpuContext> CpuContext::open(const std::filesystem::path& proc_root,
                                    const std::filesystem::path& sys_root) {
    auto s = std::make_unique<State>();
    auto file = [&](State::File& f, std::string_view rel, std::string_view why) {
        f.name = fmt::format("/proc/{}", rel);
        f.fd = open_or_note(proc_root, rel, f.name, why, s->missing);
    };
    file(s->stat, "stat", "");
    file(s->pressure, "pressure/cpu", "(a kernel without CONFIG_PSI, or booted with psi=0)");
    file(s->schedstat, "schedstat", "(a kernel without CONFIG_SCHEDSTATS)");
    file(s->interrupts, "interrupts", "");
    file(s->softirqs, "softirqs", "");
    s->cpu_dir = sys_root / "devices/system/cpu";
    if (!s->stat.fd && !s->pressure.fd && !s->schedstat.fd && !s->interrupts.fd &&
        !s->softirqs.fd) {
        return fail(Status::BadArg,
                    fmt::format("{}: none of stat, pressure/cpu, schedstat, interrupts and "
                                "softirqs can be read there (not a procfs?)",
                                proc_root.string()));
    }
    return CpuContext(std::move(s));
}

CpuContext::CpuContext(std::unique_ptr<State> state) : state_(std::move(state)) {}
CpuContext::CpuContext(CpuContext&&) noexcept = default;
CpuContext& CpuContext::operator=(CpuContext&&) noexcept = default;
CpuContext::~CpuContext() = default;

void CpuContext::forget() {
    state_->before.reset();
}

Result<CpuContextSample> CpuContext::sample(std::chrono::steady_clock::time_point now) {
    State& s = *state_;
    std::vector<std::string> problems;
    TextViews text;
    auto read = [&](State::File& f) -> std::string_view {
        if (!f.fd) return {};
        if (auto r = pread_whole(f.fd.get(), f.text, f.name); !r) {
            problems.push_back(r.error().message);
            return {};
        }
        return f.text;
    };
    text.stat = read(s.stat);
    text.pressure = read(s.pressure);
    text.schedstat = read(s.schedstat);
    text.interrupts = read(s.interrupts);
    text.softirqs = read(s.softirqs);
    for (auto& [cpu, f] : s.frequency) text.frequency_khz.emplace_back(cpu, read(f));

    Parsed parsed = parse(text);
    // The CPUs this reading knows: cpufreq is looked for when they change (hotplug), not at
    // every sample (a machine without cpufreq would fail an open per CPU each second).
    std::vector<int> cpus;
    cpus.reserve(parsed.run_delay_ns.size());
    for (const auto& [cpu, d] : parsed.run_delay_ns) cpus.push_back(cpu);
    if (cpus.empty() && parsed.interrupts) cpus = parsed.interrupts->cpus;
    std::sort(cpus.begin(), cpus.end());
    if (cpus != s.cpus_seen) {
        s.cpus_seen = cpus;
        for (int cpu : cpus) {
            if (s.frequency.contains(cpu)) continue;
            UniqueFd fd(
                ::open((s.cpu_dir / fmt::format("cpu{}/cpufreq/scaling_cur_freq", cpu)).c_str(),
                       O_RDONLY | O_CLOEXEC));
            if (!fd) continue;
            auto& f = s.frequency[cpu];
            f.name = fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/scaling_cur_freq", cpu);
            f.fd = std::move(fd);
            if (pread_whole(f.fd.get(), f.text, f.name)) {
                if (auto v = parse_unsigned(trim_space(f.text))) {
                    parsed.frequency_mhz[cpu] = static_cast<double>(*v) / 1000.0;
                }
            }
        }
    }
    std::size_t readable = text.frequency_khz.size();  // the files read, the new ones not
    for (const auto* f : {&s.stat, &s.pressure, &s.schedstat, &s.interrupts, &s.softirqs}) {
        if (f->fd) ++readable;
    }
    if (!problems.empty() && problems.size() == readable) {
        return fail(Status::IoErr, problems.front());  // nothing could be read
    }
    const double seconds =
        s.before ? std::chrono::duration<double>(now - s.before_at).count() : 0.0;
    CpuContextSample out = combine(parsed, s.before && seconds > 0 ? &*s.before : nullptr, seconds);
    if (s.frequency.empty() && !cpus.empty()) {
        out.unavailable.insert(out.unavailable.begin(),
                               "/sys/devices/system/cpu/cpuN/cpufreq: no cpufreq driver (a "
                               "virtual machine, or none loaded): no clock frequencies");
    }
    out.unavailable.insert(out.unavailable.begin(), problems.begin(), problems.end());
    out.unavailable.insert(out.unavailable.begin(), s.missing.begin(), s.missing.end());
    s.before = std::move(parsed);
    s.before_at = now;
    return out;
}

}  // namespace monitor
