// The naming half of a sampling run: what a drain of the rings read (a SampleBatch) is named
// and added up into a Profile. A ProfileSession reads its rings and names them with its own
// builder, or hands the builder to a ProfileNamer, which names on a thread of its own while its
// owner goes on reading (the daemon: naming reads other users' files, which its loop must never
// wait for).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "monitor/perf/kernel_symbols.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/perf/profile.hpp"
#include "monitor/perf/sample_ring.hpp"

namespace monitor::perf {

// What one drain of a run's rings read, owned (the rings' copies are gone after it): the
// samples and the task records of every ring in time order, and what each ring lost.
struct SampleBatch {
    struct Entry {
        std::uint64_t time_ns = 0;
        bool is_sample = true;
        std::size_t index = 0;  // in samples or tasks
    };
    struct Kept {
        Sample sample;  // its callchain points nowhere until used: chains[chain_at, + size)
        std::size_t chain_at = 0;
        std::size_t regs_at = 0;   // its user_regs: regs[regs_at, + size)
        std::size_t stack_at = 0;  // its user_stack: stacks[stack_at, + size)

        // Points the sample's spans into the batch's copies.
        void restore(const SampleBatch& batch);
    };
    std::vector<Entry> entries;
    std::vector<Kept> samples;
    std::vector<std::uint64_t> chains;
    std::vector<std::uint64_t> regs;
    std::vector<unsigned char> stacks;
    std::vector<std::pair<TaskRecord, std::string>> tasks;  // each with its own name's copy
    std::vector<std::pair<int, DrainStats>> drains;         // per ring: its CPU, its losses

    void clear();
    // Keeps a copy of `sample`, the chain, registers and stack it points at with it.
    void keep(const Sample& sample);
    // The samples are counted as their CPUs' unnamed (DrainStats); the task records stay, so that
    // later samples are still named right.
    void drop_samples();
};

struct ProfileBuilderOptions {
    bool by_cpu = false;  // each CPU's samples added up on their own as well
    AddressWindow kept_addresses{.start = 0, .end = 0};
    // Samples are named and added up; false: counted by mode only.
    bool profile = true;
    bool callchain = false;  // each sample's chain folded into a stack
    // The user part of each chain unwound from the sample's registers and stack
    // (DwarfUnwinder); the samples' own chains hold the kernel's part alone.
    bool dwarf = false;
    bool kernel = true;  // kernel mode is sampled: its names are needed
    std::filesystem::path kallsyms = "/proc/kallsyms";
    // The kernel's symbols read already; null: read `kallsyms` now when kernel samples are
    // named.
    std::shared_ptr<const KernelSymbols> kernel_symbols;
};

class DwarfUnwinder;

class ProfileBuilder {
  public:
    explicit ProfileBuilder(ProfileBuilderOptions options);
    ~ProfileBuilder();
    ProfileBuilder(const ProfileBuilder&) = delete;
    ProfileBuilder& operator=(const ProfileBuilder&) = delete;

    // Names the batch's samples and adds them up, its task records applied in time order.
    void add(SampleBatch& batch);
    // Every sample since the start.
    const Profile& profile() const { return profile_; }
    // The samples since the last call (since the start, at the first), and a new interval.
    Profile take_interval();

  private:
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
    void on_task(const TaskRecord& record);
    // Keeps what is known of names and processes within bounds (see its definition).
    void forget();
    static constexpr std::size_t kMaxNamesKept = std::size_t{1} << 16;
    void add(const Sample& sample);
    // The folded stack of `sample`, its user part unwound first with dwarf chains.
    std::string stack_of(const Sample& sample);
    // The folded stack of `sample`: its process's name, then its frames outermost first.
    std::string fold(const Sample& sample);
    // The name of code at `ip` in `mode` of the sample's process, as a frame.
    const std::string& frame(const Sample& sample, SampleMode mode, std::uint64_t ip);

    Profile profile_;
    Profile interval_;
    // With dwarf chains: the unwinder, which libdwfl's sessions in names_ point at (so it is
    // made first and goes last), and the chain of the sample being folded. A shared_ptr: its
    // deleter is taken where it is made, which a library without libdw never does.
    std::shared_ptr<DwarfUnwinder> unwinder_;
    std::vector<std::uint64_t> unwound_;
    std::unique_ptr<AddressNames> names_;
    std::unordered_map<LabelKey, SampleLabel, LabelHash> labels_;
    std::unordered_map<pid_t, std::uint32_t> generations_;
    // With call chains: each frame's name by (process, address), each process's name.
    std::unordered_map<LabelKey, std::string, LabelHash> frames_;
    std::string unknown_frame_;  // frame()'s name for code not known yet, kept out of frames_
    std::chrono::steady_clock::time_point forgot_at_{};
    std::unordered_map<pid_t, std::string> commands_;
    bool callchain_ = false;
    bool profiling_ = true;
};

}  // namespace monitor::perf
