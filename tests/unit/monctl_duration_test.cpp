// The durations of monctl's options (-d, -i, --batch, top's interval), read without the
// locale or floating-point from_chars.
#include <gtest/gtest.h>

#include <clocale>
#include <cstdint>
#include <string>
#include <string_view>

#include "duration.hpp"
#include "monitor/runtime/counter_run.hpp"

namespace monctl {
namespace {

std::int64_t ms(const std::string& text) {
    auto r = parse_duration_ms(text);
    EXPECT_TRUE(r) << text << ": " << (r ? "" : r.error().to_string());
    return r.value_or(-1);
}

TEST(MonctlDuration, NumbersAndUnits) {
    EXPECT_EQ(ms("5s"), 5000);
    EXPECT_EQ(ms("5"), 5000) << "no unit: seconds";
    EXPECT_EQ(ms("250ms"), 250);
    EXPECT_EQ(ms("2m"), 120'000);
    EXPECT_EQ(ms("2min"), 120'000);
    EXPECT_EQ(ms("1h"), 3'600'000);
    EXPECT_EQ(ms("1.5"), 1500);
    EXPECT_EQ(ms(".5s"), 500);
    EXPECT_EQ(ms("0.3"), 300) << "0.1 steps add up to 0.30000000000000004";
    EXPECT_EQ(ms("1."), 1000);
    EXPECT_EQ(ms("0.25ms"), 1) << "rounded, at least 1 ms";
    EXPECT_EQ(ms("1.0005s"), 1001);
    EXPECT_EQ(ms("007ms"), 7);
    EXPECT_EQ(ms("1.00000000000000000000000001"), 1000) << "a long fraction";
    EXPECT_EQ(ms("168h"), monitor::kMaxCountingDuration.count()) << "the longest";
}

TEST(MonctlDuration, RefusedWithTheTextAndExamples) {
    for (const char* text : {"",      "s",   "ms",  ".",    "..5",
                             "1.2.3", "-1s", "+1s", "1e3",  "1 s",
                             "1sec",  "0",   "0s",  "169h", "99999999999999999999",
                             "1,5",   " 1",  "1s ", "nan",  "inf"}) {
        auto r = parse_duration_ms(text);
        ASSERT_FALSE(r) << "'" << text << "' read as " << *r << " ms";
        EXPECT_EQ(r.error().status, monitor::Status::BadArg) << text;
        EXPECT_EQ(r.error().message,
                  "'" + std::string(text) + "' is not a duration (examples: 5s, 250ms, 2m, 1.5)");
    }
}

// A point is the decimal point whatever the locale says (strtod would take "1,5" in de_DE).
TEST(MonctlDuration, TheLocaleDoesNotChangeThePoint) {
    const std::string before = std::setlocale(LC_NUMERIC, nullptr);
    bool comma = false;
    for (const char* name : {"de_DE.UTF-8", "fr_FR.UTF-8", "nl_NL.UTF-8"}) {
        if (std::setlocale(LC_NUMERIC, name) != nullptr &&
            std::string_view(std::localeconv()->decimal_point) == ",") {
            comma = true;
            break;
        }
    }
    if (!comma) {
        std::setlocale(LC_NUMERIC, before.c_str());
        GTEST_SKIP() << "no locale with a decimal comma is installed (Debian's locales package)";
    }
    EXPECT_EQ(ms("1.5"), 1500);
    EXPECT_FALSE(parse_duration_ms("1,5"));
    std::setlocale(LC_NUMERIC, before.c_str());
}

}  // namespace
}  // namespace monctl
