#include "monitor/perf/counter_device.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>

#include "monitor/perf/pmu.hpp"
#include "monitor/status.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

bool hardware(const EventSpec& e) {
    return e.counters != 0;
}

std::string target_text(const OpenTarget& t) {
    if (t.cgroup_fd >= 0) return fmt::format("the cgroup on cpu{}", t.cpu);
    if (t.pid >= 0) return fmt::format("process {}", t.pid);
    return fmt::format("cpu{}", t.cpu);
}

}  // namespace

std::optional<int> perf_event_paranoid(const std::filesystem::path& proc_root) {
    auto text = read_text_file(proc_root / "sys" / "kernel" / "perf_event_paranoid", 64);
    if (!text) return std::nullopt;
    const std::string_view s = trim_space(*text);
    int value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return value;
}

std::string descriptor_limit() {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return "RLIMIT_NOFILE";
    auto text = [](rlim_t v) {
        return v == RLIM_INFINITY ? std::string{"unlimited"} : std::to_string(v);
    };
    return fmt::format("RLIMIT_NOFILE is {}, hard limit {}", text(r.rlim_cur), text(r.rlim_max));
}

Error explain_open_error(int err, const EventSpec& event, const OpenTarget& target) {
    const std::string what = fmt::format("{} on {}", event.name, target_text(target));
    if (event.module != nullptr) {
        if (auto own = event.module->explain_open_error(err, event, what)) return std::move(*own);
    }
    switch (err) {
        case EACCES:
        case EPERM: {
            auto level = perf_event_paranoid();
            const bool system_wide = target.pid < 0 || target.cgroup_fd >= 0;
            // The level at which an unprivileged user may open this counter.
            const int needed = system_wide ? 0 : (event.exclude_kernel ? 2 : 1);
            std::string why;
            if (level && *level > 2) {
                // Levels above 2 are a patch of Debian's (and Android's) kernels: no counting
                // at all without CAP_SYS_ADMIN, whatever CAP_PERFMON says.
                why = fmt::format(
                    "kernel.perf_event_paranoid is {}: above 2, this kernel lets only "
                    "CAP_SYS_ADMIN count (CAP_PERFMON is not enough); run as root with "
                    "CAP_SYS_ADMIN, or `sysctl kernel.perf_event_paranoid={}`",
                    *level, needed);
            } else if (level && *level > needed) {
                why = fmt::format(
                    "kernel.perf_event_paranoid is {}, and counting {} without privilege needs "
                    "{} or lower; run as root or with CAP_PERFMON, or `sysctl "
                    "kernel.perf_event_paranoid={}`{}",
                    *level, system_wide ? "a whole CPU" : "a process", needed, needed,
                    !system_wide && !event.exclude_kernel && *level == 2
                        ? fmt::format(", or count user mode only ({}:u)", event.name)
                        : std::string{});
            } else if (!system_wide) {
                why =
                    "the process belongs to another user (counting it needs the right to "
                    "ptrace it, or CAP_PERFMON)";
            } else {
                why = "run as root or with CAP_PERFMON";
            }
            return Error{Status::Perm, fmt::format("{}: permission denied: {}", what, why)};
        }
        case ENOENT:
        case EOPNOTSUPP:
            if (hardware(event)) {
                return Error{
                    Status::NoPmu,
                    fmt::format("{}: this kernel has no PMU driver that counts {} events "
                                "(no hardware counters here: a virtual machine without "
                                "a virtual PMU, or a processor the kernel does not "
                                "support); software events such as perf::TASK-CLOCK "
                                "still count",
                                what, event.counter_pmu.empty() ? event.pmu : event.counter_pmu)};
            }
            return Error{Status::NoEvent,
                         fmt::format("{}: the kernel does not know this event", what)};
        case ENOSYS:
            // A kernel built without CONFIG_PERF_EVENTS (small boards), or an emulator that does
            // not pass the call on (qemu-user).
            return Error{Status::NoPmu,
                         fmt::format("{}: perf_event_open is not implemented here (a kernel "
                                     "built without CONFIG_PERF_EVENTS, or an emulator such as "
                                     "qemu-user): nothing can be counted or sampled",
                                     what)};
        case ESRCH:
            return Error{Status::NoDev, fmt::format("{}: no such process", what)};
        case ENODEV:
        case ENXIO:
            return Error{Status::NoDev,
                         fmt::format("{}: the CPU is offline or does not exist", what)};
        case EBUSY:
            return Error{Status::Busy,
                         fmt::format("{}: the PMU is held exclusively by another user", what)};
        case EMFILE:
            return Error{Status::IoErr,
                         fmt::format("{}: out of file descriptors ({}; a counter takes one per "
                                     "event and CPU, thread or cgroup counted): raise the limit "
                                     "(ulimit -n, LimitNOFILE= in a unit) or count fewer events",
                                     what, descriptor_limit())};
        case ENFILE:
            return Error{Status::IoErr,
                         fmt::format("{}: the system is out of file descriptors (fs.file-max); "
                                     "count fewer events",
                                     what)};
        case ENOSPC:
            return Error{Status::IoErr,
                         fmt::format("{}: perf_event_open: {}", what, errno_message(err))};
        case EINVAL:
            return Error{Status::BadArg,
                         fmt::format("{}: the kernel rejected the event for this target "
                                     "(type {}, config {:#x})",
                                     what, event.type, event.config)};
        default:
            return Error{Status::IoErr,
                         fmt::format("{}: perf_event_open: {}", what, errno_message(err))};
    }
}

perf_event_attr event_attr(const EventSpec& event, const OpenTarget& target) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    copy_encoding(attr, event);
    attr.inherit = target.inherit;
    return attr;
}

