// What surrounds a CPU's loading: how many tasks wait for it, how hard they press on it, its
// clock, and the interrupts it serves. From the kernel's own counters (proc(5), sysfs):
//
//   /proc/stat            procs_running, procs_blocked (now)
//   /proc/pressure/cpu    PSI: the share of the time some runnable task waited for a CPU
//   /proc/schedstat       per CPU, the time tasks spent waiting on its run queue
//   /sys/.../cpufreq      per CPU, scaling_cur_freq (now)
//   /proc/interrupts      per CPU and source, the interrupts served
//   /proc/softirqs        per CPU and kind, the softirqs run
//
// Each figure is optional: a kernel without PSI or schedstats, a VM without cpufreq lacks it,
// and the sample says why (unavailable). Rates are over the interval between two samples; the
// first sample has none.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"

namespace monitor {

// An interrupt source ("0", "NMI", "LOC"; a softirq kind: "TIMER") and its rate.
struct InterruptRate {
    std::string source;
    std::string description;  // the rest of its /proc/interrupts line ("IO-APIC 2-edge timer")
    double per_second = 0;
};

struct CpuContextFigures {
    int cpu = 0;
    // Tasks waiting for this CPU, on average over the interval (their run-queue wait time
    // over the interval's length; the one running is not counted).
    std::optional<double> waiting;
    std::optional<double> frequency_mhz;  // now
    std::optional<double> interrupts;     // per second, every source
    std::optional<double> softirqs;       // per second, every kind
    // Its busiest interrupt source over the interval ("" when none fired).
    std::string top_interrupt;
};

struct CpuContextSample {
    std::optional<std::uint64_t> procs_running;  // runnable tasks now, the readers included
    std::optional<std::uint64_t> procs_blocked;  // tasks waiting for I/O now
    // PSI over the interval: the share (0 to 1) of the time in which some runnable task
    // waited for a CPU; and the kernel's own averages over 10, 60 and 300 s, in percent (as
    // the kernel prints them).
    std::optional<double> pressure_some;
    std::optional<double> pressure_avg10, pressure_avg60, pressure_avg300;
    std::optional<double> waiting;     // tasks waiting for a CPU, the sum over the CPUs
    std::optional<double> interrupts;  // per second, every CPU and source
    std::optional<double> softirqs;
    std::vector<InterruptRate> interrupt_sources;  // those that fired, busiest first
    std::vector<InterruptRate> softirq_kinds;      // those that ran, busiest first
    std::vector<CpuContextFigures> cpus;           // sorted by CPU
    double seconds = 0;                            // the interval's length; 0 for the first sample
    // What this machine does not give, and why ("/proc/pressure/cpu: No such file or
    // directory (a kernel without CONFIG_PSI, or booted with psi=0)").
    std::vector<std::string> unavailable;
};

// The texts of one reading of the files (CpuContext::figure): the parsers' input is the
// kernel's text, exposed for the tests and the fuzz target.
struct CpuContextText {
    std::string stat, pressure, schedstat, interrupts, softirqs;
    std::map<int, std::string> frequency_khz;  // per CPU, scaling_cur_freq's text
};

class CpuContext {
  public:
    // Reads below `proc_root` ("/proc") and `sys_root` ("/sys"); the files are kept open
    // and re-read with pread. BADARG when none of the five files below `proc_root` can be
    // opened (not a procfs); the others missing are said in each sample's unavailable.
    static Result<CpuContext> open(const std::filesystem::path& proc_root,
                                   const std::filesystem::path& sys_root);

    CpuContext(CpuContext&&) noexcept;
    CpuContext& operator=(CpuContext&&) noexcept;
    ~CpuContext();

    // Reads every file once; rates over the time since the previous call. A file that
    // cannot be read or parsed is said in unavailable, and its figures are left out; only
    // when nothing can be read is it an error.
    Result<CpuContextSample> sample(std::chrono::steady_clock::time_point now);
    // Forgets the last reading: the next sample is a first one, without rates.
    void forget();

    // The figures from texts already read (previous: the texts of the sample before, taken
    // `seconds` earlier; nullptr for a first sample). An empty text is a file the machine
    // does not have; text that is not the kernel's format is said in unavailable (naming the
    // file and line), and that file's figures are left out, as sample() does.
    static CpuContextSample figure(const CpuContextText& now, const CpuContextText* previous,
                                   double seconds);

  private:
    struct State;
    explicit CpuContext(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace monitor
