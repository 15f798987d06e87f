// Tests of the MON_* C API's watchdog: set before the start, a missing device fails it, the
// IDLE task pets, MON_stop leaves it armed, the program pets it itself once MON is stopped
// (MON_pet_watchdog), and MON_set_watchdog(NULL, 0) disarms it. A FIFO
// stands in for /dev/watchdog.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

#include "mon_api_fixture.hpp"

namespace mon_api_test {
namespace {

// --- The watchdog ----------------------------------------------------------------------------
// A FIFO stands in for /dev/watchdog: the IDLE task's pets are NUL bytes, the magic close a
// 'V', and the end of the data tells that MON closed it.

class FifoReader {
  public:
    explicit FifoReader(const fs::path& path) : path_(path) {
        EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
        fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        EXPECT_GE(fd_, 0);
    }
    ~FifoReader() { ::close(fd_); }
    // Reads what is there; returns false once the writer has closed.
    bool Poll() {
        char buf[256];
        for (;;) {
            const ssize_t n = ::read(fd_, buf, sizeof buf);
            if (n > 0) {
                data_.append(buf, static_cast<std::size_t>(n));
                continue;
            }
            return !(n == 0 && !data_.empty());
        }
    }
    std::size_t Pets() {
        (void)Poll();
        return static_cast<std::size_t>(std::count(data_.begin(), data_.end(), '\0'));
    }
    const std::string& data() const { return data_; }

  private:
    fs::path path_;
    int fd_ = -1;
    std::string data_;
};

bool WaitPets(FifoReader& r, std::size_t n, std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    while (r.Pets() < n && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    return r.Pets() >= n;
}

TEST_F(MonApi, WatchdogIsSetBeforeStart) {
    EXPECT_BADSTATE(MON_set_watchdog("/dev/watchdog", 10), "MON_set_watchdog");
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    EXPECT_MON(MON_set_watchdog("dev/watchdog", 10), MON_BADARG);
    EXPECT_THAT(MON_last_error(), HasSubstr("not an absolute path"));
    EXPECT_MON(MON_set_watchdog("/dev/watchdog", 3601), MON_BADARG);
    EXPECT_MON(MON_set_watchdog(nullptr, 0), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_BADSTATE(MON_set_watchdog(nullptr, 0), "MON_set_watchdog");
}

TEST_F(MonApi, AMissingWatchdogFailsTheStart) {
    const fs::path dir = testing::TempDir();
    const std::string missing = (dir / "no-such-watchdog").string();
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_set_watchdog(missing.c_str(), 10), MON_SUCCESS);
    EXPECT_MON(MON_start(nullptr, nullptr), MON_NODEV);
    EXPECT_THAT(MON_last_error(), HasSubstr(missing));
    EXPECT_STATE(Initialized);
    EXPECT_TRUE(NoOtherThreadWithin(3000ms)) << "a failed start left a task running";
}

// The IDLE task pets; MON_stop leaves the watchdog armed (open, not petted) and MON_start
// pets it again; MON_set_watchdog(NULL, 0) disarms it.
TEST_F(MonApi, StopLeavesTheWatchdogArmed) {
    // Should an assertion end the test with the FIFO still open, a pet into it without a
    // reader must fail, not kill the test program.
    ::signal(SIGPIPE, SIG_IGN);
    test_support::ScratchDir dir;
    FifoReader reader(dir.path() / "watchdog");
    const std::string device = (dir.path() / "watchdog").string();
    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_set_watchdog(device.c_str(), 10), MON_SUCCESS);
    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    // Pets need idle time on every CPU: on a machine busy with other tests they take longer.
    ASSERT_TRUE(WaitPets(reader, 3, 20s)) << "pets: " << reader.Pets();

    // While MON runs, only the IDLE task pets.
    EXPECT_BADSTATE(MON_pet_watchdog(), "MON_pet_watchdog");
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    std::this_thread::sleep_for(100ms);
    std::size_t stopped = reader.Pets();
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(reader.Pets(), stopped) << "petted after MON_stop";
    EXPECT_TRUE(reader.Poll()) << "MON_stop closed the watchdog";
    EXPECT_EQ(reader.data().find('V'), std::string::npos) << "MON_stop disarmed the watchdog";
    // Flight code running on with MON stopped pets it itself (MON's watchdogSet).
    ASSERT_MON(MON_pet_watchdog(), MON_SUCCESS);
    ASSERT_MON(MON_pet_watchdog(), MON_SUCCESS);
    EXPECT_EQ(reader.Pets(), stopped + 2) << "MON_pet_watchdog did not pet";
    stopped = reader.Pets();

    ASSERT_MON(MON_start(nullptr, nullptr), MON_SUCCESS);
    EXPECT_TRUE(WaitPets(reader, stopped + 2, 20s)) << "no pets after MON_start again";
    ASSERT_MON(MON_stop(), MON_SUCCESS);
    ASSERT_MON(MON_shutdown(), MON_SUCCESS);
    EXPECT_TRUE(reader.Poll()) << "MON_shutdown closed the watchdog";
    // Still armed after MON_shutdown: still petted on request.
    const std::size_t shut = reader.Pets();
    ASSERT_MON(MON_pet_watchdog(), MON_SUCCESS);
    EXPECT_EQ(reader.Pets(), shut + 1);

    ASSERT_MON(MON_initialize(), MON_SUCCESS);
    ASSERT_MON(MON_set_watchdog(nullptr, 0), MON_SUCCESS);
    EXPECT_FALSE(reader.Poll()) << "still open after MON_set_watchdog(NULL, 0)";
    ASSERT_FALSE(reader.data().empty());
    EXPECT_EQ(reader.data().back(), 'V');
    // Disarmed: nothing to pet, and it says so.
    EXPECT_MON(MON_pet_watchdog(), MON_BADSTATE);
    EXPECT_THAT(MON_last_error(), HasSubstr("no watchdog is armed"));
}

}  // namespace
}  // namespace mon_api_test
