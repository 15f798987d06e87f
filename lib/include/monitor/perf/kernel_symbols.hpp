// The kernel's functions, as /proc/kallsyms lists them: the names of kernel-mode samples
// ("schedule [kernel.kallsyms]", "ext4_writepages [ext4]"). The kernel shows their
// addresses only to a reader it trusts (kernel.kptr_restrict): to others every address reads
// 0, and the table is then empty with the reason.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace monitor::perf {

class KernelSymbols {
  public:
    struct Found {
        std::string_view function;
        std::string_view object;  // "[kernel.kallsyms]" or the module's "[name]"
        std::uint64_t address = 0;
    };

    // The text symbols (t, T, w, W) of `path`. Never fails: what could not be read leaves the
    // table empty, and unavailable() says why.
    static KernelSymbols load(const std::filesystem::path& path = "/proc/kallsyms");

    // The function whose code holds `ip`: the last symbol at or below it.
    std::optional<Found> find(std::uint64_t ip) const;
    std::size_t size() const { return symbols_.size(); }
    // Why the table is empty; empty when it is not.
    const std::string& unavailable() const { return unavailable_; }

  private:
    struct Symbol {
        std::uint64_t address;
        std::uint32_t name;    // index in names_
        std::uint32_t object;  // index in objects_
    };
    std::vector<Symbol> symbols_;  // by address
    std::vector<std::string> names_;
    std::vector<std::string> objects_;
    std::string unavailable_;
};

}  // namespace monitor::perf
