// The counter scheduler: packs events into counter sets first-fit, each set checked by a
// bipartite matching of its events to counters (Kuhn's augmenting paths), and explains a
// group or pinned events that cannot fit by a smallest set of them that compete for too few
// counters (a Hall violator).
#include "monitor/perf/counter_scheduler.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <optional>

namespace monitor::perf {
namespace {

constexpr int kMaxCounters = 32;  // the bits of a CounterMask

// Kuhn's algorithm over at most 32 counters, counters tried in ascending order so that the
// result depends only on the input.
class Matcher {
  public:
    explicit Matcher(std::span<const CounterMask> masks) : masks_(masks) { owner_.fill(-1); }

    // The counter of each event, or nullopt when the events cannot all have one.
    std::optional<std::vector<int>> solve() {
        if (masks_.size() > static_cast<std::size_t>(kMaxCounters)) return std::nullopt;
        for (std::size_t e = 0; e < masks_.size(); ++e) {
            visited_ = 0;
            if (!augment(e)) return std::nullopt;
        }
        std::vector<int> counter_of(masks_.size(), -1);
        for (int c = 0; c < kMaxCounters; ++c) {
            if (owner_[c] >= 0) counter_of[static_cast<std::size_t>(owner_[c])] = c;
        }
        return counter_of;
    }

  private:
    // NOLINTNEXTLINE(misc-no-recursion): each level visits a counter: at most 32 deep
    bool augment(std::size_t e) {
        for (int c = 0; c < kMaxCounters; ++c) {
            CounterMask bit = CounterMask{1} << c;
            if ((masks_[e] & bit) == 0 || (visited_ & bit) != 0) continue;
            visited_ |= bit;
            if (owner_[c] < 0 || augment(static_cast<std::size_t>(owner_[c]))) {
                owner_[c] = static_cast<int>(e);
                return true;
            }
        }
        return false;
    }

    std::span<const CounterMask> masks_;
    std::array<int, kMaxCounters> owner_{};
    CounterMask visited_ = 0;
};

bool fits(std::span<const CounterMask> masks) {
    return Matcher(masks).solve().has_value();
}

std::string number_word(std::size_t n) {
    static constexpr std::array<const char*, 13> kWords = {
        "no",    "one",   "two",  "three", "four",   "five",  "six",
        "seven", "eight", "nine", "ten",   "eleven", "twelve"};
    return n < kWords.size() ? kWords[n] : std::to_string(n);
}

// "A", "A and B", "A, B and C".
std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
        out += items[i];
    }
    return out;
}

class Scheduler {
  public:
    Scheduler(std::span<const SchedulerEvent> events, int counters,
              std::span<const std::string> counter_names)
        : events_(events), names_(counter_names) {
        usable_ = first_counters(counters);
    }

    Result<Schedule> run() {
        Schedule schedule;
        std::vector<std::size_t> others;  // counter events that are not pinned
        for (std::size_t i = 0; i < events_.size(); ++i) {
            const auto& ev = events_[i];
            if (ev.counters == 0) {
                schedule.free_running.push_back(i);
                continue;
            }
            if (mask(i) == 0) {
                return fail(Status::BadArg,
                            ev.name + " cannot be counted: no counter of this PMU can hold it");
            }
            (ev.pinned ? pinned_ : others).push_back(i);
        }

        if (!fits(masks_of(pinned_))) {
            return fail(Status::BadArg, explain(pinned_, {}) + "; they cannot all be pinned");
        }

        std::vector<std::vector<std::size_t>> sets;  // the events of each set but the pinned
        std::vector<int> groups_done;
        for (std::size_t i : others) {
            int group = events_[i].group;
            std::vector<std::size_t> unit;
            if (group < 0) {
                unit.push_back(i);
            } else {
                if (std::ranges::find(groups_done, group) != groups_done.end()) continue;
                groups_done.push_back(group);
                for (std::size_t j : others) {
                    if (events_[j].group == group) unit.push_back(j);
                }
            }
            if (auto err = place(unit, sets); !err.empty()) return fail(Status::BadArg, err);
        }
        if (sets.empty() && !pinned_.empty()) sets.emplace_back();

        for (auto& members : sets) {
            std::ranges::sort(members);
            std::vector<std::size_t> order = pinned_;
            order.insert(order.end(), members.begin(), members.end());
            auto counter_of = Matcher(masks_of(order)).solve();
            CounterSet set;
            for (std::size_t k = 0; k < order.size(); ++k) {
                set.events.push_back(Placement{order[k], (*counter_of)[k]});
            }
            schedule.sets.push_back(std::move(set));
        }
        return schedule;
    }

  private:
    CounterMask mask(std::size_t i) const { return events_[i].counters & usable_; }

    std::vector<CounterMask> masks_of(std::span<const std::size_t> indices) const {
        std::vector<CounterMask> masks;
        masks.reserve(indices.size());
        for (std::size_t i : indices) masks.push_back(mask(i));
        return masks;
    }

