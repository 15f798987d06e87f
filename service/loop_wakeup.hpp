// Wakes an sd-event loop from another thread: an eventfd the loop watches, and a callback run
// on the loop after one or more wakes. The workers that take slow work off the loop (the
// history's reads, the exporter's scrapes) hand their results back through it.
#pragma once

#include <systemd/sd-event.h>

#include <functional>
#include <memory>
#include <string>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"
#include "sd_event_ptr.hpp"

namespace monitord {

class LoopWakeup {
  public:
    // Watches a new eventfd on `event`; `on_wake` runs on the loop. `what` names the wakes in
    // errors ("the history's reads").
    static monitor::Result<std::unique_ptr<LoopWakeup>> start(sd_event* event,
                                                              std::function<void()> on_wake,
                                                              const std::string& what);
    LoopWakeup(const LoopWakeup&) = delete;
    LoopWakeup& operator=(const LoopWakeup&) = delete;

    // From any thread: on_wake runs on the loop soon (once for several wakes before it runs).
    void wake() const;

  private:
    explicit LoopWakeup(std::function<void()> on_wake) : on_wake_(std::move(on_wake)) {}
    void woken();

    std::function<void()> on_wake_;
    monitor::UniqueFd fd_;
    SourcePtr source_;
};

}  // namespace monitord
