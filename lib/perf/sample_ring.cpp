#include "monitor/perf/sample_ring.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::perf {
namespace {

// The ring's head, which the kernel publishes after writing the records before it. Where
// 64-bit atomics would take libatomic's lock (32-bit PowerPC), which the kernel never takes
// anyway, the two halves are read apart, the high one twice: the head only grows, so equal
// high halves mean the low one belongs with them. (A 32-bit kernel keeps the head in a
// 32-bit word, and the high half is 0.)
std::uint64_t load_head(const perf_event_mmap_page* page) {
    if constexpr (std::atomic<std::uint64_t>::is_always_lock_free) {
        return __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    } else {
        const auto* half = reinterpret_cast<const std::uint32_t*>(&page->data_head);
        const int lo = std::endian::native == std::endian::big ? 1 : 0;
        while (true) {
            const std::uint32_t h1 = __atomic_load_n(&half[1 - lo], __ATOMIC_ACQUIRE);
            const std::uint32_t l = __atomic_load_n(&half[lo], __ATOMIC_ACQUIRE);
            const std::uint32_t h2 = __atomic_load_n(&half[1 - lo], __ATOMIC_ACQUIRE);
            if (h1 == h2) return (std::uint64_t{h1} << 32) | l;
        }
    }
}

// Hands the records before `tail` back to the kernel, after they have been read. On 32-bit
// targets as two halves, as perf does there: a 32-bit kernel reads only the low one.
void store_tail(perf_event_mmap_page* page, std::uint64_t tail) {
    if constexpr (std::atomic<std::uint64_t>::is_always_lock_free) {
        __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
    } else {
        auto* half = reinterpret_cast<std::uint32_t*>(&page->data_tail);
        const int lo = std::endian::native == std::endian::big ? 1 : 0;
        __atomic_store_n(&half[1 - lo], static_cast<std::uint32_t>(tail >> 32), __ATOMIC_RELEASE);
        __atomic_store_n(&half[lo], static_cast<std::uint32_t>(tail), __ATOMIC_RELEASE);
    }
}

// What each sample record holds, in the kernel's order. The period is asked for only with a
// frequency, where the kernel changes it: with PERF_SAMPLE_PERIOD and a fixed period, the
// kernel's software events (context switches, page faults) take a sample at every event
// instead of every `period` (kernel/events/core.c, perf_swevent_event), as perf record -c
// knows and leaves it out too.
constexpr std::uint64_t kSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;

struct SampleRecord {
    std::uint64_t ip;
    std::uint32_t pid, tid;
    std::uint64_t time;
    std::uint32_t cpu, reserved;
    std::uint64_t period;  // with a frequency only
    // With PERF_SAMPLE_CALLCHAIN: the number of addresses, then the addresses.
};
constexpr std::size_t kRecordWithoutPeriod = offsetof(SampleRecord, period);

struct LostRecord {
    std::uint64_t id;
    std::uint64_t lost;
};

// What ends every other record with sample_id_all: of kSampleType, the TID, TIME and CPU.
struct SampleId {
    std::uint32_t pid, tid;
    std::uint64_t time;
    std::uint32_t cpu, reserved;
};

// The time of a record that ends with a SampleId.
std::uint64_t time_of(const unsigned char* body, std::size_t size) {
    if (size < sizeof(SampleId)) return 0;
    SampleId id;
    std::memcpy(&id, body + size - sizeof id, sizeof id);
    return id.time;
}

// PERF_RECORD_MMAP2 without a build id, then the file's name.
struct Mmap2Record {
    std::uint32_t pid, tid;
    std::uint64_t addr, len, pgoff;
    std::uint32_t major, minor;
    std::uint64_t inode, inode_generation;
    std::uint32_t prot, flags;
};

struct ForkRecord {
    std::uint32_t pid, ppid, tid, ptid;
    std::uint64_t time;
};

// The NUL-terminated text at `at` of a record's body.
std::string_view text_at(const unsigned char* body, std::size_t size, std::size_t at) {
    if (at >= size) return {};
    const auto* start = reinterpret_cast<const char*>(body + at);
    return {start, ::strnlen(start, size - at)};
}

SampleMode mode_of(std::uint16_t misc) {
    switch (misc & PERF_RECORD_MISC_CPUMODE_MASK) {
        case PERF_RECORD_MISC_USER:
            return SampleMode::User;
        case PERF_RECORD_MISC_KERNEL:
            return SampleMode::Kernel;
        case PERF_RECORD_MISC_HYPERVISOR:
            return SampleMode::Hypervisor;
        case PERF_RECORD_MISC_GUEST_USER:
        case PERF_RECORD_MISC_GUEST_KERNEL:
            return SampleMode::Guest;
        default:
            return SampleMode::Unknown;
    }
}

Result<void> check_rate(const EventSpec& event, SampleRate rate) {
    if ((rate.period == 0) == (rate.frequency == 0)) {
        return fail(Status::BadArg,
                    fmt::format("{}: sample every N events (a period above 0) or N times a "
                                "second (a frequency above 0), one of the two",
                                event.name));
    }
    return {};
}

// Opens `event` on `target` sampling at `rate`, disabled: the descriptor.
Result<UniqueFd> open_sampling(const EventSpec& event, const OpenTarget& target, SampleRate rate,
                               SampleContent content) {
    perf_event_attr attr = event_attr(event, target);
    attr.sample_type = kSampleType;
    if (content.callchain) attr.sample_type |= PERF_SAMPLE_CALLCHAIN;
    attr.exclude_callchain_user = content.kernel_chain_only ? 1 : 0;
    if (content.user_regs != 0) {
        attr.sample_type |= PERF_SAMPLE_REGS_USER;
        attr.sample_regs_user = content.user_regs;
    }
    if (content.user_stack != 0) {
        attr.sample_type |= PERF_SAMPLE_STACK_USER;
        attr.sample_stack_user = content.user_stack;
    }
    if (content.tasks) {
        // As perf record asks: executable mappings, exec()s with the new name, forks.
        attr.mmap = 1;
        attr.mmap2 = 1;
        attr.comm = 1;
        attr.comm_exec = 1;
        attr.task = 1;
        // Each record ends with the sample's identity (SampleId): its time orders it among the
        // samples of the other rings.
        attr.sample_id_all = 1;
    }
    if (rate.frequency != 0) {
        attr.sample_type |= PERF_SAMPLE_PERIOD;
        attr.freq = 1;
        attr.sample_freq = rate.frequency;
    } else {
        attr.sample_period = rate.period;
    }
    attr.disabled = 1;
    attr.enable_on_exec = target.enable_on_exec;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    const long fd = open_event(attr, target, -1);
    if (fd < 0) return std::unexpected(explain_open_error(errno, event, target));
    return UniqueFd(static_cast<int>(fd));
}

}  // namespace

