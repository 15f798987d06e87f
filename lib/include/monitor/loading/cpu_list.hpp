// CPU lists in the kernel's format ("0-3,5,7-8"), as found in
// /sys/devices/system/cpu/online and friends.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor {

// Parses a kernel CPU list into sorted, unique CPU ids. Surrounding white space is ignored;
// an empty list gives no CPUs. Malformed text is BADDATA naming the offending part.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// Reads <sys_root>/devices/system/cpu/online. Fails with NODEV when the file does not exist
// (a container without sysfs), so the caller can fall back to the CPUs of /proc/stat.
Result<std::vector<int>> read_online_cpus(const std::filesystem::path& sys_root);

// The same file kept open and re-read from the start, so that sampling never needs a new
// file descriptor.
class OnlineCpusReader {
  public:
    // NODEV when the file does not exist.
    static Result<OnlineCpusReader> open(const std::filesystem::path& sys_root);
    Result<std::vector<int>> read();

  private:
    OnlineCpusReader(std::filesystem::path path, UniqueFd fd)
        : path_(std::move(path)), fd_(std::move(fd)) {}

    std::filesystem::path path_;
    UniqueFd fd_;
    std::string buffer_;
};

}  // namespace monitor
