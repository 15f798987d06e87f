// Loading measured by the real daemon on this machine's real /proc/stat.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>

#include "daemon_process.hpp"

namespace itest {
namespace {

double cpu_load(const nlohmann::json& loading, int cpu) {
    for (const auto& c : loading["cpus"]) {
        if (c["cpu"] == cpu && c["procstat"].is_object() &&
            c["procstat"]["avg_prev_sec"].is_number()) {
            return c["procstat"]["avg_prev_sec"].get<double>();
        }
    }
    return -1;
}

// Keeps one CPU busy from a normal-priority thread pinned to it.
class Spinner {
  public:
    explicit Spinner(int cpu) : thread_([this, cpu] { spin(cpu); }) {}
    ~Spinner() {
        stop_ = true;
        thread_.join();
    }
    bool pinned() const { return pinned_; }

  private:
    void spin(int cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
        volatile unsigned long n = 0;
        while (!stop_.load(std::memory_order_relaxed)) n = n + 1;
    }

    std::atomic<bool> stop_{false};
    std::atomic<bool> pinned_{false};
    std::thread thread_;
};

TEST(LoadingLive, OneBusyCpuReadsBusy) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    auto cpus = d->call("GetStatus")["cpus"];
    ASSERT_FALSE(cpus.empty());
    const int target = cpus.back();
    ASSERT_TRUE(d->wait_samples(1));
    const double before = cpu_load(d->call("GetLoading", {{"per_cpu", true}}), target);
    ASSERT_GE(before, 0.0);

    double busy = -1;
    {
        Spinner spinner(target);
        // Two whole sampling intervals with the spinner running.
        std::this_thread::sleep_for(2200ms);
        ASSERT_TRUE(spinner.pinned());
        busy = cpu_load(d->call("GetLoading", {{"per_cpu", true}}), target);
    }
    // Loose bounds: the machine is shared, but a pinned spinning thread owns its CPU.
    EXPECT_GT(busy, 70.0) << "cpu" << target;
    EXPECT_LE(busy, 100.0);
    if (before < 50.0) {
        EXPECT_GT(busy, before + 30.0) << "cpu" << target << " did not get busier";
    }
}

TEST(LoadingLive, WindowHoldsAtMostHistorySecondsSamples) {
    Daemon::Options o;
    o.args = {"--history-seconds", "2"};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    std::this_thread::sleep_for(1500ms);  // at least one more tick
    auto j = d->call("GetLoading", {{"history", true}, {"per_cpu", true}});
    EXPECT_EQ(j["window_seconds"], 2);
    EXPECT_EQ(j["machine"]["procstat"]["samples"], 2);
    EXPECT_EQ(j["machine"]["procstat"]["history"].size(), 2u);
    for (const auto& c : j["cpus"]) EXPECT_EQ(c["procstat"]["history"].size(), 2u);
}

TEST(LoadingLive, ShowLoadingPrintsALinePerSecond) {
    Daemon::Options o;
    o.args = {"--show-loading"};
    auto d = Daemon::start(o);
    ASSERT_TRUE(d);
    ASSERT_TRUE(d->wait_samples(2));
    EXPECT_EQ(d->stop(SIGTERM), 0);
    auto log = d->log();
    std::size_t lines = 0;
    for (std::size_t p = log.find("procstat all"); p != std::string::npos;
         p = log.find("procstat all", p + 1)) {
        ++lines;
    }
    EXPECT_GE(lines, 2u) << log;
    EXPECT_NE(log.find("cpu0"), std::string::npos) << log;
}

TEST(LoadingLive, TimestampIsRecentWallClockTime) {
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    auto first = d->call("GetLoading");
    EXPECT_TRUE(first["timestamp"].is_null()) << "no sample can exist right after READY";
    ASSERT_TRUE(d->wait_samples(1));
    auto j = d->call("GetLoading");
    auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    ASSERT_TRUE(j["timestamp"].is_number_integer()) << j.dump();
    EXPECT_LE(j["timestamp"].get<long long>(), now);
    EXPECT_GT(j["timestamp"].get<long long>(), now - 5'000'000);
}

}  // namespace
}  // namespace itest
