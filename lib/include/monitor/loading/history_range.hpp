// A stretch of the history on disk summed up as the window is: the statistics of each source,
// for the machine and each CPU, over the seconds of a range instead of the last minute.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "monitor/loading/history_record.hpp"
#include "monitor/loading/loading_report.hpp"

namespace monitor {

class HistoryRange {
  public:
    using Time = std::chrono::system_clock::time_point;

    // What to report: per_cpu, history (each second's value: the caller bounds the range),
    // states. Units, context and tasks are not kept.
    explicit HistoryRange(const LoadingQuery& query) : query_(query) {}

    // The second that ended at `at`, in time order. Seconds missing since the one before (the
    // daemon was not running) are gaps in the per-second values, and carry no weight. A
    // minute (fold_history_seconds) comes with its lowest and highest loads, and gives its mean
    // to each of its seconds' values.
    void add(Time at, const HistorySecond& second, const HistorySecond* low = nullptr,
             const HistorySecond* high = nullptr);

    // The report: its timestamp the newest second's, its window the seconds the range holds
    // (gaps included). Sources a second lacks are gaps there.
    LoadingReport report() const;
    std::size_t seconds() const { return seconds_; }

  private:
    struct Series {
        double min = 0;
        double max = 0;
        double weighted = 0;
        double weight = 0;
        double plain = 0;
        std::size_t samples = 0;
        std::optional<double> last;
        std::vector<std::optional<double>> values;
        std::array<double, kTimeStateCount> states_weighted{};
        std::array<double, kTimeStateCount> states_plain{};
        double states_weight = 0;
        std::size_t state_samples = 0;
        std::optional<StateShares> last_states;
        bool has_states = false;
    };
    void push(Series& s, std::optional<double> load, const std::optional<StateShares>* states,
              double seconds, std::size_t span, std::optional<double> low,
              std::optional<double> high);
    // Gaps up to the second before the one being added (values are kept with history only).
    void pad(Series& s, std::size_t to) const;
    SourceLoad load_of(const std::string& source, const Series& s) const;

    LoadingQuery query_;
    std::optional<Time> last_;
    std::size_t seconds_ = 0;  // the seconds added and the gaps between them
    // Per source: the machine, and each CPU.
    std::map<std::string, Series> machine_;
    std::map<int, std::map<std::string, Series>> cpus_;
};

}  // namespace monitor
