// Other users' object files, as the daemon reads them to name sampled code and to find the
// symbols breakpoints are placed on: the bytes are a file (a memfd) that a process gone had
// mapped as code, named through AddressNames from the kernel's record of the mapping, and a
// program about to run, searched by find_program_symbol. Whatever the bytes, no crash, and
// what is named is named in that file.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "monitor/perf/process_symbols.hpp"
#include "monitor/unique_fd.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    monitor::UniqueFd fd{::memfd_create("object", MFD_CLOEXEC)};
    if (!fd) return 0;
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = ::write(fd.get(), data + done, size - done);
        if (n <= 0) return 0;
        done += static_cast<std::size_t>(n);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0) return 0;
    const std::string path = "/proc/self/fd/" + std::to_string(fd.get());

    // No process has this pid (pid_max is at most 2^22): the file is found by its path, as
    // the one the record says was mapped.
    constexpr pid_t kGone = INT_MAX;
    constexpr std::uint64_t kStart = 0x10000000;
    const std::uint64_t length = (static_cast<std::uint64_t>(size) + 4095) / 4096 * 4096 + 4096;
    monitor::perf::AddressNames names;
    names.mapped({.kind = monitor::perf::TaskRecord::Kind::Mapped,
                  .pid = kGone,
                  .start = kStart,
                  .length = length,
                  .offset = 0,
                  .major = major(st.st_dev),
                  .minor = minor(st.st_dev),
                  .inode = st.st_ino,
                  .name = path});
    for (std::uint64_t at : {std::uint64_t{0}, std::uint64_t{0x40}, std::uint64_t{0x184},
                             std::uint64_t{0x240}, std::uint64_t{0x1000}, length / 2, length - 1}) {
        const auto n = names.name(kGone, kStart + at);
        if (n.object != path && n.object != "[unknown]") std::abort();
    }
    (void)monitor::perf::find_program_symbol(path, "tiny_one");
    (void)monitor::perf::find_program_symbol(path, "main");
    return 0;
}
