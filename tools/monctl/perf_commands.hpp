// monctl perf ...: the counter commands. `perf stat` counts a command it launches itself,
// with the library, like perf stat; the others ask monitord.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/cpu_topology.hpp"
#include "monitor/status.hpp"

namespace monctl {

struct PerfOptions {
    std::string socket;
    bool json = false;
    bool csv = false;
    std::string events;
    // Derived metrics by group or name (-M ipc,branch): their events are counted too.
    std::string metrics;
    bool list_metrics = false;  // perf list --metrics
    bool list_all = false;      // perf list --metrics --all: those that cannot count here too
    std::string duration = "1s";
    std::string interval;  // empty: no periods
    // perf stat's -I MSEC: the same as --interval, a bare number in milliseconds as perf's.
    std::string interval_print;
    std::optional<std::string> separator;  // -x SEP: perf stat's separated fields
    std::string output;                    // -o FILE: the counts there, with perf's header
    int repeat = 1;                        // perf stat -r N: the command N times, mean and spread
    bool per_cpu = false;
    // --per-core, --per-die, --per-socket, --per-node (with per_cpu: each CPU's counts added up
    // by that level).
    monitor::CpuLevel per = monitor::CpuLevel::Cpu;
    std::vector<int> cpus;   // -C 0,2-3: these CPUs (one: that CPU)
    std::vector<long> pids;  // -p 42,43: these processes (one: that process)
    std::string cgroup;
    std::string unit;
    std::string mux = "daemon";
    std::optional<int> slice_ms;
    std::optional<int> counters;               // counter budget
    std::optional<std::int64_t> sample_every;  // the SIA: sample each event every N events
    std::string pmu;                           // perf list
    std::string session;                       // perf show: one standing session
    std::vector<std::string> command;
    // perf profile
    std::string profile_duration;  // empty: 5 s, or until the command exits
    std::optional<std::int64_t> frequency;
    std::optional<std::int64_t> period;
    bool user = false;    // user mode only
    bool kernel = false;  // kernel mode only
    int top = 20;
    std::string range;  // START-END[/BUCKET]
    bool callchain = false;
    std::string call_graph;  // --call-graph fp | dwarf[,SIZE] (empty: -g's frame pointers)
    std::string folded;  // a file for the folded stacks; "-": standard output
    std::string pprof;   // a file for the whole profile in pprof's format (gzipped protobuf)
    std::string batch;   // perf overflows: how often a batch comes (empty: 100 ms)
};

int perf_info(const PerfOptions& o);
int perf_list(const PerfOptions& o);
int perf_plan(const PerfOptions& o);
int perf_collect(const PerfOptions& o);
int perf_start(const PerfOptions& o);
int perf_read(const PerfOptions& o);
int perf_stop(const PerfOptions& o);
// The standing sessions of monitord.conf, or the one named.
int perf_show(const PerfOptions& o);
// ResetCounters: the counts up to the reset, as `perf read` shows them.
int perf_reset(const PerfOptions& o);
// PauseCounters (`pause`) or ResumeCounters: the counts so far, as `perf read` shows them.
int perf_pause(const PerfOptions& o, bool pause);
// Runs the command counted from its first instruction to its exit; returns its exit code
// (128 + the signal when a signal ended it), or 1 (127 when it could not be started).
int perf_stat(const PerfOptions& o);
// Asks monitord to sample a target (or a command monctl launches, until it exits) and shows
// the profile; with an interval, each interval's too. A command's exit code is returned as
// perf_stat does.
int perf_profile(const PerfOptions& o);
// Asks monitord to tell of the overflows of an event every `period` events on a target, and
// shows each batch as it comes, then the totals.
int perf_overflows(const PerfOptions& o);

}  // namespace monctl
