// The MON C API's watchdog under load, with a FIFO in place of /dev/watchdog: the IDLE task
// keeps petting a machine that is busy but not starved, and stops when every CPU is starved.
// Here rather than among the unit tests: the load must have the machine to itself.
#include <gtest/gtest.h>
#include <mon.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "daemon_process.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "watchdog_support.hpp"

namespace itest {
namespace {

class MonWatchdog : public testing::Test {
  protected:
    void SetUp() override {
        ::signal(SIGPIPE, SIG_IGN);  // a pet into the FIFO after its reader is gone fails
        ASSERT_EQ(MON_initialize(), MON_SUCCESS) << MON_last_error();
    }
    void TearDown() override {
        (void)MON_stop();
        (void)MON_set_watchdog(nullptr, 0);  // disarms
        (void)MON_shutdown();
    }
    // MON running with the FIFO as its watchdog and this timeout, first pets seen.
    void start(const FifoWatchdog& w, unsigned timeout_s) {
        ASSERT_EQ(MON_set_watchdog(w.path().c_str(), timeout_s), MON_SUCCESS) << MON_last_error();
        ASSERT_EQ(MON_start(nullptr, nullptr), MON_SUCCESS) << MON_last_error();
        ASSERT_TRUE(wait_pets(w, 2, 10s)) << "pets: " << w.pets();
    }
    ScratchDir dir_{ScratchDir::Everyone};
};

// At 95 % every CPU has 500 ms of idle time per 10 s: the IDLE task earns a credit on each
// about every 2 s, and the watchdog never goes 10 s without a pet.
TEST_F(MonWatchdog, PetsKeepComingWhileEveryCpuIs95PercentBusy) {
    FifoWatchdog w(dir_.path());
    start(w, 10);
    DutyCycle load(95);
    std::this_thread::sleep_for(2s);
    const auto seen = watch_pets(w, 20s, "95 % on every CPU");
    EXPECT_LT(seen.longest_gap, 10s) << "a watchdog with the 10 s timeout would have reset it";
    EXPECT_GE(seen.pets, 4u);
}

// A nice-0 loop on every CPU leaves each IDLE thread ~0.4 % of its CPU, 12 ms per 3 s: after
// the timeout, within which a credit under way may still complete, the pets stop.
TEST_F(MonWatchdog, PetsStopWhenEveryCpuIsStarved) {
    auto cpus = monitor::read_online_cpus("/sys");
    ASSERT_TRUE(cpus) << cpus.error().message;
    FifoWatchdog w(dir_.path());
    start(w, 3);
    BusyCpus load(*cpus);
    const auto began = Clock::now();
    std::this_thread::sleep_for(4s);
    const std::size_t before = w.pets();
    std::this_thread::sleep_for(3s);
    EXPECT_EQ(w.pets(), before) << "every CPU was busy; the pets should have stopped";
    const auto pets = w.pet_times();
    std::printf("the last pet came %.2f s after the load began\n",
                pets.empty() ? 0.0 : seconds(pets.back() - began));
}

}  // namespace
}  // namespace itest
