#include "monitor/status.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

namespace monitor {
namespace {

struct StatusInfo {
    std::string_view name;
    std::string_view message;
};

constexpr std::array<StatusInfo, kStatusCount> kStatusTable{{
    {"SUCCESS", "The function succeeded."},
    {"ALLOCMEM", "Unable to allocate memory."},
    {"ALLOCMTX", "Unable to allocate a mutex."},
    {"ALLOCWUT", "Unable to allocate a wake-up timer."},
    {"BADSTATE", "The operation is not valid in the current state."},
    {"FREEMEM", "Unable to free memory."},
    {"FREEMTX", "Unable to destroy a mutex."},
    {"FREEWUT", "Unable to destroy a wake-up timer."},
    {"LOCKMTX", "Unable to lock or unlock a mutex."},
    {"NOTRDY", "Not ready for the requested operation."},
    {"NULLPTR", "A NULL pointer was passed."},
    {"POLSLEEP", "A task is unable to sleep."},
    {"PRFRUN", "Performance statistics are already being collected."},
    {"TSKJOIN", "A task could not be stopped."},
    {"TSKSPAWN", "A task could not be started."},
    {"NOPMU", "No performance monitoring unit can count the requested events."},
    {"PERM", "The kernel refused the operation for lack of privilege."},
    {"NOEVENT", "No such event."},
    {"NODEV", "No such device."},
    {"BUSY", "The resource is held by someone else."},
    {"IOERR", "A system call failed."},
    {"BADARG", "An argument is invalid."},
    {"BADDATA", "Data read from the kernel or a peer is malformed."},
}};

// strerror_r is the GNU function with _GNU_SOURCE (which g++ and clang++ define for C++): it
// returns the message, in `buf` or a static string. The POSIX one (other C libraries) returns 0
// and fills `buf`, or an error number.
[[maybe_unused]] std::string strerror_r_message(const char* message, const char* /*buf*/,
                                                int /*err*/) {
    return message;
}
[[maybe_unused]] std::string strerror_r_message(int r, const char* buf, int err) {
    return r == 0 ? std::string{buf} : "Unknown error " + std::to_string(err);
}

const StatusInfo& info(Status s) noexcept {
    auto i = static_cast<std::size_t>(s);
    return kStatusTable[i < kStatusTable.size() ? i : static_cast<std::size_t>(Status::IoErr)];
}

}  // namespace

std::string_view status_name(Status s) noexcept {
    return info(s).name;
}

std::string_view status_message(Status s) noexcept {
    return info(s).message;
}

std::optional<Status> status_from_name(std::string_view name) noexcept {
    for (std::size_t i = 0; i < kStatusTable.size(); ++i) {
        if (kStatusTable[i].name == name) return static_cast<Status>(i);
    }
    return std::nullopt;
}

std::string Error::to_string() const {
    std::string s{status_name(status)};
    s += ": ";
    s += message.empty() ? status_message(status) : std::string_view{message};
    return s;
}

std::string errno_message(int err) {
    std::array<char, 256> buf{};
    return strerror_r_message(::strerror_r(err, buf.data(), buf.size()), buf.data(), err);
}

std::unexpected<Error> fail_errno(int err, std::string_view what) {
    Status s = Status::IoErr;
    switch (err) {
        case EACCES:
        case EPERM:
            s = Status::Perm;
            break;
        case ENOENT:
        case ENODEV:
        case ENXIO:
            s = Status::NoDev;
            break;
        case EBUSY:
            s = Status::Busy;
            break;
        case ENOMEM:
            s = Status::AllocMem;
            break;
        default:
            break;
    }
    std::string msg{what};
    msg += ": ";
    msg += errno_message(err);
    return fail(s, std::move(msg));
}

}  // namespace monitor
