// The times monctl loading --since and --until take, as journalctl takes them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "timestamp.hpp"

namespace monctl {
namespace {

using namespace std::chrono_literals;

// 2026-12-01 10:30:15.5 UTC, a Tuesday.
const WallTime kNow = WallTime{} + 1'796'121'015s + 500ms;

class Timestamp : public ::testing::Test {
  protected:
    void SetUp() override { zone("UTC"); }
    void TearDown() override {
        ::unsetenv("TZ");
        ::tzset();
    }
    static void zone(const char* tz) {
        ::setenv("TZ", tz, 1);
        ::tzset();
    }
    static WallTime at(const std::string& text) {
        auto t = parse_timestamp(text, kNow);
        EXPECT_TRUE(t.has_value()) << text << ": " << t.error().message;
        return t.value_or(WallTime{});
    }
};

TEST_F(Timestamp, Words) {
    EXPECT_EQ(at("now"), kNow);
    EXPECT_EQ(at("today"), WallTime{} + 1'796'083'200s);
    EXPECT_EQ(at("yesterday"), WallTime{} + 1'796'083'200s - 24h);
    EXPECT_EQ(at("tomorrow"), WallTime{} + 1'796'083'200s + 24h);
}

TEST_F(Timestamp, SpansBeforeAndAfterNow) {
    EXPECT_EQ(at("-2h"), kNow - 2h);
    EXPECT_EQ(at("+30min"), kNow + 30min);
    EXPECT_EQ(at("-1h 30min"), kNow - 90min);
    EXPECT_EQ(at("-1h30m"), kNow - 90min);
    EXPECT_EQ(at("1h ago"), kNow - 1h);
    EXPECT_EQ(at("2 days ago"), kNow - 48h);
    EXPECT_EQ(at("-1.5h"), kNow - 90min);
    EXPECT_EQ(at("-90"), kNow - 90s);
    EXPECT_EQ(at("-1w"), kNow - 7 * 24h);
    EXPECT_EQ(at("-500ms"), kNow - 500ms);
}

TEST_F(Timestamp, DatesAndClockTimes) {
    EXPECT_EQ(at("03:00"), WallTime{} + 1'796'083'200s + 3h);
    EXPECT_EQ(at("03:00:07"), WallTime{} + 1'796'083'200s + 3h + 7s);
    EXPECT_EQ(at("2026-11-30"), WallTime{} + 1'796'083'200s - 24h);
    EXPECT_EQ(at("2026-11-30 23:59:59"), WallTime{} + 1'796'083'200s - 1s);
    EXPECT_EQ(at("2026-11-30T23:59:59.25"), WallTime{} + 1'796'083'200s - 750ms);
    EXPECT_EQ(at("Mon 2026-11-30 23:00"), WallTime{} + 1'796'083'200s - 1h);
    EXPECT_EQ(at("@1764558000"), WallTime{} + 1'764'558'000s);
}

TEST_F(Timestamp, LocalTimesFollowTheZoneAndUtcSaysSo) {
    zone("Europe/Berlin");  // UTC+1 in December
    EXPECT_EQ(at("2026-12-01 03:00"), WallTime{} + 1'796'083'200s + 2h);
    EXPECT_EQ(at("2026-12-01 03:00 UTC"), WallTime{} + 1'796'083'200s + 3h);
    EXPECT_EQ(at("today"), WallTime{} + 1'796'083'200s - 1h);
}

TEST_F(Timestamp, WhatIsNotATimeIsNamed) {
    for (const char* bad :
         {"", "soon", "25:00", "2026-13-01", "2026-02-30", "-2 lightyears", "03:00 tomorrow", "-",
          "@", "@x", "12", "2026-1-1", "1h agoo", "-1e9y"}) {
        auto t = parse_timestamp(bad, kNow);
        EXPECT_FALSE(t.has_value()) << "'" << bad << "'";
        if (!t) {
            EXPECT_NE(t.error().message.find(std::string{"'"} + bad + "'"), std::string::npos)
                << t.error().message;
            EXPECT_NE(t.error().message.find("yesterday"), std::string::npos);
        }
    }
}

}  // namespace
}  // namespace monctl
