// A child process that maps a file as code, for the tests that name what is mapped (the
// files of other users: copies of this test program, corrupt, truncated or with a section
// added): the address it mapped the file at, and where this program's code is in a copy.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "monitor/perf/mapped_files.hpp"
#include "monitor/text_file.hpp"

namespace test_support {

// Where `address` of this program is in a copy of its file mapped whole from offset 0.
inline std::uint64_t offset_in_file(std::uint64_t address) {
    auto maps = monitor::read_text_file("/proc/self/maps");
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
    for (const auto& f : monitor::perf::mapped_files(*maps)) {
        if (f.path == exe) return address - f.start;  // the first: the file's offset 0
    }
    return 0;
}

// A child that maps `file` (readable and executable, as code is) and says where, then waits;
// with `own_mount` its copy is put first at `file` in a tmpfs of a mount namespace of its own.
struct MappingChild {
    pid_t pid = -1;
    std::uint64_t start = 0;

    MappingChild(const std::filesystem::path& file, bool own_mount = false) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) < 0) return;
        const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
        pid = ::fork();
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that crashes leaves no child behind
            if (own_mount) {
                if (::unshare(CLONE_NEWNS) < 0 ||
                    ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0 ||
                    ::mount("none", file.parent_path().c_str(), "tmpfs", 0, nullptr) < 0) {
                    ::_exit(2);
                }
                std::error_code ec;
                std::filesystem::copy_file(self, file, ec);
                if (ec) ::_exit(3);
            }
            const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
            struct stat st {};
            if (fd < 0 || ::fstat(fd, &st) < 0) ::_exit(4);
            void* at = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_EXEC,
                              MAP_PRIVATE, fd, 0);
            if (at == MAP_FAILED) ::_exit(5);
            const auto where = reinterpret_cast<std::uint64_t>(at);
            if (::write(fds[1], &where, sizeof where) != sizeof where) ::_exit(6);
            ::pause();
            ::_exit(0);
        }
        ::close(fds[1]);
        if (::read(fds[0], &start, sizeof start) != sizeof start) start = 0;
        ::close(fds[0]);
    }
    ~MappingChild() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

}  // namespace test_support