Result<std::unique_ptr<SampleRing>> SampleRing::open(const EventSpec& event,
                                                     const OpenTarget& target, SampleRate rate,
                                                     std::size_t pages, SampleContent content) {
    if (auto ok = check_rate(event, rate); !ok) return std::unexpected(ok.error());
    if (pages == 0 || !std::has_single_bit(pages)) {
        return fail(Status::BadArg,
                    fmt::format("a sample ring of {} pages: a power of two is needed", pages));
    }
    if (content.user_stack % 8 != 0 || content.user_stack > kMaxUserStack) {
        return fail(Status::BadArg,
                    fmt::format("{} bytes of user stack per sample: a multiple of 8 up to {} is "
                                "needed",
                                content.user_stack, kMaxUserStack));
    }
    auto opened = open_sampling(event, target, rate, content);
    if (!opened) return std::unexpected(opened.error());
    UniqueFd owned = std::move(*opened);

    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t size = (pages + 1) * page;
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, owned.get(), 0);
    if (map == MAP_FAILED) {
        const int err = errno;
        auto failed = fail(
            err == EPERM || err == ENOMEM ? Status::AllocMem : Status::IoErr,
            fmt::format("{}: mapping a sample ring of {} KiB: {}{}", event.name, size / 1024,
                        errno_message(err),
                        err == EPERM ? " (kernel.perf_event_mlock_kb, or RLIMIT_MEMLOCK)" : ""));
        failed.error().bytes = size;
        return failed;
    }
    const auto* header = static_cast<const perf_event_mmap_page*>(map);
    // Kernels before 4.1 leave data_offset and data_size 0: the data follows the first page.
    const std::size_t offset = header->data_offset != 0 ? header->data_offset : page;
    const std::size_t data = header->data_size != 0 ? header->data_size : pages * page;
    auto ring =
        std::unique_ptr<SampleRing>(new SampleRing(std::move(owned), map, size, offset, data));
    ring->period_ = rate.period;
    ring->content_ = content;
    return ring;
}

