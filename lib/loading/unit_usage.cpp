#include "monitor/loading/unit_usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "monitor/text_file.hpp"  // trim_space
#include "monitor/unique_fd.hpp"

namespace monitor {

namespace {

// Deeper than any tree systemd or a container runtime makes; a bound for a hostile one.
constexpr int kMaxDepth = 32;

constexpr std::array<std::string_view, 5> kUnitSuffixes = {".service", ".scope", ".socket",
                                                           ".mount", ".swap"};

bool ends_with_any(std::string_view name, std::span<const std::string_view> suffixes) {
    return std::ranges::any_of(
        suffixes, [&](std::string_view s) { return name.size() > s.size() && name.ends_with(s); });
}

bool is_directory(const std::filesystem::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool present(const std::filesystem::path& p) {
    return ::access(p.c_str(), F_OK) == 0;
}

// A decimal number, with spaces around it or not.
std::optional<std::uint64_t> number(std::string_view text) {
    const auto v = trim_space(text);
    std::uint64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc{} || p != v.data() + v.size()) return std::nullopt;
    return n;
}

// The value of `key` in a "key value" line of `text` (cpu.stat).
std::optional<std::uint64_t> stat_value(std::string_view text, std::string_view key) {
    std::size_t at = 0;
    while (at < text.size()) {
        const auto end = std::min(text.find('\n', at), text.size());
        const auto line = text.substr(at, end - at);
        if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ') {
            return number(line.substr(key.size() + 1));
        }
        at = end + 1;
    }
    return std::nullopt;
}

}  // namespace

std::string_view cgroup_accounting_name(CgroupAccounting a) {
    return a == CgroupAccounting::V2 ? "cgroup2 cpu.stat" : "cgroup v1 cpuacct";
}

struct UnitUsage::State {
    struct Counters {
        std::uint64_t total = 0;  // nanoseconds
        std::uint64_t user = 0;
        std::uint64_t system = 0;
    };
    struct Entry {
        std::string unit;
        UniqueFd first;      // cpu.stat, or cpuacct.usage
        UniqueFd second;     // cpuacct.usage_user
        UniqueFd third;      // cpuacct.usage_sys
        int open_error = 0;  // why one of them did not open
        bool kept = false;   // its files stay open (within the budget), else opened each time
        std::uint64_t walk = 0;
        std::optional<Counters> last;
        bool has_interval = false;
        double cpu = 0, user = 0, system = 0;
        std::uint64_t first_seq = 0;      // the sample of its first reading in the window
        std::vector<std::uint64_t> ring;  // the total at each sample, by sequence number
    };

    std::filesystem::path root;
    CgroupAccounting accounting = CgroupAccounting::V2;
    std::size_t capacity = 2;  // samples kept: the window's intervals and one more
    std::vector<Clock::time_point> times;
    std::uint64_t seq = 0;  // samples taken
    std::uint64_t walk = 0;
    std::unordered_map<std::string, Entry> entries;  // by cgroup path
    std::array<char, 4096> buffer{};                 // cpu.stat has 3 to 10 lines
    std::size_t max_open_files = 0;
    std::size_t open_files = 0;  // those the kept entries hold

    std::size_t files_per_unit() const { return accounting == CgroupAccounting::V2 ? 1 : 3; }
    void open_files_of(const std::string& rel, Entry& e) const;
    void forget(const Entry& e) {
        if (e.kept) open_files -= files_per_unit();
    }

    void walk_tree();
    void found(const std::string& rel, std::string_view name);
    Result<Counters> read(const std::string& rel, const Entry& e);
    Result<std::string_view> read_file(const Entry& e, int fd, const std::string& rel,
                                       const char* name);
};

void UnitUsage::State::found(const std::string& rel, std::string_view name) {
    auto [it, added] = entries.try_emplace(rel);
    auto& e = it->second;
    e.walk = walk;
    if (!added) return;
    e.unit = ends_with_any(name, kUnitSuffixes) ? std::string(name) : rel;
    e.ring.assign(capacity, 0);
    // Past the budget (a machine of thousands of units, a low RLIMIT_NOFILE), a unit's files
    // are opened at each reading instead: slower, never a descriptor the daemon lacks.
    if (open_files + files_per_unit() <= max_open_files) {
        open_files_of(rel, e);
        e.kept = true;
        open_files += files_per_unit();
    }
}

