// A PC sampling profile (the seeds' pfm PC histograms): the samples of a sampling run added
// up by function, by object, by mode (pfm's IPL histogram: idle, user, kernel) and by
// address, with what the kernel lost or throttled, never hidden. Functions and objects are
// named as the samples come (AddressNames), so a process that exits mid-profile keeps its
// names; an address range histogram (pfm's PCNTSETUADDR, 4-byte buckets by default) is made
// from the raw addresses afterwards.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "monitor/perf/process_symbols.hpp"
#include "monitor/perf/sample_ring.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

struct ProfileLine {
    std::string name;  // "burn_three (/usr/bin/app)", "/usr/lib/libc.so.6", ...
    std::uint64_t samples = 0;
    double percent = 0;  // of all the samples
};

struct ModeSplit {
    std::uint64_t idle = 0;    // the idle task (pid 0)
    std::uint64_t user = 0;    // user mode of a process
    std::uint64_t kernel = 0;  // kernel mode of a process
    std::uint64_t other = 0;   // hypervisor, guest, unknown
};

struct CpuProfileReport;

struct ProfileReport {
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;       // samples the kernel dropped (ring full)
    std::uint64_t throttled = 0;  // times the kernel throttled the sampling
    std::uint64_t unnamed = 0;    // samples dropped unnamed: the naming fell behind
    ModeSplit modes;
    std::vector<ProfileLine> functions;  // most samples first
    std::vector<ProfileLine> objects;
    // With call chains: every stack, folded ("app;main;work;burn"), most samples first.
    std::vector<ProfileLine> stacks;
    // A profile of each CPU: each CPU's own, by CPU (its percentages of its own samples).
    std::vector<CpuProfileReport> cpus;
};

struct CpuProfileReport {
    int cpu = -1;
    ProfileReport report;  // without stacks or CPUs of its own
};

// The counts of an address range in buckets: bucket i covers [start + i * size, + size).
struct AddressHistogram {
    std::uint64_t start = 0;
    std::uint64_t bucket_size = 4;
    std::vector<std::uint64_t> buckets;
    std::uint64_t samples = 0;  // in the range, of all the profile's
};

// What a sample is counted under: "burn_three (/usr/bin/app)" in "/usr/bin/app",
// "schedule ([kernel.kallsyms])", "[idle]"; and its name as a frame of a folded stack, as
// flame graphs take them: "burn_three", "schedule_[k]" (kernel code), "[libc.so.6]" (code
// without a symbol).
struct SampleLabel {
    std::string function;
    std::string object;
    std::string frame;
};

// Distinct stacks kept by a profile; the samples of any further stack are counted under
// kMoreStacks, so that a profile's memory stays bounded.
inline constexpr std::size_t kMaxStacks = 50'000;
inline constexpr const char* kMoreStacks = "[more stacks than 50000]";

// Addresses [start, end): by default all of them.
struct AddressWindow {
    std::uint64_t start = 0;
    std::uint64_t end = ~std::uint64_t{0};
};

// The number of buckets of `bucket_size` bytes that cover [start, end): BADARG for an empty
// range, a bucket size of 0, or more than `max_buckets` buckets (saying how to ask for fewer).
Result<std::size_t> histogram_buckets(std::uint64_t start, std::uint64_t end,
                                      std::uint64_t bucket_size = 4,
                                      std::size_t max_buckets = 1 << 20);

class Profile {
  public:
    // `by_cpu`: each CPU's samples are added up on their own as well.
    // `kept`: the addresses whose samples are counted one by one, for histogram(); others
    // only by function and object (a profile asked for no histogram keeps none).
    explicit Profile(bool by_cpu = false, AddressWindow kept = {}) : by_cpu_(by_cpu), kept_(kept) {}

    // The function and object of a sample, named now through `names` (so that the process
    // is still there to be asked).
    static SampleLabel label(const Sample& sample, AddressNames& names);
    // The label of the code at `ip` in `mode` of process `pid` (a return address of a call
    // chain is named by the call before it: give ip - 1).
    static SampleLabel label(pid_t pid, SampleMode mode, std::uint64_t ip, AddressNames& names);
    // Adds a sample, counted under `label`, and under its folded call chain `stack` if given.
    void add(const Sample& sample, const SampleLabel& label, const std::string& stack = {});
    void add(const Sample& sample, AddressNames& names) { add(sample, label(sample, names)); }
    // Counts a sample by its mode only, not by function, object or address.
    void count(const Sample& sample);
    // Adds what a drain of a ring on `cpu` lost or throttled.
    void add(const DrainStats& drain, int cpu = -1);

    // The top `top` functions and objects (all for 0), with their share of all samples; every
    // stack; each CPU's own top `top`.
    ProfileReport report(std::size_t top = 0) const;
    bool by_cpu() const { return by_cpu_; }
    AddressWindow kept_addresses() const { return kept_; }

    // The samples in [start, end) in buckets of `bucket_size` bytes; histogram_buckets()'s
    // errors.
    Result<AddressHistogram> histogram(std::uint64_t start, std::uint64_t end,
                                       std::uint64_t bucket_size = 4,
                                       std::size_t max_buckets = 1 << 20) const;

  private:
    // The samples of the whole profile or of one CPU.
    struct Tally {
        std::uint64_t samples = 0;
        std::uint64_t lost = 0;
        std::uint64_t throttled = 0;
        std::uint64_t unnamed = 0;
        ModeSplit modes;
        std::map<std::string, std::uint64_t> functions;
        std::map<std::string, std::uint64_t> objects;

        void count(const Sample& s);
        void add(const Sample& s, const SampleLabel& label);
        ProfileReport report(std::size_t top) const;
    };

    bool by_cpu_ = false;
    AddressWindow kept_;
    Tally all_;
    std::map<int, Tally> cpus_;
    std::map<std::uint64_t, std::uint64_t> addresses_;  // ip -> samples, within kept_
    std::map<std::string, std::uint64_t> stacks_;
};

}  // namespace monitor::perf
