#include "monitor/perf/count_target.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>

#include "monitor/perf/counter_device.hpp"

namespace monitor::perf {

Result<std::vector<int>> target_cpus(const CountTarget& target, const std::vector<int>& online) {
    std::vector<int> cpus;
    if (target.kind == TargetKind::OneCpu) {
        cpus = {target.cpu};
    } else if ((target.kind == TargetKind::AllCpus || target.kind == TargetKind::EachCpu) &&
               !target.cpus.empty()) {
        cpus = target.cpus;
    } else {
        return online;
    }
    for (int cpu : cpus) {
        if (std::ranges::find(online, cpu) == online.end()) {
            return fail(Status::NoDev, fmt::format("cpu{} is not online (online: {})", cpu,
                                                   fmt::join(online, ", ")));
        }
    }
    return cpus;
}

Result<std::vector<pid_t>> process_threads(pid_t pid) {
    const std::string dir = fmt::format("/proc/{}/task", pid);
    auto gone = [&] {
        return fail(Status::NoDev, fmt::format("process {}: no such process ({} does not exist); "
                                               "name a running process (ps -e lists them)",
                                               pid, dir));
    };
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        const int err = errno;
        if (err == ENOENT || err == ESRCH) return gone();
        if (err == EMFILE) {
            return fail(Status::IoErr, fmt::format("process {}: cannot list its threads in {}: "
                                                   "out of file descriptors ({}); raise the limit "
                                                   "or count fewer events",
                                                   pid, dir, descriptor_limit()));
        }
        return fail_errno(err, fmt::format("process {}: list its threads in {}", pid, dir));
    }
    std::vector<pid_t> tids;
    errno = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir races only on one stream, and d is ours
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        pid_t tid = 0;
        auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
        if (ec == std::errc{} && end == name.data() + name.size() && tid > 0) tids.push_back(tid);
        errno = 0;
    }
    const int err = errno;
    ::closedir(d);
    // A process that ends while its directory is read: the directory has gone.
    if (err == ENOENT || err == ESRCH || (err == 0 && tids.empty())) return gone();
    if (err != 0) return fail_errno(err, fmt::format("process {}: read {}", pid, dir));
    return tids;
}

Result<std::vector<pid_t>> process_threads(const std::vector<pid_t>& pids) {
    std::vector<pid_t> all;
    for (pid_t pid : pids) {
        auto tids = process_threads(pid);
        if (!tids) return tids;
        all.insert(all.end(), tids->begin(), tids->end());
    }
    std::ranges::sort(all);
    all.erase(std::ranges::unique(all).begin(), all.end());
    return all;
}

std::vector<pid_t> target_processes(const CountTarget& target) {
    if (!target.pids.empty()) return target.pids;
    return {target.pid};
}

std::string processes_text(const std::vector<pid_t>& pids) {
    return fmt::format("process{} {}", pids.size() == 1 ? "" : "es", fmt::join(pids, ", "));
}

}  // namespace monitor::perf
