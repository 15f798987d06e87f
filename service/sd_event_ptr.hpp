// Owning pointers for sd-event objects.
#pragma once

#include <systemd/sd-event.h>

#include <memory>

namespace monitord {

struct EventUnref {
    void operator()(sd_event* e) const noexcept { sd_event_unref(e); }
};
struct SourceUnref {
    void operator()(sd_event_source* s) const noexcept { sd_event_source_disable_unref(s); }
};

using EventPtr = std::unique_ptr<sd_event, EventUnref>;
using SourcePtr = std::unique_ptr<sd_event_source, SourceUnref>;

}  // namespace monitord
