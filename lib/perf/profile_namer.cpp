#include "monitor/perf/profile_namer.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>

#include "monitor/unique_fd.hpp"

namespace monitor::perf {
namespace {

struct EndInterval {};
struct Finish {};
using Work = std::variant<SampleBatch, EndInterval, Finish>;

}  // namespace

struct ProfileNamer::State {
    std::mutex mutex;  // all below but the builder, which only the thread touches
    std::condition_variable wake;
    std::deque<Work> work;
    std::size_t backlog = 0;      // samples in `work` and in the batch being named
    std::size_t stack_bytes = 0;  // their copies of user stacks
    std::size_t max_backlog = 0;
    std::vector<Named> named;
    bool quit = false;  // the owner is gone
    UniqueFd ready;     // an eventfd
    std::unique_ptr<ProfileBuilder> builder;

    void publish(Named n) {
        {
            std::lock_guard lock(mutex);
            named.push_back(std::move(n));
        }
        const std::uint64_t one = 1;
        // Only a counter at its maximum refuses, and it is read at each take().
        (void)::write(ready.get(), &one, sizeof one);
    }

    void run() {
        ::pthread_setname_np(::pthread_self(), "profile-names");
        for (;;) {
            Work next;
            {
                std::unique_lock lock(mutex);
                wake.wait(lock, [&] { return quit || !work.empty(); });
                if (quit) return;
                next = std::move(work.front());
                work.pop_front();
            }
            if (auto* batch = std::get_if<SampleBatch>(&next)) {
                builder->add(*batch);
                std::lock_guard lock(mutex);
                backlog -= batch->samples.size();
                stack_bytes -= batch->stacks.size();
            } else if (std::holds_alternative<EndInterval>(next)) {
                publish({.whole = false, .profile = builder->take_interval()});
            } else {
                publish({.whole = true, .profile = builder->profile()});
                return;
            }
        }
    }
};

Result<std::unique_ptr<ProfileNamer>> ProfileNamer::start(std::unique_ptr<ProfileBuilder> builder,
                                                          std::size_t max_backlog) {
    auto state = std::make_shared<State>();
    state->ready = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!state->ready) return fail_errno(errno, "cannot make an eventfd for naming samples");
    state->builder = std::move(builder);
    state->max_backlog = max_backlog;
    try {
        // The thread holds the state: it outlives the namer when it is still naming.
        std::thread([state] { state->run(); }).detach();
    } catch (const std::system_error& e) {
        return fail(Status::IoErr,
                    fmt::format("cannot start a thread naming samples: {}", e.what()));
    }
    return std::unique_ptr<ProfileNamer>(new ProfileNamer(std::move(state)));
}

ProfileNamer::~ProfileNamer() {
    {
        std::lock_guard lock(state_->mutex);
        state_->quit = true;
        state_->work.clear();
    }
    state_->wake.notify_one();
}

void ProfileNamer::add(SampleBatch batch) {
    {
        std::lock_guard lock(state_->mutex);
        if (state_->backlog + batch.samples.size() > state_->max_backlog ||
            state_->stack_bytes + batch.stacks.size() > kMaxNamingStackBytes) {
            batch.drop_samples();
        }
        state_->backlog += batch.samples.size();
        state_->stack_bytes += batch.stacks.size();
        state_->work.emplace_back(std::move(batch));
    }
    state_->wake.notify_one();
}

void ProfileNamer::end_interval() {
    {
        std::lock_guard lock(state_->mutex);
        state_->work.emplace_back(EndInterval{});
    }
    state_->wake.notify_one();
}

void ProfileNamer::finish() {
    {
        std::lock_guard lock(state_->mutex);
        state_->work.emplace_back(Finish{});
    }
    state_->wake.notify_one();
}

int ProfileNamer::fd() const {
    return state_->ready.get();
}

std::vector<ProfileNamer::Named> ProfileNamer::take() {
    std::uint64_t count = 0;
    (void)::read(state_->ready.get(), &count, sizeof count);  // 0 or more: it is reset
    std::lock_guard lock(state_->mutex);
    return std::exchange(state_->named, {});
}

std::size_t ProfileNamer::backlog() const {
    std::lock_guard lock(state_->mutex);
    return state_->backlog;
}

}  // namespace monitor::perf
