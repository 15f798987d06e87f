#include "monitor/status.hpp"

#include <array>
#include <cerrno>
#include <cstring>

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
    msg += std::strerror(err);
    return fail(s, std::move(msg));
}

}  // namespace monitor
