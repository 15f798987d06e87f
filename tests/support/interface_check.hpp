// Replies held to the interface file, the one definition of the wire format: what the tests
// of the daemon and of its components check every answer of io.monitord.Monitor with.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "monitor/protocol/varlink_client.hpp"
#include "monitor/protocol/varlink_idl.hpp"

namespace test_support {

// Checks a reply of io.monitord.Monitor.<method> against the interface, rejecting fields the
// interface does not declare. Empty string when it matches, else the mismatch.
inline std::string check_reply(const std::string& method, const nlohmann::json& params) {
    const auto* iface = monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface);
    const auto* m = iface->method(method);
    if (m == nullptr) return "no method " + method;
    auto bad = iface->check(*m->output, params, monitor::varlink::Extra::Reject);
    return bad ? bad->path + ": " + bad->reason : std::string{};
}

// Calls io.monitord.Monitor.<method> and checks the reply against the interface, strictly.
// Records a test failure on a transport error or an error reply, and returns empty
// parameters then.
inline nlohmann::json call_checked(monitor::varlink::Client& client, const std::string& method,
                                   const nlohmann::json& params = nlohmann::json::object()) {
    auto reply =
        client.call(std::string{monitor::varlink::kMonitorInterface} + "." + method, params);
    if (!reply) {
        ADD_FAILURE() << method << ": " << reply.error().message;
        return {};
    }
    if (reply->error) {
        ADD_FAILURE() << method << " returned " << *reply->error << " " << reply->parameters.dump();
        return {};
    }
    std::string bad = check_reply(method, reply->parameters);
    EXPECT_EQ(bad, "") << method
                       << " reply does not match the interface: " << reply->parameters.dump();
    return reply->parameters;
}

}  // namespace test_support
