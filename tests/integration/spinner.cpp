#include "spinner.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

namespace itest {

void Spinner::spin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
    if (mode_ == Mode::SystemCalls) {
        // The read goes straight to the kernel: a sanitizer's interceptor of read() would
        // check the whole buffer in user space after each call and make the loop user time.
        std::vector<char> buffer(64 * 1024);
        const int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        while (!stop_.load(std::memory_order_relaxed)) {
            if (::syscall(SYS_read, fd, buffer.data(), buffer.size()) < 0) break;
        }
        ::close(fd);
        return;
    }
    volatile unsigned long n = 0;
    while (!stop_.load(std::memory_order_relaxed)) n = n + 1;
}

}  // namespace itest
