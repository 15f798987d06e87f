// The MON_* C API when memory runs out: every allocation a MON call makes, in any of its
// threads, is made to fail in turn (std::bad_alloc from a replaced operator new), and the call
// must return a MON status (ALLOCMEM, or another that names the failure) instead of letting
// the exception cross extern "C", where it would end the caller's program. Afterwards MON is
// still usable: it stops, shuts down and starts again. A program of its own: it replaces the
// global operator new.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <string>
#include <thread>

#include "mon.h"
#include "perf_events_probe.hpp"

namespace {

// > 0: the allocation that makes this 0 fails; every other one succeeds.
std::atomic<long> fail_in{0};
std::atomic<long> failed{0};

void* allocate(std::size_t n,
               std::align_val_t align = std::align_val_t{alignof(std::max_align_t)}) {
    if (fail_in.load(std::memory_order_relaxed) > 0 &&
        fail_in.fetch_sub(1, std::memory_order_relaxed) == 1) {
        failed.fetch_add(1, std::memory_order_relaxed);
        throw std::bad_alloc();
    }
    const auto a = static_cast<std::size_t>(align);
    void* p = a <= alignof(std::max_align_t) ? std::malloc(n == 0 ? 1 : n)
                                             : std::aligned_alloc(a, (n + a - 1) / a * a);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

}  // namespace

// g++ 12 with the sanitizers at -O1 and above takes these replacements' free() for the
// release of memory from another allocator (-Wmismatched-new-delete); both sides are this
// file's, on malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
    return allocate(n);
}
void* operator new[](std::size_t n) {
    return allocate(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate(n, a);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

// The purposes that MON_ALLOCMEM's fields named, by call ("MON_start: the POLL task").
std::set<std::string>& purposes() {
    static std::set<std::string> p;
    return p;
}

// What a call returned with its `n`th allocation made to fail.
struct Outcome {
    MON_status status;
    bool failure_happened;  // the nth allocation came (in this call or one of MON's threads)
};

template <class Call>
Outcome with_allocation_failure(long n, Call call) {
    failed = 0;
    fail_in = n;
    const MON_status s = call();
    const bool happened = fail_in.exchange(0) <= 0;
    return {s, happened};
}

// Fails each allocation of `call` in turn, from the first until the call makes no more, with
// `before` and `after` around each try (outside the injection). Every outcome must be success
// or one of `allowed`; returns how many failure points there were.
template <class Before, class Call, class After>
long every_failure_point(const char* name, Before before, Call call, After after,
                         std::initializer_list<MON_status> allowed) {
    long points = 0;
    for (long n = 1;; ++n) {
        before();
        const auto o = with_allocation_failure(n, call);
        if (o.status != MON_SUCCESS) {
            bool ok = false;
            for (auto a : allowed) ok = ok || a == o.status;
            EXPECT_TRUE(ok) << name << " with allocation " << n
                            << " failing: " << MON_status_name(o.status) << ": "
                            << MON_last_error();
            EXPECT_NE(std::string{MON_last_error()}, "") << name << ", allocation " << n;
            // The same as fields: the call, and what it was allocating or which task failed.
            MON_error_info info{};
            EXPECT_EQ(MON_last_error_info(&info), MON_SUCCESS);
            EXPECT_EQ(info.status, o.status) << name << ", allocation " << n;
            EXPECT_STREQ(info.call, name) << "allocation " << n;
            EXPECT_STREQ(info.message, MON_last_error());
            if (o.status == MON_ALLOCMEM) {
                EXPECT_STRNE(info.purpose, "") << name << ", allocation " << n;
                purposes().insert(std::string{name} + ": " + info.purpose);
            }
            if (o.status == MON_TSKSPAWN) {
                EXPECT_TRUE(std::string{info.task} == "IDLE" || std::string{info.task} == "POLL")
                    << name << ", allocation " << n << ": task '" << info.task << "'";
            }
        }
        after(o.status);
        if (!o.failure_happened) return points;
        ++points;
        if (points > 100000) {
            ADD_FAILURE() << name << " never stops allocating";
            return points;
        }
    }
}

class MonOutOfMemory : public testing::Test {
  protected:
    void TearDown() override {
        fail_in = 0;
        (void)MON_stop();
        (void)MON_shutdown();
    }
    // MON works as it should after all of it.
    static void StillUsable() {
        ASSERT_EQ(MON_initialize(), MON_SUCCESS) << MON_last_error();
        MON_task_attr idle{SCHED_IDLE, 0, nullptr, 0};
        int cpu0 = 0;
        idle.cpus = &cpu0;
        idle.ncpus = 1;
        ASSERT_EQ(MON_start(&idle, nullptr), MON_SUCCESS) << MON_last_error();
        ASSERT_EQ(MON_stop(), MON_SUCCESS) << MON_last_error();
        ASSERT_EQ(MON_shutdown(), MON_SUCCESS) << MON_last_error();
    }
};

TEST_F(MonOutOfMemory, InitializeAndShutdown) {
    const long points = every_failure_point(
        "MON_initialize", [] {}, [] { return MON_initialize(); },
        [](MON_status s) {
            if (s == MON_SUCCESS) {
                EXPECT_EQ(MON_shutdown(), MON_SUCCESS);
            }
        },
        {MON_ALLOCMEM});
    std::printf("MON_initialize: %ld allocations made to fail\n", points);
    StillUsable();
}

// One CPU for the IDLE task keeps each try short.
TEST_F(MonOutOfMemory, StartAndStop) {
    static int cpu0 = 0;
    static const MON_task_attr idle{SCHED_IDLE, 0, &cpu0, 1};
    const long points = every_failure_point(
        "MON_start", [] { ASSERT_EQ(MON_initialize(), MON_SUCCESS); },
        [] { return MON_start(&idle, nullptr); },
        [](MON_status s) {
            if (s == MON_SUCCESS) {
                EXPECT_EQ(MON_stop(), MON_SUCCESS) << MON_last_error();
            }
            EXPECT_EQ(MON_shutdown(), MON_SUCCESS)
                << MON_last_error() << " after " << MON_status_name(s);
        },
        {MON_ALLOCMEM, MON_TSKSPAWN});
    std::printf("MON_start: %ld allocations made to fail\n", points);

    const long stop_points = every_failure_point(
        "MON_stop",
        [] {
            ASSERT_EQ(MON_initialize(), MON_SUCCESS);
            ASSERT_EQ(MON_start(&idle, nullptr), MON_SUCCESS) << MON_last_error();
        },
        [] { return MON_stop(); },
        [](MON_status) { EXPECT_EQ(MON_shutdown(), MON_SUCCESS) << "MON_stop did not stop"; },
        {MON_ALLOCMEM});
    std::printf("MON_stop: %ld allocations made to fail\n", stop_points);
    // MON_start's steps each say what they were allocating for.
    for (const char* step :
         {"MON_start: the IDLE task and the loading history", "MON_start: the POLL task"}) {
        EXPECT_TRUE(purposes().contains(step)) << "no MON_ALLOCMEM said '" << step << "'";
    }
    for (const auto& p : purposes()) std::printf("  purpose: %s\n", p.c_str());
    StillUsable();
}

TEST_F(MonOutOfMemory, LoadingWhileRunning) {
    static int cpu0 = 0;
    static const MON_task_attr idle{SCHED_IDLE, 0, &cpu0, 1};
    ASSERT_EQ(MON_initialize(), MON_SUCCESS);
    ASSERT_EQ(MON_start(&idle, nullptr), MON_SUCCESS) << MON_last_error();
    MON_loading l{};
    for (int i = 0; i < 50 && MON_get_loading(&l) == MON_NOTRDY; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const long points = every_failure_point(
        "MON_get_loading", [] {},
        [] {
            MON_loading out{};
            return MON_get_loading(&out);
        },
        [](MON_status) {}, {MON_ALLOCMEM});
    std::printf("MON_get_loading: %ld allocations made to fail\n", points);
    // The POLL task survives failures in its own allocations too: a sample that fails is a
    // gap, and the loading keeps coming.
    with_allocation_failure(1, [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return MON_SUCCESS;
    });
    EXPECT_EQ(MON_get_loading(&l), MON_SUCCESS) << MON_last_error();
    ASSERT_EQ(MON_stop(), MON_SUCCESS);
    ASSERT_EQ(MON_shutdown(), MON_SUCCESS);
    StillUsable();
}

TEST_F(MonOutOfMemory, Counting) {
    SKIP_WITHOUT_PERF_EVENTS();
    static int cpu0 = 0;
    static const MON_task_attr idle{SCHED_IDLE, 0, &cpu0, 1};
    ASSERT_EQ(MON_initialize(), MON_SUCCESS);
    ASSERT_EQ(MON_start(&idle, nullptr), MON_SUCCESS) << MON_last_error();
    static const MON_perf_config config{
        {"perf::TASK-CLOCK:u", "perf::PAGE-FAULTS:u", nullptr, nullptr}, MON_PERF_THREAD, 0, 0};
    const long points = every_failure_point(
        "MON_start_perf_mon", [] {}, [] { return MON_start_perf_mon(&config); },
        [](MON_status s) {
            MON_perf_stats stats{};
            if (s == MON_SUCCESS) {
                EXPECT_EQ(MON_stop_perf_mon(&stats), MON_SUCCESS);
            }
        },
        {MON_ALLOCMEM});
    std::printf("MON_start_perf_mon: %ld allocations made to fail\n", points);
    const long stop_points = every_failure_point(
        "MON_stop_perf_mon",
        [] { ASSERT_EQ(MON_start_perf_mon(&config), MON_SUCCESS) << MON_last_error(); },
        [] {
            MON_perf_stats stats{};
            return MON_stop_perf_mon(&stats);
        },
        [](MON_status) {
            MON_perf_stats stats{};
            EXPECT_NE(MON_start_perf_mon(&config), MON_PRFRUN) << "the session was left running";
            (void)MON_stop_perf_mon(&stats);
        },
        {MON_ALLOCMEM});
    std::printf("MON_stop_perf_mon: %ld allocations made to fail\n", stop_points);
    ASSERT_EQ(MON_stop(), MON_SUCCESS);
    ASSERT_EQ(MON_shutdown(), MON_SUCCESS);
    StillUsable();
}

TEST_F(MonOutOfMemory, StatusNamesNeedNoMemory) {
    const auto o = with_allocation_failure(1, [] {
        for (unsigned s = 0; s <= MON_BADDATA + 1; ++s) {
            (void)MON_status_name(static_cast<MON_status>(s));
            (void)MON_status_message(static_cast<MON_status>(s));
        }
        (void)MON_last_error();
        return MON_SUCCESS;
    });
    EXPECT_FALSE(o.failure_happened) << "they allocated";
    EXPECT_STREQ(MON_status_name(MON_PRFRUN), "MON_PRFRUN");
}

}  // namespace
