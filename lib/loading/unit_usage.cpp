#include "monitor/loading/unit_usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <ranges>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "monitor/loading/pressure.hpp"
#include "monitor/text_file.hpp"  // trim_space, read_text_file
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

std::string unit_of_cgroup(std::string_view cgroup) {
    for (auto part : cgroup | std::views::split('/')) {
        const std::string_view name(part.begin(), part.end());
        if (ends_with_any(name, kUnitSuffixes)) return std::string(name);
    }
    if (cgroup.empty() || cgroup == "/" || cgroup.ends_with(".slice")) return {};
    return std::string(cgroup);
}

std::optional<std::string> cgroup_of_process(std::string_view proc_cgroup,
                                             CgroupAccounting accounting) {
    // "hierarchy-ID:controller-list:path" a line (cgroups(7)); cgroup2's has no controllers.
    for (auto line : proc_cgroup | std::views::split('\n')) {
        const std::string_view l(line.begin(), line.end());
        const auto first = l.find(':');
        const auto second = first == l.npos ? l.npos : l.find(':', first + 1);
        if (second == l.npos) continue;
        const auto controllers = l.substr(first + 1, second - first - 1);
        const auto path = l.substr(second + 1);
        if (accounting == CgroupAccounting::V2) {
            if (controllers.empty() && l.substr(0, first) == "0") return std::string(path);
            continue;
        }
        for (auto c : controllers | std::views::split(',')) {
            if (std::string_view(c.begin(), c.end()) == "cpuacct") return std::string(path);
        }
    }
    return std::nullopt;
}

std::string_view cgroup_accounting_name(CgroupAccounting a) {
    return a == CgroupAccounting::V2 ? "cgroup2 cpu.stat" : "cgroup v1 cpuacct";
}

// How often a cgroup is read though nothing said it grew beyond the tolerance: every 30th
// sample, each at its own (so that a thirtieth of them are read at each).
constexpr std::uint64_t kRefreshSamples = 30;

struct UnitUsage::State {
    struct Counters {
        std::uint64_t total = 0;  // nanoseconds
        std::uint64_t user = 0;
        std::uint64_t system = 0;
    };
    // A directory of the tree: a unit (reported), or a directory walked into (a slice, a
    // cgroup no unit names with others below it), read for its total alone.
    struct Node {
        const std::string* rel = nullptr;  // its key: the path below the root
        std::string unit;                  // the name it is reported under; empty: walked into
        std::vector<Node*> children;       // as of the last walk
        UniqueFd first;                    // cpu.stat, or cpuacct.usage
        UniqueFd second;                   // cpuacct.usage_user
        UniqueFd third;                    // cpuacct.usage_sys
        int open_error = 0;                // why one of them did not open
        std::size_t files = 0;  // those kept open, within the budget (0: opened each time)
        std::uint64_t walk = 0;
        std::uint64_t stagger = 0;  // which of kRefreshSamples' samples refreshes it
        // Its last reading: the counters, when, at which sample.
        std::optional<Counters> last;
        Clock::time_point last_time{};
        std::uint64_t read_seq = 0;
        // At this sample: read or not, and how much its total grew since the last reading
        // (nullopt: no previous reading, or counters that went back).
        bool read_now = false;
        // Not read at a sample where it may have grown (by less than the tolerance): its
        // next reading's growth is spread back to its last reading.
        bool pending = false;
        bool gone = false;  // its files read ENOENT or ENODEV, or could not be parsed
        std::optional<std::uint64_t> grew;
        std::uint64_t active_seq = 0;  // the last sample at which its total grew
        // A unit's figures.
        bool has_interval = false;
        double cpu = 0, user = 0, system = 0;
        std::uint64_t first_seq = 0;      // the sample of its first reading in the window
        std::vector<std::uint64_t> ring;  // the total at each sample, by sequence number

        bool reported() const { return !unit.empty(); }
    };

