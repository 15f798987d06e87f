// How monctl shows counter replies to people (tables with the locale's thousands separators;
// the counts themselves in perf stat's layout, perf_stat_views.hpp) and to spreadsheets (CSV).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/profile_messages.hpp"

namespace monctl {

// "1,234,567" in a locale that groups digits, "1234567" in the C locale.
std::string format_count(std::uint64_t n);

// "1,234.57" in a locale that groups digits (`digits` after the point).
std::string format_fixed(double v, int digits);

// A header line (when `header`), then one line per event (and CPU): time (when the report
// was shown, as csv_time writes it), period, event, cpu, count, enabled_ns, running_ns, scaled,
// running.
std::string format_counter_csv(const monitor::protocol::CounterReport& report, bool header,
                               std::chrono::system_clock::time_point time);

std::string format_plan(const monitor::protocol::CounterPlan& plan);
// A standing session: its name, table, events and target, then its totals and its last
// second as format_counter_report shows them (or why it is not counting).
std::string format_standing_session(const monitor::protocol::StandingSession& session);
std::string format_pmus(const std::vector<monitor::perf::PmuInfo>& pmus,
                        std::optional<int> paranoid);
std::string format_events(const std::vector<monitor::protocol::EventListing>& events);
// The derived metrics that can count here: name, groups, formula and description; and how
// many more are defined for other PMUs.
std::string format_metric_definitions(const std::vector<monitor::protocol::MetricListing>& metrics);
// Every definition, where it comes from, and why one cannot count here.
std::string format_all_metric_definitions(
    const std::vector<monitor::protocol::MetricListing>& metrics);
// A profile: what was sampled, where and how long; the samples by mode, what was lost and
// throttled; the top functions and objects with their shares; the address histogram's
// buckets that have samples.
// With `top` (not 0), a profile asked for with every line (top 0) is shown as one asked for
// `top` lines comes: its functions and objects, and each CPU's, cut to the first `top`. The
// daemon sorts the lines the same either way (most samples first, ties by name), so it shows
// the same.
std::string format_profile(const monitor::protocol::ProfileMessage& profile, std::size_t top = 0);
// The same cut in the JSON of a ProfileMessage (a reply's "report"). In place: a report is
// never copied (a profile of many CPUs and stacks is large).
void keep_top(nlohmann::json& profile, std::size_t top);
// A batch of overflows on a line ("+1.500 s  12 overflows, 240 in all (2,400,000 events); the
// last at 0x4011a6 in 4242/4243 on cpu1, user"), or the totals of the last.
std::string format_overflow_batch(const monitor::protocol::OverflowBatch& batch);

}  // namespace monctl
