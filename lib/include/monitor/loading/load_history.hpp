// A ring of per-second load samples and the MON statistics over it.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

#include "monitor/loading/window_ring.hpp"

namespace monitor {

// Statistics over the window, in percent (0-100), to a float's precision (within 1e-5).
struct LoadStats {
    // Load of the newest sample; nullopt when the newest interval gave no valid sample.
    std::optional<double> avg_prev_sec;
    // Time-weighted mean of the valid samples in the window.
    double avg_prev_min = 0;
    // Lowest and highest valid per-second load in the window.
    double min_prev_min = 0;
    double max_prev_min = 0;
    // Number of valid samples in the window.
    std::size_t samples = 0;
};

class LoadHistory {
  public:
    // `capacity` samples (at least 1): 60 for MON's minute at one sample a second.
    explicit LoadHistory(std::size_t capacity);

    // Appends the load (percent, clamped to 0-100) of an interval lasting `seconds`; the
    // oldest sample leaves when the ring is full. nullopt records a gap: an interval without
    // a valid measurement (CPU offline, counters went backwards).
    void push(std::optional<double> load, double seconds);

    // Changes the window to `capacity` samples, keeping the newest ones.
    void resize(std::size_t capacity);

    // nullopt when the window holds no valid sample.
    std::optional<LoadStats> stats() const;

    // The samples, oldest first; gaps are nullopt.
    std::vector<std::optional<double>> values() const;
    // The newest sample; nullopt when it is a gap or there is none.
    std::optional<double> newest() const;

    std::size_t size() const { return ring_.size(); }
    std::size_t capacity() const { return ring_.capacity(); }
    // True when every sample in the window is a gap (or there is none).
    bool empty_of_data() const;

  private:
    // 8 bytes (floats carry a percent to far below the 0.001 reported; a gap is a NaN load),
    // so an hour's window takes 28 KiB a CPU.
    struct Sample {
        float load = std::numeric_limits<float>::quiet_NaN();  // percent; NaN: a gap
        float seconds = 0;  // interval length, the weight in the average
        bool valid() const { return !std::isnan(load); }
    };
    static_assert(sizeof(Sample) == 8);

    WindowRing<Sample> ring_;
};

}  // namespace monitor
