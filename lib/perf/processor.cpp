#include "monitor/perf/processor.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>
#include <system_error>

#include "monitor/text_file.hpp"

namespace monitor::perf {
namespace {

// The value of the first "key : value" line of cpuinfo with this key.
std::optional<std::string_view> field(std::string_view text, std::string_view key) {
    while (!text.empty()) {
        const auto end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        if (trim_space(line.substr(0, colon)) == key) return trim_space(line.substr(colon + 1));
    }
    return std::nullopt;
}

// "2.2 (pvr 0008 2214)" -> 0x00082214.
std::optional<std::uint32_t> parse_pvr(std::string_view revision) {
    const auto at = revision.find("(pvr ");
    if (at == std::string_view::npos) return std::nullopt;
    std::string digits;
    for (char c : revision.substr(at + 5)) {
        if (c == ')') break;
        if (c != ' ') digits += c;
    }
    if (digits.size() != 8) return std::nullopt;
    char* end = nullptr;
    const unsigned long v = std::strtoul(digits.c_str(), &end, 16);
    if (end != digits.c_str() + digits.size()) return std::nullopt;
    return static_cast<std::uint32_t>(v);
}

}  // namespace

std::string Processor::describe() const {
    std::string out = name.empty() ? std::string{"an unknown processor"} : name;
    if (pvr) out += fmt::format(" (pvr {:04x} {:04x})", *pvr >> 16, *pvr & 0xffff);
    return out;
}

Processor read_processor(const std::filesystem::path& proc_root,
                         const std::filesystem::path& sys_root) {
    Processor p;
    const auto devices = sys_root / "bus/event_source/devices";
    std::error_code ec;
    p.core_pmu = std::filesystem::exists(devices / "cpu", ec);
    if (p.core_pmu) {
        if (auto name = read_text_file(devices / "cpu/caps/pmu_name")) {
            p.core_pmu_name = std::string{trim_space(*name)};
        }
    }
    const auto path = proc_root / "cpuinfo";
    auto text = read_text_file(path);
    if (!text) {
        p.error = text.error().message;
        return p;
    }
    for (const char* key : {"model name", "cpu", "Processor"}) {
        if (auto v = field(*text, key); v && !v->empty()) {
            p.name = std::string{*v};
            break;
        }
    }
    if (p.name.empty()) {
        auto implementer = field(*text, "CPU implementer");
        auto part = field(*text, "CPU part");
        if (implementer && part) {
            p.name = fmt::format("an ARM core (implementer {}, part {})", *implementer, *part);
        }
    }
    if (auto revision = field(*text, "revision")) p.pvr = parse_pvr(*revision);
    return p;
}

}  // namespace monitor::perf
