// What a counting session or a profile measures: whole CPUs, one CPU, a process, a thread or a
// cgroup; and the threads of a process as the kernel lists them.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::perf {

enum class TargetKind {
    AllCpus,  // every online CPU, counts added up
    EachCpu,  // every online CPU, counts kept per CPU
    OneCpu,   // one CPU
    // Every thread of a process, and the threads and children they start afterwards, on any
    // CPU. The threads are those of /proc/PID/task when the session starts (a thread's id
    // counts its whole process, as perf stat -p does); the ones started later are counted
    // by inheritance. The counts of all of them are added up into one instance.
    Process,
    Thread,  // one thread, and the threads and children it starts afterwards, on any CPU
    Cgroup,  // the tasks of a cgroup, on every online CPU
};

struct CountTarget {
    TargetKind kind = TargetKind::AllCpus;
    int cpu = -1;           // OneCpu
    std::vector<int> cpus;  // AllCpus, EachCpu: only these, ascending (empty: every online CPU)
    pid_t pid = -1;         // Process: the process; Thread: the thread's id
    // Process: start counting at its next exec (a command launched to be counted, stopped
    // before its exec: it has one thread, which is all that is opened).
    bool enable_on_exec = false;
    // enable_on_exec: the executable it will run, where breakpoints named by symbol are
    // looked up (the process is not running it yet).
    std::filesystem::path program;
    std::string cgroup;  // Cgroup: a path below the cgroup2 root, or absolute
    // Process: several processes (perf stat -p 1,2), ascending, their threads counted into the
    // one instance as one process's are; `pid` is the first. Empty: `pid` alone.
    std::vector<pid_t> pids;
};

// The processes of a Process target: its `pids`, or its `pid` alone.
std::vector<pid_t> target_processes(const CountTarget& target);

// "process 42", "processes 42, 43": for messages.
std::string processes_text(const std::vector<pid_t>& pids);

// The CPUs a target opens its counters or rings on, given the CPUs online now: the one CPU of
// OneCpu, the listed ones of AllCpus and EachCpu (every online one without a list); `online`
// for the task targets, which are opened per CPU by a profile. NODEV naming a CPU that is not
// online, and those that are.
Result<std::vector<int>> target_cpus(const CountTarget& target, const std::vector<int>& online);

// The threads of process `pid` now: the entries of /proc/PID/task, as perf stat -p reads them
// (for the id of a thread that is not the main one, the threads of its whole process). NODEV
// for a process that is gone.
Result<std::vector<pid_t>> process_threads(pid_t pid);

// The threads of several processes, ascending and each once (two ids of one process list the
// same threads). NODEV for the first process that is gone.
Result<std::vector<pid_t>> process_threads(const std::vector<pid_t>& pids);

}  // namespace monitor::perf
