// The kernel's PMUs as sysfs describes them, as a module of the catalog, for perf's own event
// syntax: `PMU/term=value,.../MODIFIERS` (cpu/event=0x3c,umask=0x00/u, software/config=0/,
// cpu/cpu-cycles/) and raw codes of the core PMU, `rHEX[:MODIFIERS]` (r1a8:pp). Each PMU is
// <sys>/bus/event_source/devices/PMU: its `type` is the event's perf_event_attr type, its
// format/NAME files say where each term goes in config, config1 and config2 (`config:8-15`),
// its events/NAME files are aliases for terms (`event=0x3c,umask=0x00`), and its
// caps/max_precise (or its being the processor's core PMU) how precise its events may be.
// Read when an event is resolved, under the sys root the catalog was made with.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "monitor/perf/pmu.hpp"

namespace monitor::perf {

// How counting names the processor's counters, which events of the core PMU take: the core
// PMU's name and its general-purpose counters as the catalog's other modules know them
// (libpfm4's), or an empty name and 0 when none does.
struct CoreCounters {
    std::string pmu;
    int counters = 0;
};

// Whether `name` is in the module's syntax: `PMU/...` or a raw code `rHEX[:...]`.
bool is_perf_syntax_name(std::string_view name);

std::unique_ptr<PmuModule> make_sysfs_pmus(std::filesystem::path sys_root, CoreCounters core);

}  // namespace monitor::perf
