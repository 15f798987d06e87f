// Whether perf_event_open works where the tests run, found without monitord's code: a task
// clock opened directly on the calling thread. A kernel built without CONFIG_PERF_EVENTS, and
// qemu-user (where the PowerPC tests run), answer ENOSYS; the tests that count or sample skip
// there, saying so, after whatever checks they make without counting.
#pragma once

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace test_support {

// The calling thread's task clock in user mode, counted (or sampled every `period` ns):
// perf_event_open's descriptor, or -1 with errno.
inline long open_own_task_clock(std::uint64_t period = 0) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.sample_period = period;
    return ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

// Empty when perf_event_open opens a software event here; else why nothing can be counted.
inline std::string perf_events_missing() {
    static const std::string reason = [] {
        const long fd = open_own_task_clock();
        if (fd >= 0) {
            ::close(static_cast<int>(fd));
            return std::string{};
        }
        const int err = errno;
        return std::string{"perf_event_open fails here ("} + std::strerror(err) + ")" +
               (err == ENOSYS ? ": an emulator that does not pass it on (qemu-user), or a kernel "
                                "without CONFIG_PERF_EVENTS"
                              : "");
    }();
    return reason;
}

}  // namespace test_support

// Skips the test when nothing can be counted here.
#define SKIP_WITHOUT_PERF_EVENTS()                                            \
    do {                                                                      \
        if (auto why = ::test_support::perf_events_missing(); !why.empty()) { \
            GTEST_SKIP() << why;                                              \
        }                                                                     \
    } while (false)
