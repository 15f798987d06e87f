// A sampling run on a target, as a counting session is a counting run: one sample ring per
// CPU (the kernel refuses to map a ring of an inherited event that follows a task across CPUs,
// so a process or a command is sampled on every CPU, as perf record does), every thread of a
// process sending its samples into its CPU's ring, and the samples added into one Profile as
// they are drained. The rings also carry the kernel's records of the sampled tasks (code
// mapped, exec, fork), used in time order with the samples, so that a process gone before its
// samples are read is still named.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/perf_session.hpp"
#include "monitor/perf/profile.hpp"
#include "monitor/perf/sample_ring.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// perf record's defaults: the CPU clock, about 4000 samples a second.
inline constexpr const char* kDefaultProfileEvent = "perf::CPU-CLOCK";
inline constexpr std::uint64_t kDefaultProfileFrequency = 4000;

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
    // The addresses whose samples are kept one by one (a histogram's range): none unless asked.
    AddressWindow kept_addresses{.start = 0, .end = 0};
    FileBudget files;                   // one file per CPU sampled and thread of the target
    std::string no_kernel_breakpoints;  // as SessionOptions's
};

class ProfileSession {
  public:
    // Opens the rings, enabled (a command's start at its exec). Errors name the event and the
    // target; a rate of 0 is BADARG.
    static Result<std::unique_ptr<ProfileSession>> start(const EventCatalog& catalog,
                                                         ProfileOptions options);

    // Adds the samples written since the last drain to the profile, and hands each to
    // `observer` if given, oldest first per ring.
    void drain(const std::function<void(const Sample&)>& observer = {});
    // Stops sampling, and drains what is left.
    Result<void> stop(const std::function<void(const Sample&)>& observer = {});

    // Every sample since the start (and each CPU's own, for TargetKind::EachCpu).
    const Profile& profile() const { return profile_; }
    // The samples since the last call (since the start, at the first), and a new interval.
    Profile take_interval();
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
    UniqueFd cgroup_fd_;
    Profile profile_;
    Profile interval_;
    std::unique_ptr<AddressNames> names_;
    // The label of each (process, address) named so far: a loop's samples hit the same few
    // addresses, which are named once. A pid that exec()s or is forked anew starts a new
    // generation of its names.
    struct LabelKey {
        pid_t pid;
        std::uint32_t generation;
        std::uint64_t ip;
        bool operator==(const LabelKey&) const = default;
    };
    struct LabelHash {
        std::size_t operator()(const LabelKey& k) const noexcept {
            return std::hash<std::uint64_t>{}(k.ip * 31 + static_cast<std::uint64_t>(k.pid) +
                                              (std::uint64_t{k.generation} << 32));
        }
    };
    LabelKey key(pid_t who, std::uint64_t ip) const;
    std::unordered_map<LabelKey, SampleLabel, LabelHash> labels_;
    std::unordered_map<pid_t, std::uint32_t> generations_;
    // With call chains: each frame's name by (process, address), each process's name.
    std::unordered_map<LabelKey, std::string, LabelHash> frames_;
    std::string unknown_frame_;  // frame()'s name for code not known yet, kept out of frames_
    std::chrono::steady_clock::time_point forgot_at_{};
    std::unordered_map<pid_t, std::string> commands_;
    std::vector<int> ring_cpus_;  // the CPU of each ring
    bool callchain_ = false;
    // A drain's samples and task records of every ring, put in time order before they are
    // used (a process's code may be mapped on one CPU and sampled on another), with the
    // samples' call chains and the records' names.
    struct Pending {
        std::uint64_t time_ns = 0;
        bool is_sample = true;
        std::size_t index = 0;  // in samples_ or tasks_
    };
    struct PendingSample {
        Sample sample;
        std::size_t chain_at = 0;
    };
    std::vector<Pending> pending_;
    std::vector<PendingSample> samples_;
    std::vector<std::uint64_t> chains_;
    std::vector<std::pair<TaskRecord, std::string>> tasks_;
    void on_task(const TaskRecord& record);
    // Keeps what is known of names and processes within bounds (see its definition).
    void forget();
    static constexpr std::size_t kMaxNamesKept = std::size_t{1} << 16;
    void add(const Sample& sample);
    // The folded stack of `sample`: its process's name, then its frames outermost first.
    std::string fold(const Sample& sample);
    // The name of code at `ip` in `mode` of the sample's process, as a frame.
    const std::string& frame(const Sample& sample, SampleMode mode, std::uint64_t ip);
    std::size_t threads_ = 0;
    bool stopped_ = false;
    bool profiling_ = true;
};

}  // namespace monitor::perf
