// Status codes of libmonitor: the MON package's MSG codes, kept by name, plus the conditions
// Linux adds. The C API returns them as integers, the C++ API inside Result<T>, and the
// control protocol names them.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace monitor {

// Numeric values are part of the C API (mon.h): append, never reorder.
enum class Status : std::uint8_t {
    Success = 0,  // SUCCESS   the function succeeded
    AllocMem,     // ALLOCMEM  unable to allocate memory
    AllocMtx,     // ALLOCMTX  unable to allocate a mutex
    AllocWut,     // ALLOCWUT  unable to allocate a wake-up timer
    BadState,     // BADSTATE  not valid in the current state
    FreeMem,      // FREEMEM   unable to free memory
    FreeMtx,      // FREEMTX   unable to destroy a mutex
    FreeWut,      // FREEWUT   unable to destroy a wake-up timer
    LockMtx,      // LOCKMTX   unable to lock or unlock a mutex
    NotRdy,       // NOTRDY    not ready for the requested operation
    NullPtr,      // NULLPTR   a NULL pointer argument
    PolSleep,     // POLSLEEP  a task is unable to sleep
    PrfRun,       // PRFRUN    performance statistics are already being collected
    TskJoin,      // TSKJOIN   a task could not be stopped
    TskSpawn,     // TSKSPAWN  a task could not be started
    NoPmu,        // NOPMU     no performance monitoring unit for the requested events
    Perm,         // PERM      the kernel refused for lack of privilege
    NoEvent,      // NOEVENT   no such event
    NoDev,        // NODEV     no such device
    Busy,         // BUSY      the resource is held by someone else
    IoErr,        // IOERR     a system call failed
    BadArg,       // BADARG    an argument is invalid
    BadData,      // BADDATA   data read from the kernel or a peer is malformed
};

inline constexpr std::size_t kStatusCount = static_cast<std::size_t>(Status::BadData) + 1;

// "PRFRUN", "BADSTATE", ...
std::string_view status_name(Status s) noexcept;
// One sentence saying what the code means.
std::string_view status_message(Status s) noexcept;
// Inverse of status_name (exact, upper case); nullopt for an unknown name.
std::optional<Status> status_from_name(std::string_view name) noexcept;

// An error as a value: the code, and a message that names what failed and why.
struct Error {
    Status status = Status::IoErr;
    std::string message;
    // AllocMem: the bytes the failed request asked for, where the library made it itself (a
    // ring buffer's mapping); 0 when not known.
    std::uint64_t bytes = 0;

    // "PRFRUN: a session is already collecting (started by pid 42)".
    std::string to_string() const;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Status s, std::string message) {
    return std::unexpected<Error>(Error{s, std::move(message)});
}

// strerror(err) without strerror's shared buffer, which another thread may overwrite (the
// library's probes and the daemon's loop run at once): "No such file or directory". Every
// message the library and the programs make from an errno value comes from here.
std::string errno_message(int err);

// An error from a failed system call: "<what>: <errno_message(err)>", status from errno
// (EACCES/EPERM -> PERM, ENOENT/ENODEV/ENXIO -> NODEV, EBUSY -> BUSY, ENOMEM -> ALLOCMEM,
// anything else -> IOERR).
std::unexpected<Error> fail_errno(int err, std::string_view what);

}  // namespace monitor
