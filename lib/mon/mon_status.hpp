// How a MON call fails: the status it returns and, for the calling thread, what
// MON_last_error() says about it; and the guard that keeps whatever is thrown below a MON call
// from crossing extern "C".
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <system_error>

#include "mon.h"
#include "monitor/status.hpp"

namespace monitor::mon {

// Records why the calling thread's MON call failed with `s`; returns `s`. The structured
// fields (MON_error_info) are cleared; the functions below set theirs.
MON_status fail(MON_status s, std::string why);
// BADSTATE: the states the call is valid in and the state MON is in (MON_STATE_* bits).
MON_status fail_state(unsigned valid_states, unsigned state, std::string why);
// ALLOCMEM for a request of `bytes` (0: not known); the purpose is the current Step's.
MON_status fail_alloc(std::uint64_t bytes, std::string why);
// The library's error `e` as the call's failure, said by `why`: its status (ALLOCMEM with the
// bytes asked for, where the library knows them).
MON_status fail(const Error& e, std::string why);
// TSKSPAWN or TSKJOIN: the task ("IDLE" or "POLL") and, for the IDLE task, the CPU of its
// thread (-1 for the POLL task).
MON_status fail_task(MON_status s, const char* task, int cpu, std::string why);

// What a MON call is doing, for MON_ALLOCMEM's purpose: while one lives, an allocation that
// fails in the calling thread was made for `purpose` (a literal), also when the failure is an
// exception that ends the Step on its way out. They nest.
class Step {
  public:
    explicit Step(const char* purpose) noexcept;
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

  private:
    const char* purpose_;
    const char* outer_;
    int uncaught_;
};

// Called by guarded() before a MON call's body: no Step of an earlier call is remembered.
void begin_call() noexcept;
// The status an exception thrown below a MON call stands for (without allocating).
MON_status status_of(const std::system_error& e) noexcept;
// Records why `call` failed with `status` without letting anything out: when the message
// cannot be made (no memory), MON_last_error says so in a fixed sentence.
MON_status failed_by_exception(const char* call, MON_status status, const char* what) noexcept;

// What MON_last_error() returns for the calling thread.
const char* last_error() noexcept;
// Fills `info` with what the calling thread's last failing MON call recorded.
void last_error_info(MON_error_info& info) noexcept;
// Records that the failure just recorded was `call`'s (a literal).
void failed_call(const char* call) noexcept;
// "MON_PRFRUN" for MON_PRFRUN; nullptr for a value that is no status.
const char* status_name(MON_status status) noexcept;

// Runs the body of the MON call `call`. Nothing thrown below it crosses extern "C" (where it
// would end the caller's program): a failed allocation is ALLOCMEM, a thread that could not
// be started TSKSPAWN, a mutex LOCKMTX, anything else the closest status, and MON_last_error
// says what happened. The body leaves MON's state as it was when it throws.
template <class Body>
MON_status guarded(const char* call, Body&& body) noexcept {
    begin_call();
    try {
        const MON_status s = body();
        if (s != MON_SUCCESS) failed_call(call);
        return s;
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