void UnitUsage::State::open_files_of(const std::string& rel, Entry& e) const {
    const auto dir = root.string() + rel;
    e.open_error = 0;
    auto open_file = [&](UniqueFd& fd, const char* file) {
        fd.reset(::open((dir + file).c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd && e.open_error == 0) e.open_error = errno;
    };
    if (accounting == CgroupAccounting::V2) {
        open_file(e.first, "/cpu.stat");
    } else {
        open_file(e.first, "/cpuacct.usage");
        open_file(e.second, "/cpuacct.usage_user");
        open_file(e.third, "/cpuacct.usage_sys");
    }
}

// The whole of one of an entry's files, kept open, from offset 0.
Result<std::string_view> UnitUsage::State::read_file(const Entry& e, int fd, const std::string& rel,
                                                     const char* name) {
    const auto error = [&](int err) {
        if (err == ENOENT || err == ENODEV) {
            return fail(Status::NoDev, root.string() + rel + name + ": the cgroup is gone");
        }
        return fail_errno(err, "read " + root.string() + rel + name);
    };
    if (fd < 0) return error(e.open_error);
    for (;;) {
        const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return error(errno);
        if (static_cast<std::size_t>(n) == buffer.size()) {
            return fail(Status::BadData, root.string() + rel + name + ": larger than " +
                                             std::to_string(buffer.size()) + " bytes");
        }
        return std::string_view(buffer.data(), static_cast<std::size_t>(n));
    }
}

void UnitUsage::State::walk_tree() {
    // Depth first, with a stack of the directories still to read: (path below the root, its
    // name, its depth).
    struct Pending {
        std::string rel;
        std::string name;
        int depth = 0;
    };
    std::vector<Pending> stack{{}};
    std::string dir;
    while (!stack.empty()) {
        const Pending p = std::move(stack.back());
        stack.pop_back();
        dir = root.string();
        dir += p.rel;
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr) continue;  // gone since its parent was read
        bool has_subdirectory = false;
        // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and d is ours
        while (const dirent* ent = ::readdir(d)) {
            const std::string_view name = ent->d_name;
            if (name == "." || name == "..") continue;
            if (ent->d_type != DT_DIR &&
                (ent->d_type != DT_UNKNOWN || !is_directory(dir + "/" + std::string(name)))) {
                continue;
            }
            has_subdirectory = true;
            std::string child = p.rel;
            child += '/';
            child += name;
            if (ends_with_any(name, kUnitSuffixes)) {
                found(child, name);
            } else if (p.depth < kMaxDepth) {
                stack.push_back({std::move(child), std::string(name), p.depth + 1});
            }
        }
        ::closedir(d);
        // A cgroup no unit names is an entry when nothing lies below it; a slice never is
        // (its time is its units'), nor the root.
        if (!has_subdirectory && !p.rel.empty() && !p.name.ends_with(".slice")) {
            found(p.rel, p.name);
        }
    }
}

Result<UnitUsage::State::Counters> UnitUsage::State::read(const std::string& rel, const Entry& e) {
    if (accounting == CgroupAccounting::V2) {
        auto text = read_file(e, e.first.get(), rel, "/cpu.stat");
        if (!text) return std::unexpected(text.error());
        const auto usage = stat_value(*text, "usage_usec");
        const auto user = stat_value(*text, "user_usec");
        const auto system = stat_value(*text, "system_usec");
        if (!usage || !user || !system) {
            return fail(Status::BadData,
                        root.string() + rel +
                            "/cpu.stat: no usage_usec, user_usec and system_usec lines with "
                            "numbers");
        }
        return Counters{*usage * 1000, *user * 1000, *system * 1000};
    }
    // cpuacct.usage is the tasks' run time; since Linux 5.15 the user and system parts are
    // the ticks' split of it (a tick's granularity), which need not add up to it.
    Counters c;
    for (auto [fd, name, out] : {std::tuple{e.first.get(), "/cpuacct.usage", &c.total},
                                 std::tuple{e.second.get(), "/cpuacct.usage_user", &c.user},
                                 std::tuple{e.third.get(), "/cpuacct.usage_sys", &c.system}}) {
        auto text = read_file(e, fd, rel, name);
        if (!text) return std::unexpected(text.error());
        const auto n = number(*text);
        if (!n) {
            return fail(Status::BadData,
                        root.string() + rel + name + ": not a number of nanoseconds");
        }
        *out = *n;
    }
    return c;
}

