#include "mon_status.hpp"

#include <cerrno>
#include <exception>
#include <iterator>

#include "monitor/status.hpp"

namespace monitor::mon {

namespace {

// The C constants, in the order of their values, beside the C++ statuses they equal.
// One per line, by hand: clang-format 14 reflows these continuation lines differently at each
// run.
// clang-format off
#define MON_STATUSES(X) \
    X(MON_SUCCESS, Success) \
    X(MON_ALLOCMEM, AllocMem) \
    X(MON_ALLOCMTX, AllocMtx) \
    X(MON_ALLOCWUT, AllocWut) \
    X(MON_BADSTATE, BadState) \
    X(MON_FREEMEM, FreeMem) \
    X(MON_FREEMTX, FreeMtx) \
    X(MON_FREEWUT, FreeWut) \
    X(MON_LOCKMTX, LockMtx) \
    X(MON_NOTRDY, NotRdy) \
    X(MON_NULLPTR, NullPtr) \
    X(MON_POLSLEEP, PolSleep) \
    X(MON_PRFRUN, PrfRun) \
    X(MON_TSKJOIN, TskJoin) \
    X(MON_TSKSPAWN, TskSpawn) \
    X(MON_NOPMU, NoPmu) \
    X(MON_PERM, Perm) \
    X(MON_NOEVENT, NoEvent) \
    X(MON_NODEV, NoDev) \
    X(MON_BUSY, Busy) \
    X(MON_IOERR, IoErr) \
    X(MON_BADARG, BadArg) \
    X(MON_BADDATA, BadData)
// clang-format on
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
// The structured record of the last failure (MON_error_info); its strings are literals.
thread_local MON_error_info last_info{};
// The innermost Step of the calling thread's MON call, and the innermost that an exception
// ended (the guard that catches it runs after every Step has ended).
thread_local const char* current_step = nullptr;
thread_local const char* thrown_step = nullptr;

MON_error_info cleared(MON_status s) noexcept {
    MON_error_info i{};
    i.status = s;
    i.call = "";
    i.purpose = "";
    i.task = "";
    i.cpu = -1;
    return i;
}

}  // namespace

MON_status fail(MON_status s, std::string why) {
    last_error_text = std::move(why);
    last_error_literal = nullptr;
    last_info = cleared(s);
    if (s == MON_ALLOCMEM && current_step != nullptr) last_info.purpose = current_step;
    return s;
}

MON_status fail_state(unsigned valid_states, unsigned state, std::string why) {
    fail(MON_BADSTATE, std::move(why));
    last_info.valid_states = valid_states;
    last_info.state = state;
    return MON_BADSTATE;
}

MON_status fail_alloc(std::uint64_t bytes, std::string why) {
    fail(MON_ALLOCMEM, std::move(why));
    last_info.size = bytes;
    return MON_ALLOCMEM;
}

MON_status fail(const Error& e, std::string why) {
    const auto s = static_cast<MON_status>(e.status);
    return s == MON_ALLOCMEM ? fail_alloc(e.bytes, std::move(why)) : fail(s, std::move(why));
}

MON_status fail_task(MON_status s, const char* task, int cpu, std::string why) {
    fail(s, std::move(why));
    last_info.task = task;
    last_info.cpu = cpu;
    return s;
}

Step::Step(const char* purpose) noexcept
    : purpose_(purpose), outer_(current_step), uncaught_(std::uncaught_exceptions()) {
    current_step = purpose;
}

Step::~Step() {
    if (std::uncaught_exceptions() > uncaught_ && thrown_step == nullptr) thrown_step = purpose_;
    current_step = outer_;
}

void begin_call() noexcept {
    thrown_step = nullptr;
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
    const char* step = thrown_step != nullptr ? thrown_step : current_step;
    thrown_step = nullptr;
    try {
        fail(status, std::string{call} + ": " + what +
                         (status == MON_ALLOCMEM && step != nullptr ? std::string{" ("} + step + ")"
                                                                    : std::string{}));
    } catch (...) {
        last_error_text.clear();
        last_error_literal = status == MON_ALLOCMEM ? "out of memory" : "an unexpected error";
        last_info = cleared(status);
    }
    last_info.call = call;
    if (status == MON_ALLOCMEM) last_info.purpose = step != nullptr ? step : call;
    return status;
}

const char* last_error() noexcept {
    return last_error_literal != nullptr ? last_error_literal : last_error_text.c_str();
}

void last_error_info(MON_error_info& info) noexcept {
    info = last_info;
    if (info.call == nullptr) info = cleared(MON_SUCCESS);  // no call has failed here yet
    info.message = last_error();
}

void failed_call(const char* call) noexcept {
    last_info.call = call;
    if (last_info.status == MON_ALLOCMEM &&
        (last_info.purpose == nullptr || *last_info.purpose == 0)) {
        last_info.purpose = call;
    }
}

const char* status_name(MON_status status) noexcept {
    return status < std::size(kStatusNames) ? kStatusNames[status] : nullptr;
}

}  // namespace monitor::mon
