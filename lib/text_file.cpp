#include "monitor/text_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "monitor/unique_fd.hpp"

namespace monitor {

Result<void> pread_whole(int fd, std::string& out, const std::filesystem::path& name,
                         std::size_t limit) {
    if (out.size() < 4096) out.resize(4096);
    std::size_t used = 0;
    for (;;) {
        if (used == out.size()) {
            if (out.size() >= limit) {
                return fail(Status::BadData,
                            name.string() + ": larger than " + std::to_string(limit) + " bytes");
            }
            out.resize(std::min(out.size() * 2, limit));
        }
        ssize_t n = ::pread(fd, out.data() + used, out.size() - used, static_cast<off_t>(used));
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_errno(errno, "read " + name.string());
        }
        if (n == 0) break;
        used += static_cast<std::size_t>(n);
    }
    out.resize(used);
    return {};
}

Result<std::string> read_text_file(const std::filesystem::path& path, std::size_t limit) {
    UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return fail_errno(errno, "open " + path.string());
    std::string text;
    if (auto r = pread_whole(fd.get(), text, path, limit); !r) return std::unexpected(r.error());
    return text;
}

}  // namespace monitor
