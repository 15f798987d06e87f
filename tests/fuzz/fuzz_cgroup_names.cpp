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
#include <system_error>

#include "monitor/perf/cgroup_target.hpp"

namespace fs = std::filesystem;

namespace {

// A cgroup2 tree with a few units in two slices, removed at exit.
struct Tree {
    fs::path root =
        fs::temp_directory_path() / ("monitord-fuzz-cgroup-" + std::to_string(::getpid()));
    Tree() {
        for (const char* d : {"system.slice/nginx.service", "system.slice/a.b.service",
                              "user.slice/user-1000.slice/session-2.scope", "init.scope"}) {
            fs::create_directories(root / d);
        }
    }
    ~Tree() {
        std::error_code ignored;
        fs::remove_all(root, ignored);
    }
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;
};

const fs::path& tree() {
    static const Tree t;
    return t.root;
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
