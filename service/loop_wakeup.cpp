#include "loop_wakeup.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace monitord {

monitor::Result<std::unique_ptr<LoopWakeup>> LoopWakeup::start(sd_event* event,
                                                               std::function<void()> on_wake,
                                                               const std::string& what) {
    std::unique_ptr<LoopWakeup> w{new LoopWakeup(std::move(on_wake))};
    w->fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!w->fd_) return monitor::fail_errno(errno, "eventfd for " + what);
    sd_event_source* source = nullptr;
    const int rc = sd_event_add_io(
        event, &source, w->fd_.get(), EPOLLIN,
        [](sd_event_source*, int, uint32_t, void* self) {
            static_cast<LoopWakeup*>(self)->woken();
            return 0;
        },
        w.get());
    if (rc < 0) return monitor::fail_errno(-rc, "watching the eventfd for " + what);
    w->source_.reset(source);
    return w;
}

void LoopWakeup::wake() const {
    const std::uint64_t one = 1;
    (void)::write(fd_.get(), &one, sizeof one);
}

void LoopWakeup::woken() {
    std::uint64_t n = 0;
    if (::read(fd_.get(), &n, sizeof n) != sizeof n) return;
    on_wake_();
}

}  // namespace monitord