UnitUsage::UnitUsage(std::unique_ptr<State> state) : s_(std::move(state)) {}
UnitUsage::UnitUsage(UnitUsage&&) noexcept = default;
UnitUsage& UnitUsage::operator=(UnitUsage&&) noexcept = default;
UnitUsage::~UnitUsage() = default;

Result<UnitUsage> UnitUsage::open(const std::filesystem::path& cgroup_root,
                                  std::size_t window_seconds, std::size_t max_open_files) {
    auto s = std::make_unique<State>();
    if (max_open_files == 0) {
        rlimit nofile{};
        max_open_files =
            ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                ? static_cast<std::size_t>(nofile.rlim_cur) / 4
                : 65536;
        max_open_files = std::clamp<std::size_t>(max_open_files, 16, 65536);
    }
    s->max_open_files = max_open_files;
    if (present(cgroup_root / "cgroup.controllers")) {
        s->root = cgroup_root;
    } else if (present(cgroup_root / "unified" / "cgroup.controllers")) {
        s->root = cgroup_root / "unified";
    } else {
        for (const char* name : {"cpuacct", "cpu,cpuacct"}) {
            if (present(cgroup_root / name / "cpuacct.usage_user")) {
                s->root = cgroup_root / name;
                s->accounting = CgroupAccounting::V1Cpuacct;
                break;
            }
        }
        if (s->root.empty()) {
            return fail(Status::NoDev,
                        cgroup_root.string() +
                            ": no cgroup2 tree (cgroup.controllers, there or in unified/) and no "
                            "cgroup v1 cpuacct hierarchy (cpuacct/cpuacct.usage_user): no CPU "
                            "time per unit on this machine");
        }
    }
    s->capacity = std::max<std::size_t>(window_seconds, 1) + 1;
    s->times.assign(s->capacity, {});
    return UnitUsage(std::move(s));
}

Result<void> UnitUsage::sample(Clock::time_point now) {
    auto& s = *s_;
    ++s.walk;
    s.walk_tree();
    std::erase_if(s.entries, [&](const auto& kv) {
        if (kv.second.walk == s.walk) return false;
        s.forget(kv.second);
        return true;
    });

    const auto at = s.seq % s.capacity;
    const bool has_previous = s.seq > 0;
    const auto previous = has_previous ? s.times[(s.seq - 1) % s.capacity] : now;
    s.times[at] = now;
    std::optional<Error> first_error;
    for (auto it = s.entries.begin(); it != s.entries.end();) {
        auto& e = it->second;
        if (!e.kept) {
            s.open_files_of(it->first, e);
            // Files given back by units gone are taken by those that had none kept.
            if (s.open_files + s.files_per_unit() <= s.max_open_files) {
                e.kept = true;
                s.open_files += s.files_per_unit();
            }
        }
        auto c = s.read(it->first, e);
        if (!e.kept) {
            e.first.reset();
            e.second.reset();
            e.third.reset();
        }
        if (!c) {
            if (c.error().status != Status::NoDev && !first_error) first_error = c.error();
            s.forget(e);
            it = s.entries.erase(it);
            continue;
        }
        e.has_interval = false;
        if (e.last && has_previous && now > previous && c->total >= e.last->total) {
            const double ns = std::chrono::duration<double, std::nano>(now - previous).count();
            auto pct = [&](std::uint64_t a, std::uint64_t b) {
                return b >= a ? static_cast<double>(b - a) * 100 / ns : 0.0;
            };
            e.cpu = pct(e.last->total, c->total);
            e.user = pct(e.last->user, c->user);
            e.system = pct(e.last->system, c->system);
            e.has_interval = true;
        } else {
            // The first reading, or counters that went back (a cgroup made again under the
            // same name): the window starts again here.
            e.first_seq = s.seq;
        }
        e.last = *c;
        e.ring[at] = c->total;
        ++it;
    }
    ++s.seq;
    if (first_error) return std::unexpected(*first_error);
    return {};
}

