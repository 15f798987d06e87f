// Each method of the interfaces monitord serves, described once: its qualified name, who may
// call it (Read: anyone who reaches the socket; Control: root, the daemon's own user, or
// [access] control-group) and the C++ types of its parameters and of its replies
// (Method<In, Out>, the types in method_inputs.hpp and method_outputs.hpp). The daemon
// registers each handler with its descriptor, which reads the parameters for it, replies with
// the method's Out (reply_of), and checks calls against the descriptors before it dispatches
// them; monctl and the exporter call through them with the typed parameters and receive the
// typed replies. Tests hold them to the interface files: a method without a descriptor is
// refused to everyone, every field of each `In` is one its method takes, and every field of
// its replies is written and read back by its `Out`.
#pragma once

#include <span>
#include <string_view>

namespace monitor {
struct LoadingQuery;
struct LoadingReport;
}  // namespace monitor

namespace monitor::protocol {

enum class Access { Read, Control };

struct MethodDescriptor {
    std::string_view qualified;  // "io.monitord.Monitor.GetLoading"
    Access access = Access::Control;
    // What a refusal says the method does: "counting" (Control methods).
    std::string_view action;
    // What the refused can do instead, said after the refusal; may be empty.
    std::string_view instead;

    constexpr std::string_view interface() const {
        return qualified.substr(0, qualified.rfind('.'));
    }
    constexpr std::string_view name() const { return qualified.substr(qualified.rfind('.') + 1); }
};

// A descriptor with the types of the method's parameters and replies.
template <typename In, typename Out>
struct Method : MethodDescriptor {
    using Input = In;
    using Output = Out;
};

// The parameters' types (method_inputs.hpp).
struct NoInput;
struct InterfaceNameIn;
struct ListEventsIn;
struct CounterRequestIn;
struct CollectCountersIn;
struct CounterSessionIn;
struct StandingCountersIn;
struct ProfileIn;
struct WatchOverflowsIn;
struct HistoryRunsIn;
// The replies' types (method_outputs.hpp).
struct ServiceInfo;
struct InterfaceDescription;
struct DaemonStatus;
struct PmuInfoOut;
struct EventsOut;
struct MetricsOut;
struct PlanOut;
struct CollectOut;
struct StartCountersOut;
struct ReportOut;
struct StandingSessionsOut;
struct ProfileOut;
struct OverflowsOut;
struct HistoryRunsOut;

namespace detail {

// Counting and sampling use the daemon's privileges: starting, stopping and resetting a
// session controls; listing, planning and reading the counts look.
inline constexpr std::string_view kCounting = "counting";
inline constexpr std::string_view kCountYourOwn =
    "a session counts with the daemon's privileges. `monctl perf stat -- CMD` counts your own "
    "command without them";
// A profile samples with them too, and reads the sampled processes' memory maps.
inline constexpr std::string_view kSampling = "sampling";
inline constexpr std::string_view kSampleYourOwn =
    "a profile samples with the daemon's privileges. `perf record` samples your own command "
    "without them";

}  // namespace detail

namespace method {

using enum Access;
// org.varlink.service
inline constexpr Method<NoInput, ServiceInfo> GetInfo{{"org.varlink.service.GetInfo", Read}};
inline constexpr Method<InterfaceNameIn, InterfaceDescription> GetInterfaceDescription{
    {"org.varlink.service.GetInterfaceDescription", Read}};
// io.monitord.Monitor
inline constexpr Method<NoInput, DaemonStatus> GetStatus{{"io.monitord.Monitor.GetStatus", Read}};
inline constexpr Method<LoadingQuery, LoadingReport> GetLoading{
    {"io.monitord.Monitor.GetLoading", Read}};
inline constexpr Method<HistoryRunsIn, HistoryRunsOut> GetHistoryRuns{
    {"io.monitord.Monitor.GetHistoryRuns", Read}};
inline constexpr Method<NoInput, PmuInfoOut> GetPmuInfo{{"io.monitord.Monitor.GetPmuInfo", Read}};
inline constexpr Method<ListEventsIn, EventsOut> ListEvents{
    {"io.monitord.Monitor.ListEvents", Read}};
inline constexpr Method<NoInput, MetricsOut> ListMetrics{{"io.monitord.Monitor.ListMetrics", Read}};
inline constexpr Method<CounterRequestIn, PlanOut> PlanCounters{
    {"io.monitord.Monitor.PlanCounters", Read}};
inline constexpr Method<CollectCountersIn, CollectOut> CollectCounters{
    {"io.monitord.Monitor.CollectCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<CounterRequestIn, StartCountersOut> StartCounters{
    {"io.monitord.Monitor.StartCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<NoInput, ReportOut> ReadCounters{
    {"io.monitord.Monitor.ReadCounters", Read}};
inline constexpr Method<NoInput, ReportOut> StopCounters{
    {"io.monitord.Monitor.StopCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<CounterSessionIn, ReportOut> ResetCounters{
    {"io.monitord.Monitor.ResetCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<CounterSessionIn, ReportOut> PauseCounters{
    {"io.monitord.Monitor.PauseCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<CounterSessionIn, ReportOut> ResumeCounters{
    {"io.monitord.Monitor.ResumeCounters", Control, detail::kCounting, detail::kCountYourOwn}};
inline constexpr Method<StandingCountersIn, StandingSessionsOut> GetStandingCounters{
    {"io.monitord.Monitor.GetStandingCounters", Read}};
inline constexpr Method<ProfileIn, ProfileOut> Profile{
    {"io.monitord.Monitor.Profile", Control, detail::kSampling, detail::kSampleYourOwn}};
inline constexpr Method<WatchOverflowsIn, OverflowsOut> WatchOverflows{
    {"io.monitord.Monitor.WatchOverflows", Control, detail::kSampling, detail::kSampleYourOwn}};

}  // namespace method

// Every descriptor above, once.
std::span<const MethodDescriptor* const> method_descriptors();
// The descriptor of `qualified`; nullptr for a method that has none.
const MethodDescriptor* find_method(std::string_view qualified);

}  // namespace monitor::protocol
