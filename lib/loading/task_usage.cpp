#include "monitor/loading/task_usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <unordered_map>

#include "monitor/text_file.hpp"  // read_text_file, trim_space
#include "monitor/unique_fd.hpp"

namespace monitor {

namespace {

// The fields after the command, counted from state (stat's third field) as 0 (proc(5)).
constexpr std::size_t kUtime = 11;      // field 14
constexpr std::size_t kStime = 12;      // field 15
constexpr std::size_t kThreads = 17;    // field 20
constexpr std::size_t kStart = 19;      // field 22
constexpr std::size_t kProcessor = 36;  // field 39

template <class T>
bool parse_number(std::string_view text, T& out) {
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc{} && p == text.data() + text.size();
}

// A decimal directory name: a pid.
std::optional<pid_t> pid_of(std::string_view name) {
    pid_t pid = 0;
    if (!parse_number(name, pid) || pid <= 0) return std::nullopt;
    return pid;
}

// A stat line is a few hundred bytes: the command is at most 64.
constexpr std::size_t kStatBuffer = 1024;

// Reads `name` below `dir` into `buf`: its text, or nullopt when it cannot be read (the task
// exited: the kernel says ENOENT or ESRCH, at the open or at the read).
std::optional<std::string_view> read_at(int dir, const char* name,
                                        std::array<char, kStatBuffer>& buf) {
    UniqueFd fd{::openat(dir, name, O_RDONLY | O_CLOEXEC)};
    if (!fd) return std::nullopt;
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) return std::nullopt;
    return std::string_view(buf.data(), static_cast<std::size_t>(n));
}

}  // namespace

std::optional<TaskStat> parse_task_stat(std::string_view text) {
    const auto open = text.find('(');
    const auto close = text.rfind(')');
    if (open == text.npos || close == text.npos || close < open || close + 2 > text.size()) {
        return std::nullopt;
    }
    TaskStat st;
    st.comm = text.substr(open + 1, close - open - 1);
    std::string_view rest = text.substr(close + 2);
    std::size_t index = 0;
    bool ok = true;
    while (!rest.empty() && index <= kProcessor && ok) {
        const auto space = rest.find_first_of(" \n");
        const auto field = rest.substr(0, space);
        rest = space == rest.npos ? std::string_view{} : rest.substr(space + 1);
        switch (index) {
            case kUtime:
                ok = parse_number(field, st.utime);
                break;
            case kStime:
                ok = parse_number(field, st.stime);
                break;
            case kThreads:
                ok = parse_number(field, st.threads);
                break;
            case kStart:
                ok = parse_number(field, st.start);
                break;
            case kProcessor:
                ok = parse_number(field, st.processor) && st.processor >= 0;
                break;
            default:
                break;
        }
        ++index;
    }
    if (!ok || index <= kProcessor) return std::nullopt;
    return st;
}

struct TaskUsage::State {
    std::filesystem::path proc_root;
    UniqueFd proc;
    DIR* listing = nullptr;  // proc's, rewound at each sample
    double ticks_per_second = 100;
    std::optional<CgroupAccounting> hierarchy;

    struct Task {
        pid_t pid = 0;
        std::uint64_t start = 0, utime = 0, stime = 0;
        unsigned seen = 0;  // the sample that last found it
    };
    struct Process {
        std::uint64_t start = 0, ticks = 0;
        unsigned seen = 0;
        std::vector<pid_t> threads;  // those the last reading of its threads found
    };
    std::unordered_map<pid_t, Task> tasks;
    std::unordered_map<pid_t, Process> processes;
    unsigned generation = 0;
    std::optional<Clock::time_point> last;
    std::optional<double> last_uptime_ticks;  // /proc/uptime at the last sample, in ticks
    double seconds = 0;
    std::vector<TaskLoad> busy;  // the last interval's tasks that had time, unsorted
    std::size_t reads = 0;
    std::array<char, kStatBuffer> buf{};
    std::optional<std::string> bad;  // the first stat file of this sample that did not parse

    ~State() {
        if (listing != nullptr) ::closedir(listing);
    }

