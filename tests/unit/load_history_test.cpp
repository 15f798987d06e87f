// Tests of LoadHistory: the ring of per-second samples and its statistics, against values
// computed by hand.
#include "monitor/loading/load_history.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace monitor {
namespace {

using Values = std::vector<std::optional<double>>;

constexpr std::optional<double> kGap = std::nullopt;

void push_all(LoadHistory& h, const Values& loads, double seconds = 1.0) {
    for (const auto& load : loads) h.push(load, seconds);
}

TEST(LoadHistory, StartsEmpty) {
    LoadHistory h(5);
    EXPECT_EQ(h.size(), 0u);
    EXPECT_EQ(h.capacity(), 5u);
    EXPECT_FALSE(h.stats().has_value());
    EXPECT_TRUE(h.values().empty());
    EXPECT_TRUE(h.empty_of_data());
}

TEST(LoadHistory, CapacityIsAtLeastOne) {
    LoadHistory h(0);
    EXPECT_EQ(h.capacity(), 1u);
    h.push(10, 1);
    h.push(20, 1);
    EXPECT_EQ(h.size(), 1u);
    EXPECT_EQ(h.values(), (Values{20.0}));
}

TEST(LoadHistory, BasicStatistics) {
    LoadHistory h(5);
    push_all(h, {10, 20, 30});
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(h.capacity(), 5u);

    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 20.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 30.0);
    ASSERT_TRUE(st->avg_prev_sec.has_value());
    EXPECT_DOUBLE_EQ(*st->avg_prev_sec, 30.0);
    EXPECT_EQ(st->samples, 3u);
}

TEST(LoadHistory, SingleSample) {
    LoadHistory h(60);
    h.push(42.5, 1.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 42.5);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 42.5);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 42.5);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 42.5);
    EXPECT_EQ(st->samples, 1u);
}

TEST(LoadHistory, MinAndMaxAnywhereInTheWindow) {
    LoadHistory h(6);
    push_all(h, {50, 5, 70, 95, 20, 60});
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->min_prev_min, 5.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 95.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 50.0);  // 300 / 6
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 60.0);
}

TEST(LoadHistory, AverageIsTimeWeighted) {
    LoadHistory h(5);
    h.push(10, 1.0);
    h.push(40, 2.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);  // (10*1 + 40*2) / 3
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 40.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 40.0);
    EXPECT_EQ(st->samples, 2u);
}

TEST(LoadHistory, TimeWeightingWithUnevenTicks) {
    LoadHistory h(5);
    h.push(100, 0.5);
    h.push(0, 1.5);
    h.push(50, 2.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 37.5);  // (50 + 0 + 100) / 4
}

TEST(LoadHistory, WrapAroundKeepsOnlyTheNewest) {
    LoadHistory h(3);
    push_all(h, {10, 20, 30, 40, 50});
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(h.capacity(), 3u);
    EXPECT_EQ(h.values(), (Values{30.0, 40.0, 50.0}));

    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 40.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 30.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 50.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 50.0);
    EXPECT_EQ(st->samples, 3u);
}

TEST(LoadHistory, WrapAroundManyTimes) {
    LoadHistory h(4);
    for (int i = 1; i <= 23; ++i) h.push(i, 1.0);
    EXPECT_EQ(h.values(), (Values{20.0, 21.0, 22.0, 23.0}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 21.5);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 20.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 23.0);
}

TEST(LoadHistory, OldWeightsLeaveWithTheirSamples) {
    LoadHistory h(2);
    h.push(100, 10.0);  // leaves the window below
    h.push(10, 1.0);
    h.push(40, 2.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 40.0);
}

TEST(LoadHistory, GapsAreExcluded) {
    LoadHistory h(5);
    h.push(10, 1.0);
    h.push(std::nullopt, 5.0);
    h.push(50, 1.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 50.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 50.0);
    EXPECT_EQ(st->samples, 2u);
    EXPECT_EQ(h.size(), 3u);
}

TEST(LoadHistory, GapsDoNotCountAsZero) {
    LoadHistory h(5);
    push_all(h, {80, kGap, kGap, 60});
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->min_prev_min, 60.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 70.0);
}

