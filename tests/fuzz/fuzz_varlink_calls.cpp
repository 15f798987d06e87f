// What a client sends monitord: bytes split into NUL-terminated messages (MessageBuffer, fed in
// pieces whose sizes the input's first bytes choose), each parsed as a call and checked against
// the interface file as the server checks it. A call that parses encodes to a text that parses
// to the same call.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "monitor/protocol/message_buffer.hpp"
#include "monitor/protocol/varlink_idl.hpp"
#include "monitor/protocol/varlink_message.hpp"

namespace varlink = monitor::varlink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t piece = 1 + data[0] % 64;
    const std::size_t limit = 16 + data[1] * 64;  // small limits reach the framing's errors
    std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
    const auto* iface = varlink::builtin_interface(varlink::kMonitorInterface);
    varlink::MessageBuffer buffer(limit);
    while (!rest.empty() && !buffer.too_large()) {
        buffer.append(rest.substr(0, piece));
        rest.remove_prefix(std::min(piece, rest.size()));
        while (auto message = buffer.next()) {
            auto call = varlink::parse_call(*message);
            if (!call) continue;
            if (call->interface_name() == varlink::kMonitorInterface) {
                if (const auto* m = iface->method(call->member_name())) {
                    (void)iface->check(*m->input, call->parameters, varlink::Extra::Reject);
                }
            }
            auto again = varlink::parse_call(varlink::encode(*call));
            if (!again || again->method != call->method || again->parameters != call->parameters ||
                again->more != call->more || again->oneway != call->oneway) {
                std::abort();
            }
        }
    }
    return 0;
}
