// Where a cgroup target's tasks are: a path in the cgroup2 tree, given as a path or found for
// a systemd unit. One place checks that a path stays inside the tree, for every front end.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::perf {

// The directory of a cgroup target: `cgroup` relative to `root` (the cgroup2 mount), or
// absolute with or without the root in front ("/sys/fs/cgroup/system.slice" and
// "/system.slice" are one cgroup). BADARG for a path with a ".." component, which could lead
// out of the tree.
Result<std::string> cgroup_directory(std::string_view root, std::string_view cgroup);

// That directory opened, as perf_event_open takes a cgroup: NODEV when it does not exist.
Result<UniqueFd> open_cgroup(std::string_view root, std::string_view cgroup);

// The cgroup of a systemd unit, relative to `root`: the directory of the unit's name in the
// tree (system.slice/NAME.service, or deeper for units in other slices); ".service" is
// added to a name without a type. Not looked for below a delegated cgroup (a user's manager,
// a unit with Delegate=yes), where its owner names the cgroups: a user's `systemd-run --user
// --unit=nginx` is not the system's nginx. BADARG for a name with '/', or one that names
// several cgroups; NODEV when none (the unit does not run, or only in a delegated subtree).
Result<std::string> unit_cgroup(const std::filesystem::path& root, std::string unit);

}  // namespace monitor::perf
