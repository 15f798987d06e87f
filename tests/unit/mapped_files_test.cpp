// The files of a process's map opened as that process sees them, and named right: a path
// that names another file (or a FIFO) in this mount namespace, a file truncated while it is
// read, a FIFO or an oversized file handed in.
#include "monitor/perf/mapped_files.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "mapping_child.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "monitor/text_file.hpp"
#include "test_support.hpp"

extern "C" {
[[gnu::noinline, gnu::used]] int monitord_mapped_files_probe(int x);
}
int monitord_mapped_files_probe(int x) {
    return x * 3 + 1;
}

namespace {

using monitor::Status;
using namespace monitor::perf;
using test_support::MappingChild;
using test_support::offset_in_file;
using test_support::ScratchDir;
namespace fs = std::filesystem;

TEST(MappedFiles, AMapsFilesAreItsPathsWithDeviceAndInode) {
    const auto files = mapped_files(
        "7f0000000000-7f0000001000 r--p 00000000 08:01 1234 /usr/lib/x.so\n"
        "7f0000001000-7f0000002000 r-xp 00001000 fe:1a 99 /tmp/a b (deleted)\n"
        "7f0000003000-7f0000004000 rw-p 00000000 00:00 0 \n"
        "7fff00000000-7fff00001000 r-xp 00000000 00:00 0 [vdso]\n"
        "garbage\n"
        "zz-7f r-xp 0 08:01 1 /bad/range\n");
    ASSERT_EQ(files.size(), 2u);
    EXPECT_EQ(files[0].path, "/usr/lib/x.so");
    EXPECT_EQ(files[0].start, 0x7f0000000000u);
    EXPECT_EQ(files[0].end, 0x7f0000001000u);
    EXPECT_EQ(files[0].major, 8u);
    EXPECT_EQ(files[0].minor, 1u);
    EXPECT_EQ(files[0].inode, 1234u);
    EXPECT_EQ(files[1].path, "/tmp/a b (deleted)") << "the rest of the line, spaces and all";
    EXPECT_EQ(files[1].major, 0xfeu);
    EXPECT_EQ(files[1].minor, 0x1au);
}

// Handed a FIFO (no writer: a blocking open would never return), a directory or a file
// over the size limit, the open refuses at once and names the file.
TEST(MappedFiles, OnlyARegularFileWithinTheLimitIsOpened) {
    ScratchDir dir;
    const fs::path fifo = dir.path() / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto before = std::chrono::steady_clock::now();
    auto r = open_regular_file(fifo.string());
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(1));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::BadArg);
    EXPECT_NE(r.error().message.find(fifo.string() + " is not a regular file"), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(open_regular_file(dir.path().string()));
    const fs::path big = dir.path() / "big";
    std::ofstream(big) << std::string(4096, 'x');
    auto over = open_regular_file(big.string(), 1024);
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error().status, Status::BadArg);
    EXPECT_TRUE(open_regular_file(big.string(), 4096));
    auto none = open_regular_file((dir.path() / "none").string());
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::NoDev);
}

// A process gone: its file by its path only while the path holds the inode it mapped.
TEST(MappedFiles, AGoneProcesssFileIsTheInodeItMapped) {
    ScratchDir dir;
    const fs::path file = dir.path() / "code";
    std::ofstream(file) << "code";
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    MappedFile mapped{.major = major(st.st_dev),
                      .minor = minor(st.st_dev),
                      .inode = st.st_ino,
                      .path = file.string()};
    EXPECT_TRUE(open_mapped_file(-1, mapped));
    fs::rename(file, dir.path() / "kept");  // kept: its inode is not given again
    std::ofstream(file) << "another file at the same path";
    auto r = open_mapped_file(-1, mapped);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, Status::NoDev);
    EXPECT_NE(r.error().message.find("no longer the file"), std::string::npos) << r.error().message;
}

// A process in a mount namespace of its own maps a file at a path that names something else
// here: a FIFO, then another program. Its code is named from its own file, through
// /proc/PID/map_files; the path here is never opened (a FIFO there would block the open,
// another program there would give wrong names).
TEST(MappedFiles, AProcessInItsOwnMountNamespaceIsNamedFromItsOwnFile) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: a mount namespace and map_files";
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols to compare";
    ScratchDir dir;
    const fs::path file = dir.path() / "program";
    MappingChild child(file, true);
    ASSERT_GT(child.pid, 0);
    ASSERT_NE(child.start, 0u) << "the child could not map its own copy (a mount namespace)";
    const std::uint64_t ip =
        child.start + offset_in_file(reinterpret_cast<std::uint64_t>(&monitord_mapped_files_probe));
    ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0) << "here, the path is a FIFO";
    {
        AddressNames names;
        const auto n = names.name(child.pid, ip);
        EXPECT_EQ(n.function, "monitord_mapped_files_probe") << n.object;
        EXPECT_EQ(n.object, file.string());
    }
    fs::remove(file);
    fs::copy_file("/bin/true", file);  // here, another program: its names would be wrong
    {
        AddressNames names;
        EXPECT_EQ(names.name(child.pid, ip).function, "monitord_mapped_files_probe");
    }
}