    // Accounts a task's stat as of this sample.
    void account(pid_t pid, pid_t tid, const TaskStat& st) {
        auto [it, fresh] = tasks.try_emplace(tid);
        Task& t = it->second;
        std::uint64_t du = 0;
        std::uint64_t ds = 0;
        if (fresh || t.start != st.start || t.pid != pid) {
            // New since the last sample: all its time is of this interval when it started
            // after that sample, else it has no figures before its next reading.
            if (last_uptime_ticks && static_cast<double>(st.start) >= *last_uptime_ticks) {
                du = st.utime;
                ds = st.stime;
            }
        } else {
            du = st.utime >= t.utime ? st.utime - t.utime : 0;
            ds = st.stime >= t.stime ? st.stime - t.stime : 0;
        }
        t = Task{pid, st.start, st.utime, st.stime, generation};
        if (seconds <= 0 || du + ds == 0) return;
        const double scale = 100.0 / ticks_per_second / seconds;
        TaskLoad l;
        l.pid = pid;
        l.tid = tid;
        l.comm = std::string(st.comm);
        l.cpu = st.processor;
        l.user = static_cast<double>(du) * scale;
        l.system = static_cast<double>(ds) * scale;
        l.load = l.user + l.system;
        busy.push_back(std::move(l));
    }

    void note_bad(const std::string& file) {
        if (!bad) bad = file;
    }