    std::filesystem::path root;
    CgroupAccounting accounting = CgroupAccounting::V2;
    std::size_t capacity = 2;  // samples kept: the window's intervals and one more
    std::vector<Clock::time_point> times;
    std::uint64_t seq = 0;  // samples taken
    std::uint64_t walk = 0;
    std::uint64_t next_stagger = 0;
    std::unordered_map<std::string, Node> nodes;  // by cgroup path
    std::vector<Node*> top_level;                 // the root's directories
    std::size_t units = 0;                        // the nodes reported
    std::size_t reads = 0;                        // the nodes the last sample read
    std::array<char, 4096> buffer{};              // cpu.stat has 3 to 10 lines
    std::size_t max_open_files = 0;
    std::size_t open_files = 0;  // those the nodes keep
    // Directories made, removed or renamed in those the walk reads, from inotify (cgroupfs
    // reports mkdir, rmdir and rename): the tree is walked again only then. Without it (no
    // inotify instance or watch left for the user), at every sample.
    UniqueFd inotify;
    bool watching = false;
    bool changed = true;

    bool tree_changed();

    std::size_t files_of(const Node& n) const {
        return accounting == CgroupAccounting::V2 || !n.reported() ? 1 : 3;
    }
    void close_files(Node& n) {
        open_files -= n.files;
        n.files = 0;
        n.first.reset();
        n.second.reset();
        n.third.reset();
    }
    void open_files_of(Node& n) const;

    void walk_tree();
    Node& found(std::string rel);
    void set_unit(Node& n, std::string unit);
    std::optional<Error> read_node(Node& n, Clock::time_point now);
    Result<Counters> read(const Node& n);
    Result<std::string_view> read_file(const Node& n, int fd, const char* name);
};

UnitUsage::State::Node& UnitUsage::State::found(std::string rel) {
    auto [it, added] = nodes.try_emplace(std::move(rel));
    auto& n = it->second;
    if (added) {
        n.rel = &it->first;
        n.stagger = next_stagger++;
    }
    n.walk = walk;
    return n;
}

// A directory's role, from this walk: a unit (its name), or a directory walked into (""). A
// change starts its readings again: a unit's counters are three files on v1, not one.
void UnitUsage::State::set_unit(Node& n, std::string unit) {
    if (n.unit == unit) return;
    close_files(n);
    n.last.reset();
    n.unit = std::move(unit);
    if (n.reported()) {
        n.ring.assign(capacity, 0);
    } else {
        n.ring.clear();
        n.has_interval = false;
    }
}

