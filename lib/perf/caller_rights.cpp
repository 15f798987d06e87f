#include "monitor/perf/caller_rights.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <optional>
#include <string_view>

#include "monitor/perf/counter_device.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

std::optional<int> read_int(const std::filesystem::path& path) {
    auto text = read_text_file(path, 64);
    if (!text) return std::nullopt;
    const std::string_view s = trim_space(*text);
    int value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return value;
}

// The four ids of a "Uid:" or "Gid:" line of /proc/PID/status: real, effective, saved, fs.
std::optional<std::array<unsigned long, 4>> status_ids(std::string_view status,
                                                       std::string_view key) {
    for (std::size_t at = 0; at < status.size();) {
        std::size_t end = status.find('\n', at);
        if (end == std::string_view::npos) end = status.size();
        std::string_view line = status.substr(at, end - at);
        at = end + 1;
        if (!line.starts_with(key)) continue;
        line.remove_prefix(key.size());
        std::array<unsigned long, 4> ids{};
        for (auto& id : ids) {
            line = trim_space(line);
            auto [next, ec] = std::from_chars(line.data(), line.data() + line.size(), id);
            if (ec != std::errc{}) return std::nullopt;
            line.remove_prefix(static_cast<std::size_t>(next - line.data()));
        }
        return ids;
    }
    return std::nullopt;
}

std::string_view target_words(TargetKind kind) {
    switch (kind) {
        case TargetKind::AllCpus:
            return "every CPU";
        case TargetKind::EachCpu:
            return "each CPU";
        case TargetKind::OneCpu:
            return "a CPU";
        case TargetKind::Cgroup:
            return "a cgroup or unit";
        case TargetKind::Process:
        case TargetKind::Thread:
            break;
    }
    return "a process";
}

}  // namespace

PerfSysctls read_perf_sysctls(const std::filesystem::path& proc_root) {
    const auto dir = proc_root / "sys" / "kernel";
    return {.paranoid = perf_event_paranoid(proc_root).value_or(3),
            .kptr_restrict = read_int(dir / "kptr_restrict").value_or(2)};
}

CallerRights CallerRights::everything() {
    return CallerRights{};
}

CallerRights CallerRights::unprivileged(uid_t uid, gid_t gid, PerfSysctls sysctls,
                                        std::filesystem::path proc_root) {
    CallerRights r;
    r.privileged_ = false;
    r.uid_ = uid;
    r.gid_ = gid;
    r.sysctls_ = sysctls;
    r.proc_root_ = std::move(proc_root);
    return r;
}

std::string CallerRights::kernel_refusal() const {
    return fmt::format(
        "kernel mode needs kernel.perf_event_paranoid 1 or below for a user "
        "other than root, as perf_event_open(2) does, and it is {}",
        sysctls_.paranoid);
}

std::string CallerRights::kernel_breakpoint_refusal() const {
    if (privileged_) return {};
    return "the kernel lets only a user with CAP_SYS_ADMIN watch kernel memory, whatever "
           "kernel.perf_event_paranoid says (hw_breakpoint_parse), and the daemon holds a user "
           "other than root to that";
}

Result<void> CallerRights::may_measure(const CountTarget& target, std::string_view what) const {
    if (privileged_) return {};
    const bool process = target.kind == TargetKind::Process || target.kind == TargetKind::Thread;
    if (!process) {
        if (cpu_wide()) return {};
        return fail(Status::Perm,
                    fmt::format("{} {} needs kernel.perf_event_paranoid 0 or below for a user "
                                "other than root, as perf_event_open(2) does, and it is {}: {} "
                                "a process of yours (-p PID) or a command instead, or ask root",
                                what, target_words(target.kind), sysctls_.paranoid, what));
    }
    if (target.kind == TargetKind::Thread) return may_measure_task(target.pid, what);
    for (pid_t pid : target_processes(target)) {
        if (auto ok = may_measure_task(pid, what); !ok) return ok;
    }
    return {};
}

Result<void> CallerRights::may_measure_task(pid_t pid, std::string_view what) const {
    const auto dir = proc_root_ / std::to_string(pid);
    auto status = read_text_file(dir / "status", 1 << 16);
    struct stat st {};
    if (!status || ::stat(dir.c_str(), &st) != 0) {
        return fail(Status::NoDev, fmt::format("process {}: no such process", pid));
    }
    const auto uids = status_ids(*status, "Uid:");
    const auto gids = status_ids(*status, "Gid:");
    if (!uids || !gids) {
        return fail(Status::BadData,
                    fmt::format("{}: no Uid: or Gid: line", (dir / "status").string()));
    }
    // PTRACE_MODE_READ_REALCREDS: the caller's real ids against the target's real, effective
    // and saved ones (not its file-system ids).
    const auto same = [](const std::array<unsigned long, 4>& ids, unsigned long id) {
        return ids[0] == id && ids[1] == id && ids[2] == id;
    };
    if (!same(*uids, uid_) || !same(*gids, gid_)) {
        return fail(Status::Perm,
                    fmt::format("process {} is not yours (its user ids are {} {} {}, its groups "
                                "{} {} {}; you are uid {} gid {}): a user other than root may "
                                "{} only processes it could ptrace, as perf_event_open(2) "
                                "allows; {} one of your own, or ask root",
                                pid, (*uids)[0], (*uids)[1], (*uids)[2], (*gids)[0], (*gids)[1],
                                (*gids)[2], uid_, gid_, what, what));
    }
    // A task that is not dumpable (it changed its credentials, or set PR_SET_DUMPABLE to 0)
    // has its /proc directory owned by root: the kernel's ptrace check refuses it too.
    if (st.st_uid != uid_) {
        return fail(Status::Perm,
                    fmt::format("process {} is not dumpable (it changed its credentials or "
                                "set PR_SET_DUMPABLE to 0), and the kernel lets no user other "
                                "than root {} such a process; ask root",
                                pid, what));
    }
    return {};
}

Result<void> CallerRights::may_measure_kernel(std::string_view what,
                                              std::string_view user_only) const {
    if (kernel()) return {};
    return fail(Status::Perm, fmt::format("{} in kernel mode: {}; measure user mode only ({}), "
                                          "or ask root",
                                          what, kernel_refusal(), user_only));
}

Result<PinnedProcess> PinnedProcess::pin(pid_t pid) {
    const long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        const int err = errno;
        if (err == ESRCH || err == EINVAL) {
            return fail(Status::NoDev,
                        fmt::format("process {}: no such process; name a running process (ps -e "
                                    "lists them)",
                                    pid));
        }
        return fail_errno(err, fmt::format("pidfd_open of process {}", pid));
    }
    return PinnedProcess{UniqueFd(static_cast<int>(fd))};
}

bool PinnedProcess::exited() const {
    pollfd p{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, 0) > 0;
}

}  // namespace monitor::perf
