#include "mon_tasks.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "mon_status.hpp"
#include "monitor/status.hpp"

namespace monitor::mon {

bool is_nice_policy(int policy) {
    return policy == SCHED_OTHER || policy == SCHED_BATCH;
}

MON_status check_attr(const char* task, const MON_task_attr& a, bool idle) {
    const bool rt = a.policy == SCHED_FIFO || a.policy == SCHED_RR;
    if (idle && rt) {
        return fail(MON_BADARG, std::string{task} +
                                    ": a real-time policy would let the spinning IDLE task take "
                                    "the CPU from everything else; use SCHED_IDLE");
    }
    if (!rt && !is_nice_policy(a.policy) && a.policy != SCHED_IDLE) {
        return fail(MON_BADARG,
                    std::string{task} + ": unknown scheduling policy " + std::to_string(a.policy));
    }
    if (rt && (a.priority < sched_get_priority_min(a.policy) ||
               a.priority > sched_get_priority_max(a.policy))) {
        return fail(MON_BADARG, std::string{task} + ": priority " + std::to_string(a.priority) +
                                    " is out of range for a real-time policy (1 to 99)");
    }
    if (is_nice_policy(a.policy) && (a.priority < -20 || a.priority > 19)) {
        return fail(MON_BADARG, std::string{task} + ": nice value " + std::to_string(a.priority) +
                                    " is out of range (-20 to 19)");
    }
    if (a.ncpus > 0 && a.cpus == nullptr) {
        return fail(MON_NULLPTR, std::string{task} + ": ncpus is " + std::to_string(a.ncpus) +
                                     " but cpus is NULL");
    }
    for (unsigned i = 0; i < a.ncpus; ++i) {
        if (a.cpus[i] < 0 || a.cpus[i] >= CPU_SETSIZE) {
            return fail(MON_BADARG, std::string{task} + ": no CPU " + std::to_string(a.cpus[i]));
        }
    }
    return MON_SUCCESS;
}

std::optional<std::vector<int>> cpu_list(const MON_task_attr& a) {
    if (a.ncpus == 0) return std::nullopt;
    return std::vector<int>(a.cpus, a.cpus + a.ncpus);
}

std::string apply_poll_attr(const MON_task_attr& a) {
    if (a.ncpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (unsigned i = 0; i < a.ncpus; ++i) CPU_SET(static_cast<std::size_t>(a.cpus[i]), &set);
        if (int r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); r != 0) {
            return std::string{"cannot set the POLL task's CPUs: "} + errno_message(r);
        }
    }
    sched_param p{};
    p.sched_priority = is_nice_policy(a.policy) || a.policy == SCHED_IDLE ? 0 : a.priority;
    if (int r = pthread_setschedparam(pthread_self(), a.policy, &p); r != 0) {
        return std::string{"cannot set the POLL task's policy: "} + errno_message(r) +
               (r == EPERM ? " (a real-time policy needs CAP_SYS_NICE)" : "");
    }
    if (is_nice_policy(a.policy)) {
        if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), a.priority) != 0) {
            return std::string{"cannot set the POLL task's nice value: "} + errno_message(errno);
        }
    }
    return {};
}

}  // namespace monitor::mon
