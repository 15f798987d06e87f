#include "monitor/watchdog/pet_policy.hpp"

#include <algorithm>
#include <iterator>

namespace monitor::watchdog {

std::string_view pet_policy_name(PetPolicyKind k) noexcept {
    return name_of(kPetPolicyNames, k);
}

std::optional<PetPolicyKind> pet_policy_from_name(std::string_view name) noexcept {
    return value_named(kPetPolicyNames, name);
}

void PetPolicy::set_cpus(const std::vector<int>& cpus) {
    std::lock_guard lock(mutex_);
    cpus_ = std::set<int>(cpus.begin(), cpus.end());
    std::erase_if(credited_, [&](int c) { return !cpus_.contains(c); });
}

bool PetPolicy::credit(int cpu, Clock::time_point now) {
    std::lock_guard lock(mutex_);
    if (!cpus_.contains(cpu)) return false;
    credited_.insert(cpu);
    const bool holds = kind_ == PetPolicyKind::Any || credited_.size() == cpus_.size();
    if (!holds) return false;
    if (last_pet_ && now - *last_pet_ < min_interval_) return false;  // kept for the next one
    last_pet_ = now;
    credited_.clear();
    return true;
}

std::vector<int> PetPolicy::waiting_for() const {
    std::lock_guard lock(mutex_);
    std::vector<int> out;
    std::ranges::set_difference(cpus_, credited_, std::back_inserter(out));
    return out;
}

std::optional<std::vector<int>> PetPolicy::try_waiting_for() const {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return std::nullopt;
    std::vector<int> out;
    std::ranges::set_difference(cpus_, credited_, std::back_inserter(out));
    return out;
}

}  // namespace monitor::watchdog
