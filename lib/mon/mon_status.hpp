// How a MON call fails: the status it returns and, for the calling thread, what
// MON_last_error() says about it; and the guard that keeps whatever is thrown below a MON call
// from crossing extern "C".
#pragma once

#include <exception>
#include <new>
#include <string>
#include <system_error>

#include "mon.h"

namespace monitor::mon {

// Records why the calling thread's MON call failed with `s`; returns `s`.
MON_status fail(MON_status s, std::string why);
// The status an exception thrown below a MON call stands for (without allocating).
MON_status status_of(const std::system_error& e) noexcept;
// Records why `call` failed with `status` without letting anything out: when the message
// cannot be made (no memory), MON_last_error says so in a fixed sentence.
MON_status failed_by_exception(const char* call, MON_status status, const char* what) noexcept;

// What MON_last_error() returns for the calling thread.
const char* last_error() noexcept;
// "MON_PRFRUN" for MON_PRFRUN; nullptr for a value that is no status.
const char* status_name(MON_status status) noexcept;

// Runs the body of the MON call `call`. Nothing thrown below it crosses extern "C" (where it
// would end the caller's program): a failed allocation is ALLOCMEM, a thread that could not
// be started TSKSPAWN, a mutex LOCKMTX, anything else the closest status, and MON_last_error
// says what happened. The body leaves MON's state as it was when it throws.
template <class Body>
MON_status guarded(const char* call, Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return failed_by_exception(call, MON_ALLOCMEM, "out of memory");
    } catch (const std::system_error& e) {
        return failed_by_exception(call, status_of(e), e.what());
    } catch (const std::exception& e) {
        return failed_by_exception(call, MON_IOERR, e.what());
    } catch (...) {
        return failed_by_exception(call, MON_IOERR, "an unknown exception");
    }
}

}  // namespace monitor::mon
