#include "monitor/watchdog/pet_policy.hpp"

#include <algorithm>
#include <bit>

namespace monitor::watchdog {

std::string_view pet_policy_name(PetPolicyKind k) noexcept {
    return name_of(kPetPolicyNames, k);
}

std::optional<PetPolicyKind> pet_policy_from_name(std::string_view name) noexcept {
    return value_named(kPetPolicyNames, name);
}

PetPolicy::PetPolicy(PetPolicyKind kind, std::chrono::nanoseconds min_interval)
    : kind_(kind),
      min_interval_ms_(static_cast<std::uint32_t>(
          std::chrono::ceil<std::chrono::milliseconds>(min_interval).count())) {}

std::uint32_t PetPolicy::stamp(Clock::time_point now) noexcept {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
    const auto s = static_cast<std::uint32_t>(static_cast<std::uint64_t>(ms.count()));
    return s == 0 ? 1 : s;
}

void PetPolicy::set_cpus(const std::vector<int>& cpus) noexcept {
    std::array<std::uint32_t, kWords> wanted{};
    int words = 0;
    for (int c : cpus) {
        if (c < 0 || c >= kMaxCpus) continue;
        wanted[static_cast<std::size_t>(c / kWordBits)] |= std::uint32_t{1} << (c % kWordBits);
        words = std::max(words, c / kWordBits + 1);
    }
    // First the union of the old set and the new, then the new: a probe that reads the words
    // meanwhile sees more CPUs than either set, which holds a pet back, never fewer.
    const int old_words = words_.load();
    words_.store(std::max(words, old_words));
    for (std::size_t w = 0; w < wanted.size(); ++w) {
        if (wanted[w] != 0) cpus_[w].fetch_or(wanted[w]);
    }
    for (std::size_t w = 0; w < wanted.size(); ++w) {
        cpus_[w].store(wanted[w]);
        credited_[w].fetch_and(wanted[w]);  // the credits of CPUs that left
    }
    words_.store(words);
}

bool PetPolicy::credit(int cpu, Clock::time_point now) noexcept {
    if (cpu < 0 || cpu >= kMaxCpus) return false;
    const auto word = static_cast<std::size_t>(cpu / kWordBits);
    const std::uint32_t bit = std::uint32_t{1} << (cpu % kWordBits);
    if ((cpus_[word].load() & bit) == 0) return false;
    credited_[word].fetch_or(bit);

    // Whether the credits so far earn a pet, and which they are.
    std::array<std::uint32_t, kWords> used{};
    const auto words = static_cast<std::size_t>(words_.load());
    for (std::size_t w = 0; w < words; ++w) {
        const std::uint32_t wanted = cpus_[w].load();
        used[w] = credited_[w].load() & wanted;
        if (kind_ == PetPolicyKind::All && used[w] != wanted) return false;
    }

    // Not sooner than min_interval after the last pet (the credits then count for the next);
    // of the probes that get here at once, the one that moves the time on pets.
    const std::uint32_t at = stamp(now);
    std::uint32_t last = last_pet_.load();
    if (last != 0 &&
        static_cast<std::int32_t>(at - last) < static_cast<std::int32_t>(min_interval_ms_)) {
        return false;
    }
    if (!last_pet_.compare_exchange_strong(last, at)) return false;
    // The credits used start over; one earned since they were read stays for the next pet.
    for (std::size_t w = 0; w < words; ++w) {
        if (used[w] != 0) credited_[w].fetch_and(~used[w]);
    }
    return true;
}

std::vector<int> PetPolicy::waiting_for() const {
    std::vector<int> out;
    const auto words = static_cast<std::size_t>(words_.load());
    for (std::size_t w = 0; w < words; ++w) {
        std::uint32_t waiting = cpus_[w].load() & ~credited_[w].load();
        while (waiting != 0) {
            const int b = std::countr_zero(waiting);
            out.push_back(static_cast<int>(w) * kWordBits + b);
            waiting &= waiting - 1;
        }
    }
    return out;
}

}  // namespace monitor::watchdog
