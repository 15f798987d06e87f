#include "monitor/perf/mapped_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <charconv>

#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

// The next space-separated field of `line`, taken off its front.
std::string_view next_field(std::string_view& line) {
    line = trim_space(line);
    const auto space = line.find(' ');
    const std::string_view field = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view{} : line.substr(space);
    return field;
}

template <typename T>
bool parse(std::string_view text, T& out, int base) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

// A regular file of at most `max_bytes`, as fstat says of `fd`; else why not.
Result<struct stat> regular(int fd, const std::string& path, std::uint64_t max_bytes) {
    struct stat st {};
    if (::fstat(fd, &st) < 0) return fail_errno(errno, path);
    if (!S_ISREG(st.st_mode)) {
        return fail(Status::BadArg, fmt::format("{} is not a regular file", path));
    }
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        return fail(Status::BadArg,
                    fmt::format("{} is larger than {} MiB: not read", path, max_bytes >> 20));
    }
    return st;
}

// O_NONBLOCK: a FIFO or a device put where a file was does not block the open.
constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

}  // namespace

std::vector<MappedFile> mapped_files(std::string_view maps) {
    std::vector<MappedFile> out;
    while (!maps.empty()) {
        const auto eol = maps.find('\n');
        std::string_view line = maps.substr(0, eol);
        maps = eol == std::string_view::npos ? std::string_view{} : maps.substr(eol + 1);
        // "start-end perms offset major:minor inode path"
        const std::string_view range = next_field(line);
        next_field(line);  // perms
        next_field(line);  // offset
        const std::string_view device = next_field(line);
        const std::string_view inode = next_field(line);
        const std::string_view path = trim_space(line);
        if (!path.starts_with('/')) continue;
        MappedFile f{.path = std::string(path)};
        const auto dash = range.find('-');
        const auto colon = device.find(':');
        if (dash == std::string_view::npos || colon == std::string_view::npos ||
            !parse(range.substr(0, dash), f.start, 16) ||
            !parse(range.substr(dash + 1), f.end, 16) ||
            !parse(device.substr(0, colon), f.major, 16) ||
            !parse(device.substr(colon + 1), f.minor, 16) || !parse(inode, f.inode, 10)) {
            continue;
        }
        out.push_back(std::move(f));
    }
    return out;
}

Result<UniqueFd> open_regular_file(const std::string& path, std::uint64_t max_bytes) {
    UniqueFd fd{::open(path.c_str(), kOpenFlags)};
    if (!fd) return fail_errno(errno, path);
    if (auto st = regular(fd.get(), path, max_bytes); !st) return std::unexpected(st.error());
    return fd;
}

Result<UniqueFd> open_mapped_file(pid_t pid, const MappedFile& file) {
    if (pid > 0) {
        // The very file mapped, whatever its path now names (needs CAP_SYS_ADMIN).
        auto exact = open_regular_file(
            fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, file.start, file.end));
        if (exact || exact.error().status == Status::BadArg) return exact;
        // The path in the process's own mount namespace and root.
        if (file.path.starts_with('/')) {
            auto own = open_regular_file(fmt::format("/proc/{}/root{}", pid, file.path));
            if (own || own.error().status == Status::BadArg) return own;
        }
    }
    // Gone: its path here, if the file there is the one that was mapped.
    auto here = open_regular_file(file.path);
    if (!here) return here;
    struct stat st {};
    if (::fstat(here->get(), &st) < 0) return fail_errno(errno, file.path);
    if (major(st.st_dev) != file.major || minor(st.st_dev) != file.minor ||
        st.st_ino != file.inode) {
        return fail(Status::NoDev,
                    fmt::format("{} is no longer the file process {} mapped (device {:x}:{:x}, "
                                "inode {})",
                                file.path, pid, file.major, file.minor, file.inode));
    }
    return here;
}

}  // namespace monitor::perf
