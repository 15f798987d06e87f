#include "daemon_client.hpp"

#include <cstdlib>
#include <filesystem>

#include "monitor/protocol/socket_path.hpp"
#include "monitor/protocol/varlink_idl.hpp"

namespace monctl {

using monitor::fail;
using monitor::Result;
using monitor::Status;

Result<DaemonClient> DaemonClient::connect(const std::string& socket) {
    const bool defaults = socket.empty() && std::getenv("MONITORD_SOCKET") == nullptr;
    std::vector<std::string> paths =
        socket.empty() ? monitor::protocol::client_socket_paths() : std::vector{socket};
    std::string tried;
    for (const auto& p : paths) {
        // A default place under /tmp could have been prepared by someone else.
        if (defaults && std::filesystem::exists(std::filesystem::path{p}.parent_path())) {
            if (auto ok = monitor::protocol::check_socket_directory(p); !ok) {
                tried += "\n  " + p + ": not used: " + ok.error().message;
                continue;
            }
        }
        auto c = monitor::varlink::Client::connect(p);
        if (c) return DaemonClient{std::move(*c), p};
        // A socket we may not use is worth reporting as such, not as "not running".
        if (c.error().status == Status::Perm) return std::unexpected(c.error());
        tried += "\n  " + c.error().message;
    }
    return fail(Status::NoDev,
                "cannot reach monitord:" + tried +
                    "\nStart it with 'monitord' (or 'systemctl start monitord'), or point "
                    "--socket or MONITORD_SOCKET at its socket.");
}

Result<nlohmann::json> DaemonClient::call(const std::string& method,
                                          const nlohmann::json& parameters) {
    const auto* iface = monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface);
    const std::string qualified = std::string{iface->name()} + "." + method;
    auto reply = client_.call(qualified, parameters);
    if (!reply) return std::unexpected(reply.error());
    if (reply->error) {
        std::string msg = method + " failed: " + *reply->error;
        if (!reply->parameters.empty()) msg += " " + reply->parameters.dump();
        return fail(Status::BadArg, msg);
    }
    const auto* m = iface->method(method);
    if (m != nullptr) {
        if (auto bad =
                iface->check(*m->output, reply->parameters, monitor::varlink::Extra::Allow)) {
            return fail(Status::BadData, "the reply of " + path_ + " to " + method +
                                             " does not match " + iface->name() + ": " + bad->path +
                                             ": " + bad->reason);
        }
    }
    return std::move(reply->parameters);
}

}  // namespace monctl
