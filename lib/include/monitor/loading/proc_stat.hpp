// /proc/stat: the per-CPU time counters the kernel keeps since boot, in USER_HZ ticks.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor {

// The columns of a "cpu" line, in the kernel's order (proc(5)). Older kernels print fewer
// columns; the missing ones read as zero.
enum class CpuState : std::uint8_t {
    User,
    Nice,
    System,
    Idle,
    IoWait,     // since 2.5.41
    Irq,        // since 2.6.0
    SoftIrq,    // since 2.6.0
    Steal,      // since 2.6.11
    Guest,      // since 2.6.24, already counted in User
    GuestNice,  // since 2.6.33, already counted in Nice
};
inline constexpr std::size_t kCpuStateCount = 10;

struct CpuTimes {
    std::array<std::uint64_t, kCpuStateCount> ticks{};

    std::uint64_t operator[](CpuState s) const { return ticks[static_cast<std::size_t>(s)]; }
    std::uint64_t& operator[](CpuState s) { return ticks[static_cast<std::size_t>(s)]; }

    // Time the CPU did nothing: idle + iowait.
    std::uint64_t idle() const;
    // All accounted time: every column but guest and guest_nice, which are already inside
    // user and nice.
    std::uint64_t total() const;
    // total() - idle().
    std::uint64_t busy() const { return total() - idle(); }
};

struct CpuStatLine {
    int cpu = 0;
    CpuTimes times;
};

struct ProcStatSnapshot {
    CpuTimes machine;               // the "cpu" line: the kernel's sum over its CPUs
    std::vector<CpuStatLine> cpus;  // the "cpuN" lines, sorted by N; offline CPUs are absent
    std::size_t columns = 0;        // columns on the machine line (4 on 2.4, 10 since 2.6.33)
};

// Parses the text of /proc/stat. Lines other than cpu lines are ignored. A file without a
// "cpu" line, with fewer than 4 columns, or with a value that is not a 64-bit number is
// BADDATA naming the line.
// `expected_cpus`: room made for that many cpuN lines at once (a reader's last count).
Result<ProcStatSnapshot> parse_proc_stat(std::string_view text, std::size_t expected_cpus = 0);

// Keeps <proc_root>/stat open and re-reads it from the start on each read().
class ProcStatReader {
  public:
    static Result<ProcStatReader> open(const std::filesystem::path& proc_root);

    Result<ProcStatSnapshot> read();
    const std::filesystem::path& path() const { return path_; }

  private:
    ProcStatReader(std::filesystem::path path, UniqueFd fd)
        : path_(std::move(path)), fd_(std::move(fd)) {}

    std::filesystem::path path_;
    UniqueFd fd_;
    std::string buffer_;
    std::size_t cpus_ = 0;  // the cpuN lines of the last read
};

}  // namespace monitor