void UnitUsage::State::open_files_of(Node& n) const {
    const auto dir = root.string() + *n.rel;
    n.open_error = 0;
    auto open_file = [&](UniqueFd& fd, const char* file) {
        fd.reset(::open((dir + file).c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd && n.open_error == 0) n.open_error = errno;
    };
    if (accounting == CgroupAccounting::V2) {
        open_file(n.first, "/cpu.stat");
        return;
    }
    open_file(n.first, "/cpuacct.usage");
    if (n.reported()) {
        open_file(n.second, "/cpuacct.usage_user");
        open_file(n.third, "/cpuacct.usage_sys");
    }
}

// The whole of one of a node's files, kept open, from offset 0.
Result<std::string_view> UnitUsage::State::read_file(const Node& n, int fd, const char* name) {
    const auto error = [&](int err) {
        if (err == ENOENT || err == ENODEV) {
            return fail(Status::NoDev, root.string() + *n.rel + name + ": the cgroup is gone");
        }
        return fail_errno(err, "read " + root.string() + *n.rel + name);
    };
    if (fd < 0) return error(n.open_error);
    for (;;) {
        const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return error(errno);
        if (static_cast<std::size_t>(got) == buffer.size()) {
            return fail(Status::BadData, root.string() + *n.rel + name + ": larger than " +
                                             std::to_string(buffer.size()) + " bytes");
        }
        return std::string_view(buffer.data(), static_cast<std::size_t>(got));
    }
}

// Whether a directory came or went since the last walk (the events read and dropped: the
// walk reads the tree again whichever it was).
bool UnitUsage::State::tree_changed() {
    if (!watching) return true;
    alignas(inotify_event) std::array<char, 4096> events{};
    for (;;) {
        const ssize_t got = ::read(inotify.get(), events.data(), events.size());
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;  // EAGAIN: none left
        for (std::size_t at = 0; at + sizeof(inotify_event) <= static_cast<std::size_t>(got);) {
            inotify_event ev{};
            std::memcpy(&ev, events.data() + at, sizeof ev);
            // A cgroup's files are the kernel's: only directories (or a lost event) count.
            if ((ev.mask & (IN_ISDIR | IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
                changed = true;
            }
            at += sizeof(inotify_event) + ev.len;
        }
    }
    const bool was = changed;
    changed = false;
    return was;
}

void UnitUsage::State::walk_tree() {
    // Depth first, with a stack of the directories still to read (none: the root) and their
    // depth.
    struct Pending {
        Node* node = nullptr;
        int depth = 0;
    };
    std::vector<Pending> stack{{}};
    std::string dir;
    while (!stack.empty()) {
        const Pending p = stack.back();
        stack.pop_back();
        const std::string rel = p.node != nullptr ? *p.node->rel : std::string();
        auto& children = p.node != nullptr ? p.node->children : top_level;
        children.clear();
        dir = root.string();
        dir += rel;
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr) continue;  // gone since its parent was read
        if (watching && ::inotify_add_watch(inotify.get(), dir.c_str(),
                                            IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR) < 0) {
            if (errno == ENOSPC || errno == ENOMEM) {
                // No watch left (fs.inotify.max_user_watches): walked at every sample.
                watching = false;
                inotify.reset();
            } else {
                changed = true;  // gone since: walked again at the next sample
            }
        }
        // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and d is ours
        while (const dirent* ent = ::readdir(d)) {
            const std::string_view name = ent->d_name;
            if (name == "." || name == "..") continue;
            if (ent->d_type != DT_DIR &&
                (ent->d_type != DT_UNKNOWN || !is_directory(dir + "/" + std::string(name)))) {
                continue;
            }
            const bool unit = ends_with_any(name, kUnitSuffixes);
            if (!unit && p.depth >= kMaxDepth) continue;
            std::string child = rel;
            child += '/';
            child += name;
            Node& c = found(std::move(child));
            children.push_back(&c);
            if (unit) {
                set_unit(c, std::string(name));
            } else {
                stack.push_back({&c, p.depth + 1});
            }
        }
        ::closedir(d);
        // A cgroup no unit names is a unit when nothing lies below it; a slice never is (its
        // time is its units'), nor the root.
        if (p.node != nullptr) {
            const bool leaf = children.empty() && !rel.ends_with(".slice");
            set_unit(*p.node, leaf ? rel : std::string());
        }
    }
}

// Reads a node's counters as of `now`, and a unit's figures from them. An error is returned
// for a unit's counters that are there but cannot be read or parsed.
std::optional<Error> UnitUsage::State::read_node(Node& n, Clock::time_point now) {
    ++reads;
    if (n.files == 0) {
        open_files_of(n);
        // Past the budget (a machine of thousands of units, a low RLIMIT_NOFILE), a node's
        // files are opened at each reading instead: slower, never a descriptor the daemon
        // lacks. Files given back by nodes gone are taken by those that had none kept.
        if (open_files + files_of(n) <= max_open_files) {
            n.files = files_of(n);
            open_files += n.files;
        }
    }
    auto c = read(n);
    if (n.files == 0) {
        n.first.reset();
        n.second.reset();
        n.third.reset();
    }
    if (!c) {
        n.gone = true;
        if (c.error().status == Status::NoDev || !n.reported()) return std::nullopt;
        return c.error();
    }
    n.read_now = true;
    n.grew.reset();
    if (n.last && c->total >= n.last->total) n.grew = c->total - n.last->total;
    if (n.grew.value_or(1) > 0) n.active_seq = seq;
    if (n.reported()) {
        const auto at = seq % capacity;
        n.has_interval = false;
        if (n.grew && now > n.last_time) {
            // Over the time since its last reading: the last interval, or the samples that
            // did not read it (its time was spread over them).
            const auto span = now - n.last_time;
            const double ns = std::chrono::duration<double, std::nano>(span).count();
            auto pct = [&](std::uint64_t a, std::uint64_t b) {
                return b >= a ? static_cast<double>(b - a) * 100 / ns : 0.0;
            };
            n.cpu = pct(n.last->total, c->total);
            n.user = pct(n.last->user, c->user);
            n.system = pct(n.last->system, c->system);
            n.has_interval = true;
            const std::uint64_t oldest = seq + 1 > capacity ? seq + 1 - capacity : 0;
            for (auto q = std::max({n.read_seq + 1, n.first_seq, oldest}); q < seq; ++q) {
                const auto part = std::chrono::duration<double>(times[q % capacity] - n.last_time) /
                                  std::chrono::duration<double>(span);
                n.ring[q % capacity] =
                    n.last->total + static_cast<std::uint64_t>(static_cast<double>(*n.grew) *
                                                               std::clamp(part, 0.0, 1.0));
            }
        } else {
            // The first reading, or counters that went back (a cgroup made again under the
            // same name): the window starts again here.
            n.first_seq = seq;
        }
        n.ring[at] = c->total;
    }
    n.last = *c;
    n.last_time = now;
    n.read_seq = seq;
    n.pending = false;
    return std::nullopt;
}

Result<UnitUsage::State::Counters> UnitUsage::State::read(const Node& n) {
    if (accounting == CgroupAccounting::V2) {
        auto text = read_file(n, n.first.get(), "/cpu.stat");
        if (!text) return std::unexpected(text.error());
        const auto usage = stat_value(*text, "usage_usec");
        const auto user = stat_value(*text, "user_usec");
        const auto system = stat_value(*text, "system_usec");
        if (!usage || !user || !system) {
            return fail(Status::BadData,
                        root.string() + *n.rel +
                            "/cpu.stat: no usage_usec, user_usec and system_usec lines with "
                            "numbers");
        }
        return Counters{*usage * 1000, *user * 1000, *system * 1000};
    }
    // cpuacct.usage is the tasks' run time; since Linux 5.15 the user and system parts are
    // the ticks' split of it (a tick's granularity), which need not add up to it. A
    // directory walked into is read for its total alone.
    Counters c;
    for (auto [fd, name, out] : {std::tuple{n.first.get(), "/cpuacct.usage", &c.total},
                                 std::tuple{n.second.get(), "/cpuacct.usage_user", &c.user},
                                 std::tuple{n.third.get(), "/cpuacct.usage_sys", &c.system}}) {
        if (out != &c.total && !n.reported()) break;
        auto text = read_file(n, fd, name);
        if (!text) return std::unexpected(text.error());
        const auto v = number(*text);
        if (!v) {
            return fail(Status::BadData,
                        root.string() + *n.rel + name + ": not a number of nanoseconds");
        }
        *out = *v;
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
    s->inotify.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    s->watching = static_cast<bool>(s->inotify);
    s->capacity = std::max<std::size_t>(window_seconds, 1) + 1;
    s->times.assign(s->capacity, {});
    return UnitUsage(std::move(s));
}

Result<void> UnitUsage::sample(Clock::time_point now) {
    auto& s = *s_;
    const bool walked = s.tree_changed();
    if (walked) {
        ++s.walk;
        s.walk_tree();
    }
    s.units = 0;
    for (auto it = s.nodes.begin(); it != s.nodes.end();) {
        auto& n = it->second;
        if (walked && n.walk != s.walk) {
            s.close_files(n);
            it = s.nodes.erase(it);
            continue;
        }
        n.read_now = false;
        s.units += n.reported() ? 1 : 0;
        ++it;
    }

    const auto at = s.seq % s.capacity;
    s.times[at] = now;
    // 0.1 % of one CPU over the interval: what a directory's children may have used
    // without being read at this sample.
    const auto interval = s.seq > 0 ? now - s.times[(s.seq - 1) % s.capacity] : Clock::duration{};
    const auto tolerance = static_cast<std::uint64_t>(
        std::max<std::int64_t>(std::chrono::nanoseconds(interval).count(), 0) / 1000);
    s.reads = 0;
    std::optional<Error> first_error;
    auto read = [&](State::Node& n) {
        auto error = s.read_node(n, now);
        if (error && !first_error) first_error = std::move(error);
    };

    // Top-down: the root's directories, then the children of those read. A directory's
    // total is its children's (v2; v1 adds what runs in it), so when it did not grow none of
    // theirs did: they are not read. When it grew, its children are read busiest first
    // (those that grew most recently) until the time they grew by accounts for its own, to
    // within the tolerance: those left had at most that, and are read at their refresh
    // (every kRefreshSamples samples) or when their directory's time is not accounted for.
    // Their time is never lost: a counter read later holds it, spread over the samples
    // that did not read it.
    std::vector<State::Node*> parents;
    std::vector<State::Node*> skipped;
    // A child not read, and what lies below it. When its directory did not grow, its
    // counters are known as of now, unchanged (unless it is pending already: it may have
    // grown at an earlier sample that did not read it); otherwise it is pending.
    auto skip = [&](State::Node& c, bool unchanged) {
        skipped.assign(1, &c);
        while (!skipped.empty()) {
            auto* n = skipped.back();
            skipped.pop_back();
            if (!unchanged) {
                n->pending = true;
            } else if (!n->pending) {
                n->last_time = now;
                n->read_seq = s.seq;
            }
            skipped.insert(skipped.end(), n->children.begin(), n->children.end());
        }
    };
    for (auto* n : s.top_level) {
        read(*n);
        parents.push_back(n);
    }
    while (!parents.empty()) {
        auto* p = parents.back();
        parents.pop_back();
        if (p->children.empty()) continue;
        // Not read, or no previous reading: every child is.
        const bool known = p->read_now && p->grew.has_value();
        const bool unchanged = known && *p->grew == 0;
        std::uint64_t residual = known ? *p->grew : std::numeric_limits<std::uint64_t>::max();
        if (known && !unchanged) {
            // Then the most used: a unit's first readings say nothing of its recent time.
            std::ranges::sort(p->children, [](const State::Node* a, const State::Node* b) {
                if (a->active_seq != b->active_seq) return a->active_seq > b->active_seq;
                return (a->last ? a->last->total : 0) > (b->last ? b->last->total : 0);
            });
        }
        for (auto* c : p->children) {
            const bool due = (s.seq + c->stagger) % kRefreshSamples == 0;
            if (c->last && (unchanged || (!due && residual <= tolerance))) {
                skip(*c, unchanged);
                continue;
            }
            read(*c);
            if (c->read_now && c->grew) {
                residual -= std::min(residual, *c->grew);
            } else {
                residual = std::numeric_limits<std::uint64_t>::max();
            }
            parents.push_back(c);
        }
    }

    // The units not read: their counters did not move since their last reading, or by less
    // than the tolerance (pending); either way nothing is theirs at this sample yet.
    for (auto it = s.nodes.begin(); it != s.nodes.end();) {
        auto& n = it->second;
        if (n.gone) {
            s.units -= n.reported() ? 1 : 0;
            s.close_files(n);
            it = s.nodes.erase(it);
            s.changed = true;  // the walk makes the tree's lists again, and finds it if there
            continue;
        }
        if (n.reported() && !n.read_now) {
            n.has_interval = n.last.has_value() && s.seq > 0;
            n.cpu = n.user = n.system = 0;
            if (n.last) n.ring[at] = n.last->total;
        }
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
    for (const auto& [cgroup, e] : s.nodes) {
        if (!e.reported() || (!e.has_interval && e.first_seq == newest)) continue;
        // A unit that may have run since its last reading: the window up to that reading.
        const auto last = e.pending ? e.read_seq : newest;
        UnitLoad u;
        u.unit = e.unit;
        u.cgroup = cgroup.empty() ? "/" : cgroup;
        if (e.has_interval) {
            u.cpu = e.cpu;
            u.user = e.user;
            u.system = e.system;
        }
        const auto oldest = std::max(e.first_seq, s.seq > s.capacity ? s.seq - s.capacity : 0);
        for (auto q = oldest + 1; q <= last; ++q) {
            const auto a = e.ring[(q - 1) % s.capacity], b = e.ring[q % s.capacity];
            const auto dt = s.times[q % s.capacity] - s.times[(q - 1) % s.capacity];
            if (b < a || dt <= Clock::duration::zero()) continue;
            u.window_max =
                std::max(u.window_max, static_cast<double>(b - a) * 100 /
                                           std::chrono::duration<double, std::nano>(dt).count());
        }
        const auto span = s.times[last % s.capacity] - s.times[oldest % s.capacity];
        const auto a = e.ring[oldest % s.capacity], b = e.ring[last % s.capacity];
        if (last > oldest && span > Clock::duration::zero() && b >= a) {
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
    if (s.accounting == CgroupAccounting::V2) {
        for (auto& u : out) {
            if (u.cgroup == "/") continue;
            const auto file = s.root.string() + u.cgroup + "/cpu.pressure";
            auto text = read_text_file(file, 4096);
            if (!text) continue;  // no PSI, or the cgroup went meanwhile
            if (auto p = parse_cpu_pressure(*text, file)) u.pressure = p->avg10;
        }
    }
    return out;
}

std::size_t UnitUsage::unit_count() const {
    return s_->units;
}
std::size_t UnitUsage::last_reads() const {
    return s_->reads;
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
    for (auto& [cgroup, e] : s.nodes) {
        e.read_seq = std::max(e.read_seq, from) - from;
        e.active_seq = std::max(e.active_seq, from) - from;
        if (!e.reported()) continue;
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
