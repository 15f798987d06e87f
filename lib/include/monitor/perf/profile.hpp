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

struct ProfileReport {
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;       // samples the kernel dropped (ring full)
    std::uint64_t throttled = 0;  // times the kernel throttled the sampling
    ModeSplit modes;
    std::vector<ProfileLine> functions;  // most samples first
    std::vector<ProfileLine> objects;
};

// The counts of an address range in buckets: bucket i covers [start + i * size, + size).
struct AddressHistogram {
    std::uint64_t start = 0;
    std::uint64_t bucket_size = 4;
    std::vector<std::uint64_t> buckets;
    std::uint64_t samples = 0;  // in the range, of all the profile's
};

// What a sample is counted under: "burn_three (/usr/bin/app)" in "/usr/bin/app",
// "schedule ([kernel.kallsyms])", "[idle]".
struct SampleLabel {
    std::string function;
    std::string object;
};

// The number of buckets of `bucket_size` bytes that cover [start, end): BADARG for an empty
// range, a bucket size of 0, or more than `max_buckets` buckets (saying how to ask for fewer).
Result<std::size_t> histogram_buckets(std::uint64_t start, std::uint64_t end,
                                      std::uint64_t bucket_size = 4,
                                      std::size_t max_buckets = 1 << 20);

class Profile {
  public:
    // The function and object of a sample, named now through `names` (so that the process
    // is still there to be asked).
    static SampleLabel label(const Sample& sample, AddressNames& names);
    // Adds a sample, counted under `label`.
    void add(const Sample& sample, const SampleLabel& label);
    void add(const Sample& sample, AddressNames& names) { add(sample, label(sample, names)); }
    // Counts a sample by its mode only, not by function, object or address.
    void count(const Sample& sample);
    // Adds what a drain of a ring lost or throttled.
    void add(const DrainStats& drain);

    // The top `top` functions and objects (all for 0), with their share of all samples.
    ProfileReport report(std::size_t top = 0) const;

    // The samples in [start, end) in buckets of `bucket_size` bytes; histogram_buckets()'s
    // errors.
    Result<AddressHistogram> histogram(std::uint64_t start, std::uint64_t end,
                                       std::uint64_t bucket_size = 4,
                                       std::size_t max_buckets = 1 << 20) const;

  private:
    std::uint64_t samples_ = 0;
    std::uint64_t lost_ = 0;
    std::uint64_t throttled_ = 0;
    ModeSplit modes_;
    std::map<std::string, std::uint64_t> functions_;
    std::map<std::string, std::uint64_t> objects_;
    std::map<std::uint64_t, std::uint64_t> addresses_;  // ip -> samples
};

}  // namespace monitor::perf
