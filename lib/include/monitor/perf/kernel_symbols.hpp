// The kernel's functions, as /proc/kallsyms lists them: the names of kernel-mode samples
// ("schedule [kernel.kallsyms]", "ext4_writepages [ext4]"). The kernel shows their
// addresses only to a reader it trusts (kernel.kptr_restrict): to others every address reads
// 0, and the table is then empty with the reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
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

// The kernel's symbols kept for the profiles that follow one another (reading them takes tens
// of milliseconds of a daemon's CPU): read again when the kernel's modules change (`modules`,
// /proc/modules, reads differently) or once `max_age` has passed (BPF programs and
// trampolines come and go without a module).
class KernelSymbolCache {
  public:
    KernelSymbolCache(std::filesystem::path kallsyms, std::filesystem::path modules,
                      std::chrono::seconds max_age = std::chrono::seconds(60));

    // The symbols as they are at `now`: the kept ones while they still hold.
    std::shared_ptr<const KernelSymbols> get(std::chrono::steady_clock::time_point now);
    // How many times kallsyms was read.
    std::size_t reads() const { return reads_; }

  private:
    std::filesystem::path kallsyms_;
    std::filesystem::path modules_;
    std::chrono::seconds max_age_;
    std::shared_ptr<const KernelSymbols> symbols_;
    std::string modules_read_;  // /proc/modules when they were read
    std::chrono::steady_clock::time_point read_at_;
    std::size_t reads_ = 0;
};

}  // namespace monitor::perf
