#include "monitor/loading/pressure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <system_error>
#include <tuple>

#include "monitor/text_file.hpp"  // parse_decimal, parse_unsigned

namespace monitor {
namespace {

Error bad(std::string_view file, std::size_t number, std::string_view line) {
    return Error{Status::BadData,
                 fmt::format("{}: line {} is not \"some avg10=A avg60=A avg300=A total=N\": \"{}\"",
                             file, number, line.substr(0, std::min<std::size_t>(line.size(), 80)))};
}

}  // namespace

Result<CpuPressureLine> parse_cpu_pressure(std::string_view text, std::string_view file) {
    std::size_t number = 0;
    while (!text.empty()) {
        const auto end = text.find('\n');
        const auto line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        ++number;
        if (line != "some" && !line.starts_with("some ")) continue;
        CpuPressureLine out;
        int found = 0;
        std::string_view rest = line.substr(4);
        while (!rest.empty()) {
            const auto space = rest.find_first_of(" \t");
            const auto w = rest.substr(0, space);
            rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
            const auto eq = w.find('=');
            if (w.empty() || eq == std::string_view::npos) continue;
            const auto key = w.substr(0, eq);
            const auto value = w.substr(eq + 1);
            if (key == "total") {
                auto v = parse_unsigned(value);
                if (!v) return std::unexpected(bad(file, number, line));
                out.total_us = *v;
                found |= 8;
                continue;
            }
            for (auto [name, field, bit] :
                 {std::tuple{"avg10", &out.avg10, 1}, std::tuple{"avg60", &out.avg60, 2},
                  std::tuple{"avg300", &out.avg300, 4}}) {
                if (key != name) continue;
                auto v = parse_decimal(value);
                if (!v) return std::unexpected(bad(file, number, line));
                *field = *v;
                found |= bit;
            }
        }
        if (found != 15) return std::unexpected(bad(file, number, line));
        return out;
    }
    return std::unexpected(Error{
        Status::BadData, fmt::format("{}: no \"some\" line, as the kernel writes one", file)});
}

}  // namespace monitor
