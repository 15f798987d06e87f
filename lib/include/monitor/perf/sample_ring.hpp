// One sampling event and the ring buffer the kernel writes its samples into: every `period`
// events (or about `frequency` times a second) the kernel records where the target was (the
// instruction address, the process and thread, the CPU, the mode), and the records that it
// had to drop because the ring was full, and its throttling of too frequent samples. The
// reader drains the ring whenever it likes; nothing is lost but what the kernel reports lost.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_spec.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// How often the kernel samples: every `period` events of the event (pfm's counter preload),
// or about `frequency` times a second (the kernel adjusts the period to keep to it).
struct SampleRate {
    std::uint64_t period = 0;
    std::uint64_t frequency = 0;
};

// The mode the processor was in at a sample (pfm's IPL histogram).
enum class SampleMode : std::uint8_t { User, Kernel, Hypervisor, Guest, Unknown };

struct Sample {
    std::uint64_t ip = 0;  // the sampled instruction address (the SIA)
    pid_t pid = -1;        // 0: the idle task
    pid_t tid = -1;
    int cpu = -1;
    std::uint64_t time_ns = 0;  // CLOCK_MONOTONIC, as perf_event_open's default clock
    std::uint64_t period = 0;   // the events this sample stands for
    SampleMode mode = SampleMode::Unknown;
    // With call chains: the kernel's chain, innermost first, its parts headed by the
    // PERF_CONTEXT_KERNEL and PERF_CONTEXT_USER markers. It points into the ring's copy of the
    // record: valid in the drain's callback only (a copy kept beyond it must clear it).
    std::span<const std::uint64_t> callchain;
    // With the user registers and stack (SampleContent::user_regs, user_stack): the user-mode
    // registers of the sampled thread, those of the mask in the order of their bits (none for
    // a kernel thread), and the bytes of its user stack from the stack pointer up, as much as
    // was there. Valid in the drain's callback only, as the chain.
    std::span<const std::uint64_t> user_regs;
    std::span<const unsigned char> user_stack;
};

// The user stack copied with each sample for DWARF unwinding: perf record --call-graph
// dwarf's default, and the most perf accepts (a record's size is 16 bits: the kernel copies
// less when the rest of the record leaves no room for it all).
inline constexpr std::uint32_t kDefaultUserStack = 8192;
inline constexpr std::uint32_t kMaxUserStack = 65528;

// What each sample carries besides where it was, and what else the ring is told.
struct SampleContent {
    bool callchain = false;  // each sample's call chain (frame pointers in user mode)
    // The user-mode chain left out of `callchain` (the kernel's part only), as perf record
    // --call-graph dwarf asks: the user part is unwound from the registers and stack.
    bool kernel_chain_only = false;
    // The user-mode registers of this mask (PERF_SAMPLE_REGS_USER, bits PERF_REG_*), and this
    // many bytes of the user stack (PERF_SAMPLE_STACK_USER, a multiple of 8): 0, neither.
    std::uint64_t user_regs = 0;
    std::uint32_t user_stack = 0;
    // The sampled tasks' code mappings, exec()s and forks (TaskRecord), so that a process
    // that is gone when its samples are read can still be named.
    bool tasks = false;
};

// What the kernel tells of the sampled tasks besides their samples (SampleContent::tasks).
struct TaskRecord {
    enum class Kind : std::uint8_t {
        Mapped,  // code mapped (PERF_RECORD_MMAP2, executable mappings)
        Exec,    // a new program (PERF_RECORD_COMM of an exec): `name` is its command name
        Fork,    // a new process, a copy of `parent`
    };
    Kind kind = Kind::Mapped;
    pid_t pid = -1;
    pid_t parent = -1;
    std::uint64_t time_ns = 0;  // as a Sample's: the records of all rings can be put in order
    std::uint64_t start = 0;    // Mapped: where, how long, from which offset of which file
    std::uint64_t length = 0;
    std::uint64_t offset = 0;
    std::uint32_t major = 0;
    std::uint32_t minor = 0;
    std::uint64_t inode = 0;
    std::string_view name;  // Mapped: the file ("[vdso]", "//anon"); Exec: the command.
                            // Valid in the drain's callback only.
};

// What one drain found besides the samples.
struct DrainStats {
    std::size_t samples = 0;
    std::uint64_t lost = 0;       // samples the kernel dropped: the ring was full
    std::uint64_t throttled = 0;  // times the kernel throttled the event (too many samples)
    // Samples read and then dropped unnamed: the naming fell behind (ProfileNamer).
    std::uint64_t unnamed = 0;
};

class SampleRing {
  public:
    // Opens `event` on `target` sampling at `rate`, disabled, with a ring of `pages` pages
    // (a power of two) of data, its samples carrying `content`. BADARG for a rate of 0 or both
    // given, or a bad page count; the counter device's explanations for what perf_event_open
    // refuses.
    static Result<std::unique_ptr<SampleRing>> open(const EventSpec& event,
                                                    const OpenTarget& target, SampleRate rate,
                                                    std::size_t pages = 64,
                                                    SampleContent content = {});
    // Opens `event` on another `target` (another thread, on the same CPU) writing its samples
    // into this ring (PERF_EVENT_IOC_SET_OUTPUT), disabled until enable(). `rate` must be the
    // ring's own, and the samples are made with the ring's content: its records are read as
    // the ring's.
    Result<void> attach(const EventSpec& event, const OpenTarget& target, SampleRate rate);
    ~SampleRing();
    SampleRing(const SampleRing&) = delete;
    SampleRing& operator=(const SampleRing&) = delete;

    // Every event of the ring.
    Result<void> enable();
    Result<void> disable();

    // Hands each sample written since the last drain to `on_sample`, and each task record to
    // `on_task` (if given), oldest first, and frees their place in the ring.
    DrainStats drain(const std::function<void(const Sample&)>& on_sample,
                     const std::function<void(const TaskRecord&)>& on_task = {});

    // The events its first event counted so far (with a period, the samples due are this over
    // the period).
    Result<std::uint64_t> count() const;

    // The descriptor, to poll(2) for data.
    int fd() const { return fd_.get(); }
    // The perf_event files it holds: its own and the attached ones.
    std::size_t files() const { return 1 + attached_.size(); }

  private:
    SampleRing(UniqueFd fd, void* map, std::size_t map_size, std::size_t data_offset,
               std::size_t data_size);

    UniqueFd fd_;
    std::vector<UniqueFd> attached_;
    void* map_ = nullptr;
    std::size_t map_size_ = 0;
    std::size_t data_offset_ = 0;
    std::size_t data_size_ = 0;
    std::uint64_t period_ = 0;  // the fixed period; 0 with a frequency
    SampleContent content_;
};

}  // namespace monitor::perf
