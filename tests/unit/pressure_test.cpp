// The CPU pressure files' "some" line, as the kernel writes it for the machine and for a
// cgroup, and text that is not the kernel's, named by file and line.
#include "monitor/loading/pressure.hpp"

#include <gtest/gtest.h>

#include "monitor/text_file.hpp"  // parse_decimal

namespace monitor {
namespace {

TEST(CpuPressure, TheSomeLineOfTheMachineAndOfACgroup) {
    // The machine's (5.13 and later print a "full" line of zeros).
    auto p = parse_cpu_pressure(
        "some avg10=1.25 avg60=0.50 avg300=12.07 total=123456789\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        "/proc/pressure/cpu");
    ASSERT_TRUE(p) << p.error().to_string();
    EXPECT_DOUBLE_EQ(p->avg10, 1.25);
    EXPECT_DOUBLE_EQ(p->avg60, 0.5);
    EXPECT_DOUBLE_EQ(p->avg300, 12.07);
    EXPECT_EQ(p->total_us, 123456789u);
    // A cgroup's: its "full" line says when every one of its tasks waited; "some" is read.
    p = parse_cpu_pressure(
        "full avg10=99.00 avg60=99.00 avg300=99.00 total=5\n"
        "some avg10=100.00 avg60=0.01 avg300=0.00 total=7\n",
        "cpu.pressure");
    ASSERT_TRUE(p) << p.error().to_string();
    EXPECT_DOUBLE_EQ(p->avg10, 100);
    EXPECT_EQ(p->total_us, 7u);
    // Without the newline at the end.
    EXPECT_TRUE(parse_cpu_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0", "f"));
}

TEST(CpuPressure, TextThatIsNotTheKernelsIsNamed) {
    for (const char* text : {"some avg10=1.25 avg60=0.50 avg300=0.10\n",  // no total
                             "some avg10=x avg60=0.50 avg300=0.10 total=1\n",
                             "some avg10=1.25 avg60=0.50 avg300=0.10 total=-1\n",
                             "some avg10=1.2.5 avg60=0.50 avg300=0.10 total=1\n",
                             "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\nsome\n"}) {
        SCOPED_TRACE(text);
        auto p = parse_cpu_pressure(text, "/sys/fs/cgroup/a.service/cpu.pressure");
        ASSERT_FALSE(p);
        EXPECT_EQ(p.error().status, Status::BadData);
        EXPECT_NE(p.error().message.find("/sys/fs/cgroup/a.service/cpu.pressure: line "),
                  std::string::npos)
            << p.error().message;
        EXPECT_NE(p.error().message.find("some avg10=A avg60=A avg300=A total=N"),
                  std::string::npos);
    }
    for (const char* text : {"", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", "\n\n"}) {
        auto p = parse_cpu_pressure(text, "cpu.pressure");
        ASSERT_FALSE(p) << text;
        EXPECT_NE(p.error().message.find("cpu.pressure: no \"some\" line"), std::string::npos)
            << p.error().message;
    }
}

// The kernel's decimals (PSI's averages, /proc/uptime), read without the locale.
TEST(ParseDecimal, TheKernelsNumbersAndNothingElse) {
    EXPECT_EQ(parse_decimal("12.50"), 12.5);
    EXPECT_EQ(parse_decimal("0.00"), 0.0);
    EXPECT_EQ(parse_decimal("70385.12"), 70385.12);
    EXPECT_EQ(parse_decimal("7"), 7.0);
    EXPECT_DOUBLE_EQ(parse_decimal("1.123456789").value_or(0), 1.123456789);
    for (const char* bad : {"", ".", "1.", ".5", "-1.0", "1,5", "1.2.3", "1e3", " 1.0", "1.0 ",
                            "1.1234567890", "nan", "18446744073709551616"}) {
        EXPECT_EQ(parse_decimal(bad), std::nullopt) << bad;
    }
}

}  // namespace
}  // namespace monitor
