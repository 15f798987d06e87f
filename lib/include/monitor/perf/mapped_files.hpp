// The files a process has mapped, opened as that process sees them. A root daemon that names
// other users' code must not open a path of their choosing in its own view: the path may
// name another file in the daemon's mount namespace (a container's, a PrivateTmp service's),
// a FIFO swapped in (an open that blocks the main loop) or a file that is truncated while it
// is read. So a mapping's file is opened through the process itself (/proc/PID/map_files,
// the very file mapped; else /proc/PID/root, its own view of the path), and by its path only
// when the process is gone and the file there is the one the kernel said was mapped (device
// and inode); always without blocking, and only a regular file of at most kMaxObjectBytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// The largest object file read for symbols (a program with its symbols is well below).
inline constexpr std::uint64_t kMaxObjectBytes = std::uint64_t{1} << 30;

// One mapping of a file, as a /proc/PID/maps line (or the kernel's PERF_RECORD_MMAP2) has it.
struct MappedFile {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::uint32_t major = 0;
    std::uint32_t minor = 0;
    std::uint64_t inode = 0;
    std::string path;  // as the map gives it: the process's view, " (deleted)" when unlinked
};

// The mappings of files (paths starting with '/') in a map's text, in its order.
std::vector<MappedFile> mapped_files(std::string_view maps);

// Opens `file`, mapped by process `pid` (or by a process gone, pid <= 0), for reading:
// /proc/PID/map_files/START-END, then /proc/PID/root/PATH, then PATH when it holds the inode
// mapped. NODEV when none of them holds it, BADARG for what is not a regular file or is
// larger than kMaxObjectBytes.
Result<UniqueFd> open_mapped_file(pid_t pid, const MappedFile& file);

// Opens `path` for reading without blocking: a regular file of at most `max_bytes`, else
// BADARG naming it.
Result<UniqueFd> open_regular_file(const std::string& path,
                                   std::uint64_t max_bytes = kMaxObjectBytes);

}  // namespace monitor::perf
