// Cgroup paths and unit names as monctl, the MON API and monitord.conf give them: a cgroup path
// never leads out of the cgroup tree, and a unit is looked for only inside it (a small tree
// made for the fuzzer under the temporary directory).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "monitor/perf/cgroup_target.hpp"

namespace fs = std::filesystem;

namespace {

// A cgroup2 tree with a few units in two slices.
const fs::path& tree() {
    static const fs::path root = [] {
        fs::path r = fs::temp_directory_path() / ("monitord-fuzz-cgroup-" + std::to_string(::getpid()));
        for (const char* d : {"system.slice/nginx.service", "system.slice/a.b.service",
                              "user.slice/user-1000.slice/session-2.scope", "init.scope"}) {
            fs::create_directories(r / d);
        }
        return r;
    }();
    return root;
}

bool inside(const fs::path& root, const fs::path& p) {
    const auto rel = p.lexically_normal().lexically_relative(root.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view name(reinterpret_cast<const char*>(data), size);
    const std::string root = "/sys/fs/cgroup";
    if (auto dir = monitor::perf::cgroup_directory(root, name)) {
        if (!inside(root, *dir) && fs::path(*dir).lexically_normal() != fs::path(root)) {
            std::abort();  // a path out of the cgroup tree
        }
    }
    if (auto unit = monitor::perf::unit_cgroup(tree(), std::string(name))) {
        if (!inside(tree(), tree() / *unit)) std::abort();
    }
    return 0;
}
