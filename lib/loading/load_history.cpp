#include "monitor/loading/load_history.hpp"

#include <algorithm>
#include <cmath>

namespace monitor {

LoadHistory::LoadHistory(std::size_t capacity) : ring_(capacity) {}

void LoadHistory::push(std::optional<double> load, double seconds) {
    Sample s;
    if (load && std::isfinite(*load)) s.load = static_cast<float>(std::clamp(*load, 0.0, 100.0));
    s.seconds = std::isfinite(seconds) && seconds > 0 ? static_cast<float>(seconds) : 0.0F;
    ring_.push(s);
}

void LoadHistory::resize(std::size_t capacity) {
    ring_.resize(capacity);
}

std::optional<LoadStats> LoadHistory::stats() const {
    LoadStats st;
    double weighted = 0;
    double weight = 0;
    double plain = 0;
    for (std::size_t i = 0; i < ring_.size(); ++i) {
        const Sample& s = ring_[i];
        if (!s.valid()) continue;
        const auto load = static_cast<double>(s.load);
        const auto seconds = static_cast<double>(s.seconds);
        if (st.samples == 0) {
            st.min_prev_min = st.max_prev_min = load;
        } else {
            st.min_prev_min = std::min(st.min_prev_min, load);
            st.max_prev_min = std::max(st.max_prev_min, load);
        }
        weighted += load * seconds;
        weight += seconds;
        plain += load;
        ++st.samples;
    }
    if (st.samples == 0) return std::nullopt;
    // Zero-length intervals carry no weight; if all are, fall back to the plain mean.
    st.avg_prev_min = weight > 0 ? weighted / weight : plain / static_cast<double>(st.samples);
    st.avg_prev_min = std::clamp(st.avg_prev_min, st.min_prev_min, st.max_prev_min);
    const Sample& newest = ring_.newest();
    if (newest.valid()) st.avg_prev_sec = static_cast<double>(newest.load);
    return st;
}

std::vector<std::optional<double>> LoadHistory::values() const {
    std::vector<std::optional<double>> out;
    out.reserve(ring_.size());
    for (std::size_t i = 0; i < ring_.size(); ++i) {
        const Sample& s = ring_[i];
        out.push_back(s.valid() ? std::optional<double>{static_cast<double>(s.load)}
                                : std::nullopt);
    }
    return out;
}

std::optional<double> LoadHistory::newest() const {
    if (ring_.size() == 0 || !ring_.newest().valid()) return std::nullopt;
    return static_cast<double>(ring_.newest().load);
}

bool LoadHistory::empty_of_data() const {
    for (std::size_t i = 0; i < ring_.size(); ++i) {
        if (ring_[i].valid()) return false;
    }
    return true;
}

}  // namespace monitor
