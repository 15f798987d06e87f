// The history's second as bytes (encode/decode), a minute folded from seconds, and a range of
// them summed up as the window is (HistoryRange).
#include "monitor/loading/history_record.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "monitor/loading/history_range.hpp"

namespace monitor {
namespace {

using namespace std::chrono_literals;

StateShares shares(double user, double idle) {
    StateShares s;
    s[TimeState::User] = user;
    s[TimeState::Idle] = idle;
    return s;
}

// Two sources as the engine has them: procstat with states, probe without; cpu1 a gap.
HistorySecond a_second(double load0, double load2) {
    HistorySecond s;
    s.seconds = 1.002;
    HistorySource probe{
        .name = "probe",
        .machine = (load0 + load2) / 2,
        .has_states = false,
        .machine_states = std::nullopt,
        .cpus = {
            {0, load0, std::nullopt}, {1, std::nullopt, std::nullopt}, {2, load2, std::nullopt}}};
    HistorySource procstat{.name = "procstat",
                           .machine = (load0 + load2) / 2,
                           .has_states = true,
                           .machine_states = shares((load0 + load2) / 2, 100 - (load0 + load2) / 2),
                           .cpus = {{0, load0, shares(load0, 100 - load0)},
                                    {1, std::nullopt, std::nullopt},
                                    {2, load2, shares(load2, 100 - load2)}}};
    s.sources = {probe, procstat};
    return s;
}

TEST(HistoryRecord, RoundTripsToAHundredthOfAPercent) {
    const auto second = a_second(12.3456, 99.999);
    auto bytes = encode_history_second(second);
    ASSERT_TRUE(bytes.has_value()) << bytes.error().to_string();
    // 6 of header; probe 6 + 3 x 4; procstat 6 + 20 + 3 x 24.
    EXPECT_EQ(bytes->size(), 6u + 18u + 98u);
    auto back = decode_history_second(*bytes);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_NEAR(back->seconds, 1.002, 1e-6);
    ASSERT_EQ(back->sources.size(), 2u);
    const auto& p = back->sources[1];
    EXPECT_EQ(p.name, "procstat");
    EXPECT_TRUE(p.has_states);
    ASSERT_EQ(p.cpus.size(), 3u);
    EXPECT_NEAR(*p.cpus[0].load, 12.35, 1e-9);
    EXPECT_FALSE(p.cpus[1].load.has_value());
    EXPECT_FALSE(p.cpus[1].states.has_value());
    EXPECT_NEAR(*p.cpus[2].load, 100.0, 1e-9);
    EXPECT_NEAR((*p.cpus[0].states)[TimeState::Idle], 87.65, 1e-9);
    EXPECT_FALSE(back->sources[0].has_states);
    EXPECT_EQ(back->sources[0].cpus[2].cpu, 2);
}

TEST(HistoryRecord, TheBytesReadEncodeAgainToThemselves) {
    // An interval whose microseconds, divided and multiplied by 10^6, come back a hair under
    // (a truncating encoder lost a microsecond at each round; found by fuzz-history_bytes).
    const std::vector<std::uint8_t> bytes{0x01, 0x00, 0x31, 0xdb, 0x03, 0x01, 0x01, 0x00,
                                          0x65, 0x00, 0x01, 0x00, 0x87, 0x00, 0x00, 0x13};
    auto second = decode_history_second(bytes);
    ASSERT_TRUE(second.has_value()) << second.error().to_string();
    auto again = encode_history_second(*second);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, bytes);
}

TEST(HistoryRecord, RefusesWhatItCannotKeep) {
    HistorySecond s;
    s.sources.push_back({.name = "perf",
                         .machine = 1,
                         .has_states = false,
                         .machine_states = std::nullopt,
                         .cpus = {}});
    auto r = encode_history_second(s);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("\"perf\""), std::string::npos) << r.error().message;
    s.sources[0].name = "probe";
    s.sources[0].cpus.push_back({70000, 1.0, std::nullopt});
    r = encode_history_second(s);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("70000"), std::string::npos) << r.error().message;
}

TEST(HistoryRecord, BytesNotWrittenByItAreNamedAndRefused) {
    auto good = *encode_history_second(a_second(10, 20));
    EXPECT_FALSE(decode_history_second({}).has_value());
    // Every cut is refused, never read past.
    for (std::size_t n = 0; n < good.size(); ++n) {
        auto r = decode_history_second(std::span(good).first(n));
        ASSERT_FALSE(r.has_value()) << n;
        EXPECT_EQ(r.error().status, Status::BadData);
    }
    auto extra = good;
    extra.push_back(0);
    EXPECT_FALSE(decode_history_second(extra).has_value());
    auto version = good;
    version[0] = 2;
    auto r = decode_history_second(version);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("format 2"), std::string::npos) << r.error().message;
    auto over = good;
    over[6 + 2] = 0x11;  // the probe's machine load: 0x2711 = 10,001
    over[6 + 3] = 0x27;
    EXPECT_FALSE(decode_history_second(over).has_value());
    auto source = good;
    source[6] = 9;
    EXPECT_FALSE(decode_history_second(source).has_value());
}

