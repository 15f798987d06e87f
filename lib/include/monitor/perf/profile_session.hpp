// A sampling run on a target, as a counting session is a counting run: one sample ring per
// CPU (the kernel refuses to map a ring of an inherited event that follows a task across CPUs,
// so a process or a command is sampled on every CPU, as perf record does), every thread of a
// process sending its samples into its CPU's ring, and the samples added into one Profile as
// they are drained. The rings also carry the kernel's records of the sampled tasks (code
// mapped, exec, fork), used in time order with the samples, so that a process gone before its
// samples are read is still named.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/profile.hpp"
#include "monitor/perf/profile_builder.hpp"
#include "monitor/perf/sample_ring.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// perf record's defaults: the CPU clock, about 4000 samples a second.
inline constexpr const char* kDefaultProfileEvent = "perf::CPU-CLOCK";
inline constexpr std::uint64_t kDefaultProfileFrequency = 4000;

// How a profile's user-mode call chains are made (perf record --call-graph fp or dwarf).
enum class CallGraph { FramePointers, Dwarf };

// Each CPU's ring with dwarf chains, at least: 4 MiB, about 500 samples of 8 KiB, read when
// half full (at 4000 samples a second, every 60 ms or so) and at every drain besides.
inline constexpr std::size_t kDwarfRingPages = 1024;

// Why this library cannot unwind call chains from the sampled registers and stack (not
// x86-64, no libdw), or "" when it can.
std::string dwarf_unwinding_refusal();

struct ProfileOptions {
    std::string event = kDefaultProfileEvent;
    SampleRate rate{.frequency = kDefaultProfileFrequency};
    CountTarget target;
    std::vector<int> cpus;  // the online CPUs: a ring on each (one for OneCpu)
    std::string cgroup_root = "/sys/fs/cgroup";
    std::size_t ring_pages = 128;  // per CPU
    // The modes sampled (the event's own :u or :k still apply); not both false.
    bool user = true;
    bool kernel = true;
    std::filesystem::path kallsyms = "/proc/kallsyms";  // kernel samples' names
    // The kernel's symbols read already (a daemon's copy, shared by its profiles); null: read
    // `kallsyms` at the start.
    std::shared_ptr<const KernelSymbols> kernel_symbols;
    // Add the samples up into a profile, naming them; false: only hand them to drain()'s
    // observer (overflows: where each one was, without the cost of naming).
    bool profile = true;
    // Each sample's call chain, added up as folded stacks ("app;main;work;burn"). User-mode
    // chains follow frame pointers, as perf record -g does: code built without them (most of
    // Debian's libraries) ends its chain early or with a wrong caller.
    bool callchain = false;
    // How user-mode chains are made: frame pointers, or (CallGraph::Dwarf) unwound from each
    // sample's registers and `user_stack` bytes of its stack by the code's call frame
    // information, as perf record --call-graph dwarf does; the kernel's part of a chain stays the
    // kernel's. Dwarf makes each sample about `user_stack` bytes larger, so each CPU's ring
    // grows to kDwarfRingPages at least. Dwarf needs x86-64 and libdw.
    CallGraph call_graph = CallGraph::FramePointers;
    std::uint32_t user_stack = kDefaultUserStack;
    // The addresses whose samples are kept one by one (a histogram's range): none unless asked.
    AddressWindow kept_addresses{.start = 0, .end = 0};
    FileBudget files;                 // one file per CPU sampled and thread of the target
    std::string no_kernel_addresses;  // as SessionOptions's
};

class ProfileSession {
  public:
    // Opens the rings, enabled (a command's start at its exec). Errors name the event and the
    // target; a rate of 0 is BADARG.
    static Result<std::unique_ptr<ProfileSession>> start(const EventCatalog& catalog,
                                                         ProfileOptions options);

    // Adds the samples written since the last drain to the profile, and hands each to
    // `observer` if given, oldest first.
    void drain(const std::function<void(const Sample&)>& observer = {});
    // Stops sampling, and drains what is left.
    Result<void> stop(const std::function<void(const Sample&)>& observer = {});

    // Naming elsewhere (a ProfileNamer): the session's builder, which drain(), stop(),
    // profile() and take_interval() use, is the caller's from now on; read() and disable()
    // take their place.
    std::unique_ptr<ProfileBuilder> take_builder() { return std::move(builder_); }
    // The samples and task records written since the last read, in time order, into `batch`
    // (cleared first); each sample handed to `observer` if given.
    void read(SampleBatch& batch, const std::function<void(const Sample&)>& observer = {});
    // Stops sampling; what is left is read() after it.
    Result<void> disable();
    // Stops sampling until resume(), the rings kept: what they hold stays to be read. Neither
    // does anything once sampling stopped.
    Result<void> pause();
    Result<void> resume();

    // Every sample since the start (and each CPU's own, for TargetKind::EachCpu).
    const Profile& profile() const { return builder_->profile(); }
    // The samples since the last call (since the start, at the first), and a new interval.
    Profile take_interval() { return builder_->take_interval(); }
    const EventSpec& event() const { return event_; }
    // The threads of a process target opened at the start.
    std::size_t threads() const { return threads_; }
    // The rings' descriptors, to poll(2) for samples.
    std::vector<int> fds() const;
    // The perf_event files it holds (FileBudget).
    std::size_t files() const;

  private:
    ProfileSession() = default;

    EventSpec event_;
    std::vector<std::unique_ptr<SampleRing>> rings_;
    std::vector<int> ring_cpus_;  // the CPU of each ring
    UniqueFd cgroup_fd_;
    std::unique_ptr<ProfileBuilder> builder_;
    SampleBatch batch_;  // drain()'s
    std::size_t threads_ = 0;
    bool stopped_ = false;
};

}  // namespace monitor::perf
