#include "monitor/perf/minidebuginfo.hpp"

#include <fmt/format.h>
#include <lzma.h>

#include <algorithm>
#include <array>
#include <memory>

namespace monitor::perf {
namespace {

constexpr std::array<unsigned char, 6> kXzMagic = {0xfd, '7', 'z', 'X', 'Z', 0x00};

// "32 MiB", or "1000 bytes" for a size that is not whole mebibytes.
std::string size_text(std::uint64_t bytes) {
    constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
    return bytes % kMiB == 0 ? fmt::format("{} MiB", bytes / kMiB) : fmt::format("{} bytes", bytes);
}

struct LzmaEnd {
    void operator()(lzma_stream* s) const { lzma_end(s); }
};

}  // namespace

bool is_xz(std::span<const unsigned char> bytes) noexcept {
    return bytes.size() >= kXzMagic.size() &&
           std::equal(kXzMagic.begin(), kXzMagic.end(), bytes.begin());
}

Result<std::string> unpack_xz(std::span<const unsigned char> packed, std::size_t most) {
    if (!is_xz(packed)) return fail(Status::BadData, "not an xz stream");
    lzma_stream stream = LZMA_STREAM_INIT;
    if (lzma_ret r = lzma_stream_decoder(&stream, kMaxXzDecoderBytes, 0); r != LZMA_OK) {
        return fail(
            r == LZMA_MEM_ERROR ? Status::AllocMem : Status::BadData,
            fmt::format("xz: the decoder cannot start (liblzma's code {})", static_cast<int>(r)));
    }
    const std::unique_ptr<lzma_stream, LzmaEnd> end{&stream};
    stream.next_in = packed.data();
    stream.avail_in = packed.size();
    std::string out;
    // Grown as it fills, up to one byte past the bound: a stream that fills that much is over.
    const std::size_t limit = most + 1;
    out.resize(std::min<std::size_t>(limit, std::max<std::size_t>(packed.size() * 4, 4096)));
    stream.next_out = reinterpret_cast<unsigned char*>(out.data());
    stream.avail_out = out.size();
    while (true) {
        const lzma_ret r = lzma_code(&stream, LZMA_FINISH);
        const std::size_t done = out.size() - stream.avail_out;
        if (r == LZMA_STREAM_END && done <= most) {
            out.resize(done);
            return out;
        }
        if (r == LZMA_STREAM_END || (stream.avail_out == 0 && out.size() >= limit)) {
            return fail(Status::BadData,
                        fmt::format("xz: the stream unpacks to more than {}", size_text(most)));
        }
        if (r == LZMA_MEMLIMIT_ERROR) {
            return fail(
                Status::BadData,
                fmt::format("xz: the stream needs {} of memory to unpack, more than "
                            "the {} allowed",
                            size_text(lzma_memusage(&stream)), size_text(kMaxXzDecoderBytes)));
        }
        // LZMA_BUF_ERROR: no progress, with room to write (the input ended early: below) or
        // none (more room).
        if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
            return fail(Status::BadData, fmt::format("xz: the stream is damaged (liblzma's code "
                                                     "{})",
                                                     static_cast<int>(r)));
        }
        if (stream.avail_out == 0) {
            out.resize(std::min(limit, out.size() * 2));
            stream.next_out = reinterpret_cast<unsigned char*>(out.data()) + done;
            stream.avail_out = out.size() - done;
        } else if (r == LZMA_BUF_ERROR) {
            return fail(Status::BadData, "xz: the stream ends early");
        }
    }
}

}  // namespace monitor::perf
