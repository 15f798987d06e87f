// Varlink calls and replies as JSON objects.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/status.hpp"

namespace monitor::varlink {

struct Call {
    std::string method;  // "io.monitord.Monitor.GetLoading"
    nlohmann::json parameters = nlohmann::json::object();
    bool oneway = false;
    bool more = false;
    bool upgrade = false;

    // "io.monitord.Monitor" and "GetLoading"; empty interface when there is no dot.
    std::string_view interface_name() const;
    std::string_view member_name() const;
};

struct Reply {
    nlohmann::json parameters = nlohmann::json::object();
    std::optional<std::string> error;  // the qualified error name
    bool continues = false;
};

// Deepest nesting accepted in a message, far above what the interfaces need.
inline constexpr int kMaxJsonDepth = 64;

// Parses one message's text (without its NUL) as a call. A message that is not a JSON object
// with a string "method", or nests deeper than kMaxJsonDepth, is BADDATA saying why.
Result<Call> parse_call(std::string_view text);
Result<Reply> parse_reply(std::string_view text);

// The message text, without the terminating NUL.
std::string encode(const Call& call);
std::string encode(const Reply& reply);

Reply make_error(std::string_view name, nlohmann::json parameters = nlohmann::json::object());

}  // namespace monitor::varlink
