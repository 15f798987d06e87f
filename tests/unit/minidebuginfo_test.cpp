// MiniDebugInfo (.gnu_debugdata: an xz-compressed ELF file of function symbols in a stripped
// program, as Fedora, RHEL and SUSE ship them) unpacked within bounds: a real one names a
// stripped program's functions; one that unpacks past the bound, asks the decoder for too
// much memory, is damaged, or holds strings without an end is not handed to libdwfl, and the
// program is named by its object alone.
#include "monitor/perf/minidebuginfo.hpp"

#include <gtest/gtest.h>
#include <lzma.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "mapping_child.hpp"
#include "monitor/perf/process_symbols.hpp"
#include "test_support.hpp"
#include "xz.hpp"

extern "C" {
[[gnu::noinline, gnu::used]] int monitord_minidebuginfo_probe(int x);
}
int monitord_minidebuginfo_probe(int x) {
    return x * 5 + 2;
}

namespace {

using monitor::Status;
using namespace monitor::perf;
using test_support::MappingChild;
using test_support::offset_in_file;
using test_support::ScratchDir;
using test_support::xz_compress;
using test_support::xz_of_zeros;
namespace fs = std::filesystem;

std::span<const unsigned char> bytes_of(const std::string& s) {
    return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

// Text that compresses, but not to nothing.
std::string some_text(std::size_t bytes) {
    std::string s;
    for (std::uint32_t i = 0; s.size() < bytes; ++i) s += std::to_string(i * 2654435761u) + ' ';
    s.resize(bytes);
    return s;
}

TEST(UnpackXz, AStreamUnpacksToWhatWasPacked) {
    const std::string text = some_text(100'000);
    auto out = unpack_xz(bytes_of(xz_compress(text, 6)));
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(*out, text);
    // Exactly at the bound, and nothing at all.
    out = unpack_xz(bytes_of(xz_compress(text)), text.size());
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(out->size(), text.size());
    out = unpack_xz(bytes_of(xz_compress("")));
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(*out, "");
}

// The stream is unpacked no further than one byte past the bound: 256 MiB of zeros packed in
// 38 KiB is refused after 64 KiB.
TEST(UnpackXz, AStreamPastTheBoundIsRefusedWithoutUnpackingIt) {
    const std::string bomb = xz_of_zeros(std::size_t{256} << 20);
    ASSERT_FALSE(bomb.empty());
    EXPECT_LT(bomb.size(), std::size_t{50'000});
    auto out = unpack_xz(bytes_of(bomb), 65'536);
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().status, Status::BadData);
    EXPECT_EQ(out.error().message, "xz: the stream unpacks to more than 65536 bytes");
    out = unpack_xz(bytes_of(xz_compress(some_text(65'537))), 65'536);
    ASSERT_FALSE(out) << "one byte over";
    out = unpack_xz(bytes_of(bomb));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().message, "xz: the stream unpacks to more than 32 MiB");
}

// A stream whose dictionary is larger than the decoder may have (its LZMA2 property, in the
// block header, set to 4 GiB and the header's CRC32 made again) is refused before anything
// is allocated for it.
TEST(UnpackXz, AStreamThatAsksForTooMuchMemoryIsRefused) {
    std::string packed = xz_compress(some_text(10'000));
    // Stream header (12 bytes), then the block header: its size, (size byte + 1) * 4.
    ASSERT_GT(packed.size(), 32u);
    const std::size_t header = 12;
    const std::size_t size = (static_cast<unsigned char>(packed[header]) + 1u) * 4u;
    // The LZMA2 filter's flags: ID 0x21, one byte of properties, the dictionary's size.
    const auto at = packed.find("\x21\x01", header + 2);
    ASSERT_NE(at, std::string::npos);
    ASSERT_LT(at + 2, header + size - 4);
    packed[at + 2] = 40;  // 4 GiB - 1
    const std::uint32_t crc =
        lzma_crc32(reinterpret_cast<const std::uint8_t*>(packed.data()) + header, size - 4, 0);
    for (int i = 0; i < 4; ++i) packed[header + size - 4 + i] = static_cast<char>(crc >> (8 * i));
    const auto out = unpack_xz(bytes_of(packed));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().status, Status::BadData);
    EXPECT_NE(out.error().message.find("more than the 72 MiB allowed"), std::string::npos)
        << out.error().message;
}

TEST(UnpackXz, ADamagedOrTruncatedStreamIsAnError) {
    const std::string packed = xz_compress(some_text(50'000));
    auto out = unpack_xz(bytes_of(packed.substr(0, packed.size() / 2)));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().message, "xz: the stream ends early");
    std::string damaged = packed;
    damaged[damaged.size() / 2] ^= 0x55;
    out = unpack_xz(bytes_of(damaged));
    ASSERT_FALSE(out);
    EXPECT_TRUE(out.error().message.starts_with("xz: the stream is damaged"))
        << out.error().message;
    out =
        unpack_xz(bytes_of("\x7f"
                           "ELF and more"));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().message, "not an xz stream");
    EXPECT_FALSE(unpack_xz({}));
}

// libdwfl unpacks the first stream alone: so does the check.
TEST(UnpackXz, WhatFollowsTheFirstStreamIsLeftAlone) {
    const std::string first = some_text(1000);
    const auto out = unpack_xz(bytes_of(xz_compress(first) + xz_of_zeros(1 << 20)), 2000);
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_EQ(*out, first);
}

// --- In programs -----------------------------------------------------------------------------

// This test program, by a path that other programs can open (/proc/self is theirs).
std::string self() {
    return fs::read_symlink("/proc/self/exe").string();
}

void run(const std::string& command) {
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

std::string read_all(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_all(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// This program stripped, with `section` (if any) as its .gnu_debugdata.
fs::path stripped_copy(const ScratchDir& dir, const std::string& section) {
    const fs::path file = dir / "stripped";
    run("strip --strip-all -R .comment -o " + file.string() + " " + self());
    if (!section.empty()) {
        write_all(dir / "section", section);
        run("objcopy --add-section .gnu_debugdata=" + (dir / "section").string() + " " +
            file.string());
    }
    return file;
}

// MiniDebugInfo as the distributions make it (Fedora's find-debuginfo): this program's
// debugging information with the symbols kept that a profile names, the rest stripped.
std::string minidebuginfo(const ScratchDir& dir) {
    const fs::path mini = dir / "mini";
    run("objcopy --only-keep-debug " + self() + " " + mini.string());
    run("objcopy -S --remove-section .gdb_index --remove-section .comment "
        "--keep-symbol=monitord_minidebuginfo_probe " +
        mini.string());
    return read_all(mini);
}

std::uint64_t probe_ip(const MappingChild& child) {
    return child.start +
           offset_in_file(reinterpret_cast<std::uint64_t>(&monitord_minidebuginfo_probe));
}

// The name of this program's probe function in `file`, mapped as code by a child process.
AddressNames::Name probe_named_in(const fs::path& file) {
    MappingChild child(file);
    if (child.pid <= 0 || child.start == 0) {
        ADD_FAILURE() << "no child could map " << file;
        return {};
    }
    AddressNames names;
    return names.name(child.pid, probe_ip(child));
}

TEST(MiniDebugInfo, AStrippedProgramIsNamedFromIt) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols read";
    ScratchDir dir;
    const fs::path file = stripped_copy(dir, xz_compress(minidebuginfo(dir), 6));
    const auto n = probe_named_in(file);
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "monitord_minidebuginfo_probe");

    // Without it, the stripped program has no name for its code.
    ScratchDir plain;
    const fs::path bare = stripped_copy(plain, "");
    EXPECT_EQ(probe_named_in(bare).function, "");
}

// The peak of this process's resident memory since the last reset, in bytes.
std::uint64_t peak_rss() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6)) * 1024;
    }
    return 0;
}

// 256 MiB of zeros as MiniDebugInfo (38 KiB in the file): libdwfl unpacks it whole when it
// is handed the file. The object is named without functions, and the memory this process
// used at its peak grew by the bound at most (32 MiB), not by 256 MiB.
TEST(MiniDebugInfo, OneThatUnpacksPastTheBoundIsNotUnpacked) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols read";
    ScratchDir dir;
    const fs::path file = stripped_copy(dir, xz_of_zeros(std::size_t{256} << 20));
    MappingChild child(file);
    ASSERT_GT(child.pid, 0);
    std::ofstream("/proc/self/clear_refs") << "5";  // the peak starts again from now
    const std::uint64_t before = peak_rss();
    AddressNames names;
    const auto n = names.name(child.pid, probe_ip(child));
    const std::uint64_t grew = peak_rss() - before;
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "");
    EXPECT_LT(grew, std::uint64_t{96} << 20) << "the peak grew by " << (grew >> 20) << " MiB";

    const auto found = find_program_symbol(file, "main");
    ASSERT_FALSE(found);
    EXPECT_EQ(found.error().message,
              "symbol 'main': " + file.string() +
                  " cannot be read for symbols: its .gnu_debugdata section: xz: the stream "
                  "unpacks to more than 32 MiB");
}

// Two .gnu_debugdata sections (no distribution makes more than one; each would be unpacked),
// each a real one: the file is named by its object.
TEST(MiniDebugInfo, AFileWithTwoIsNotRead) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols read";
    ScratchDir dir;
    const fs::path file = stripped_copy(dir, xz_compress(minidebuginfo(dir)));
    // objcopy adds no second section of a name: one of another name, renamed in place.
    run("objcopy --add-section .gnu_debugdatb=" + (dir / "section").string() + " " + file.string());
    std::string bytes = read_all(file);
    const auto at = bytes.rfind(std::string(".gnu_debugdatb") + '\0');  // its names: last
    ASSERT_NE(at, std::string::npos);
    bytes[at + 13] = 'a';
    write_all(file, bytes);
    const auto n = probe_named_in(file);
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "");
    const auto found = find_program_symbol(file, "main");
    ASSERT_FALSE(found);
    EXPECT_NE(found.error().message.find("it has 2 .gnu_debugdata sections, where there is one"),
              std::string::npos)
        << found.error().message;
}

// The section header of `name` in a 64-bit ELF file's `bytes`: its offset and size.
std::pair<std::uint64_t, std::uint64_t> section_of(const std::string& bytes,
                                                   const std::string& name) {
    auto u16 = [&](std::size_t at) {
        std::uint16_t v;
        std::memcpy(&v, &bytes[at], 2);
        return v;
    };
    auto u32 = [&](std::size_t at) {
        std::uint32_t v;
        std::memcpy(&v, &bytes[at], 4);
        return v;
    };
    auto u64 = [&](std::size_t at) {
        std::uint64_t v;
        std::memcpy(&v, &bytes[at], 8);
        return v;
    };
    const std::uint64_t shoff = u64(0x28);
    const std::uint16_t size = u16(0x3a);
    const std::uint16_t count = u16(0x3c);
    const std::uint64_t names = u64(shoff + std::uint64_t{size} * u16(0x3e) + 0x18);
    for (std::uint16_t i = 0; i < count; ++i) {
        const std::uint64_t h = shoff + std::uint64_t{size} * i;
        if (bytes.compare(names + u32(h), name.size() + 1, name.c_str(), name.size() + 1) == 0) {
            return {u64(h + 0x18), u64(h + 0x20)};
        }
    }
    return {0, 0};
}

// MiniDebugInfo whose table of symbols' names has no end (its last byte not a NUL): libdwfl
// would read the last name past the table. The program is named without functions.
TEST(MiniDebugInfo, OneWhoseNamesHaveNoEndIsNotRead) {
    if (!reads_symbols()) GTEST_SKIP() << "built without libdw: no symbols read";
    if (sizeof(void*) != 8) GTEST_SKIP() << "the test edits a 64-bit ELF file";
    ScratchDir dir;
    std::string mini = minidebuginfo(dir);
    const auto [offset, size] = section_of(mini, ".strtab");
    ASSERT_GT(size, 0u);
    ASSERT_EQ(mini[offset + size - 1], '\0');
    mini[offset + size - 1] = 'x';
    const fs::path file = stripped_copy(dir, xz_compress(mini));
    const auto n = probe_named_in(file);
    EXPECT_EQ(n.object, file.string());
    EXPECT_EQ(n.function, "");
}

}  // namespace
