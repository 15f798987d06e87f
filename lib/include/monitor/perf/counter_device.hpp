// The boundary between counting and the hardware: opening an event on a target, enabling and
// disabling a group, reading a count with its enabled and running times. PerfEventDevice is
// the real one (perf_event_open); a simulated PMU stands in where the machine has none.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "monitor/perf/event_spec.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// Where one event counts: a CPU (everything running on it), a process (and, with inherit,
// the children it creates after the counter is opened) on any CPU, or a cgroup on a CPU.
struct OpenTarget {
    int cpu = -1;                 // -1: any CPU (process targets only)
    pid_t pid = -1;               // -1: every process (CPU targets)
    int cgroup_fd = -1;           // an open cgroup directory: count its tasks on `cpu`
    bool inherit = false;         // count the children too
    bool enable_on_exec = false;  // start counting when the process calls exec (leaders)
};

struct CounterReading {
    std::uint64_t value = 0;       // raw count, `width` bits wide
    std::uint64_t enabled_ns = 0;  // time the event was enabled
    std::uint64_t running_ns = 0;  // time it was on a counter
};

class CounterDevice {
  public:
    virtual ~CounterDevice() = default;

    // Opens one event, disabled when it leads a group (`leader` < 0); a member (`leader` is
    // the handle of an open leader) follows its leader. Returns a handle. Errors name the
    // event, the cause and the fix.
    virtual Result<int> open(const EventSpec& event, const OpenTarget& target, int leader) = 0;
    virtual Result<void> enable(int leader) = 0;   // the whole group
    virtual Result<void> disable(int leader) = 0;  // the whole group
    virtual Result<void> reset(int leader) = 0;    // the whole group's counts to zero
    virtual Result<CounterReading> read(int handle) = 0;
    // Reads a whole group: `handles` are its leader and members in the order they were
    // opened, `out` gets one reading each. One call where the device can (PERF_FORMAT_GROUP);
    // this default reads the handles one by one.
    virtual Result<void> read_group(std::span<const int> handles, std::span<CounterReading> out);
    virtual void close(int handle) = 0;
    // Bits of the values read() returns: they wrap at 2^width.
    virtual int width(int handle) const = 0;
};

// perf_event_open(2).
class PerfEventDevice final : public CounterDevice {
  public:
    Result<int> open(const EventSpec& event, const OpenTarget& target, int leader) override;
    Result<void> enable(int leader) override;
    Result<void> disable(int leader) override;
    Result<void> reset(int leader) override;
    Result<CounterReading> read(int handle) override;
    Result<void> read_group(std::span<const int> handles, std::span<CounterReading> out) override;
    void close(int handle) override;
    int width(int) const override { return 64; }

  private:
    // The descriptor of a handle, -1 for one that is not open.
    int fd_of(int handle) const;
    Result<void> group_ioctl(int leader, unsigned long request, const char* what);
    // Reads the group of `handle` (PERF_FORMAT_GROUP): buf_ holds {nr, time enabled, time
    // running, value[nr]} afterwards. Returns nr.
    Result<std::size_t> read_into_buffer(int handle);

    struct Counter {
        UniqueFd fd;                 // empty once closed
        int leader = -1;             // the handle of its group's leader (its own for one)
        std::size_t index = 0;       // its place in its group (0: the leader)
        std::size_t group_size = 1;  // leaders: the counters of the group opened so far
    };
    std::vector<Counter> counters_;  // by handle
    std::vector<std::uint64_t> buf_;
};

// The perf_event_attr of `event` on `target`: its type, config, breakpoint, modes and
// inheritance; how it is read, sampled and enabled is the caller's.
perf_event_attr event_attr(const EventSpec& event, const OpenTarget& target);

// perf_event_open(attr) on `target` (a cgroup by its descriptor), close-on-exec, in the group
// of `group_fd` (-1 for none): the descriptor, or -1 with errno set.
long open_event(perf_event_attr& attr, const OpenTarget& target, int group_fd);

// Why perf_event_open refused `event` with `err`, and what to do about it: PERM (paranoid
// level and privilege), NOPMU (no driver for its PMU: no hardware counters here), NODEV (no
// such process, CPU offline), ...
Error explain_open_error(int err, const EventSpec& event, const OpenTarget& target);

// PROC_ROOT/sys/kernel/perf_event_paranoid, or nullopt when it cannot be read or holds no
// integer. The one reader of it: the errors here, CallerRights (read_perf_sysctls), the
// daemon's GetPmuInfo.
std::optional<int> perf_event_paranoid(const std::filesystem::path& proc_root = "/proc");

// This process's limit on open file descriptors, for the errors that hit it: "RLIMIT_NOFILE
// is 1024, hard limit 524288".
std::string descriptor_limit();

}  // namespace monitor::perf
