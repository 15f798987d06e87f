// Names a sampling run's samples on a thread of its own (a ProfileBuilder's work), in the
// order they were read, so that its owner never waits for what naming reads: other users'
// programs, which may be large, slow to read, or on a file system that stalls. The owner reads
// the rings and hands over each batch; the profiles of intervals and the whole profile come
// back, in order, through a descriptor it polls.
//
// The owner never waits for the thread, not even when it ends the namer: a thread still
// naming ends on its own once its batch is named, and then drops what it was not asked for.
// The thread shares no lock with any other (a SCHED_IDLE probe's or the watchdog's); it runs
// at the priority of the thread that started it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "monitor/perf/profile.hpp"
#include "monitor/perf/profile_builder.hpp"
#include "monitor/status.hpp"

namespace monitor::perf {

// The samples that may wait for naming; a batch that would pass it is counted as unnamed (its
// task records kept), so that a namer that falls behind costs a bounded memory.
inline constexpr std::size_t kMaxNamingBacklog = std::size_t{1} << 18;
// And the bytes of user stack they may hold (dwarf call chains: up to 64 KiB a sample), past
// which a batch is counted as unnamed too.
inline constexpr std::size_t kMaxNamingStackBytes = std::size_t{64} << 20;

class ProfileNamer {
  public:
    struct Named {
        bool whole = false;  // the whole profile (finish()); false: an interval
        Profile profile;
    };

    // Starts the thread, naming with `builder`; the error when no thread or descriptor can be
    // had.
    static Result<std::unique_ptr<ProfileNamer>> start(std::unique_ptr<ProfileBuilder> builder,
                                                       std::size_t max_backlog = kMaxNamingBacklog);
    ~ProfileNamer();
    ProfileNamer(const ProfileNamer&) = delete;
    ProfileNamer& operator=(const ProfileNamer&) = delete;

    // Queues a batch for naming (past the backlog its samples are counted as unnamed).
    void add(SampleBatch batch);
    // The batches queued so far end an interval: its profile comes as a Named.
    void end_interval();
    // The batches queued so far end the profile: the whole profile comes as a Named, after
    // which nothing is named.
    void finish();

    // Readable when take() has something.
    int fd() const;
    // What was named since the last call, in the order asked for.
    std::vector<Named> take();
    // The samples queued and not named yet.
    std::size_t backlog() const;

  private:
    struct State;
    explicit ProfileNamer(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

}  // namespace monitor::perf
