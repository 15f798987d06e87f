#include "monitor/perf/count_report.hpp"

#include <algorithm>

namespace monitor::perf {

double CountValue::scaled() const {
    if (running_ns == 0) return 0;
    if (running_ns >= enabled_ns) return static_cast<double>(count);
    return static_cast<double>(count) * static_cast<double>(enabled_ns) /
           static_cast<double>(running_ns);
}

double CountValue::running_ratio() const {
    if (enabled_ns == 0) return 1;
    return std::min(1.0, static_cast<double>(running_ns) / static_cast<double>(enabled_ns));
}

CountValue& CountValue::operator+=(const CountValue& o) {
    count += o.count;
    enabled_ns += o.enabled_ns;
    running_ns += o.running_ns;
    return *this;
}

CountValue CountValue::operator-(const CountValue& o) const {
    return {count - o.count, enabled_ns - o.enabled_ns, running_ns - o.running_ns};
}

PerfReport PerfReport::since(const PerfReport& earlier) const {
    PerfReport d = *this;
    d.subtract(earlier);
    return d;
}

void PerfReport::subtract(const PerfReport& earlier) {
    elapsed -= earlier.elapsed;
    paused -= earlier.paused;
    rotations -= earlier.rotations;
    if (earlier.events.size() != events.size() || earlier.groups.size() != groups.size()) {
        return;
    }
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i].total = events[i].total - earlier.events[i].total;
        for (std::size_t k = 0;
             k < events[i].per_instance.size() && k < earlier.events[i].per_instance.size(); ++k) {
            events[i].per_instance[k] =
                events[i].per_instance[k] - earlier.events[i].per_instance[k];
        }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
        for (std::size_t k = 0; k < groups[g].counts.size() && k < earlier.groups[g].counts.size();
             ++k) {
            groups[g].counts[k] -= earlier.groups[g].counts[k];
        }
        groups[g].running_ns -= earlier.groups[g].running_ns;
    }
}

}  // namespace monitor::perf
