#include "monitor/text_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "monitor/unique_fd.hpp"

namespace monitor {

Result<void> pread_whole(int fd, std::string& out, const std::filesystem::path& name,
                         std::size_t limit) {
    // Read into the room `out` already has (a file re-read every second keeps its size): no
    // zeroing of it first, and one pread more only to find the end.
    std::size_t room = std::max<std::size_t>(out.capacity(), 4096);
    std::size_t used = 0;
    int error = 0;
    for (;;) {
        bool end = false;
        out.resize_and_overwrite(room, [&](char* p, std::size_t n) {
            while (used < n) {
                const ssize_t r = ::pread(fd, p + used, n - used, static_cast<off_t>(used));
                if (r < 0) {
                    if (errno == EINTR) continue;
                    error = errno;
                    break;
                }
                if (r == 0) {
                    end = true;
                    break;
                }
                used += static_cast<std::size_t>(r);
            }
            return used;
        });
        if (error != 0) return fail_errno(error, "read " + name.string());
        if (end) return {};
        if (room >= limit) {
            return fail(Status::BadData,
                        name.string() + ": larger than " + std::to_string(limit) + " bytes");
        }
        room = std::min(room * 2, limit);
    }
}

Result<std::string> read_text_file(const std::filesystem::path& path, std::size_t limit) {
    UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return fail_errno(errno, "open " + path.string());
    std::string text;
    if (auto r = pread_whole(fd.get(), text, path, limit); !r) return std::unexpected(r.error());
    return text;
}

std::string_view trim_space(std::string_view s) {
    constexpr std::string_view kSpace = " \t\r\n";
    const auto first = s.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

std::optional<std::uint64_t> parse_unsigned(std::string_view s) {
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_decimal(std::string_view s) {
    const auto point = s.find('.');
    const auto whole = parse_unsigned(s.substr(0, point));
    if (!whole) return std::nullopt;
    const double v = static_cast<double>(*whole);
    if (point == std::string_view::npos) return v;
    const auto tail = s.substr(point + 1);
    const auto fraction = parse_unsigned(tail);
    if (!fraction || tail.size() > 9) return std::nullopt;
    return v + static_cast<double>(*fraction) / std::pow(10.0, static_cast<double>(tail.size()));
}

}  // namespace monitor
