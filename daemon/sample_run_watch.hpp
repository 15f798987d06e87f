// A sample run's descriptors (SampleRun::fds()) watched on the daemon's loop: when one is
// readable (a ring half full, the process sampled gone, the namer done), `ready` is called, to
// advance the run. The runtime's timer paces the rest (drains, intervals, the end).
#pragma once

#include <systemd/sd-event.h>

#include <functional>
#include <vector>

#include "sd_event_ptr.hpp"

namespace monitord {

class SampleRunWatch {
  public:
    // `ready` may destroy this watch.
    SampleRunWatch(sd_event* event, std::function<void()> ready)
        : event_(event), ready_(std::move(ready)) {}
    SampleRunWatch(const SampleRunWatch&) = delete;
    SampleRunWatch& operator=(const SampleRunWatch&) = delete;

    // Watches `fds` in place of what it watched (after a step that ended the sampling, fewer
    // are left: a ring of a process gone would stay readable); false when the loop refuses one.
    bool watch(const std::vector<int>& fds);

  private:
    static int on_ready(sd_event_source* s, int fd, uint32_t revents, void* userdata);

    sd_event* event_;
    std::function<void()> ready_;
    std::vector<SourcePtr> sources_;
};

}  // namespace monitord
