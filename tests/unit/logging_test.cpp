// Journal detection: JOURNAL_STREAM names stderr's device and inode when systemd connected
// stderr to the journal.
#include "logging.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace monitord {
namespace {

class JournalStream : public ::testing::Test {
  protected:
    void SetUp() override {
        const char* old = std::getenv("JOURNAL_STREAM");
        if (old != nullptr) saved_ = old;
    }
    void TearDown() override {
        if (saved_) {
            ::setenv("JOURNAL_STREAM", saved_->c_str(), 1);
        } else {
            ::unsetenv("JOURNAL_STREAM");
        }
    }
    static std::string stderr_id() {
        struct stat st {};
        EXPECT_EQ(::fstat(STDERR_FILENO, &st), 0);
        return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    }
    std::optional<std::string> saved_;
};

TEST_F(JournalStream, MatchingDeviceAndInodeMeanTheJournal) {
    ::setenv("JOURNAL_STREAM", stderr_id().c_str(), 1);
    EXPECT_TRUE(stderr_is_journal());
}

TEST_F(JournalStream, AnotherStreamIsNotStderr) {
    struct stat st {};
    ASSERT_EQ(::fstat(STDERR_FILENO, &st), 0);
    std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
    ::setenv("JOURNAL_STREAM", other.c_str(), 1);
    EXPECT_FALSE(stderr_is_journal());
}

TEST_F(JournalStream, UnsetOrMalformedIsNotTheJournal) {
    ::unsetenv("JOURNAL_STREAM");
    EXPECT_FALSE(stderr_is_journal());
    ::setenv("JOURNAL_STREAM", "garbage", 1);
    EXPECT_FALSE(stderr_is_journal());
    ::setenv("JOURNAL_STREAM", "", 1);
    EXPECT_FALSE(stderr_is_journal());
}

}  // namespace
}  // namespace monitord
