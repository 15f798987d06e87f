// Varlink interface files: the parser of the IDL (it reads the files compiled into libmonitor,
// and any a developer writes), then each method's input and output types checked against
// values of every JSON kind, as calls and replies are.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "monitor/protocol/varlink_idl.hpp"

namespace varlink = monitor::varlink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto iface = varlink::Interface::parse(text);
    if (!iface) return 0;
    static const nlohmann::json values[] = {
        nlohmann::json::object(),
        nlohmann::json::array(),
        nlohmann::json(nullptr),
        nlohmann::json(true),
        nlohmann::json(-3),
        nlohmann::json(2.5),
        nlohmann::json("text"),
        nlohmann::json::parse(R"({"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}})"),
    };
    for (const auto& [name, method] : iface->methods()) {
        for (const auto& v : values) {
            (void)iface->check(*method.input, v, varlink::Extra::Reject);
            (void)iface->check(*method.output, v, varlink::Extra::Allow);
        }
    }
    return 0;
}