long open_event(perf_event_attr& attr, const OpenTarget& target, int group_fd) {
    unsigned long flags = PERF_FLAG_FD_CLOEXEC;
    pid_t pid = target.pid;
    if (target.cgroup_fd >= 0) {
        flags |= PERF_FLAG_PID_CGROUP;
        pid = target.cgroup_fd;
    }
    return ::syscall(SYS_perf_event_open, &attr, pid, target.cpu, group_fd, flags);
}

Result<int> PerfEventDevice::open(const EventSpec& event, const OpenTarget& target, int leader) {
    perf_event_attr attr = event_attr(event, target);
    // A group reads in one call: a read of any of its descriptors returns every member.
    attr.read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.disabled = leader < 0;
    attr.enable_on_exec = leader < 0 && target.enable_on_exec;

    const int group_fd = leader < 0 ? -1 : fd_of(leader);
    if (leader >= 0 && group_fd < 0) {
        return fail(Status::BadArg, fmt::format("{}: no open group leader {}", event.name, leader));
    }
    const long fd = open_event(attr, target, group_fd);
    if (fd < 0) return std::unexpected(explain_open_error(errno, event, target));
    const std::size_t index =
        leader < 0 ? 0 : counters_[static_cast<std::size_t>(leader)].group_size++;
    const int handle = static_cast<int>(counters_.size());
    counters_.push_back({UniqueFd(static_cast<int>(fd)), leader < 0 ? handle : leader, index, 1});
    return handle;
}

int PerfEventDevice::fd_of(int handle) const {
    if (handle < 0 || static_cast<std::size_t>(handle) >= counters_.size()) return -1;
    return counters_[static_cast<std::size_t>(handle)].fd.get();
}

Result<void> PerfEventDevice::group_ioctl(int leader, unsigned long request, const char* what) {
    const int fd = fd_of(leader);
    if (fd < 0) return fail(Status::BadArg, fmt::format("{}: no open counter {}", what, leader));
    if (::ioctl(fd, request, PERF_IOC_FLAG_GROUP) < 0) {
        return fail_errno(errno, fmt::format("{} a counter group", what));
    }
    return {};
}

Result<void> PerfEventDevice::enable(int leader) {
    return group_ioctl(leader, PERF_EVENT_IOC_ENABLE, "enable");
}

Result<void> PerfEventDevice::disable(int leader) {
    return group_ioctl(leader, PERF_EVENT_IOC_DISABLE, "disable");
}

Result<void> PerfEventDevice::reset(int leader) {
    return group_ioctl(leader, PERF_EVENT_IOC_RESET, "reset");
}

Result<std::size_t> PerfEventDevice::read_into_buffer(int handle) {
    const int fd = fd_of(handle);
    if (fd < 0) return fail(Status::BadArg, fmt::format("read: no open counter {}", handle));
    // A group's size is fixed once its members are open; the buffer grows to the largest.
    const auto& c = counters_[static_cast<std::size_t>(handle)];
    const std::size_t size = counters_[static_cast<std::size_t>(c.leader)].group_size;
    if (buf_.size() < 3 + size) buf_.resize(3 + size);
    const std::size_t bytes = buf_.size() * sizeof buf_[0];
    ssize_t n = ::read(fd, buf_.data(), bytes);
    if (n < 0) return fail_errno(errno, "read a counter group");
    const std::size_t nr = n >= 8 ? buf_[0] : 0;
    if (n < 24 || static_cast<std::size_t>(n) != (3 + nr) * sizeof buf_[0]) {
        return fail(Status::BadData,
                    fmt::format("read a counter group: {} bytes for {} counters", n, nr));
    }
    return nr;
}

Result<CounterReading> PerfEventDevice::read(int handle) {
    // A member's descriptor reads its leader's group: the value is at the member's place.
    auto nr = read_into_buffer(handle);
    if (!nr) return std::unexpected(nr.error());
    std::size_t index = counters_[static_cast<std::size_t>(handle)].index;
    // A member whose leader was closed counts on as a group of its own (perf_group_detach).
    if (*nr == 1) index = 0;
    if (index >= *nr) {
        return fail(Status::BadData, fmt::format("read a counter: {} counters in its group, "
                                                 "it is number {}",
                                                 *nr, index + 1));
    }
    return CounterReading{buf_[3 + index], buf_[1], buf_[2]};
}

Result<void> PerfEventDevice::read_group(std::span<const int> handles,
                                         std::span<CounterReading> out) {
    if (handles.empty()) return {};
    auto nr = read_into_buffer(handles.front());
    if (!nr) return std::unexpected(nr.error());
    if (*nr != handles.size() || out.size() < handles.size()) {
        return fail(Status::BadData, fmt::format("read a counter group: {} counters instead of {}",
                                                 *nr, handles.size()));
    }
    for (std::size_t i = 0; i < handles.size(); ++i) out[i] = {buf_[3 + i], buf_[1], buf_[2]};
    return {};
}

void PerfEventDevice::close(int handle) {
    if (fd_of(handle) >= 0) counters_[static_cast<std::size_t>(handle)].fd.reset();
}

Result<void> CounterDevice::read_group(std::span<const int> handles,
                                       std::span<CounterReading> out) {
    if (out.size() < handles.size()) {
        return fail(Status::BadArg, "read a counter group: room for fewer readings than counters");
    }
    for (std::size_t i = 0; i < handles.size(); ++i) {
        auto r = read(handles[i]);
        if (!r) return std::unexpected(r.error());
        out[i] = *r;
    }
    return {};
}

}  // namespace monitor::perf
