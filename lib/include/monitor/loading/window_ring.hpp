// The fixed-size ring a history window keeps its per-second samples in: the newest replaces
// the oldest once it is full, and a resize keeps the newest.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace monitor {

template <typename Sample>
class WindowRing {
  public:
    explicit WindowRing(std::size_t capacity) : ring_(std::max<std::size_t>(capacity, 1)) {}

    void push(const Sample& s) {
        ring_[next_] = s;
        next_ = (next_ + 1) % ring_.size();
        size_ = std::min(size_ + 1, ring_.size());
    }

    // Keeps the newest min(size, capacity) samples; a capacity of 0 counts as 1.
    void resize(std::size_t capacity) {
        capacity = std::max<std::size_t>(capacity, 1);
        if (capacity == ring_.size()) return;
        std::vector<Sample> kept;
        const std::size_t keep = std::min(size_, capacity);
        kept.reserve(keep);
        for (std::size_t i = size_ - keep; i < size_; ++i) kept.push_back((*this)[i]);
        ring_.assign(capacity, Sample{});
        std::copy(kept.begin(), kept.end(), ring_.begin());
        size_ = keep;
        next_ = keep % capacity;
    }

    // i = 0 is the oldest, size() - 1 the newest.
    const Sample& operator[](std::size_t i) const {
        return ring_[(next_ + ring_.size() - size_ + i) % ring_.size()];
    }
    const Sample& newest() const { return (*this)[size_ - 1]; }

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::size_t capacity() const { return ring_.size(); }

  private:
    std::vector<Sample> ring_;
    std::size_t next_ = 0;  // where the next sample goes
    std::size_t size_ = 0;
};

}  // namespace monitor
