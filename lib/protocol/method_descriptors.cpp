#include "monitor/protocol/method_descriptors.hpp"

#include <algorithm>
#include <array>

namespace monitor::protocol {
namespace {

constexpr std::array<const MethodDescriptor*, 19> kDescriptors{
    &method::GetInfo,
    &method::GetInterfaceDescription,
    &method::GetStatus,
    &method::GetLoading,
    &method::GetHistoryRuns,
    &method::GetPmuInfo,
    &method::ListEvents,
    &method::ListMetrics,
    &method::PlanCounters,
    &method::CollectCounters,
    &method::StartCounters,
    &method::ReadCounters,
    &method::StopCounters,
    &method::ResetCounters,
    &method::PauseCounters,
    &method::ResumeCounters,
    &method::GetStandingCounters,
    &method::Profile,
    &method::WatchOverflows,
};

}  // namespace

std::span<const MethodDescriptor* const> method_descriptors() {
    return kDescriptors;
}

const MethodDescriptor* find_method(std::string_view qualified) {
    auto it = std::ranges::find(kDescriptors, qualified, &MethodDescriptor::qualified);
    return it == kDescriptors.end() ? nullptr : *it;
}

}  // namespace monitor::protocol
