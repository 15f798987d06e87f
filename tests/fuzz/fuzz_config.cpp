// monitord.conf as an administrator (or a mistaken tool) writes it: TOML parsed, every key
// read by its parser, [[counters]] tables with their event lists and targets; then a reload
// planned from the defaults to it, as SIGHUP does. An error always names the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto config = monitord::parse_config(text, "fuzz.conf", monitord::Config{});
    if (!config) {
        if (!config.error().message.starts_with("fuzz.conf")) std::abort();
        return 0;
    }
    (void)monitord::plan_reload(monitord::Config{}, *config).restart_message();
    return 0;
}