    // Puts `unit` into the first set that can take it, or into a new one; the error message
    // when not even a new set can.
    std::string place(const std::vector<std::size_t>& unit,
                      std::vector<std::vector<std::size_t>>& sets) const {
        for (auto& members : sets) {
            std::vector<std::size_t> trial = pinned_;
            trial.insert(trial.end(), members.begin(), members.end());
            trial.insert(trial.end(), unit.begin(), unit.end());
            if (fits(masks_of(trial))) {
                members.insert(members.end(), unit.begin(), unit.end());
                return {};
            }
        }
        std::vector<std::size_t> fresh = pinned_;
        fresh.insert(fresh.end(), unit.begin(), unit.end());
        if (fits(masks_of(fresh))) {
            sets.push_back(unit);
            return {};
        }
        if (unit.size() == 1) {
            return explain(unit, pinned_) + "; " + events_[unit.front()].name +
                   " cannot be counted with the pinned events";
        }
        auto culprits = violator(unit, pinned_);
        bool with_pinned = std::ranges::any_of(culprits, [&](std::size_t i) {
            return std::ranges::find(pinned_, i) != pinned_.end();
        });
        return describe(culprits) + (with_pinned
                                         ? "; the group cannot be counted with the pinned events"
                                         : "; they cannot be in one group");
    }

    // A smallest set of `first` + `then` events that need more counters than they can use
    // together, `first` events preferred; they must not fit together. With more than 20
    // counters in play (too many sets of counters to try), an inclusion-minimal one instead.
    std::vector<std::size_t> violator(std::span<const std::size_t> first,
                                      std::span<const std::size_t> then) const {
        std::vector<std::size_t> all(first.begin(), first.end());
        all.insert(all.end(), then.begin(), then.end());
        CounterMask in_play = 0;
        for (std::size_t i : all) in_play |= mask(i);

        if (std::popcount(in_play) > 20) {
            // Drop every event without which the rest still does not fit; what stays does
            // not fit, and fits without any one of its events.
            std::vector<std::size_t> keep = all;
            for (auto it = all.rbegin(); it != all.rend(); ++it) {
                std::vector<std::size_t> without;
                for (std::size_t i : keep) {
                    if (i != *it) without.push_back(i);
                }
                if (!fits(masks_of(without))) keep = std::move(without);
            }
            return keep;
        }

        // The smallest violators: k counters that k + 1 events can only be counted on.
        std::vector<std::size_t> best;
        std::size_t best_later = 0;
        CounterMask c = 0;
        do {
            std::size_t k = static_cast<std::size_t>(std::popcount(c));
            if (best.empty() || k + 1 <= best.size()) {
                std::vector<std::size_t> inside;
                std::size_t later = 0;
                for (std::size_t n = 0; n < all.size() && inside.size() <= k; ++n) {
                    if ((mask(all[n]) & ~c) != 0) continue;
                    inside.push_back(all[n]);
                    if (n >= first.size()) ++later;
                }
                if (inside.size() > k &&
                    (best.empty() || inside.size() < best.size() || later < best_later)) {
                    best = std::move(inside);
                    best_later = later;
                }
            }
            c = (c - in_play) & in_play;  // the next subset of in_play, in ascending order
        } while (c != 0);
        return best;
    }

    std::string counter_name(int c) const {
        auto idx = static_cast<std::size_t>(c);
        return idx < names_.size() ? names_[idx] : "counter " + std::to_string(c + 1);
    }

    // Why `events` and `pinned` do not fit together, from a smallest violator of them.
    std::string explain(std::span<const std::size_t> events,
                        std::span<const std::size_t> pinned) const {
        return describe(violator(events, pinned));
    }

    // "A, B and the pinned event P can only be counted on PMC1 and PMC2, two counters for
    // three events".
    std::string describe(std::vector<std::size_t> culprits) const {
        std::ranges::sort(culprits);
        std::vector<std::string> plain;
        std::vector<std::string> held;
        CounterMask used = 0;
        for (std::size_t i : culprits) {
            (events_[i].pinned ? held : plain).push_back(events_[i].name);
            used |= mask(i);
        }
        std::vector<std::string> subject = plain;
        if (!held.empty()) {
            subject.push_back((held.size() == 1 ? "the pinned event " : "the pinned events ") +
                              join(held));
        }
        std::vector<std::string> counter_names;
        for (int c = 0; c < kMaxCounters; ++c) {
            if ((used & (CounterMask{1} << c)) != 0) counter_names.push_back(counter_name(c));
        }
        std::size_t n_counters = counter_names.size();
        return join(subject) + " can only be counted on " + join(counter_names) + ", " +
               number_word(n_counters) + (n_counters == 1 ? " counter" : " counters") + " for " +
               number_word(culprits.size()) + " events";
    }

    std::span<const SchedulerEvent> events_;
    std::span<const std::string> names_;
    CounterMask usable_ = 0;
    std::vector<std::size_t> pinned_;
};

}  // namespace

Result<Schedule> schedule_events(std::span<const SchedulerEvent> events, int counters,
                                 std::span<const std::string> counter_names) {
    if (counters < 0) {
        return fail(Status::BadArg,
                    "bad number of counters " + std::to_string(counters) + ": a PMU has 0 or more");
    }
    return Scheduler(events, counters, counter_names).run();
}

}  // namespace monitor::perf
