// The kernel's text monitord reads every second, which a container or an injected root may
// make anything: /proc/stat, and the CPU lists of /sys/devices/system/cpu. A parsed list is
// sorted, unique and non-negative, as its callers take it; a parsed /proc/stat has its cpuN
// lines sorted by N. The CPUs' context (/proc/interrupts, softirqs, schedstat, pressure/cpu,
// cpufreq), the text read as each of its files against its own first half a second before:
// every rate finite and not negative, the CPUs sorted and unique. A task's stat line: its name
// within the text, its CPU not negative. A process's cgroup file: the cgroup a part of the
// text, its unit a part of the cgroup.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/loading/cpu_context.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/proc_stat.hpp"
#include "monitor/loading/task_usage.hpp"
#include "monitor/loading/unit_usage.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto cpus = monitor::parse_cpu_list(text)) {
        if (!std::ranges::is_sorted(*cpus) || std::ranges::adjacent_find(*cpus) != cpus->end() ||
            (!cpus->empty() && cpus->front() < 0)) {
            std::abort();
        }
    }
    if (auto stat = monitor::parse_proc_stat(text)) {
        if (!std::ranges::is_sorted(stat->cpus, {}, [](const auto& c) { return c.cpu; })) {
            std::abort();
        }
    }
    if (auto st = monitor::parse_task_stat(text)) {
        if (st->comm.data() < text.data() ||
            st->comm.data() + st->comm.size() > text.data() + text.size() || st->processor < 0) {
            std::abort();
        }
    }
    for (auto accounting : {monitor::CgroupAccounting::V2, monitor::CgroupAccounting::V1Cpuacct}) {
        if (auto cgroup = monitor::cgroup_of_process(text, accounting)) {
            if (text.find(*cgroup) == std::string_view::npos) std::abort();
            const auto unit = monitor::unit_of_cgroup(*cgroup);
            if (cgroup->find(unit) == std::string::npos) std::abort();
        }
    }
    const std::string now(text);
    const std::string half(text.substr(0, text.size() / 2));
    const monitor::CpuContextText a{now, now, now, now, now, {{0, now}}};
    const monitor::CpuContextText b{half, half, half, half, half, {{0, half}}};
    for (const auto& [later, earlier] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        const auto s = monitor::CpuContext::figure(*later, earlier, 1.0);
        auto bad = [](const std::optional<double>& v) {
            return v && (!std::isfinite(*v) || *v < 0);
        };
        if (bad(s.pressure_some) || bad(s.waiting) || bad(s.interrupts) || bad(s.softirqs)) {
            std::abort();
        }
        for (const auto* list : {&s.interrupt_sources, &s.softirq_kinds}) {
            for (const auto& r : *list) {
                if (!std::isfinite(r.per_second) || r.per_second <= 0) std::abort();
            }
        }
        for (std::size_t i = 0; i < s.cpus.size(); ++i) {
            if (i > 0 && s.cpus[i - 1].cpu >= s.cpus[i].cpu) std::abort();
            if (bad(s.cpus[i].waiting) || bad(s.cpus[i].interrupts) || bad(s.cpus[i].softirqs)) {
                std::abort();
            }
        }
    }
    return 0;
}
