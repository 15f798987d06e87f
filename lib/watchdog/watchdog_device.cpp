#include "monitor/watchdog/watchdog_device.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/watchdog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "monitor/status.hpp"
#include "monitor/text_file.hpp"

namespace monitor::watchdog {
namespace {

std::string open_error(const std::string& path, int err) {
    switch (err) {
        case ENOENT:
            return fmt::format(
                "{}: no such device; load a watchdog driver (the board's, or `modprobe "
                "softdog`), or turn the watchdog off (device = \"\")",
                path);
        case EBUSY:
            return fmt::format(
                "{}: busy: another process holds it, usually systemd (RuntimeWatchdogSec= in "
                "/etc/systemd/system.conf) or a watchdog daemon; only one may pet it. Let "
                "monitord have it (RuntimeWatchdogSec=0, or stop the other daemon), or leave "
                "it to them and turn monitord's off (device = \"\")",
                path);
        case EACCES:
        case EPERM:
            return fmt::format(
                "{}: permission denied: opening a watchdog needs root (or "
                "write access to the device)",
                path);
        default:
            return fmt::format("{}: {}", path, errno_message(err));
    }
}

Status open_status(int err) {
    switch (err) {
        case ENOENT:
        case ENXIO:
        case ENODEV:
            return Status::NoDev;
        case EBUSY:
            return Status::Busy;
        case EACCES:
        case EPERM:
            return Status::Perm;
        default:
            return Status::IoErr;
    }
}

}  // namespace

std::optional<bool> read_nowayout(const std::filesystem::path& sys_root, unsigned major,
                                  unsigned minor) {
    constexpr unsigned kMiscMajor = 10;
    constexpr unsigned kWatchdogMinor = 130;  // the legacy /dev/watchdog: watchdog0's
    const auto dir = major == kMiscMajor && minor == kWatchdogMinor
                         ? sys_root / "class/watchdog/watchdog0"
                         : sys_root / "dev/char" / fmt::format("{}:{}", major, minor);
    auto text = read_text_file(dir / "nowayout", 64);
    if (!text) return std::nullopt;
    const auto value = trim_space(*text);
    if (value == "1") return true;
    if (value == "0") return false;
    return std::nullopt;
}

Result<WatchdogDevice> WatchdogDevice::open(const std::string& path, std::chrono::seconds timeout,
                                            const std::filesystem::path& sys_root) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return fail(open_status(err), open_error(path, err));
    }
    WatchdogDevice d(path, UniqueFd(fd));
    if (struct stat st{}; ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode)) {
        d.nowayout_ = read_nowayout(sys_root, major(st.st_rdev), minor(st.st_rdev)).value_or(false);
    }

    watchdog_info info{};
    if (::ioctl(fd, WDIOC_GETSUPPORT, &info) != 0) {
        // ENOSYS: an emulator that passes no watchdog ioctl on (qemu-user).
        if (errno != ENOTTY && errno != EINVAL && errno != ENOSYS) {
            const int err = errno;
            (void)d.disarm();  // never leave armed a device we give up on
            return fail(Status::IoErr,
                        fmt::format("{}: WDIOC_GETSUPPORT: {}", path, errno_message(err)));
        }
        d.ioctls_ = false;  // a device without the watchdog ioctls: petted by writes
        return d;
    }
    d.identity_ = DeviceIdentity{
        std::string(reinterpret_cast<const char*>(info.identity),
                    strnlen(reinterpret_cast<const char*>(info.identity), sizeof info.identity)),
        info.options, info.firmware_version};

    // Ask for the timeout; the driver rounds it to what the hardware can do and says so.
    int granted = static_cast<int>(timeout.count());
    if ((info.options & WDIOF_SETTIMEOUT) != 0 && ::ioctl(fd, WDIOC_SETTIMEOUT, &granted) != 0) {
        const int err = errno;
        (void)d.disarm();  // never leave armed a device we give up on
        return fail(err == EINVAL ? Status::BadArg : Status::IoErr,
                    fmt::format("{}: a timeout of {} s: {}", path, timeout.count(),
                                err == EINVAL ? "out of the driver's range" : errno_message(err)));
    }
    if (int t = 0; ::ioctl(fd, WDIOC_GETTIMEOUT, &t) == 0 && t > 0) d.timeout_ = t;
    if (int boot = 0; ::ioctl(fd, WDIOC_GETBOOTSTATUS, &boot) == 0) {
        d.card_reset_ = (static_cast<unsigned>(boot) & WDIOF_CARDRESET) != 0;
    }
    return d;
}

bool WatchdogDevice::magic_close() const {
    return !identity_ || (identity_->options & WDIOF_MAGICCLOSE) != 0;
}

int WatchdogDevice::keepalive() const noexcept {
    if (!fd_) return EBADF;
    if (ioctls_) {
        int dummy = 0;
        if (::ioctl(fd_.get(), WDIOC_KEEPALIVE, &dummy) == 0) return 0;
        if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP) return errno;
    }
    // Any byte but 'V' is a keepalive.
    const char ping = '\0';
    return ::write(fd_.get(), &ping, 1) == 1 ? 0 : errno;
}

Result<void> WatchdogDevice::pet() const {
    if (!fd_) return fail(Status::BadState, path_ + ": not open");
    if (const int err = keepalive(); err != 0) {
        return fail(Status::IoErr, fmt::format("{}: keepalive: {}", path_, errno_message(err)));
    }
    return {};
}

std::optional<int> WatchdogDevice::time_left() const {
    int left = 0;
    if (!fd_ || !ioctls_ || ::ioctl(fd_.get(), WDIOC_GETTIMELEFT, &left) != 0) return std::nullopt;
    return left;
}

Result<void> WatchdogDevice::write_magic() const {
    if (!fd_) return {};
    const char magic = 'V';
    if (::write(fd_.get(), &magic, 1) != 1) {
        const int err = errno;
        return fail(Status::IoErr, fmt::format("{}: the magic close failed ({}); the watchdog "
                                               "stays armed",
                                               path_, errno_message(err)));
    }
    return {};
}

Result<void> WatchdogDevice::disarm() {
    auto written = write_magic();
    fd_.reset();
    return written;
}

}  // namespace monitor::watchdog