SampleRing::SampleRing(UniqueFd fd, void* map, std::size_t map_size, std::size_t data_offset,
                       std::size_t data_size)
    : fd_(std::move(fd)),
      map_(map),
      map_size_(map_size),
      data_offset_(data_offset),
      data_size_(data_size) {}

Result<void> SampleRing::attach(const EventSpec& event, const OpenTarget& target, SampleRate rate) {
    if (auto ok = check_rate(event, rate); !ok) return ok;
    auto fd = open_sampling(event, target, rate, content_);
    if (!fd) return std::unexpected(fd.error());
    if (::ioctl(fd->get(), PERF_EVENT_IOC_SET_OUTPUT, fd_.get()) < 0) {
        return fail_errno(
            errno, fmt::format("{}: send the samples of {} to a ring", event.name, target.pid));
    }
    attached_.push_back(std::move(*fd));
    return {};
}

SampleRing::~SampleRing() {
    if (map_ != nullptr) ::munmap(map_, map_size_);
}

Result<void> SampleRing::enable() {
    if (::ioctl(fd_.get(), PERF_EVENT_IOC_ENABLE, 0) < 0) {
        return fail_errno(errno, "enable a sampling event");
    }
    for (const auto& fd : attached_) {
        if (::ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0) < 0) {
            return fail_errno(errno, "enable a sampling event");
        }
    }
    return {};
}

Result<void> SampleRing::disable() {
    // Every one is tried; the first failure is the result.
    Result<void> result;
    auto off = [&](int fd) {
        if (::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) < 0 && result) {
            result = fail_errno(errno, "disable a sampling event");
        }
    };
    off(fd_.get());
    for (const auto& fd : attached_) off(fd.get());
    return result;
}

Result<std::uint64_t> SampleRing::count() const {
    std::uint64_t value = 0;
    const ssize_t n = ::read(fd_.get(), &value, sizeof value);
    if (n < 0) return fail_errno(errno, "read a sampling event's count");
    if (n != sizeof value) {
        return fail(Status::BadData, fmt::format("read a sampling event's count: {} bytes", n));
    }
    return value;
}

