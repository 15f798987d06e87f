#include "monitor/perf/cgroup_target.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/xattr.h>

#include <cerrno>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::perf {

namespace fs = std::filesystem;

// How deep below the root a unit's cgroup is looked for: slices nest (a-b.slice in a.slice).
constexpr int kUnitDepth = 4;

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

namespace {

// A cgroup whose subtree its owner names as it likes: every user's manager (user@UID.service),
// and any unit with Delegate=yes, which systemd marks with the xattr trusted.delegate (or
// user.delegate) set to "1". A unit's name found below one proves nothing.
bool delegates(const fs::path& dir) {
    const std::string name = dir.filename().string();
    if (name.starts_with("user@") && name.ends_with(".service")) return true;
    for (const char* attr : {"trusted.delegate", "user.delegate"}) {
        char value[2] = {};
        if (::getxattr(dir.c_str(), attr, value, sizeof value) == 1 && value[0] == '1') return true;
    }
    return false;
}

}  // namespace

Result<std::string> unit_cgroup(const fs::path& root, std::string unit) {
    if (unit.empty() || unit.find('/') != std::string::npos || unit == "." || unit == "..") {
        return fail(Status::BadArg, fmt::format("'{}' is not a unit name", unit));
    }
    if (unit.find('.') == std::string::npos) unit += ".service";
    std::vector<std::string> found;
    std::error_code ec;
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_directory(ec)) continue;
        if (it->path().filename() == unit) found.push_back(it->path().lexically_relative(root));
        if (it.depth() >= kUnitDepth || delegates(it->path())) it.disable_recursion_pending();
    }
    if (found.size() > 1) {
        return fail(Status::BadArg,
                    fmt::format("unit {}: {} cgroups under {} have that name ({}); name the one "
                                "to count as a cgroup target",
                                unit, found.size(), root.string(), fmt::join(found, ", ")));
    }
    if (found.empty()) {
        return fail(Status::NoDev,
                    fmt::format("no cgroup for unit {} under {} (is the unit running? `systemctl "
                                "status {}`; a unit of a user's manager, or inside another "
                                "delegated cgroup, is named by its cgroup, not its name)",
                                unit, root.string(), unit));
    }
    return found.front();
}

}  // namespace monitor::perf
