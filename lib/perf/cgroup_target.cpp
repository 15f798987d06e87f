#include "monitor/perf/cgroup_target.hpp"

#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>

#include "monitor/status.hpp"

namespace monitor::perf {

namespace fs = std::filesystem;

Result<UniqueFd> open_cgroup(std::string_view root, std::string_view cgroup) {
    auto dir = cgroup_directory(root, cgroup);
    if (!dir) return std::unexpected(dir.error());
    const int fd = ::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return fail(err == ENOENT || err == ENOTDIR ? Status::NoDev : Status::IoErr,
                    fmt::format("cgroup {}: {}", *dir, errno_message(err)));
    }
    return UniqueFd(fd);
}

Result<std::string> cgroup_directory(std::string_view root, std::string_view cgroup) {
    const fs::path base = fs::path(root).lexically_normal();
    for (const auto& part : fs::path(cgroup)) {
        if (part == "..") {
            return fail(Status::BadArg,
                        fmt::format("cgroup '{}': '..' could lead out of the cgroup tree {}; "
                                    "name a cgroup below it, such as system.slice",
                                    cgroup, base.string()));
        }
    }
    fs::path rel = fs::path(cgroup).lexically_normal();
    if (rel.is_absolute()) {
        // Below the root by whole components ("/sys/fs/cgroupX" is not below "/sys/fs/cgroup"):
        // the part after it; otherwise the path is taken from the root.
        const fs::path under = rel.lexically_relative(base);
        const bool below = !under.empty() && *under.begin() != "..";
        rel = below ? under : rel.relative_path();
    }
    return (rel.empty() || rel == "." ? base : base / rel).string();
}

Result<std::string> unit_cgroup(const fs::path& root, std::string unit) {
    if (unit.find('/') != std::string::npos) {
        return fail(Status::BadArg, fmt::format("'{}' is not a unit name", unit));
    }
    if (unit.find('.') == std::string::npos) unit += ".service";
    std::error_code ec;
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it.depth() > 4) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_directory(ec) && it->path().filename() == unit) {
            return it->path().lexically_relative(root).string();
        }
    }
    return fail(Status::NoDev, fmt::format("no cgroup for unit {} under {} (is the unit running? "
                                           "`systemctl status {}`)",
                                           unit, root.string(), unit));
}

}  // namespace monitor::perf