TEST(LoadHistory, NewestGapHasNoPreviousSecond) {
    LoadHistory h(5);
    push_all(h, {10, 20, kGap});
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_FALSE(st->avg_prev_sec.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 15.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 20.0);
    EXPECT_EQ(st->samples, 2u);

    h.push(70, 1.0);
    st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 70.0);
}

TEST(LoadHistory, AllGapsHaveNoStatistics) {
    LoadHistory h(3);
    push_all(h, {kGap, kGap});
    EXPECT_FALSE(h.stats().has_value());
    EXPECT_EQ(h.size(), 2u);
    EXPECT_TRUE(h.empty_of_data());
}

TEST(LoadHistory, ValidSamplesAgeOutBehindGaps) {
    LoadHistory h(3);
    push_all(h, {25, kGap, kGap});
    ASSERT_TRUE(h.stats().has_value());
    EXPECT_EQ(h.stats()->samples, 1u);
    h.push(std::nullopt, 1.0);
    EXPECT_FALSE(h.stats().has_value());
    EXPECT_TRUE(h.empty_of_data());
}

TEST(LoadHistory, LoadsAreClamped) {
    LoadHistory h(5);
    h.push(-5, 1.0);
    h.push(150, 1.0);
    EXPECT_EQ(h.values(), (Values{0.0, 100.0}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->min_prev_min, 0.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 100.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 50.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 100.0);
    EXPECT_EQ(st->samples, 2u);
}

TEST(LoadHistory, NanIsAGap) {
    LoadHistory h(5);
    h.push(40, 1.0);
    h.push(std::numeric_limits<double>::quiet_NaN(), 1.0);
    EXPECT_EQ(h.values(), (Values{40.0, kGap}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->samples, 1u);
    EXPECT_FALSE(st->avg_prev_sec.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 40.0);
    EXPECT_FALSE(std::isnan(st->min_prev_min));
    EXPECT_FALSE(std::isnan(st->max_prev_min));
}

TEST(LoadHistory, OnlyNanHasNoStatistics) {
    LoadHistory h(2);
    h.push(std::numeric_limits<double>::quiet_NaN(), 1.0);
    EXPECT_FALSE(h.stats().has_value());
    EXPECT_TRUE(h.empty_of_data());
}

TEST(LoadHistory, ZeroLengthIntervalsOnlyUseThePlainMean) {
    LoadHistory h(5);
    h.push(10, 0.0);
    h.push(40, 0.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 25.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 40.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 40.0);
    EXPECT_EQ(st->samples, 2u);
}

TEST(LoadHistory, ZeroLengthIntervalsCarryNoWeight) {
    LoadHistory h(5);
    h.push(10, 0.0);
    h.push(40, 1.0);
    h.push(70, 1.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 55.0);  // (40 + 70) / 2
    EXPECT_DOUBLE_EQ(st->min_prev_min, 10.0);  // still a sample for min and max
    EXPECT_EQ(st->samples, 3u);
}

TEST(LoadHistory, NegativeAndNanDurationsCarryNoWeight) {
    LoadHistory h(5);
    h.push(90, -3.0);
    h.push(80, std::numeric_limits<double>::quiet_NaN());
    h.push(20, 2.0);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 20.0);
    EXPECT_DOUBLE_EQ(st->max_prev_min, 90.0);
    EXPECT_EQ(st->samples, 3u);
}

TEST(LoadHistory, AverageStaysWithinMinAndMax) {
    LoadHistory h(3);
    push_all(h, {33.3, 33.3, 33.3}, 0.1);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_GE(st->avg_prev_min, st->min_prev_min);
    EXPECT_LE(st->avg_prev_min, st->max_prev_min);
    EXPECT_NEAR(st->avg_prev_min, 33.3, 1e-5);  // samples are kept as floats
}

TEST(LoadHistory, ValuesOldestFirstWithGaps) {
    LoadHistory h(4);
    push_all(h, {10, kGap, 30});
    EXPECT_EQ(h.values(), (Values{10.0, kGap, 30.0}));
    push_all(h, {kGap, 50, 60});
    EXPECT_EQ(h.values(), (Values{30.0, kGap, 50.0, 60.0}));
}

TEST(LoadHistory, ResizeSmallerKeepsTheNewest) {
    LoadHistory h(5);
    push_all(h, {10, 20, 30, 40, 50});
    h.resize(2);
    EXPECT_EQ(h.capacity(), 2u);
    EXPECT_EQ(h.size(), 2u);
    EXPECT_EQ(h.values(), (Values{40.0, 50.0}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 45.0);
    EXPECT_DOUBLE_EQ(st->min_prev_min, 40.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 50.0);

    h.push(60, 1.0);
    EXPECT_EQ(h.values(), (Values{50.0, 60.0}));
}

TEST(LoadHistory, ResizeSmallerAfterWrapAround) {
    LoadHistory h(3);
    push_all(h, {1, 2, 3, 4, kGap});  // ring holds 3, 4, gap with the write position inside
    h.resize(2);
    EXPECT_EQ(h.values(), (Values{4.0, kGap}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_FALSE(st->avg_prev_sec.has_value());
    EXPECT_EQ(st->samples, 1u);
    h.push(7, 1.0);
    EXPECT_EQ(h.values(), (Values{kGap, 7.0}));
}

TEST(LoadHistory, ResizeSmallerThanTheContentOfAPartialRing) {
    LoadHistory h(10);
    push_all(h, {10, 20, 30, 40});
    h.resize(3);
    EXPECT_EQ(h.values(), (Values{20.0, 30.0, 40.0}));
}

TEST(LoadHistory, ResizeToOneKeepsTheNewest) {
    LoadHistory h(4);
    push_all(h, {10, 20, 30});
    h.resize(0);  // at least one
    EXPECT_EQ(h.capacity(), 1u);
    EXPECT_EQ(h.values(), (Values{30.0}));
}

TEST(LoadHistory, ResizeLargerKeepsAll) {
    LoadHistory h(3);
    push_all(h, {10, 20, 30, 40});  // wrapped: 20, 30, 40
    h.resize(5);
    EXPECT_EQ(h.capacity(), 5u);
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(h.values(), (Values{20.0, 30.0, 40.0}));
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);
    EXPECT_DOUBLE_EQ(st->avg_prev_sec.value_or(-1), 40.0);

    push_all(h, {50, 60});
    EXPECT_EQ(h.values(), (Values{20.0, 30.0, 40.0, 50.0, 60.0}));
    h.push(70, 1.0);
    EXPECT_EQ(h.values(), (Values{30.0, 40.0, 50.0, 60.0, 70.0}));
}

TEST(LoadHistory, ResizeKeepsWeights) {
    LoadHistory h(4);
    h.push(0, 5.0);
    h.push(10, 1.0);
    h.push(40, 2.0);
    h.resize(2);
    auto st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);
    h.resize(8);
    st = h.stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_DOUBLE_EQ(st->avg_prev_min, 30.0);
}

TEST(LoadHistory, ResizeToTheSameCapacityChangesNothing) {
    LoadHistory h(3);
    push_all(h, {10, 20, 30, 40});
    h.resize(3);
    EXPECT_EQ(h.values(), (Values{20.0, 30.0, 40.0}));
    h.push(50, 1.0);
    EXPECT_EQ(h.values(), (Values{30.0, 40.0, 50.0}));
}

TEST(LoadHistory, ResizeAnEmptyHistory) {
    LoadHistory h(3);
    h.resize(6);
    EXPECT_EQ(h.size(), 0u);
    EXPECT_EQ(h.capacity(), 6u);
    EXPECT_FALSE(h.stats().has_value());
    h.push(12, 1.0);
    EXPECT_EQ(h.values(), (Values{12.0}));
}

TEST(LoadHistory, EmptyOfData) {
    LoadHistory h(2);
    EXPECT_TRUE(h.empty_of_data());
    h.push(std::nullopt, 1.0);
    EXPECT_TRUE(h.empty_of_data());
    h.push(0.0, 1.0);  // a valid zero load is data
    EXPECT_FALSE(h.empty_of_data());
    h.push(std::nullopt, 1.0);
    EXPECT_FALSE(h.empty_of_data());
    h.push(std::nullopt, 1.0);
    EXPECT_TRUE(h.empty_of_data());
}

}  // namespace
}  // namespace monitor
