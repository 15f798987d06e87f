// MiniDebugInfo: the ELF file of function symbols that Fedora, RHEL and SUSE put, compressed
// by xz, in the .gnu_debugdata section of their stripped programs and libraries, so that a
// profile names their local functions. libdwfl unpacks it by itself, for any file without a
// .symtab, and with no bound on the output: a section of a few kilobytes in another user's
// program can unpack to gigabytes in the root daemon. So the daemon unpacks it first, within
// the bounds below, and hands libdwfl only a file whose section unpacks within them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "monitor/status.hpp"

namespace monitor::perf {

// The most a .gnu_debugdata section may unpack to: it holds a table of symbols and its names,
// no debugging information.
inline constexpr std::size_t kMaxMiniDebugInfoBytes = std::size_t{32} << 20;
// The xz decoder's own memory, its dictionary mostly: xz -9's (64 MiB) fits, a stream that
// asks for more is refused before anything is allocated for it.
inline constexpr std::uint64_t kMaxXzDecoderBytes = std::uint64_t{72} << 20;

// Whether `bytes` start as an xz stream does.
bool is_xz(std::span<const unsigned char> bytes) noexcept;

// The first xz stream in `packed` unpacked, as libdwfl unpacks it (one stream; what follows
// it is ignored); an error when it would be more than `most` bytes, would need more decoder
// memory than kMaxXzDecoderBytes, is not xz, or is damaged (Status::BadData, saying which).
// Part of the library where libdw is (liblzma comes with it).
Result<std::string> unpack_xz(std::span<const unsigned char> packed,
                              std::size_t most = kMaxMiniDebugInfoBytes);

}  // namespace monitor::perf