TEST(HistoryRecord, AMinuteFoldsToItsMeanLowestAndHighest) {
    std::vector<HistorySecond> seconds;
    for (int i = 0; i < 60; ++i) {
        auto s = a_second(i < 30 ? 10 : 30, 50);
        s.seconds = 1;
        seconds.push_back(s);
    }
    seconds[5].sources[1].cpus[0].load = std::nullopt;  // a gap carries no weight
    seconds[5].sources[1].cpus[0].states = std::nullopt;
    const auto fold = fold_history_seconds(seconds);
    EXPECT_DOUBLE_EQ(fold.mean.seconds, 60);
    ASSERT_EQ(fold.mean.sources.size(), 2u);
    const auto& mean = fold.mean.sources[1];
    EXPECT_NEAR(*mean.cpus[0].load, (29 * 10 + 30 * 30) / 59.0, 1e-9);
    EXPECT_NEAR((*mean.cpus[0].states)[TimeState::User], (29 * 10 + 30 * 30) / 59.0, 1e-9);
    EXPECT_FALSE(mean.cpus[1].load.has_value());
    EXPECT_DOUBLE_EQ(*fold.low.sources[1].cpus[0].load, 10);
    EXPECT_DOUBLE_EQ(*fold.high.sources[1].cpus[0].load, 30);
    EXPECT_FALSE(fold.low.sources[1].has_states);
    EXPECT_TRUE(encode_history_second(fold.mean).has_value());
}

using Time = HistoryRange::Time;
const Time kStart = Time{} + 1'700'000'000s;

TEST(HistoryRange, SumsUpTheSecondsAsTheWindowWould) {
    HistoryRange range(LoadingQuery{.per_cpu = true, .history = true, .states = true});
    range.add(kStart, a_second(10, 40));
    range.add(kStart + 1s, a_second(20, 40));
    range.add(kStart + 5s, a_second(60, 40));  // 3 seconds missing: gaps
    const auto r = range.report();
    EXPECT_EQ(r.window_seconds, 6u);
    EXPECT_EQ(r.timestamp, kStart + 5s);
    ASSERT_EQ(r.machine.size(), 2u);
    EXPECT_EQ(r.machine[0].source, "probe");
    ASSERT_EQ(r.cpus.size(), 3u);
    const auto& cpu0 = r.cpus[0].sources[1];
    ASSERT_TRUE(cpu0.stats.has_value());
    EXPECT_NEAR(cpu0.stats->avg_prev_min, 30, 1e-9);
    EXPECT_DOUBLE_EQ(cpu0.stats->min_prev_min, 10);
    EXPECT_DOUBLE_EQ(cpu0.stats->max_prev_min, 60);
    EXPECT_EQ(cpu0.stats->avg_prev_sec, 60);
    EXPECT_EQ(cpu0.stats->samples, 3u);
    ASSERT_EQ(cpu0.history.size(), 6u);
    EXPECT_EQ(cpu0.history[1], 20);
    EXPECT_FALSE(cpu0.history[2].has_value());
    EXPECT_FALSE(cpu0.history[4].has_value());
    EXPECT_EQ(cpu0.history[5], 60);
    ASSERT_TRUE(cpu0.states.has_value());
    EXPECT_NEAR(cpu0.states->avg[TimeState::User], 30, 1e-9);
    EXPECT_FALSE(r.cpus[1].sources[1].stats.has_value()) << "cpu1 was a gap throughout";
}

TEST(HistoryRange, AMinuteGivesItsMeanToEachSecondAndItsExtremes) {
    std::vector<HistorySecond> seconds(60, a_second(10, 40));
    for (auto& s : seconds) s.seconds = 1;
    seconds[7] = a_second(90, 40);
    seconds[7].seconds = 1;
    const auto fold = fold_history_seconds(seconds);
    HistoryRange range(LoadingQuery{.per_cpu = true, .history = true});
    range.add(kStart + 60s, fold.mean, &fold.low, &fold.high);
    auto after = a_second(20, 40);
    after.seconds = 1;
    range.add(kStart + 61s, after);
    const auto r = range.report();
    EXPECT_EQ(r.window_seconds, 61u) << "a minute and the second after it: no gap";
    const auto& cpu0 = r.cpus[0].sources[1];
    ASSERT_EQ(cpu0.history.size(), 61u);
    EXPECT_NEAR(*cpu0.history[0], (59 * 10 + 90) / 60.0, 1e-9);
    EXPECT_EQ(cpu0.history[60], 20);
    EXPECT_DOUBLE_EQ(cpu0.stats->max_prev_min, 90);
    EXPECT_DOUBLE_EQ(cpu0.stats->min_prev_min, 10);
    EXPECT_NEAR(cpu0.stats->avg_prev_min, (59 * 10 + 90 + 20) / 61.0, 1e-9);
    EXPECT_EQ(cpu0.stats->samples, 61u) << "a minute counts as its seconds";
}

TEST(HistoryRange, WithoutPerCpuOnlyTheMachine) {
    HistoryRange range(LoadingQuery{});
    range.add(kStart, a_second(10, 30));
    const auto r = range.report();
    EXPECT_TRUE(r.cpus.empty());
    ASSERT_EQ(r.machine.size(), 2u);
    EXPECT_TRUE(r.machine[1].history.empty());
    EXPECT_FALSE(r.machine[1].states.has_value());
    EXPECT_NEAR(r.machine[1].stats->avg_prev_min, 20, 1e-9);
}

}  // namespace
}  // namespace monitor
