#include "perf_errors.hpp"

#include <fmt/format.h>

#include "monitor/perf/perf_session.hpp"

namespace monitord {

using monitor::Status;
using monitor::varlink::Reply;
using nlohmann::json;
namespace perf = monitor::perf;

namespace {

std::string error_name(std::string_view member) {
    return "io.monitord.Monitor." + std::string(member);
}

}  // namespace

Reply perf_error_reply(const monitor::Error& e, const perf::EventCatalog* catalog,
                       const std::string& events) {
    switch (e.status) {
        case Status::PrfRun:
            return monitor::varlink::make_error(error_name("PerfRunning"),
                                                json{{"message", e.message}});
        case Status::NotRdy:
            return monitor::varlink::make_error(error_name("PerfNotRunning"),
                                                json{{"message", e.message}});
        case Status::NoEvent: {
            json suggestions = json::array();
            // The first name that does not resolve is the one the message is about.
            if (catalog != nullptr) {
                if (auto list = perf::parse_event_list(events)) {
                    for (const auto& r : *list) {
                        if (!catalog->resolve(r.name)) {
                            for (auto& s : catalog->closest(r.name)) suggestions.push_back(s);
                            break;
                        }
                    }
                }
            }
            return monitor::varlink::make_error(
                error_name("NoSuchEvent"),
                json{{"message", e.message}, {"suggestions", std::move(suggestions)}});
        }
        case Status::Perm:
            return monitor::varlink::make_error(error_name("PermissionDenied"),
                                                json{{"message", e.message}});
        case Status::NoPmu:
            return monitor::varlink::make_error(error_name("NoPmu"), json{{"message", e.message}});
        case Status::NoDev:
            return monitor::varlink::make_error(error_name("NoSuchTarget"),
                                                json{{"message", e.message}});
        case Status::BadArg:
            return monitor::varlink::make_error(error_name("InvalidRequest"),
                                                json{{"message", e.message}});
        default:
            return monitor::varlink::make_error(
                error_name("CounterFailure"),
                json{{"status", std::string(monitor::status_name(e.status))},
                     {"message", e.message}});
    }
}

Reply limit_exceeded(std::string_view limit, std::string message) {
    return monitor::varlink::make_error("io.monitord.Monitor.LimitExceeded",
                                        json{{"limit", limit}, {"message", std::move(message)}});
}

}  // namespace monitord
