// Placing the spinning probes' process under systemd: systemd owns the cgroup tree (and the
// service sees it read-only), so it is asked, over its private socket or the system bus, to
// move the process into a transient scope monitord-probes-PID.scope of the slice
// monitord.slice, right below the root slice, with CPUWeight=idle (cpu.idle=1 under cgroup
// v2; the lowest weight under v1). The scope goes when the process does.
#pragma once

#include <sys/types.h>

#include <chrono>

#include "monitor/status.hpp"

namespace monitord {

inline constexpr const char* kProbeSlice = "monitord.slice";

// Asks systemd to place `pid` so, and waits up to `wait` for the move to show in
// /proc/PID/cgroup. The errors name what failed and what systemd said.
monitor::Result<void> place_in_systemd_scope(
    pid_t pid, std::chrono::milliseconds wait = std::chrono::seconds(5));

}  // namespace monitord