std::vector<UnitLoad> UnitUsage::top(std::size_t n) const {
    const auto& s = *s_;
    std::vector<UnitLoad> out;
    if (s.seq == 0 || n == 0) return out;
    const auto newest = s.seq - 1;
    for (const auto& [cgroup, e] : s.entries) {
        if (!e.has_interval && e.first_seq == newest) continue;
        UnitLoad u;
        u.unit = e.unit;
        u.cgroup = cgroup.empty() ? "/" : cgroup;
        if (e.has_interval) {
            u.cpu = e.cpu;
            u.user = e.user;
            u.system = e.system;
        }
        const auto oldest = std::max(e.first_seq, s.seq > s.capacity ? s.seq - s.capacity : 0);
        for (auto q = oldest + 1; q <= newest; ++q) {
            const auto a = e.ring[(q - 1) % s.capacity], b = e.ring[q % s.capacity];
            const auto dt = s.times[q % s.capacity] - s.times[(q - 1) % s.capacity];
            if (b < a || dt <= Clock::duration::zero()) continue;
            u.window_max =
                std::max(u.window_max, static_cast<double>(b - a) * 100 /
                                           std::chrono::duration<double, std::nano>(dt).count());
        }
        const auto span = s.times[newest % s.capacity] - s.times[oldest % s.capacity];
        const auto a = e.ring[oldest % s.capacity], b = e.ring[newest % s.capacity];
        if (span > Clock::duration::zero() && b >= a) {
            u.window_avg = static_cast<double>(b - a) * 100 /
                           std::chrono::duration<double, std::nano>(span).count();
        }
        if (u.cpu == 0 && u.window_avg == 0 && u.window_max == 0) continue;
        out.push_back(std::move(u));
    }
    auto busier = [](const UnitLoad& a, const UnitLoad& b) {
        if (a.cpu != b.cpu) return a.cpu > b.cpu;
        if (a.window_avg != b.window_avg) return a.window_avg > b.window_avg;
        return a.cgroup < b.cgroup;
    };
    if (out.size() > n) {
        std::ranges::partial_sort(out, out.begin() + static_cast<std::ptrdiff_t>(n), busier);
        out.resize(n);
    } else {
        std::ranges::sort(out, busier);
    }
    return out;
}

std::size_t UnitUsage::unit_count() const {
    return s_->entries.size();
}
std::size_t UnitUsage::open_files() const {
    return s_->open_files;
}
CgroupAccounting UnitUsage::accounting() const {
    return s_->accounting;
}
const std::filesystem::path& UnitUsage::root() const {
    return s_->root;
}

void UnitUsage::set_window(std::size_t seconds) {
    auto& s = *s_;
    const std::size_t capacity = std::max<std::size_t>(seconds, 1) + 1;
    if (capacity == s.capacity) return;
    // The newest readings that both windows hold, renumbered from 0.
    const std::uint64_t keep = std::min<std::uint64_t>({s.seq, s.capacity, capacity});
    const std::uint64_t from = s.seq - keep;
    std::vector<Clock::time_point> times(capacity);
    for (std::uint64_t q = from; q < s.seq; ++q) times[q - from] = s.times[q % s.capacity];
    for (auto& [cgroup, e] : s.entries) {
        std::vector<std::uint64_t> ring(capacity, 0);
        const std::uint64_t first = std::max(e.first_seq, from);
        for (std::uint64_t q = first; q < s.seq; ++q) ring[q - from] = e.ring[q % s.capacity];
        e.ring = std::move(ring);
        e.first_seq = first - from;
    }
    s.times = std::move(times);
    s.capacity = capacity;
    s.seq = keep;
}

}  // namespace monitor
