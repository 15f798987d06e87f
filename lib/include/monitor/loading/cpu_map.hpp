// A value per CPU, kept in a vector sorted by CPU number: what the engine keeps for every CPU
// and walks once a second beside a sorted list of CPUs. Contiguous, so that the walk over a
// thousand CPUs does not chase a tree's nodes through the cache; CPUs come and go rarely,
// which is when inserting and erasing move the values after them.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace monitor {

template <class T>
class CpuMap {
  public:
    using value_type = std::pair<int, T>;
    using iterator = typename std::vector<value_type>::iterator;
    using const_iterator = typename std::vector<value_type>::const_iterator;

    iterator begin() { return values_.begin(); }
    iterator end() { return values_.end(); }
    const_iterator begin() const { return values_.begin(); }
    const_iterator end() const { return values_.end(); }
    std::size_t size() const { return values_.size(); }
    bool empty() const { return values_.empty(); }

    const_iterator find(int cpu) const {
        auto it = lower_bound(cpu);
        return it != end() && it->first == cpu ? it : end();
    }
    // The value of `cpu`, made from `args` at `hint` when there is none: `hint` must be the
    // place of the first CPU above it (or end()), as a walk in CPU order finds it.
    template <class... Args>
    iterator try_emplace(const_iterator hint, int cpu, Args&&... args) {
        if (hint != end() && hint->first == cpu) return begin() + (hint - begin());
        return values_.emplace(hint, std::piecewise_construct, std::forward_as_tuple(cpu),
                               std::forward_as_tuple(std::forward<Args>(args)...));
    }
    iterator erase(const_iterator it) { return values_.erase(it); }

  private:
    const_iterator lower_bound(int cpu) const {
        return std::lower_bound(values_.begin(), values_.end(), cpu,
                                [](const value_type& v, int c) { return v.first < c; });
    }

    std::vector<value_type> values_;
};

}  // namespace monitor