    // Reads the threads of `pid` (more than one, and its time grew).
    void read_threads(pid_t pid, Process& p) {
        const std::string dir = std::to_string(pid) + "/task";
        UniqueFd fd{::openat(proc.get(), dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
        if (!fd) return;  // gone
        DIR* d = ::fdopendir(fd.get());
        if (d == nullptr) return;
        (void)fd.release();
        p.threads.clear();
        // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and d is ours
        while (const dirent* ent = ::readdir(d)) {
            const auto tid = pid_of(ent->d_name);
            if (!tid) continue;
            const std::string name = std::string(ent->d_name) + "/stat";
            ++reads;
            const auto text = read_at(::dirfd(d), name.c_str(), buf);
            if (!text) continue;  // gone, or not readable: not counted
            const auto st = parse_task_stat(*text);
            if (!st) {
                std::string file = dir;
                file += '/';
                file += name;
                note_bad(file);
                continue;
            }
            account(pid, *tid, *st);
            p.threads.push_back(*tid);
        }
        ::closedir(d);
    }
};

TaskUsage::TaskUsage(std::unique_ptr<State> state) : s_(std::move(state)) {}
TaskUsage::TaskUsage(TaskUsage&&) noexcept = default;
TaskUsage& TaskUsage::operator=(TaskUsage&&) noexcept = default;
TaskUsage::~TaskUsage() = default;

Result<TaskUsage> TaskUsage::open(const std::filesystem::path& proc_root,
                                  std::optional<CgroupAccounting> hierarchy,
                                  long ticks_per_second) {
    auto s = std::make_unique<State>();
    s->proc_root = proc_root;
    s->hierarchy = hierarchy;
    s->proc = UniqueFd{::open(proc_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (!s->proc) {
        const int err = errno;
        return fail(Status::BadArg, proc_root.string() + ": " + errno_message(err) +
                                        " (the tasks are read from a procfs)");
    }
    const int listing = ::dup(s->proc.get());
    s->listing = listing < 0 ? nullptr : ::fdopendir(listing);
    if (s->listing == nullptr) {
        const int err = errno;
        if (listing >= 0) ::close(listing);
        return fail_errno(err, proc_root.string());
    }
    if (ticks_per_second <= 0) ticks_per_second = ::sysconf(_SC_CLK_TCK);
    s->ticks_per_second = static_cast<double>(ticks_per_second > 0 ? ticks_per_second : 100);
    return TaskUsage(std::move(s));
}

Result<void> TaskUsage::sample(Clock::time_point now) {
    State& s = *s_;
    ++s.generation;
    s.reads = 0;
    s.busy.clear();
    s.bad.reset();
    s.seconds = s.last ? std::chrono::duration<double>(now - *s.last).count() : 0;
    // A first sample, or a clock that did not advance, gives no figures.
    if (s.seconds <= 0) s.seconds = 0;
    if (!s.last) s.last_uptime_ticks.reset();

    // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and it is ours
    ::rewinddir(s.listing);
    std::size_t listed = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): as above
    while (const dirent* ent = ::readdir(s.listing)) {
        const auto pid = pid_of(ent->d_name);
        if (!pid) continue;
        ++listed;
        const std::string name = std::string(ent->d_name) + "/stat";
        ++s.reads;
        const auto text = read_at(s.proc.get(), name.c_str(), s.buf);
        if (!text) continue;  // gone
        const auto st = parse_task_stat(*text);
        if (!st) {
            s.note_bad(name);
            continue;
        }
        auto [it, fresh] = s.processes.try_emplace(*pid);
        State::Process& p = it->second;
        const bool renewed = fresh || p.start != st->start;
        const std::uint64_t ticks = st->utime + st->stime;
        if (st->threads <= 1) {
            // Its stat's time is the process's: its threads', those that ended included. When
            // its main thread was read alone before (it had threads), that time is not its
            // own reading's: it starts over rather than show the ended threads' time as its.
            if (!renewed && (p.threads.size() != 1 || p.threads.front() != *pid)) {
                s.tasks.erase(*pid);
            }
            s.account(*pid, *pid, *st);
            p.threads.assign(1, *pid);
        } else if (renewed || ticks != p.ticks) {
            // After this, st's comm (in the buffer the threads are read into) is not used.
            s.read_threads(*pid, p);
        } else {
            // None of its threads ran: they are still there, with no time.
            for (pid_t tid : p.threads) {
                if (auto t = s.tasks.find(tid); t != s.tasks.end()) t->second.seen = s.generation;
            }
        }
        p.start = st->start;
        p.ticks = ticks;
        p.seen = s.generation;
    }
    if (listed == 0 && s.processes.empty()) {
        return fail(Status::BadData, s.proc_root.string() + ": lists no process (not a procfs?)");
    }
    std::erase_if(s.processes, [&](const auto& e) { return e.second.seen != s.generation; });
    std::erase_if(s.tasks, [&](const auto& e) { return e.second.seen != s.generation; });

    // The uptime, in ticks: a task that starts after it has all its time in the next interval.
    if (auto up = read_text_file(s.proc_root / "uptime", 4096)) {
        const auto text = trim_space(*up);
        const auto secs = parse_decimal(text.substr(0, text.find(' ')));
        s.last_uptime_ticks.reset();
        if (secs) s.last_uptime_ticks = *secs * s.ticks_per_second;
    } else {
        s.last_uptime_ticks.reset();
    }
    // The busy tasks' cgroups, a read per process, now: a process that ran and ended is
    // named too, and a task moved to another cgroup is named by the one it is in.
    if (s.hierarchy) {
        std::sort(s.busy.begin(), s.busy.end(),
                  [](const TaskLoad& a, const TaskLoad& b) { return a.pid < b.pid; });
        for (std::size_t i = 0; i < s.busy.size();) {
            std::size_t end = i;
            while (end < s.busy.size() && s.busy[end].pid == s.busy[i].pid) ++end;
            std::string path = std::to_string(s.busy[i].pid);
            path += "/cgroup";
            if (auto text = read_text_file(s.proc_root / path, 65536)) {
                if (auto cg = cgroup_of_process(*text, *s.hierarchy)) {
                    const std::string unit = unit_of_cgroup(*cg);
                    for (std::size_t k = i; k < end; ++k) {
                        s.busy[k].cgroup = *cg;
                        s.busy[k].unit = unit;
                    }
                }
            }
            i = end;
        }
    }
    s.last = now;
    if (s.bad) {
        return fail(Status::BadData, (s.proc_root / *s.bad).string() +
                                         ": not a stat line of proc(5) (the command in "
                                         "parentheses, then at least 37 numbers); skipped");
    }
    return {};
}

void TaskUsage::forget() {
    State& s = *s_;
    s.tasks.clear();
    s.processes.clear();
    s.busy.clear();
    s.last.reset();
    s.last_uptime_ticks.reset();
    s.seconds = 0;
}

std::vector<TaskLoad> TaskUsage::top(std::size_t per_cpu) const {
    std::vector<TaskLoad> list = s_->busy;
    std::sort(list.begin(), list.end(), [](const TaskLoad& a, const TaskLoad& b) {
        if (a.cpu != b.cpu) return a.cpu < b.cpu;
        if (a.load != b.load) return a.load > b.load;
        return a.tid < b.tid;
    });
    std::vector<TaskLoad> out;
    std::size_t of_cpu = 0;
    for (auto& l : list) {
        of_cpu = !out.empty() && out.back().cpu == l.cpu ? of_cpu + 1 : 0;
        if (of_cpu >= per_cpu) continue;
        out.push_back(std::move(l));
    }
    return out;
}

double TaskUsage::seconds() const {
    return s_->seconds;
}
std::size_t TaskUsage::task_count() const {
    return s_->tasks.size();
}
std::size_t TaskUsage::process_count() const {
    return s_->processes.size();
}
std::size_t TaskUsage::last_reads() const {
    return s_->reads;
}

}  // namespace monitor
