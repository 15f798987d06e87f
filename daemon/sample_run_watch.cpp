#include "sample_run_watch.hpp"

#include <sys/epoll.h>

namespace monitord {

bool SampleRunWatch::watch(const std::vector<int>& fds) {
    sources_.clear();
    for (int fd : fds) {
        sd_event_source* s = nullptr;
        if (sd_event_add_io(event_, &s, fd, EPOLLIN, on_ready, this) < 0) return false;
        sd_event_source_set_description(s, "sample-run");
        sources_.emplace_back(s);
    }
    return true;
}

int SampleRunWatch::on_ready(sd_event_source*, int, uint32_t, void* userdata) {
    // A copy: the call may destroy the watch, and its function with it.
    const auto ready = static_cast<SampleRunWatch*>(userdata)->ready_;
    ready();
    return 0;
}

}  // namespace monitord
