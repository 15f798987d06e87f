// A FUSE file system of one file, "program", a copy of PROGRAM, that stalls process READER for
// STALL_MS from its first read on, as a hung network file system stalls its readers: it tells
// on stdout ("stalled thread T of process P for M ms"), and every read of the process until
// then waits (not only the first: that may be the kernel's readahead, which its reader does
// not wait for). A test's stand-in for a file that a process maps and that the one who reads
// it to name its code waits on.
//
//     stalling_fs PROGRAM READER STALL_MS MOUNTPOINT
//
// Runs in the foreground until the file system is unmounted (fusermount3 -u, or umount).
#define FUSE_USE_VERSION 31
#include <fuse3/fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<char> program;
pid_t reader = 0;
int stall_ms = 0;
std::mutex stall;
std::optional<std::chrono::steady_clock::time_point> stalled_until;  // under `stall`

// The process of thread `tid` (its Tgid), or 0.
pid_t process_of(pid_t tid) {
    std::ifstream status("/proc/" + std::to_string(tid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.starts_with("Tgid:")) return static_cast<pid_t>(std::atoi(line.c_str() + 5));
    }
    return 0;
}
constexpr const char* kName = "/program";

int getattr(const char* path, struct stat* st, fuse_file_info*) {
    *st = {};
    if (std::strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (std::strcmp(path, kName) != 0) return -ENOENT;
    st->st_mode = S_IFREG | 0755;
    st->st_nlink = 1;
    st->st_size = static_cast<off_t>(program.size());
    return 0;
}

int readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
            fuse_readdir_flags) {
    if (std::strcmp(path, "/") != 0) return -ENOENT;
    fill(buf, ".", nullptr, 0, fuse_fill_dir_flags{});
    fill(buf, "..", nullptr, 0, fuse_fill_dir_flags{});
    fill(buf, kName + 1, nullptr, 0, fuse_fill_dir_flags{});
    return 0;
}

int open(const char* path, fuse_file_info* fi) {
    if (std::strcmp(path, kName) != 0) return -ENOENT;
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EACCES;
    return 0;  // no keep_cache: every open reads the file anew
}

int read(const char* path, char* buf, size_t size, off_t offset, fuse_file_info*) {
    if (std::strcmp(path, kName) != 0) return -ENOENT;
    const pid_t tid = fuse_get_context()->pid;
    if (process_of(tid) == reader) {
        std::chrono::steady_clock::time_point until;
        {
            std::lock_guard lock(stall);
            if (!stalled_until) {
                stalled_until =
                    std::chrono::steady_clock::now() + std::chrono::milliseconds(stall_ms);
                std::printf("stalled thread %d of process %d for %d ms\n", static_cast<int>(tid),
                            static_cast<int>(reader), stall_ms);
                std::fflush(stdout);
            }
            until = *stalled_until;
        }
        std::this_thread::sleep_until(until);
    }
    if (offset < 0 || static_cast<std::size_t>(offset) >= program.size()) return 0;
    const auto n = std::min(size, program.size() - static_cast<std::size_t>(offset));
    std::memcpy(buf, program.data() + offset, n);
    return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: stalling_fs PROGRAM READER STALL_MS MOUNTPOINT\n");
        return 2;
    }
    std::FILE* in = std::fopen(argv[1], "rb");
    if (in == nullptr) {
        std::fprintf(stderr, "stalling_fs: cannot read %s: %s\n", argv[1], std::strerror(errno));
        return 1;
    }
    char chunk[65536];
    for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, in)) > 0;) {
        program.insert(program.end(), chunk, chunk + n);
    }
    std::fclose(in);
    reader = static_cast<pid_t>(std::atoi(argv[2]));
    stall_ms = std::atoi(argv[3]);
    fuse_operations ops{};
    ops.getattr = getattr;
    ops.readdir = readdir;
    ops.open = open;
    ops.read = read;
    // Foreground; every user may read (the daemon is root, the test may not be).
    std::vector<char*> args{argv[0], const_cast<char*>("-f"), const_cast<char*>("-o"),
                            const_cast<char*>("allow_other,ro"), argv[4]};
    return fuse_main(static_cast<int>(args.size()), args.data(), &ops, nullptr);
}
