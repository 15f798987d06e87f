#include "monitor/loading/cpu_list.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "monitor/text_file.hpp"

namespace monitor {
namespace {

constexpr int kMaxCpuId = 1 << 16;  // far above any kernel's NR_CPUS

bool parse_id(std::string_view s, int& out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && p == s.data() + s.size() && out >= 0 && out < kMaxCpuId;
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
    std::vector<int> cpus;
    text = trim_space(text);
    if (!text.empty() && (text.back() == ',' || text.front() == ',')) {
        return fail(Status::BadData, "bad CPU list '" + std::string{text} +
                                         "': empty element (expected N or N-M, e.g. 0-3,5)");
    }
    while (!text.empty()) {
        auto comma = text.find(',');
        std::string_view part = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);

        int first = 0;
        int last = 0;
        auto dash = part.find('-');
        bool ok = dash == std::string_view::npos
                      ? parse_id(part, first) && parse_id(part, last)
                      : parse_id(part.substr(0, dash), first) &&
                            parse_id(part.substr(dash + 1), last) && first <= last;
        if (!ok) {
            return fail(Status::BadData, "bad CPU list element '" + std::string{part} +
                                             "' (expected N or N-M, e.g. 0-3,5)");
        }
        for (int c = first; c <= last; ++c) cpus.push_back(c);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

namespace {

std::filesystem::path online_path(const std::filesystem::path& sys_root) {
    return sys_root / "devices/system/cpu/online";
}

Result<std::vector<int>> parse_online(const std::filesystem::path& path, std::string_view text) {
    auto cpus = parse_cpu_list(text);
    if (!cpus) return fail(Status::BadData, path.string() + ": " + cpus.error().message);
    return cpus;
}

}  // namespace

Result<std::vector<int>> read_online_cpus(const std::filesystem::path& sys_root) {
    auto path = online_path(sys_root);
    auto text = read_text_file(path, 1 << 16);
    if (!text) return std::unexpected(text.error());
    return parse_online(path, *text);
}

Result<OnlineCpusReader> OnlineCpusReader::open(const std::filesystem::path& sys_root) {
    auto path = online_path(sys_root);
    UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) return fail_errno(errno, "open " + path.string());
    return OnlineCpusReader{std::move(path), std::move(fd)};
}

Result<std::vector<int>> OnlineCpusReader::read() {
    if (auto r = pread_whole(fd_.get(), buffer_, path_, 1 << 16); !r) {
        return std::unexpected(r.error());
    }
    return parse_online(path_, buffer_);
}

}  // namespace monitor
