// Tests of the kernel CPU list parser and of reading <sys>/devices/system/cpu/online.
#include "monitor/loading/cpu_list.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "test_support.hpp"

namespace monitor {
namespace {

using test_support::ScratchDir;
using test_support::write_file;

namespace fs = std::filesystem;

std::vector<int> parsed(std::string_view text) {
    auto r = parse_cpu_list(text);
    EXPECT_TRUE(r.has_value()) << "'" << text << "': " << r.error().to_string();
    return r.value_or(std::vector<int>{});
}

TEST(ParseCpuList, RangesAndSingles) {
    EXPECT_EQ(parsed("0-3,5,7-8"), (std::vector<int>{0, 1, 2, 3, 5, 7, 8}));
}

TEST(ParseCpuList, SingleIds) {
    EXPECT_EQ(parsed("0"), (std::vector<int>{0}));
    EXPECT_EQ(parsed("7"), (std::vector<int>{7}));
    EXPECT_EQ(parsed("255"), (std::vector<int>{255}));
    EXPECT_EQ(parsed("4-4"), (std::vector<int>{4}));
}

TEST(ParseCpuList, KernelFileWithTrailingNewline) {
    EXPECT_EQ(parsed("0-3\n"), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(parsed("  0,2-3 \t\r\n"), (std::vector<int>{0, 2, 3}));
}

TEST(ParseCpuList, EmptyAndWhitespaceGiveNoCpus) {
    for (std::string_view text : {"", " ", "\n", " \t\r\n "}) {
        auto r = parse_cpu_list(text);
        ASSERT_TRUE(r.has_value()) << "'" << text << "': " << r.error().to_string();
        EXPECT_TRUE(r->empty()) << "'" << text << "'";
    }
}

TEST(ParseCpuList, DuplicatesAndUnsortedAreSortedAndUnique) {
    EXPECT_EQ(parsed("5,1,3"), (std::vector<int>{1, 3, 5}));
    EXPECT_EQ(parsed("2,2,2"), (std::vector<int>{2}));
    EXPECT_EQ(parsed("4-6,0-2,5,1"), (std::vector<int>{0, 1, 2, 4, 5, 6}));
    EXPECT_EQ(parsed("0-3,2-5"), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

struct MalformedCase {
    const char* text;
    const char* bad_element;  // what the message must quote
};

class ParseCpuListMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(ParseCpuListMalformed, IsBadDataNamingTheElement) {
    const auto& c = GetParam();
    auto r = parse_cpu_list(c.text);
    ASSERT_FALSE(r.has_value()) << "'" << c.text << "' was accepted";
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find(std::string{"'"} + c.bad_element + "'"), std::string::npos)
        << "message: " << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(Elements, ParseCpuListMalformed,
                         ::testing::Values(MalformedCase{"1-", "1-"}, MalformedCase{"a", "a"},
                                           MalformedCase{"3-1", "3-1"}, MalformedCase{"-1", "-1"},
                                           MalformedCase{"1,,2", ""}, MalformedCase{"0-3,x,5", "x"},
                                           MalformedCase{"0-3,4-b", "4-b"},
                                           MalformedCase{"1.5", "1.5"}));

TEST(ParseCpuList, DoubleCommaNamesTheEmptyElement) {
    auto r = parse_cpu_list("1,,2");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find("''"), std::string::npos) << r.error().message;
}

TEST(ReadOnlineCpus, ReadsTheSysfsFile) {
    ScratchDir sys;
    ASSERT_FALSE(sys.path().empty());
    write_file(sys.path() / "devices/system/cpu/online", "0-2,4\n");

    auto r = read_online_cpus(sys.path());
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 4}));
}

TEST(ReadOnlineCpus, RereadsAfterTheFileChanges) {
    ScratchDir sys;
    ASSERT_FALSE(sys.path().empty());
    const auto online = sys.path() / "devices/system/cpu/online";
    write_file(online, "0-3\n");
    ASSERT_EQ(read_online_cpus(sys.path()).value_or(std::vector<int>{}),
              (std::vector<int>{0, 1, 2, 3}));

    write_file(online, "0,2-3\n");
    auto r = read_online_cpus(sys.path());
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(*r, (std::vector<int>{0, 2, 3}));
}

TEST(ReadOnlineCpus, MissingFileIsNoDev) {
    ScratchDir sys;
    ASSERT_FALSE(sys.path().empty());

    auto r = read_online_cpus(sys.path());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::NoDev) << r.error().to_string();
    EXPECT_NE(r.error().message.find("online"), std::string::npos) << r.error().message;
}

TEST(ReadOnlineCpus, MalformedFileIsBadDataNamingThePath) {
    ScratchDir sys;
    ASSERT_FALSE(sys.path().empty());
    const auto online = sys.path() / "devices/system/cpu/online";
    write_file(online, "0-3,zz\n");

    auto r = read_online_cpus(sys.path());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::BadData);
    EXPECT_NE(r.error().message.find(online.string()), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("'zz'"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace monitor
