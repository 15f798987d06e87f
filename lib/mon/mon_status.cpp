#include "mon_status.hpp"

#include <cerrno>
#include <iterator>

#include "monitor/status.hpp"

namespace monitor::mon {

namespace {

// The C constants, in the order of their values, beside the C++ statuses they equal.
#define MON_STATUSES(X)                                                                           \
    X(MON_SUCCESS, Success)                                                                       \
    X(MON_ALLOCMEM, AllocMem)                                                                     \
    X(MON_ALLOCMTX, AllocMtx)                                                                     \
    X(MON_ALLOCWUT, AllocWut)                                                                     \
    X(MON_BADSTATE, BadState)                                                                     \
    X(MON_FREEMEM, FreeMem)                                                                       \
    X(MON_FREEMTX, FreeMtx)                                                                       \
    X(MON_FREEWUT, FreeWut)                                                                       \
    X(MON_LOCKMTX, LockMtx) X(MON_NOTRDY, NotRdy) X(MON_NULLPTR, NullPtr)                         \
        X(MON_POLSLEEP, PolSleep) X(MON_PRFRUN, PrfRun) X(MON_TSKJOIN, TskJoin)                   \
            X(MON_TSKSPAWN, TskSpawn) X(MON_NOPMU, NoPmu) X(MON_PERM, Perm)                       \
                X(MON_NOEVENT, NoEvent) X(MON_NODEV, NoDev) X(MON_BUSY, Busy) X(MON_IOERR, IoErr) \
                    X(MON_BADARG, BadArg) X(MON_BADDATA, BadData)
#define MON_SAME(mon, cpp) static_assert((mon) == static_cast<unsigned>(Status::cpp));
MON_STATUSES(MON_SAME)
#undef MON_SAME
#define MON_VALUE(mon, cpp) mon,
constexpr unsigned kStatusValues[] = {MON_STATUSES(MON_VALUE)};
#undef MON_VALUE
#define MON_NAME(mon, cpp) #mon,
// MON_status_name's answers: literals, so that it never allocates.
constexpr const char* kStatusNames[] = {MON_STATUSES(MON_NAME)};
#undef MON_NAME
#undef MON_STATUSES
static_assert(std::size(kStatusValues) == monitor::kStatusCount, "mon.h lists every status");
static_assert(
    [] {
        for (unsigned i = 0; i < std::size(kStatusValues); ++i) {
            if (kStatusValues[i] != i) return false;
        }
        return true;
    }(),
    "the statuses are listed in the order of their values");

thread_local std::string last_error_text;
// Said instead of last_error when even the message could not be stored (no memory).
thread_local const char* last_error_literal = nullptr;

}  // namespace

MON_status fail(MON_status s, std::string why) {
    last_error_text = std::move(why);
    last_error_literal = nullptr;
    return s;
}

MON_status status_of(const std::system_error& e) noexcept {
    if (e.code().category() != std::generic_category() &&
        e.code().category() != std::system_category()) {
        return MON_IOERR;
    }
    switch (e.code().value()) {
        case ENOMEM:
            return MON_ALLOCMEM;
        case EAGAIN:  // std::thread: the limit of threads or their memory
            return MON_TSKSPAWN;
        case EDEADLK:
        case EBUSY:
            return MON_LOCKMTX;
        case EACCES:
        case EPERM:
            return MON_PERM;
        case ENOENT:
        case ENODEV:
            return MON_NODEV;
        default:
            return MON_IOERR;
    }
}

MON_status failed_by_exception(const char* call, MON_status status, const char* what) noexcept {
    try {
        return fail(status, std::string{call} + ": " + what);
    } catch (...) {
        last_error_text.clear();
        last_error_literal = status == MON_ALLOCMEM ? "out of memory" : "an unexpected error";
        return status;
    }
}

const char* last_error() noexcept {
    return last_error_literal != nullptr ? last_error_literal : last_error_text.c_str();
}

const char* status_name(MON_status status) noexcept {
    return status < std::size(kStatusNames) ? kStatusNames[status] : nullptr;
}

}  // namespace monitor::mon
