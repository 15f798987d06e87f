// A 64-bit value that one thread writes and any thread reads, and that no reader ever waits
// for. Where the processor has 64-bit atomic instructions it is a std::atomic<std::uint64_t>.
// Where it has not (32-bit PowerPC), std::atomic<std::uint64_t> calls into libatomic, which
// takes a lock; a SCHED_IDLE probe preempted while holding it on a busy CPU would stall every
// other thread that touches the value (or any value hashed to the same lock) until the probe
// runs again, which on a starved CPU is never. There it is a latch instead, as the kernel's
// seqcount_latch: two copies and a 32-bit sequence whose lowest bit says which copy is whole.
// The writer updates one copy while readers read the other, so a writer stopped half-way
// never holds a reader up; a reader only retries when the writer finished an update meanwhile.
//
// One writer at a time: the writers must be one thread, or be serialized by a lock of their
// own (which no reader takes).
#pragma once

#include <atomic>
#include <cstdint>

namespace monitor {

template <bool kNativeAtomic = std::atomic<std::uint64_t>::is_always_lock_free>
class BasicLockFreeU64;

template <>
class BasicLockFreeU64<true> {
  public:
    constexpr BasicLockFreeU64(std::uint64_t v = 0) noexcept : value_(v) {}

    std::uint64_t load() const noexcept { return value_.load(std::memory_order_acquire); }
    void store(std::uint64_t v) noexcept { value_.store(v, std::memory_order_release); }
    // By the writer.
    void add(std::uint64_t d) noexcept { store(value_.load(std::memory_order_relaxed) + d); }

  private:
    std::atomic<std::uint64_t> value_;
};

template <>
class BasicLockFreeU64<false> {
  public:
    constexpr BasicLockFreeU64(std::uint64_t v = 0) noexcept
        : copies_{{high(v), low(v)}, {high(v), low(v)}} {}

    // The copy the sequence points to. Its words are read with acquire, so that the sequence
    // is read again only after them; a reader that saw a word written after a step of the
    // sequence sees that step then, and retries.
    std::uint64_t load() const noexcept {
        while (true) {
            const std::uint32_t seq = seq_.load(std::memory_order_acquire);
            const auto& c = copies_[seq & 1];
            const std::uint32_t hi = c[0].load(std::memory_order_acquire);
            const std::uint32_t lo = c[1].load(std::memory_order_acquire);
            if (seq_.load(std::memory_order_relaxed) == seq) return join(hi, lo);
        }
    }

    // Each step of the sequence and each word is a release store: a reader that sees a step
    // sees whole the copy it points to (copy 1 was written in the previous store), and one
    // that sees a word sees the step before it (the kernel's smp_wmb() on either side of the
    // increment; no fences, which the thread sanitizer cannot follow).
    void store(std::uint64_t v) noexcept {
        const std::uint32_t seq = seq_.load(std::memory_order_relaxed);
        // Odd: readers read copy 1 while copy 0 changes.
        seq_.store(seq + 1, std::memory_order_release);
        write(copies_[0], v);
        // Even: readers read copy 0, whole again, while copy 1 changes.
        seq_.store(seq + 2, std::memory_order_release);
        write(copies_[1], v);
    }

    // By the writer: copy 0 is always the last value it stored.
    void add(std::uint64_t d) noexcept {
        const auto& c = copies_[0];
        store(join(c[0].load(std::memory_order_relaxed), c[1].load(std::memory_order_relaxed)) + d);
    }

  private:
    using Copy = std::atomic<std::uint32_t>[2];  // high, low

    static constexpr std::uint32_t high(std::uint64_t v) {
        return static_cast<std::uint32_t>(v >> 32);
    }
    static constexpr std::uint32_t low(std::uint64_t v) { return static_cast<std::uint32_t>(v); }
    static constexpr std::uint64_t join(std::uint32_t hi, std::uint32_t lo) {
        return (std::uint64_t{hi} << 32) | lo;
    }
    static void write(Copy& c, std::uint64_t v) noexcept {
        c[0].store(high(v), std::memory_order_release);
        c[1].store(low(v), std::memory_order_release);
    }

    std::atomic<std::uint32_t> seq_{0};
    Copy copies_[2];
};

using LockFreeU64 = BasicLockFreeU64<>;

}  // namespace monitor
