// Tests of the formulas of derived metrics: what they read, their arithmetic, and the errors
// a mistyped formula gets.
#include "monitor/perf/metric_formula.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace monitor::perf {
namespace {

double value_of(std::string_view text, std::vector<double> counts, double seconds = 1) {
    auto f = MetricFormula::parse(text);
    EXPECT_TRUE(f) << text << ": " << f.error().to_string();
    if (!f) return -1;
    auto v = f->evaluate(counts, seconds);
    EXPECT_TRUE(v) << text;
    return v.value_or(-1);
}

TEST(MetricFormula, ReadsEachEventOnceInTheOrderNamed) {
    auto f = MetricFormula::parse("branch-misses * 1000 / instructions + branch-misses");
    ASSERT_TRUE(f) << f.error().to_string();
    EXPECT_EQ(f->events(), (std::vector<std::string>{"branch-misses", "instructions"}));
    EXPECT_FALSE(f->uses_seconds());
    EXPECT_EQ(f->text(), "branch-misses * 1000 / instructions + branch-misses");
    EXPECT_DOUBLE_EQ(*f->evaluate(std::vector<double>{5, 1000}, 1), 5 * 1000 / 1000.0 + 5);
}

TEST(MetricFormula, NamesTakePmusModifiersAndBraces) {
    auto f = MetricFormula::parse(
        "ppc750::L1_ICACHE_MISSES:u / {cpu/event=0x3c,umask=0/} - perf::TASK-CLOCK");
    ASSERT_TRUE(f) << f.error().to_string();
    EXPECT_EQ(f->events(),
              (std::vector<std::string>{"ppc750::L1_ICACHE_MISSES:u", "cpu/event=0x3c,umask=0/",
                                        "perf::TASK-CLOCK"}));
}

TEST(MetricFormula, AMinusNeedsSpacesBetweenNamesAndNotBeforeNumbers) {
    // Without spaces the '-' is part of the name, as in perf's event names.
    auto joined = MetricFormula::parse("cycles-instructions");
    ASSERT_TRUE(joined);
    EXPECT_EQ(joined->events(), std::vector<std::string>{"cycles-instructions"});
    EXPECT_DOUBLE_EQ(value_of("cycles - instructions", {10, 4}), 6);
    EXPECT_DOUBLE_EQ(value_of("cycles -instructions", {10, 4}), 6);
    EXPECT_DOUBLE_EQ(value_of("cycles - 1", {10}), 9);
    auto named = MetricFormula::parse("cycles-1");  // as perf names the events of a PMU
    ASSERT_TRUE(named);
    EXPECT_EQ(named->events(), std::vector<std::string>{"cycles-1"});
}

TEST(MetricFormula, PrecedenceParenthesesAndUnaryMinus) {
    EXPECT_DOUBLE_EQ(value_of("a + b * c", {1, 2, 3}), 7);
    EXPECT_DOUBLE_EQ(value_of("(a + b) * c", {1, 2, 3}), 9);
    EXPECT_DOUBLE_EQ(value_of("a / b / c", {12, 2, 3}), 2);  // left to right
    EXPECT_DOUBLE_EQ(value_of("a - b - c", {12, 2, 3}), 7);
    EXPECT_DOUBLE_EQ(value_of("-a * -b", {2, 3}), 6);
    EXPECT_DOUBLE_EQ(value_of("1e9 * 0.5 + .25", {}), 5e8 + 0.25);
}

TEST(MetricFormula, SecondsIsTheTimeCounted) {
    auto f = MetricFormula::parse("context-switches / seconds");
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->uses_seconds());
    EXPECT_EQ(f->events(), std::vector<std::string>{"context-switches"});
    EXPECT_DOUBLE_EQ(*f->evaluate(std::vector<double>{300}, 2.5), 120);
}

TEST(MetricFormula, ADivisionByZeroHasNoValue) {
    auto f = MetricFormula::parse("a / (b - c)");
    ASSERT_TRUE(f);
    EXPECT_FALSE(f->evaluate(std::vector<double>{1, 2, 2}, 1));
    auto rate = MetricFormula::parse("a / seconds");
    ASSERT_TRUE(rate);
    EXPECT_FALSE(rate->evaluate(std::vector<double>{1}, 0));
}

TEST(MetricFormula, MistakesAreSaidWithWhere) {
    struct Case {
        const char* text;
        const char* says;
    };
    const Case cases[] = {
        {"", "at 1: a number, an event or '(' expected"},
        {"a /", "at 4: a number, an event or '(' expected"},
        {"(a + b", "at 7: ')' expected"},
        {"a b", "at 3: 'b' where the formula should end"},
        {"a + {b", "at 5: '}' expected"},
        {"a + {}", "an event name expected in the braces"},
        {"a % b", "at 3: '%' where the formula should end"},
        {"1000x", "'x' after a number"},
        {"a * #", "'#': a number, an event or '(' expected"},
    };
    for (const auto& c : cases) {
        auto f = MetricFormula::parse(c.text);
        ASSERT_FALSE(f) << c.text;
        EXPECT_EQ(f.error().status, Status::BadArg);
        EXPECT_NE(f.error().message.find(c.says), std::string::npos)
            << c.text << " -> " << f.error().message;
        EXPECT_NE(f.error().message.find(std::string("\"") + c.text + "\""), std::string::npos)
            << f.error().message;
    }
}

TEST(MetricFormula, HostileNestingIsRefusedNotRecursedInto) {
    EXPECT_FALSE(MetricFormula::parse(std::string(100000, '(') + "a"));
    EXPECT_FALSE(MetricFormula::parse(std::string(200, '-') + "a"));
    std::string deep;
    for (int i = 0; i < 70; ++i) deep += "a + (";
    deep += "a" + std::string(70, ')');
    auto f = MetricFormula::parse(deep);
    ASSERT_FALSE(f);
    EXPECT_NE(f.error().message.find("nested too deeply"), std::string::npos);
    // As deep as is allowed still evaluates.
    std::string ok;
    for (int i = 0; i < 30; ++i) ok += "a + (";
    ok += "a" + std::string(30, ')');
    EXPECT_DOUBLE_EQ(value_of(ok, {1}), 31);
}

}  // namespace
}  // namespace monitor::perf
