// perf's own event syntax, as text: `PMU/term=value,term,.../MODIFIERS` taken apart into its
// terms, the kernel's format files (`config:0-7`, `config1:0-15`, `config:0-7,32-35`) read into
// the bits they name, and a term's value placed into those bits as perf's tools/perf/util/pmu.c
// places it (pmu_format_value: the value's bits, lowest first, into the format's bits, lowest
// first). No file is read here: sysfs_pmus.hpp reads a PMU's directory and uses these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::perf {

// One term between the slashes: `event=0x3c` (a value) or `inv` (none).
struct PerfTerm {
    std::string_view name;
    std::optional<std::string_view> value;
};

// `cpu/event=0x3c,umask=0x00/u` taken apart; views into the text, which must outlive them.
struct PerfPmuEvent {
    std::string_view pmu;   // "cpu"
    std::string_view body;  // "cpu/event=0x3c,umask=0x00/": the event without modifiers
    std::vector<PerfTerm> terms;
    std::string_view modifiers;  // "u" (a ':' after the closing '/' left out); empty for none
};

// Whether `text` is written as `PMU/...`: a PMU's name (letters, digits, '_', '-', '.') and a
// '/' after it. Says nothing about whether the rest is well formed.
bool is_pmu_syntax(std::string_view text);

// Where the event at the start of `list` ends: at the first of `separators` (",}") that is not
// between the slashes of a `PMU/TERMS/` event, whose commas separate its terms; npos for none.
std::size_t find_event_end(std::string_view list, std::string_view separators);

// `text` taken apart: BADARG naming the text and what is wrong (no closing '/', an empty
// term, `=` without a value, a term's name that no PMU could have).
Result<PerfPmuEvent> parse_pmu_event(std::string_view text);

// A comma-separated list of terms (what is between the slashes, or an events/ alias file);
// `text` names the event in messages. Empty for an empty list.
Result<std::vector<PerfTerm>> parse_terms(std::string_view terms, std::string_view text);

// A format file's contents, `config1:0-15` or `config:0-7,32-35`: which field of the event
// (config 0, config1 1, config2 2) and its bits there.
struct PerfFormat {
    int field = 0;
    std::uint64_t bits = 0;
};

// BADARG saying what is wrong (an unknown field, a bit beyond 63, a range backwards).
Result<PerfFormat> parse_format(std::string_view contents);

// How many bits the format has, and the largest value they hold (all ones).
int format_width(std::uint64_t bits);
std::uint64_t format_max(std::uint64_t bits);

// `value`'s bits, lowest first, placed into `bits`, lowest first, in `field`: the bits of the
// format cleared first, so that a later term overrides an earlier one. The caller checks that
// `value` fits (format_max).
void place_value(std::uint64_t bits, std::uint64_t value, std::uint64_t& field);

// How a format's bits are written in its file: "config:8-15", "config:0-7,32-35".
std::string describe_format(const PerfFormat& format);

}  // namespace monitor::perf
