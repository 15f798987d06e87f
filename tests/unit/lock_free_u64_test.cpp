// LockFreeU64 in both forms, whatever this processor has: the native atomic, and the latch that
// 32-bit PowerPC uses (tested here on any processor, with a writer and readers racing): a
// reader never sees a value the writer did not store, nor one older than it saw before.
#include "monitor/lock_free_u64.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace monitor {
namespace {

template <typename T>
class LockFreeU64Test : public ::testing::Test {};
using Forms = ::testing::Types<BasicLockFreeU64<true>, BasicLockFreeU64<false>>;
TYPED_TEST_SUITE(LockFreeU64Test, Forms);

TYPED_TEST(LockFreeU64Test, StoresAddsAndLoads) {
    TypeParam v{5};
    EXPECT_EQ(v.load(), 5u);
    v.store(0xFFFF'FFFFu);
    v.add(1);  // a carry into the high half
    EXPECT_EQ(v.load(), 0x1'0000'0000u);
    v.add(0xFFFF'FFFE'FFFF'FFFFu);
    EXPECT_EQ(v.load(), 0xFFFF'FFFF'FFFF'FFFFu);
    v.add(1);
    EXPECT_EQ(v.load(), 0u);
}

// The writer stores values whose halves are equal and that grow, crossing the high half often;
// a torn read would have unequal halves, a stale one a smaller value than before.
TYPED_TEST(LockFreeU64Test, ReadersRacingTheWriterSeeWholeGrowingValues) {
    TypeParam v{0};
    std::atomic<bool> done{false};
    constexpr int kReaders = 3;
    std::atomic<int> started{0};
    std::atomic<std::uint64_t> torn{0}, backwards{0}, reads{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
        readers.emplace_back([&] {
            ++started;
            std::uint64_t last = 0;
            while (!done.load(std::memory_order_relaxed)) {
                const std::uint64_t x = v.load();
                if ((x >> 32) != (x & 0xFFFF'FFFFu)) ++torn;
                if (x < last) ++backwards;
                last = x;
                reads.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    while (started.load() < kReaders) std::this_thread::yield();
    // At least 300,000 writes, and on until the readers have read as often (or 5 s).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::uint32_t i = 0;
    while (i < 300'000 || (reads.load(std::memory_order_relaxed) < 300'000 &&
                           std::chrono::steady_clock::now() < until)) {
        ++i;
        v.store((std::uint64_t{i} << 32) | i);
    }
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(torn.load(), 0u);
    EXPECT_EQ(backwards.load(), 0u);
    EXPECT_GE(reads.load(), 1000u) << "the readers hardly ran";
    EXPECT_EQ(v.load(), (std::uint64_t{i} << 32) | i);
}

// What the library uses on this processor: the native atomic exactly where it is lock-free.
TEST(LockFreeU64, TheLatchIsUsedWhereAtomicsWouldLock) {
    EXPECT_EQ((std::is_same_v<LockFreeU64, BasicLockFreeU64<true>>),
              std::atomic<std::uint64_t>::is_always_lock_free);
}

}  // namespace
}  // namespace monitor
