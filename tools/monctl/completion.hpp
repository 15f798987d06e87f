// Shell completion: what may come next on a monctl command line. The bash, zsh and fish
// scripts (tools/monctl/completions/) call `monctl __complete WORD...` with the words after
// "monctl", the last being the word under completion (empty after a space), and offer what it
// prints, one candidate a line. The commands and options come from monctl's own command line
// (CLI11's App), so that the scripts never list them; the values of some options come from
// the running daemon and the machine (CompletionSources).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace monctl {

// What the shell completes itself: file names. complete() returns it alone.
inline constexpr std::string_view kCompleteFiles = ":files";

// Where option values come from; each may return nothing (no daemon, no cgroups).
struct CompletionSources {
    std::function<std::vector<std::string>()> events;    // -e: the daemon's event names
    // -M: the groups and metrics that can count on the daemon's machine
    std::function<std::vector<std::string>()> metrics;
    std::function<std::vector<std::string>()> pmus;      // perf list PMU: its PMUs
    std::function<std::vector<std::string>()>
        sessions;  // perf show|reset|pause|resume NAME: standing ones
    std::function<std::vector<std::string>()> units;     // -u: systemd units with a cgroup
    std::function<std::vector<std::string>()> cpus;      // -C: the online CPUs
};

// The candidates for the last of `words` (the words after "monctl", at least one), not
// filtered by what that word starts with: the shells do that. {kCompleteFiles} where a file
// name is wanted (--socket, --folded, --pprof, a command after --).
std::vector<std::string> complete(const CLI::App& app, const std::vector<std::string>& words,
                                  const CompletionSources& sources);

// The sources of a live machine: the daemon at the socket `words` names (-s, --socket), else
// where monctl looks for it, asked with a short timeout; the units below `cgroup_root`; the
// CPUs online under /sys.
CompletionSources live_sources(const std::vector<std::string>& words,
                               const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace monctl
