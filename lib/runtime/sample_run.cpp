#include "monitor/runtime/sample_run.hpp"

#include <poll.h>

#include <algorithm>

#include "monitor/runtime/counter_run.hpp"

namespace monitor {

Result<void> SampleRunOptions::check() const {
    if (auto ok = CounterRunOptions{.duration = duration, .interval = interval}.check(); !ok) {
        return ok;
    }
    if (drain.count() < 1) return fail(Status::BadArg, "a drain of 0 ms: choose 1 ms or more");
    return {};
}

Result<std::unique_ptr<SampleRun>> SampleRun::start(std::unique_ptr<perf::ProfileSession> session,
                                                    SampleRunOptions options,
                                                    Clock::time_point started, UniqueFd pidfd,
                                                    Observer observer) {
    std::unique_ptr<SampleRun> run{
        new SampleRun(std::move(session), options, started, std::move(pidfd), std::move(observer))};
    if (!run->observer_) {
        auto namer = perf::ProfileNamer::start(run->session_->take_builder());
        if (!namer) return std::unexpected(namer.error());
        run->namer_ = std::move(*namer);
    }
    return run;
}

SampleRun::SampleRun(std::unique_ptr<perf::ProfileSession> session, SampleRunOptions options,
                     Clock::time_point started, UniqueFd pidfd, Observer observer)
    : session_(std::move(session)),
      options_(options),
      started_(started),
      pidfd_(std::move(pidfd)),
      observer_(std::move(observer)),
      drain_due_(started + options.drain),
      interval_started_(started) {
    if (options_.duration) ends_ = started + *options_.duration;
    if (options_.interval) interval_due_ = started + *options_.interval;
}

SampleRun::~SampleRun() = default;

void SampleRun::pace_with(const TickSchedule* ticks) {
    ticks_ = ticks;
    drain_due_ = next_drain(drain_due_ - options_.drain);
}

SampleRun::Clock::time_point SampleRun::next_drain(Clock::time_point now) const {
    const auto target = now + options_.drain;
    if (ticks_ != nullptr && options_.drain.count() % 1000 == 0) return ticks_->nearest(target);
    return target;
}

SampleRun::Clock::time_point SampleRun::next_due() const {
    if (ended_) return Clock::time_point::max();
    return std::min({drain_due_, interval_due_, ends_});
}

std::vector<int> SampleRun::fds() const {
    std::vector<int> fds;
    if (!ended_) {
        fds = session_->fds();
        if (pidfd_) fds.push_back(pidfd_.get());
    }
    if (namer_ && !whole_named_) fds.push_back(namer_->fd());
    return fds;
}

void SampleRun::read() {
    if (!namer_) {
        session_->drain(observer_);
        return;
    }
    perf::SampleBatch batch;
    session_->read(batch);
    namer_->add(std::move(batch));
}

bool SampleRun::exited() const {
    if (!pidfd_) return false;
    pollfd p{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

Result<SampleRun::Step> SampleRun::advance(Clock::time_point now) {
    Step step;
    if (!ended_) {
        read();
        drain_due_ = next_drain(now);
        if (now >= ends_) {
            if (auto ok = end(End::Duration, now, step); !ok) return std::unexpected(ok.error());
        } else if (exited()) {
            if (auto ok = end(End::Exited, now, step); !ok) return std::unexpected(ok.error());
        } else if (now >= interval_due_) {
            step.interval_ended = true;
            if (namer_) {
                asked_.emplace_back(interval_started_, now);
                namer_->end_interval();
            }
            interval_started_ = now;
            // The next on the schedule; one interval missed is not made up.
            interval_due_ += *options_.interval;
            if (interval_due_ <= now) interval_due_ = now + *options_.interval;
        }
    }
    take_named(step);
    return step;
}

Result<void> SampleRun::pause() {
    return ended_ ? Result<void>{} : session_->pause();
}

Result<void> SampleRun::resume() {
    return ended_ ? Result<void>{} : session_->resume();
}

Result<SampleRun::Step> SampleRun::finish(Clock::time_point now) {
    Step step;
    if (!ended_) {
        if (auto ok = end(End::Finished, now, step); !ok) return std::unexpected(ok.error());
    }
    take_named(step);
    return step;
}

Result<void> SampleRun::end(End why, Clock::time_point now, Step& step) {
    ended_ = true;
    step.ended = why;
    auto stopped = session_->disable();
    read();
    if (!stopped) return stopped;
    if (namer_) {
        asked_.emplace_back(started_, now);
        namer_->finish();
    }
    return {};
}

void SampleRun::take_named(Step& step) {
    if (!namer_) return;
    for (auto& named : namer_->take()) {
        if (asked_.empty()) break;  // never: the namer names what it was asked for
        const auto [from, to] = asked_.front();
        asked_.pop_front();
        whole_named_ = whole_named_ || named.whole;
        step.named.push_back(
            {.whole = named.whole, .profile = std::move(named.profile), .from = from, .to = to});
    }
}

}  // namespace monitor
