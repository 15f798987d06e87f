// What monctl and monitord-exporter read from monitord: a reply's text parsed, checked against
// the output type of a method of the interface file (the input's first byte picks the method),
// as DaemonClient checks it, and, when it passes, made into the structures the front ends
// print, by the same functions they use. A reply the interface accepts must never throw there.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/protocol/profile_messages.hpp"
#include "monitor/protocol/varlink_idl.hpp"
#include "monitor/protocol/varlink_message.hpp"

namespace varlink = monitor::varlink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const auto* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    const auto& methods = iface->methods();
    auto it = methods.begin();
    std::advance(it, data[0] % methods.size());
    const auto& [name, method] = *it;
    auto reply = varlink::parse_reply(std::string_view(reinterpret_cast<const char*>(data) + 1,
                                                       size - 1));
    if (!reply || reply->error) return 0;
    if (iface->check(*method.output, reply->parameters, varlink::Extra::Allow)) return 0;
    const auto& p = reply->parameters;
    namespace protocol = monitor::protocol;
    try {
        if (name == "GetStatus") (void)protocol::status_from_json(p);
        if (name == "GetLoading") (void)protocol::loading_from_json(p);
        if (name == "GetPmuInfo") {
            for (const auto& pmu : p.at("pmus")) (void)protocol::pmu_from_json(pmu);
        }
        if (name == "ListEvents") {
            for (const auto& e : p.at("events")) (void)protocol::event_from_json(e);
        }
        if (name == "ListMetrics") {
            for (const auto& m : p.at("metrics")) (void)protocol::metric_listing_from_json(m);
        }
        if (name == "PlanCounters" || name == "StartCounters") {
            (void)protocol::counter_plan_from_json(p.at("plan"));
        }
        if (name == "CollectCounters" || name == "ReadCounters" || name == "StopCounters" ||
            name == "ResetCounters") {
            (void)protocol::counter_report_from_json(p.at("report"));
        }
        if (name == "Profile" && p.contains("report")) {
            (void)protocol::profile_message_from_json(p.at("report"));
        }
        if (name == "WatchOverflows" && p.contains("batch")) {
            (void)protocol::overflow_batch_from_json(p.at("batch"));
        }
        if (name == "GetStandingCounters") {
            for (const auto& s : p.at("sessions")) (void)protocol::standing_session_from_json(s);
        }
    } catch (...) {
        std::abort();  // the interface accepted what the front ends cannot read
    }
    return 0;
}
