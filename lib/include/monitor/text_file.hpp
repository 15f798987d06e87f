// Reading small text files from procfs and sysfs, whose size stat() does not tell.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/status.hpp"

namespace monitor {

// Reads the whole file at `path` (at most `limit` bytes; more is BADDATA).
Result<std::string> read_text_file(const std::filesystem::path& path,
                                   std::size_t limit = std::size_t{1} << 24);

// Reads an open file from offset 0 into `out` with pread, growing `out` as needed, so that a
// procfs file kept open can be re-read without reopening it. `name` is used in errors.
Result<void> pread_whole(int fd, std::string& out, const std::filesystem::path& name,
                         std::size_t limit = std::size_t{1} << 24);

// `s` without the spaces, tabs and line ends around it.
std::string_view trim_space(std::string_view s);

// An unsigned decimal number, the whole of `s` (digits only, no sign or space); nullopt for
// anything else, and for a number beyond 64 bits.
std::optional<std::uint64_t> parse_unsigned(std::string_view s);

// A decimal number as the kernel prints one ("12.50": digits, and a point and at most 9
// digits, or not), without the locale and without floating-point from_chars (libc++ 16, the
// fuzz build's, has none); nullopt for anything else.
std::optional<double> parse_decimal(std::string_view s);

}  // namespace monitor
