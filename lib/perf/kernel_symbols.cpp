#include "monitor/perf/kernel_symbols.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "monitor/text_file.hpp"

namespace monitor::perf {

KernelSymbols KernelSymbols::load(const std::filesystem::path& path) {
    KernelSymbols k;
    // /proc/kallsyms is about 10 MiB on a distribution kernel.
    auto text = read_text_file(path, std::size_t{256} << 20);
    if (!text) {
        k.unavailable_ = text.error().message;
        return k;
    }
    k.objects_.emplace_back("[kernel.kallsyms]");
    bool any_address = false;
    std::string_view rest = *text;
    while (!rest.empty()) {
        const auto end = rest.find('\n');
        std::string_view line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        // "ffffffff81000000 T _stext" or "ffffffffc0a01000 t ext4_fill_super\t[ext4]"
        const auto space = line.find(' ');
        if (space == std::string_view::npos || line.size() < space + 4) continue;
        const char type = line[space + 1];
        if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
        std::uint64_t address = 0;
        if (std::from_chars(line.data(), line.data() + space, address, 16).ec != std::errc{}) {
            continue;
        }
        any_address = any_address || address != 0;
        std::string_view name = line.substr(space + 3);
        std::uint32_t object = 0;
        if (const auto tab = name.find('\t'); tab != std::string_view::npos) {
            std::string_view module = trim_space(name.substr(tab + 1));
            name = name.substr(0, tab);
            if (!module.empty()) {
                if (k.objects_.back() != module) k.objects_.emplace_back(module);
                object = static_cast<std::uint32_t>(k.objects_.size() - 1);
            }
        }
        k.names_.emplace_back(name);
        k.symbols_.push_back({address, static_cast<std::uint32_t>(k.names_.size() - 1), object});
    }
    if (!any_address) {
        k.symbols_.clear();
        k.names_.clear();
        k.unavailable_ = fmt::format(
            "{} shows no addresses to this reader (kernel.kptr_restrict): kernel code is "
            "counted as [kernel]; CAP_SYSLOG (or kptr_restrict 0 with perf_event_paranoid 1 "
            "or lower) shows them",
            path.string());
        return k;
    }
    std::ranges::stable_sort(k.symbols_, {}, &Symbol::address);
    return k;
}

std::optional<KernelSymbols::Found> KernelSymbols::find(std::uint64_t ip) const {
    auto it = std::ranges::upper_bound(symbols_, ip, {}, &Symbol::address);
    if (it == symbols_.begin()) return std::nullopt;
    --it;
    return Found{names_[it->name], objects_[it->object], it->address};
}

KernelSymbolCache::KernelSymbolCache(std::filesystem::path kallsyms, std::filesystem::path modules,
                                     std::chrono::seconds max_age)
    : kallsyms_(std::move(kallsyms)), modules_(std::move(modules)), max_age_(max_age) {}

std::shared_ptr<const KernelSymbols> KernelSymbolCache::get(
    std::chrono::steady_clock::time_point now) {
    // A kernel without modules has no /proc/modules: it reads as empty, and never changes.
    std::string modules = read_text_file(modules_).value_or(std::string{});
    if (symbols_ && now - read_at_ < max_age_ && modules == modules_read_) return symbols_;
    symbols_ = std::make_shared<const KernelSymbols>(KernelSymbols::load(kallsyms_));
    modules_read_ = std::move(modules);
    read_at_ = now;
    ++reads_;
    return symbols_;
}

}  // namespace monitor::perf