DrainStats SampleRing::drain(const std::function<void(const Sample&)>& on_sample,
                             const std::function<void(const TaskRecord&)>& on_task) {
    auto* header = static_cast<perf_event_mmap_page*>(map_);
    const auto* data = static_cast<const unsigned char*>(map_) + data_offset_;
    // The kernel writes up to data_head, then publishes it; the records before it are whole.
    const std::uint64_t head = load_head(header);
    std::uint64_t tail = header->data_tail;
    DrainStats stats;
    std::vector<unsigned char> record;
    std::vector<std::uint64_t> chain;
    std::vector<std::uint64_t> regs;
    const std::size_t sample_size = period_ != 0 ? kRecordWithoutPeriod : sizeof(SampleRecord);
    while (tail < head) {
        // A record may wrap around the end of the ring: copy it out whole.
        perf_event_header h;
        auto copy = [&](void* out, std::uint64_t at, std::size_t n) {
            const std::size_t start = at % data_size_;
            const std::size_t first = std::min(n, data_size_ - start);
            std::memcpy(out, data + start, first);
            std::memcpy(static_cast<unsigned char*>(out) + first, data, n - first);
        };
        copy(&h, tail, sizeof h);
        if (h.size < sizeof h || tail + h.size > head) break;  // never, from a sane kernel
        record.resize(h.size);
        copy(record.data(), tail, h.size);
        const unsigned char* body = record.data() + sizeof h;
        const std::size_t body_size = h.size - sizeof h;
        if (h.type == PERF_RECORD_SAMPLE && body_size >= sample_size) {
            SampleRecord r{};
            std::memcpy(&r, body, sample_size);
            if (period_ != 0) r.period = period_;
            chain.clear();
            regs.clear();
            std::span<const unsigned char> stack;
            // What follows the fixed part, in the kernel's order: the chain, the registers,
            // the stack; each read only as far as the record holds it.
            std::size_t at = sample_size;
            auto word = [&](std::uint64_t& out) {
                if (body_size < at + sizeof out) return false;
                std::memcpy(&out, body + at, sizeof out);
                at += sizeof out;
                return true;
            };
            std::uint64_t nr = 0;
            if (content_.callchain && word(nr)) {
                const std::size_t room = (body_size - at) / sizeof(std::uint64_t);
                chain.resize(static_cast<std::size_t>(std::min<std::uint64_t>(nr, room)));
                // A dwarf profile's user-mode samples may have no kernel chain: nothing to copy
                // (and memcpy takes no null pointer, even for no bytes).
                if (!chain.empty()) {
                    std::memcpy(chain.data(), body + at, chain.size() * sizeof(std::uint64_t));
                }
                at += chain.size() * sizeof(std::uint64_t);
            }
            std::uint64_t abi = PERF_SAMPLE_REGS_ABI_NONE;
            if (content_.user_regs != 0 && word(abi) && abi != PERF_SAMPLE_REGS_ABI_NONE) {
                const auto n = static_cast<std::size_t>(std::popcount(content_.user_regs));
                if (body_size >= at + n * sizeof(std::uint64_t)) {
                    regs.resize(n);
                    std::memcpy(regs.data(), body + at, n * sizeof(std::uint64_t));
                    at += n * sizeof(std::uint64_t);
                }
            }
            std::uint64_t size = 0;
            if (content_.user_stack != 0 && word(size) && size != 0 && size <= body_size - at) {
                // The bytes copied, then how many of them the stack had (dyn_size).
                const unsigned char* bytes = body + at;
                at += static_cast<std::size_t>(size);
                std::uint64_t had = 0;
                if (word(had)) {
                    stack = {bytes, static_cast<std::size_t>(std::min(had, size))};
                }
            }
            ++stats.samples;
            on_sample(Sample{.ip = r.ip,
                             .pid = static_cast<pid_t>(r.pid),
                             .tid = static_cast<pid_t>(r.tid),
                             .cpu = static_cast<int>(r.cpu),
                             .time_ns = r.time,
                             .period = r.period,
                             .mode = mode_of(h.misc),
                             .callchain = chain,
                             .user_regs = regs,
                             .user_stack = stack});
        } else if (h.type == PERF_RECORD_LOST && body_size >= sizeof(LostRecord)) {
            LostRecord r;
            std::memcpy(&r, body, sizeof r);
            stats.lost += r.lost;
        } else if (h.type == PERF_RECORD_THROTTLE) {
            ++stats.throttled;
        } else if (!on_task) {
            // Nobody asked about the tasks.
        } else if (h.type == PERF_RECORD_MMAP2 && body_size > sizeof(Mmap2Record) &&
                   (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) == 0) {
            Mmap2Record r;
            std::memcpy(&r, body, sizeof r);
            on_task(TaskRecord{.kind = TaskRecord::Kind::Mapped,
                               .pid = static_cast<pid_t>(r.pid),
                               .time_ns = time_of(body, body_size),
                               .start = r.addr,
                               .length = r.len,
                               .offset = r.pgoff,
                               .major = r.major,
                               .minor = r.minor,
                               .inode = r.inode,
                               .name = text_at(body, body_size, sizeof r)});
        } else if (h.type == PERF_RECORD_COMM && (h.misc & PERF_RECORD_MISC_COMM_EXEC) != 0 &&
                   body_size > 8) {
            std::uint32_t pid = 0;
            std::memcpy(&pid, body, sizeof pid);
            on_task(TaskRecord{.kind = TaskRecord::Kind::Exec,
                               .pid = static_cast<pid_t>(pid),
                               .time_ns = time_of(body, body_size),
                               .name = text_at(body, body_size, 8)});
        } else if (h.type == PERF_RECORD_FORK && body_size >= sizeof(ForkRecord)) {
            ForkRecord r;
            std::memcpy(&r, body, sizeof r);
            // A new thread of the same process is no new process.
            if (r.pid == r.tid && r.pid != r.ppid) {
                on_task(TaskRecord{.kind = TaskRecord::Kind::Fork,
                                   .pid = static_cast<pid_t>(r.pid),
                                   .parent = static_cast<pid_t>(r.ppid),
                                   .time_ns = r.time});
            }
        }
        tail += h.size;
    }
    store_tail(header, tail);
    return stats;
}

}  // namespace monitor::perf
