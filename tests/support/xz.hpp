// xz streams made with liblzma's encoder, for the tests of what the library unpacks: a
// distribution's MiniDebugInfo, and streams that unpack to more than it takes.
#pragma once

#include <lzma.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace test_support {

// `data` as one xz stream, compressed at `preset` (0: xz -0, a 256 KiB dictionary).
inline std::string xz_compress(std::string_view data, std::uint32_t preset = 0) {
    std::string out(lzma_stream_buffer_bound(data.size()), '\0');
    std::size_t size = 0;
    if (lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64, nullptr,
                                reinterpret_cast<const std::uint8_t*>(data.data()), data.size(),
                                reinterpret_cast<std::uint8_t*>(out.data()), &size,
                                out.size()) != LZMA_OK) {
        return {};
    }
    out.resize(size);
    return out;
}

// `bytes` zero bytes as one xz stream: a few kilobytes for hundreds of megabytes.
inline std::string xz_of_zeros(std::size_t bytes) {
    lzma_stream s = LZMA_STREAM_INIT;
    if (lzma_easy_encoder(&s, 0, LZMA_CHECK_CRC64) != LZMA_OK) return {};
    const std::string zeros(std::size_t{1} << 20, '\0');
    std::string out;
    char buf[1 << 16];
    for (std::size_t left = bytes;;) {
        const std::size_t n = left < zeros.size() ? left : zeros.size();
        s.next_in = reinterpret_cast<const std::uint8_t*>(zeros.data());
        s.avail_in = n;
        left -= n;
        const lzma_action action = left == 0 ? LZMA_FINISH : LZMA_RUN;
        lzma_ret r = LZMA_OK;
        do {
            s.next_out = reinterpret_cast<std::uint8_t*>(buf);
            s.avail_out = sizeof buf;
            r = lzma_code(&s, action);
            out.append(buf, sizeof buf - s.avail_out);
        } while (r == LZMA_OK && (action == LZMA_FINISH || s.avail_in > 0));
        if (r == LZMA_STREAM_END) break;
        if (r != LZMA_OK) {
            out.clear();
            break;
        }
    }
    lzma_end(&s);
    return out;
}

}  // namespace test_support
