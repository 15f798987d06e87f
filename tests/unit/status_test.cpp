// Status codes: names, messages, the numeric order of the C API, and errno mapping.
#include "monitor/status.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace monitor {
namespace {

std::vector<Status> all_statuses() {
    std::vector<Status> all;
    for (std::size_t i = 0; i < kStatusCount; ++i) all.push_back(static_cast<Status>(i));
    return all;
}

TEST(Status, CountCoversEveryCode) {
    EXPECT_EQ(kStatusCount, 23u);
    EXPECT_EQ(static_cast<std::size_t>(Status::BadData) + 1, kStatusCount);
}

TEST(Status, EveryNameIsUniqueNonEmptyAndUpperCase) {
    std::set<std::string> seen;
    for (Status s : all_statuses()) {
        std::string name{status_name(s)};
        SCOPED_TRACE("status " + std::to_string(static_cast<int>(s)));
        ASSERT_FALSE(name.empty());
        for (char c : name) {
            EXPECT_TRUE(std::isupper(static_cast<unsigned char>(c))) << name;
        }
        EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
    }
    EXPECT_EQ(seen.size(), kStatusCount);
}

TEST(Status, EveryCodeHasAMessage) {
    for (Status s : all_statuses()) {
        auto msg = status_message(s);
        EXPECT_FALSE(msg.empty()) << status_name(s);
        EXPECT_NE(msg, status_name(s));
    }
}

TEST(Status, KnownNamesAndMessages) {
    EXPECT_EQ(status_name(Status::Success), "SUCCESS");
    EXPECT_EQ(status_name(Status::PrfRun), "PRFRUN");
    EXPECT_EQ(status_name(Status::BadState), "BADSTATE");
    EXPECT_EQ(status_name(Status::NoDev), "NODEV");
    EXPECT_EQ(status_name(Status::BadData), "BADDATA");
    EXPECT_EQ(status_message(Status::PrfRun),
              "Performance statistics are already being collected.");
}

TEST(Status, FromNameRoundTripsEveryCode) {
    for (Status s : all_statuses()) {
        auto back = status_from_name(status_name(s));
        ASSERT_TRUE(back.has_value()) << status_name(s);
        EXPECT_EQ(*back, s);
    }
}

TEST(Status, FromNameRejectsUnknownAndLowerCase) {
    for (std::string_view bad : {"", "prfrun", "Prfrun", "PRFRUN ", " PRFRUN", "PRF", "PRFRUNX",
                                 "NOSUCHCODE", "success", "IOERR\n"}) {
        EXPECT_FALSE(status_from_name(bad).has_value()) << "'" << bad << "'";
    }
}

TEST(Status, MonCodesKeepTheirDocumentedOrder) {
    const std::vector<std::pair<Status, int>> expected{
        {Status::Success, 0},  {Status::AllocMem, 1}, {Status::AllocMtx, 2},
        {Status::AllocWut, 3}, {Status::BadState, 4}, {Status::FreeMem, 5},
        {Status::FreeMtx, 6},  {Status::FreeWut, 7},  {Status::LockMtx, 8},
        {Status::NotRdy, 9},   {Status::NullPtr, 10}, {Status::PolSleep, 11},
        {Status::PrfRun, 12},  {Status::TskJoin, 13}, {Status::TskSpawn, 14},
    };
    for (const auto& [s, n] : expected) {
        EXPECT_EQ(static_cast<int>(s), n) << status_name(s);
    }
    const std::vector<std::string_view> mon_names{
        "SUCCESS", "ALLOCMEM", "ALLOCMTX", "ALLOCWUT", "BADSTATE", "FREEMEM", "FREEMTX",  "FREEWUT",
        "LOCKMTX", "NOTRDY",   "NULLPTR",  "POLSLEEP", "PRFRUN",   "TSKJOIN", "TSKSPAWN",
    };
    for (std::size_t i = 0; i < mon_names.size(); ++i) {
        EXPECT_EQ(status_name(static_cast<Status>(i)), mon_names[i]);
    }
}

TEST(Status, LinuxCodesFollowTheMonCodes) {
    EXPECT_EQ(static_cast<int>(Status::NoPmu), 15);
    EXPECT_EQ(static_cast<int>(Status::Perm), 16);
    EXPECT_EQ(static_cast<int>(Status::NoEvent), 17);
    EXPECT_EQ(static_cast<int>(Status::NoDev), 18);
    EXPECT_EQ(static_cast<int>(Status::Busy), 19);
    EXPECT_EQ(static_cast<int>(Status::IoErr), 20);
    EXPECT_EQ(static_cast<int>(Status::BadArg), 21);
    EXPECT_EQ(static_cast<int>(Status::BadData), 22);
}

TEST(Status, OutOfRangeValueStillHasANameAndMessage) {
    auto bogus = static_cast<Status>(200);
    EXPECT_FALSE(status_name(bogus).empty());
    EXPECT_FALSE(status_message(bogus).empty());
}

TEST(Error, ToStringWithMessage) {
    Error e{Status::PrfRun, "a session is already collecting (started by pid 42)"};
    EXPECT_EQ(e.to_string(), "PRFRUN: a session is already collecting (started by pid 42)");
}

TEST(Error, ToStringWithoutMessageUsesTheStatusMessage) {
    Error e{Status::BadArg, ""};
    EXPECT_EQ(e.to_string(), "BADARG: An argument is invalid.");
}

TEST(Error, DefaultIsIoErr) {
    Error e;
    EXPECT_EQ(e.status, Status::IoErr);
    EXPECT_EQ(e.to_string(), "IOERR: A system call failed.");
}

TEST(Result, FailBuildsAnUnexpectedError) {
    Result<int> r = fail(Status::NotRdy, "not yet");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::NotRdy);
    EXPECT_EQ(r.error().message, "not yet");

    Result<int> ok = 7;
    ASSERT_TRUE(ok.has_value());
    EXPECT_EQ(*ok, 7);
}

struct ErrnoCase {
    int err;
    Status status;
};

TEST(FailErrno, MapsErrnoToStatus) {
    const std::vector<ErrnoCase> cases{
        {EACCES, Status::Perm},     {EPERM, Status::Perm},  {ENOENT, Status::NoDev},
        {ENODEV, Status::NoDev},    {ENXIO, Status::NoDev}, {EBUSY, Status::Busy},
        {ENOMEM, Status::AllocMem}, {EIO, Status::IoErr},   {EINVAL, Status::IoErr},
        {EAGAIN, Status::IoErr},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string{"errno "} + std::strerror(c.err));
        auto u = fail_errno(c.err, "open /dev/cpu/0/msr");
        EXPECT_EQ(u.error().status, c.status);
    }
}

TEST(FailErrno, MessageNamesWhatFailedAndIncludesStrerror) {
    auto u = fail_errno(ENOENT, "open /proc/stat");
    EXPECT_EQ(u.error().message, std::string{"open /proc/stat: "} + std::strerror(ENOENT));

    Result<void> r = fail_errno(EACCES, "perf_event_open");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, Status::Perm);
    EXPECT_NE(r.error().message.find(std::strerror(EACCES)), std::string::npos);
    EXPECT_EQ(r.error().message.rfind("perf_event_open: ", 0), 0u);
    EXPECT_EQ(r.error().to_string(),
              std::string{"PERM: perf_event_open: "} + std::strerror(EACCES));
}

}  // namespace
}  // namespace monitor
