// The MON tasks' attributes (MON_task_attr): their checks, and applying them to a thread.
// The IDLE task is the engine's probes (EngineOptions::probe_attr and probe_cpus); the POLL
// task applies its own on its thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mon.h"

namespace monitor::mon {

// SCHED_OTHER and SCHED_BATCH, whose priority is a nice value.
bool is_nice_policy(int policy);
// MON_SUCCESS, or BADARG / NULLPTR (recorded by fail()) naming `task` and what is wrong.
// `idle`: the IDLE task, which must not run at a real-time policy.
MON_status check_attr(const char* task, const MON_task_attr& a, bool idle);
// The CPUs of `a`; nullopt for every CPU.
std::optional<std::vector<int>> cpu_list(const MON_task_attr& a);
// Applies the POLL task's attributes to the calling thread; "" on success, else why not.
std::string apply_poll_attr(const MON_task_attr& a);

}  // namespace monitor::mon