// A file truncated after its symbols were first read (a SIGBUS, were libelf reading it
// through mmap): the names read stay, and the daemon does not die.
TEST(MappedFiles, AFileTruncatedWhileItIsReadIsNoCrash) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols read";
    ScratchDir dir;
    const fs::path file = dir.path() / "program";
    fs::copy_file(fs::read_symlink("/proc/self/exe"), file);
    MappingChild child(file);
    ASSERT_GT(child.pid, 0);
    ASSERT_NE(child.start, 0u);
    const std::uint64_t ip =
        child.start + offset_in_file(reinterpret_cast<std::uint64_t>(&monitord_mapped_files_probe));
    AddressNames names;
    EXPECT_EQ(names.name(child.pid, ip).function, "monitord_mapped_files_probe");
    fs::resize_file(file, 64);  // the child does not touch its mapping again
    const std::uint64_t other =
        child.start + offset_in_file(reinterpret_cast<std::uint64_t>(&offset_in_file));
    const auto n = names.name(child.pid, other);  // the symbols read before, from memory
    EXPECT_EQ(n.object, file.string());
    EXPECT_NE(n.function.find("offset_in_file"), std::string::npos) << n.function;
}

// A corrupt file mapped as code (its section headers pointing past its end): named by its
// object alone.
TEST(MappedFiles, ACorruptFileIsNamedByItsObject) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no object file read";
    ScratchDir dir;
    const fs::path file = dir.path() / "corrupt";
    fs::copy_file(fs::read_symlink("/proc/self/exe"), file);
    {
        // e_shoff (64-bit ELF: at byte 40) far beyond the file, e_shnum (60) many.
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        const std::uint64_t shoff = std::uint64_t{1} << 40;
        const std::uint16_t shnum = 0xfff0;
        f.seekp(40);
        f.write(reinterpret_cast<const char*>(&shoff), sizeof shoff);
        f.seekp(60);
        f.write(reinterpret_cast<const char*>(&shnum), sizeof shnum);
    }
    MappingChild child(file);
    ASSERT_GT(child.pid, 0);
    ASSERT_NE(child.start, 0u);
    AddressNames names;
    const auto n = names.name(child.pid, child.start + 0x100);
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "");
}

// A relocatable object mapped as code, its allocated sections at address 0 (a running
// program's code is never one): libdwfl would ask the section_address callback where to put
// each section, and a process's modules have none (a call to address 0, found by fuzzing).
// Named by its object alone.
TEST(MappedFiles, ARelocatableObjectIsNamedByItsObject) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no object file read";
    if (sizeof(void*) != 8) GTEST_SKIP() << "the test edits a 64-bit ELF file";
    ScratchDir dir;
    const fs::path file = dir.path() / "relocatable";
    fs::copy_file(fs::read_symlink("/proc/self/exe"), file);
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        auto read = [&](std::uint64_t at, auto& v) {
            f.seekg(static_cast<std::streamoff>(at));
            f.read(reinterpret_cast<char*>(&v), sizeof v);
        };
        auto write = [&](std::uint64_t at, const auto& v) {
            f.seekp(static_cast<std::streamoff>(at));
            f.write(reinterpret_cast<const char*>(&v), sizeof v);
        };
        write(16, std::uint16_t{1});  // e_type: ET_REL
        std::uint64_t shoff = 0;
        std::uint16_t size = 0;
        std::uint16_t count = 0;
        read(40, shoff);
        read(58, size);
        read(60, count);
        for (std::uint16_t i = 0; i < count; ++i) {
            const std::uint64_t header = shoff + std::uint64_t{size} * i;
            std::uint64_t flags = 0;
            read(header + 8, flags);
            if ((flags & 2) != 0) write(header + 16, std::uint64_t{0});  // SHF_ALLOC: sh_addr 0
        }
        ASSERT_TRUE(f.good());
    }
    MappingChild child(file);
    ASSERT_GT(child.pid, 0);
    ASSERT_NE(child.start, 0u);
    AddressNames names;
    const auto n =
        names.name(child.pid, child.start + offset_in_file(reinterpret_cast<std::uint64_t>(
                                                &monitord_mapped_files_probe)));
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "");
}

}  // namespace
