#include "monitor/protocol/daemon_client.hpp"

#include "monitor/protocol/socket_path.hpp"
#include "monitor/protocol/varlink_idl.hpp"

namespace monitor::protocol {

using monitor::fail;
using monitor::Result;
using monitor::Status;

Result<DaemonClient> DaemonClient::connect(const std::string& socket) {
    auto places = socket.empty() ? socket_places(SocketEnvironment::current())
                                 : std::vector{SocketPlace{SocketPlaceKind::Given, socket}};
    auto c = connect_to_daemon(places);
    if (!c) return std::unexpected(c.error());
    return DaemonClient{std::move(c->client), std::move(c->path)};
}

std::optional<Status> status_of_error(std::string_view error) {
    static constexpr std::pair<std::string_view, Status> kErrors[] = {
        {"PerfRunning", Status::PrfRun},    {"PerfNotRunning", Status::NotRdy},
        {"NoSuchEvent", Status::NoEvent},   {"PermissionDenied", Status::Perm},
        {"NoPmu", Status::NoPmu},           {"NoSuchTarget", Status::NoDev},
        {"InvalidRequest", Status::BadArg}, {"CounterFailure", Status::IoErr},
        {"NoSuchSession", Status::NoDev},   {"LimitExceeded", Status::Busy},
        {"NoHistory", Status::NoDev},
    };
    const std::string prefix = std::string{monitor::varlink::kMonitorInterface} + ".";
    if (!error.starts_with(prefix)) return std::nullopt;
    error.remove_prefix(prefix.size());
    for (auto [name, status] : kErrors) {
        if (name == error) return status;
    }
    return std::nullopt;
}

Result<nlohmann::json> DaemonClient::call(const MethodDescriptor& method,
                                          const nlohmann::json& parameters) {
    return call(method, parameters, Check::Interface);
}

Result<nlohmann::json> DaemonClient::call(const MethodDescriptor& method,
                                          const nlohmann::json& parameters, Check check) {
    return checked(method, client_.call(std::string{method.qualified}, parameters), check);
}

Result<std::optional<nlohmann::json>> DaemonClient::call_unless(const MethodDescriptor& method,
                                                                std::string_view absent,
                                                                const nlohmann::json& parameters) {
    return call_unless(method, absent, parameters, Check::Interface);
}

Result<std::optional<nlohmann::json>> DaemonClient::call_unless(const MethodDescriptor& method,
                                                                std::string_view absent,
                                                                const nlohmann::json& parameters,
                                                                Check check) {
    auto reply = client_.call(std::string{method.qualified}, parameters);
    if (reply && reply->error &&
        *reply->error == std::string{method.interface()} + "." + std::string{absent}) {
        return std::nullopt;
    }
    auto params = checked(method, std::move(reply), check);
    if (!params) return std::unexpected(params.error());
    return std::optional{std::move(*params)};
}

Result<void> DaemonClient::stream(const MethodDescriptor& method, const nlohmann::json& parameters,
                                  const std::function<bool(const nlohmann::json&)>& on_reply) {
    return stream(method, parameters, on_reply, Check::Interface);
}

Result<void> DaemonClient::stream(const MethodDescriptor& method, const nlohmann::json& parameters,
                                  const std::function<bool(const nlohmann::json&)>& on_reply,
                                  Check check) {
    monitor::varlink::Call c;
    c.method = std::string{method.qualified};
    c.parameters = parameters;
    c.more = true;
    client_.set_timeout(std::chrono::milliseconds(0));  // replies come when the daemon has them
    auto reply = client_.call(c);
    for (;;) {
        const bool more = reply && reply->continues;
        auto params = checked(method, std::move(reply), check);
        if (!params) return std::unexpected(params.error());
        if (!on_reply(*params) || !more) return {};
        reply = client_.receive();
    }
}

Result<nlohmann::json> DaemonClient::checked(const MethodDescriptor& method,
                                             Result<monitor::varlink::Reply> reply,
                                             Check check) const {
    if (!reply) return std::unexpected(reply.error());
    if (reply->error) {
        // The daemon's own errors carry a message written for people: show just that.
        if (auto status = status_of_error(*reply->error)) {
            if (auto it = reply->parameters.find("message");
                it != reply->parameters.end() && it->is_string()) {
                return fail(*status, it->get<std::string>());
            }
        }
        std::string msg = std::string{method.name()} + " failed: " + *reply->error;
        if (!reply->parameters.empty()) msg += " " + reply->parameters.dump();
        return fail(Status::BadArg, msg);
    }
    if (check == Check::ByReader) return std::move(reply->parameters);
    const auto* iface = monitor::varlink::builtin_interface(method.interface());
    if (const auto* m = iface != nullptr ? iface->method(method.name()) : nullptr) {
        if (auto bad =
                iface->check(*m->output, reply->parameters, monitor::varlink::Extra::Allow)) {
            return std::unexpected(mismatch(method, bad->path + ": " + bad->reason));
        }
    }
    return std::move(reply->parameters);
}

monitor::Error DaemonClient::mismatch(const MethodDescriptor& method, std::string_view why) const {
    return {Status::BadData, "the reply of " + path_ + " to " + std::string{method.name()} +
                                 " does not match " + std::string{method.interface()} + ": " +
                                 std::string{why}};
}

}  // namespace monitor::protocol
