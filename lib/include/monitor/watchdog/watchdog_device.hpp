// A Linux watchdog device (/dev/watchdog): armed when opened, petted by keepalives, disarmed
// by the magic close (write 'V', then close). Closing without the 'V' leaves it armed: the
// machine resets when the timeout passes without a pet. See the kernel's
// Documentation/watchdog/watchdog-api.rst.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::watchdog {

// What WDIOC_GETSUPPORT says about the driver.
struct DeviceIdentity {
    std::string identity;       // "i6300ESB timer", "Software Watchdog"
    std::uint32_t options = 0;  // WDIOF_* the driver supports
    std::uint32_t firmware_version = 0;
};

class WatchdogDevice {
  public:
    // Opens `path`, which arms the watchdog, and asks for `timeout` (whole seconds); the
    // driver may grant another value, which timeout() reports. A driver without the ioctls
    // (ENOTTY) is still petted by writes. Errors: NODEV (no such device), BUSY (another
    // process holds it; the message names the usual holders and the choice), PERM, IOERR.
    // A device that fails after it was opened gets the magic close first (unless nowayout).
    // `sys_root`: where sysfs is, to tell nowayout.
    static Result<WatchdogDevice> open(const std::string& path, std::chrono::seconds timeout,
                                       const std::filesystem::path& sys_root = "/sys");

    WatchdogDevice(WatchdogDevice&&) = default;
    WatchdogDevice& operator=(WatchdogDevice&&) = default;
    // Closes without the magic character: the watchdog stays armed.
    ~WatchdogDevice() = default;

    const std::string& path() const { return path_; }
    // nullopt when the driver has no ioctls.
    const std::optional<DeviceIdentity>& identity() const { return identity_; }
    // The timeout in force (as granted), if the driver says.
    std::optional<int> timeout() const { return timeout_; }
    // Whether the driver reported, at open, that the last reset was its doing (WDIOF_CARDRESET).
    bool last_reset_by_watchdog() const { return card_reset_; }
    // Whether a magic close stops the watchdog (WDIOF_MAGICCLOSE); unknown drivers: assumed.
    bool magic_close() const;
    // Whether the driver was built or loaded with nowayout: once opened, it cannot be
    // stopped, and the machine resets unless something pets it (sysfs's nowayout of the
    // watchdog's class device). False when sysfs does not say.
    bool nowayout() const { return nowayout_; }

    // One keepalive (WDIOC_KEEPALIVE, or a write when the driver has no ioctls). Safe to call
    // from any thread, also while another reads time_left() or writes the magic 'V'.
    Result<void> pet() const;
    // The same, as 0 or the errno of the failure: neither allocates nor throws.
    int keepalive() const noexcept;
    // Seconds until the watchdog fires (WDIOC_GETTIMELEFT), when the driver can tell.
    std::optional<int> time_left() const;

    // The magic close: writes 'V' and closes, which stops the watchdog (unless the kernel was
    // built or loaded with nowayout).
    Result<void> disarm();
    // Its first half: writes 'V', and the watchdog stops when the descriptor is closed next
    // (close_armed()), by whichever thread lets go of it last.
    Result<void> write_magic() const;
    // Closes without the 'V': the watchdog keeps counting down.
    void close_armed() { fd_.reset(); }
    bool is_open() const { return static_cast<bool>(fd_); }

  private:
    WatchdogDevice(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

    std::string path_;
    UniqueFd fd_;
    bool ioctls_ = true;
    std::optional<DeviceIdentity> identity_;
    std::optional<int> timeout_;
    bool card_reset_ = false;
    bool nowayout_ = false;
};

// Whether the watchdog behind the character device `major`:`minor` has nowayout set, from
// `sys_root`/class/watchdog/watchdogN/nowayout. The legacy /dev/watchdog (misc 10:130) is
// watchdog0's; any other device is found through `sys_root`/dev/char/MAJOR:MINOR. nullopt
// when sysfs does not say (no such file: a kernel before 4.x, or no sysfs).
std::optional<bool> read_nowayout(const std::filesystem::path& sys_root, unsigned major,
                                  unsigned minor);

}  // namespace monitor::watchdog
