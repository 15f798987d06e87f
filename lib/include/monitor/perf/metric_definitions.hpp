// Derived metrics defined as formulas (metric_formula.hpp) and gathered in groups, as perf's
// -M, likwid's groups and rpistat's ratios: a session asked for "ipc,branch" counts the
// events the formulas need besides its own, and its reports carry the metrics.
//
// A metric may be defined more than once under one name, for different PMUs ("ipc" from a
// 750's INSTRUCTIONS_COMPLETED and CYCLES, and from the kernel's generic events): the first
// definition whose events all resolve and may count on this machine is the one taken.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/perf/count_plan.hpp"
#include "monitor/perf/counter_device.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/metric_formula.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

struct MetricDefinition {
    std::string name;  // "ipc": lower-case letters, digits and '_'
    std::string description;
    MetricFormula formula;
    std::vector<std::string> groups;  // "ipc", "branch"; a metric may be in none
    std::string where;                // "FILE:LINE" of its table, for messages

    bool operator==(const MetricDefinition&) const = default;
};

// BADARG unless `name` is 1 to 64 lower-case letters, digits and '_', starting with a letter:
// what a metric or group is called (a Prometheus label value, a word on a command line).
Result<void> check_metric_name(std::string_view name, std::string_view what);

// Whether an event opens on this machine: an error for one its PMU does not count (the kernel's
// generic events map onto some PMUs' codes and not onto others': a 750 has no cache-references,
// most Intel processors no stalled-cycles-frontend), nothing when it opens.
using EventProbe = std::function<std::optional<Error>(const EventSpec&)>;

// A probe that opens the event on `device` for this thread in user mode, and closes it at
// once. Only the PMU's refusals (NOPMU, NOEVENT) are errors: a refusal for want of privilege
// says nothing of the machine.
EventProbe opening_probe(CounterDevice& device);

// Why `d` cannot count on the machine of `catalog` (an event it does not know, one of a PMU
// that does not count here, or one `probe` does not open); nothing when it can.
std::optional<Error> cannot_count(const MetricDefinition& d, const EventCatalog& catalog,
                                  const EventProbe& probe = {});

// The metric definitions each name in `names` asks for ("ipc,branch": groups and metrics,
// comma-separated; a group's name in any case), for this machine, each metric once, in the
// order asked. A group keeps the metrics that can count here and leaves out the others;
// NOEVENT for a name that is neither a group nor a metric (with the groups there are),
// NOPMU for a metric, or a group, none of whose definitions can count here (saying why);
// "can count" as cannot_count() says, with `probe`.
Result<std::vector<const MetricDefinition*>> choose_metrics(
    std::span<const MetricDefinition> definitions, std::string_view names,
    const EventCatalog& catalog, const EventProbe& probe = {});

// Adds `chosen`'s metrics to `options`, and the events they need that it does not count
// already (an event counts already when it is requested by the same name, or resolves to the
// same code with the same modes).
Result<void> add_metrics(SessionOptions& options, std::span<const MetricDefinition* const> chosen,
                         const EventCatalog& catalog);

// The groups of `definitions`, each once, in the order they first appear.
std::vector<std::string> metric_groups(std::span<const MetricDefinition> definitions);

}  // namespace monitor::perf
