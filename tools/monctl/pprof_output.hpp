// monctl perf profile --pprof FILE: the whole run's profile in pprof's format (profile.proto,
// gzip-compressed), as go tool pprof, speedscope, Pyroscope and Grafana read it. Without call
// chains a pprof sample is a line of the table of functions; with them, a folded stack, its
// frames leaf first as pprof orders them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "monitor/perf/event_spec.hpp"
#include "monitor/protocol/profile_messages.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monctl {

// What the profile message does not say, from the request and monctl's own clock.
struct PprofContext {
    // When the sampling started (ProfileMessage::elapsed before the final message came).
    std::chrono::system_clock::time_point start;
    // The events one sample stands for (pprof's period), when known: the request's period, or
    // a clock event's period in nanoseconds at a frequency.
    std::optional<std::int64_t> period;
    // The event counts nanoseconds of CPU time (cpu-clock, task-clock): each sample is also
    // `period` nanoseconds of "cpu", as Go's CPU profiles count it.
    bool clock = false;
};

// The kernel's hrtimer of a clock event fires no more often than every 10 us, whatever the
// period asked (kernel/events/core.c, perf_swevent_start_hrtimer).
inline constexpr std::int64_t kMinClockPeriodNs = 10'000;

// The context of a profile of `event` sampled as `request` asks. A clock event has a fixed
// period in nanoseconds even at a frequency (the kernel turns it into 1e9 / frequency); any
// other event's period at a frequency varies, and is not known.
PprofContext pprof_context(const monitor::perf::EventSpec& event,
                           const monitor::protocol::ProfileRequest& request,
                           std::chrono::system_clock::time_point start);

// The message's profile as profile.proto's bytes, gzip-compressed. Sample types
// "samples"/"count", and "cpu"/"nanoseconds" (samples x period) for a clock event of known
// period. Functions are named as the table names them ("burn (/usr/bin/app)" is the function
// "burn" of the file /usr/bin/app), code without a symbol by its file as the stacks' frames
// are ("[libc.so.6]"), so that pprof (which adds up functions by name) keeps them apart.
std::string pprof_bytes(const monitor::protocol::ProfileMessage& m, const PprofContext& c);

// The file of --pprof, opened (created, or emptied) before the profile runs: a path that
// cannot be written is said before the sampling, not after it.
class PprofFile {
  public:
    // BADARG "--pprof PATH: cannot write it: <why>".
    static monitor::Result<PprofFile> open(const std::string& path);

    // Writes the profile and closes the file; IOERR "--pprof PATH: cannot write it: <why>".
    monitor::Result<void> write(const monitor::protocol::ProfileMessage& m, const PprofContext& c);
    const std::string& path() const { return path_; }

  private:
    PprofFile(std::string path, monitor::UniqueFd fd)
        : path_(std::move(path)), fd_(std::move(fd)) {}

    std::string path_;
    monitor::UniqueFd fd_;
};

}  // namespace monctl
