#include "standing_counters.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>

#include "monitor/perf/cgroup_target.hpp"

namespace monitord {

namespace perf = monitor::perf;
namespace protocol = monitor::protocol;

namespace {

// A standing session's periods: one second, ended on the loading tick.
constexpr monitor::CounterRunOptions kEverySecond{.duration = std::nullopt,
                                                  .interval = std::chrono::milliseconds(1000)};

std::string label(const StandingSessionConfig& c) {
    return fmt::format("{}{}[[counters]] '{}'", c.where, c.where.empty() ? "" : ": ", c.name);
}

}  // namespace

StandingCounters::StandingCounters(monitor::Runtime& runtime, Opener open,
                                   std::function<void()> schedule_changed)
    : runtime_(runtime), open_(std::move(open)), schedule_changed_(std::move(schedule_changed)) {}

StandingCounters::~StandingCounters() {
    for (auto& s : sessions_) {
        if (s.run != 0) runtime_.remove_run(s.run);
    }
}

void StandingCounters::configure(const std::vector<StandingSessionConfig>& tables,
                                 Clock::time_point now) {
    std::vector<Session> next;
    next.reserve(tables.size());
    for (const auto& table : tables) {
        auto old = std::find_if(sessions_.begin(), sessions_.end(),
                                [&](const Session& s) { return s.config.name == table.name; });
        if (old != sessions_.end() && old->config.same_session(table)) {
            // Counts on; only its place in the file may have moved.
            old->config.where = table.where;
            next.push_back(std::move(*old));
            sessions_.erase(old);
            continue;
        }
        if (old != sessions_.end()) {
            spdlog::info("{}: changed; restarting it", label(table));
            close(*old);
            sessions_.erase(old);
        }
        Session s;
        s.config = table;
        open(s, now);
        next.push_back(std::move(s));
    }
    for (auto& gone : sessions_) {
        spdlog::info("{}: removed from the configuration; it stops", label(gone.config));
        close(gone);
    }
    sessions_ = std::move(next);
    schedule_changed_();
}

void StandingCounters::open(Session& s, Clock::time_point now) {
    auto session = open_(s.config.request);
    if (!session) {
        // Said once; the retries that fail the same way are quiet.
        if (session.error().message != s.error) {
            spdlog::warn("{}: cannot count: {}; tried again every {} s and at each reload",
                         label(s.config), session.error().message, kRetryInterval.count());
        }
        s.error = session.error().message;
        s.retry = now + kRetryInterval;
        return;
    }
    const auto& options = (*session)->options();
    s.shape.per_cpu = options.target.kind == perf::TargetKind::EachCpu;
    s.cgroup.clear();
    s.retry = Clock::time_point::max();
    if (options.target.kind == perf::TargetKind::Cgroup) {
        struct stat st {};
        auto dir = perf::cgroup_directory(options.cgroup_root, options.target.cgroup);
        if (dir && ::stat(dir->c_str(), &st) == 0) {
            s.cgroup = std::move(*dir);
            s.cgroup_ino = st.st_ino;
            s.retry = now + kRetryInterval;
        }
    }
    s.run = runtime_.add_run(std::move(*session), kEverySecond, now);
    if (s.paused) {
        if (auto r = runtime_.run(s.run)->pause(); !r) {
            spdlog::warn("{}: counting, not paused as it was: {}", label(s.config),
                         r.error().message);
            s.paused = false;
        }
    }
    spdlog::info("{}: counting {} on {}{}", label(s.config), s.config.request.events,
                 protocol::target_text(s.config.request),
                 s.error.empty() ? "" : " (it could not before)");
    s.error.clear();
}

void StandingCounters::close(Session& s) {
    if (s.run == 0) return;
    runtime_.remove_run(s.run);  // closes its counters
    s.run = 0;
}

bool StandingCounters::run_stepped(const monitor::Runtime::Due::RunStep& step,
                                   Clock::time_point now) {
    auto it = std::find_if(sessions_.begin(), sessions_.end(),
                           [&](const Session& s) { return s.run != 0 && s.run == step.id; });
    if (it == sessions_.end()) return false;
    if (!step.step) {
        close(*it);
        it->error = step.step.error().message;
        it->retry = now + kRetryInterval;
        spdlog::warn("{}: stopped counting: {}; tried again every {} s", label(it->config),
                     it->error, kRetryInterval.count());
        schedule_changed_();
    }
    return true;
}

bool StandingCounters::cgroup_replaced(const Session& s) {
    struct stat st {};
    return ::stat(s.cgroup.c_str(), &st) != 0 || st.st_ino != s.cgroup_ino;
}

void StandingCounters::retry_due(Clock::time_point now) {
    bool changed = false;
    for (auto& s : sessions_) {
        if (s.retry > now) continue;
        if (s.run != 0) {
            s.retry = now + kRetryInterval;
            if (!cgroup_replaced(s)) continue;
            spdlog::info(
                "{}: {} was removed or made again (a unit that restarted?); opening "
                "the session again",
                label(s.config), s.cgroup);
            close(s);
            changed = true;
        }
        open(s, now);
        changed = changed || s.run != 0;
    }
    if (changed) schedule_changed_();
}

const monitor::CounterRun* StandingCounters::run_of(const Session& s) const {
    return s.run == 0 ? nullptr : runtime_.run(s.run);
}

std::vector<protocol::StandingSession> StandingCounters::report(
    const std::optional<std::string>& name) const {
    std::vector<protocol::StandingSession> out;
    for (const auto& s : sessions_) {
        if (name && s.config.name != *name) continue;
        protocol::StandingSession m;
        m.name = s.config.name;
        m.request = s.config.request;
        m.source = s.config.where;
        const auto* run = run_of(s);
        m.counting = run != nullptr;
        if (run == nullptr) {
            m.error = s.error;
        } else {
            const auto& plan = run->session().plan();
            m.plan = protocol::make_plan_message(plan);
            // Before the first tick there are no readings yet.
            if (run->periods() > 0) {
                const auto& online = runtime_.engine().online_cpus();
                m.totals = protocol::make_report(plan, run->totals(), s.shape, std::nullopt, false,
                                                 online);
                m.last = protocol::make_report(plan, run->period(), s.shape, run->periods(), false,
                                               online);
            }
        }
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<std::string> StandingCounters::names() const {
    std::vector<std::string> out;
    out.reserve(sessions_.size());
    for (const auto& s : sessions_) out.push_back(s.config.name);
    return out;
}

bool StandingCounters::has(const std::string& name) const {
    return std::ranges::any_of(sessions_, [&](const Session& s) { return s.config.name == name; });
}

monitor::Result<std::pair<StandingCounters::Session*, monitor::CounterRun*>>
StandingCounters::counting(const std::string& name) {
    auto it =
        std::ranges::find_if(sessions_, [&](const Session& s) { return s.config.name == name; });
    if (it == sessions_.end()) {
        return monitor::fail(monitor::Status::BadArg,
                             fmt::format("no standing session '{}'", name));
    }
    auto* run = it->run == 0 ? nullptr : runtime_.run(it->run);
    if (run == nullptr) {
        return monitor::fail(
            monitor::Status::NotRdy,
            fmt::format("standing session '{}' is not counting: {}", name, it->error));
    }
    return std::pair{&*it, run};
}

monitor::Result<protocol::CounterReport> StandingCounters::reset(const std::string& name) {
    auto found = counting(name);
    if (!found) return std::unexpected(found.error());
    auto [s, run] = *found;
    auto before = run->reset();
    if (!before) return std::unexpected(before.error());
    return protocol::make_report(run->session().plan(), *before, s->shape, std::nullopt, false,
                                 runtime_.engine().online_cpus());
}

monitor::Result<protocol::CounterReport> StandingCounters::set_paused(const std::string& name,
                                                                      bool paused) {
    auto found = counting(name);
    if (!found) return std::unexpected(found.error());
    auto [s, run] = *found;
    auto now = paused ? run->pause() : run->resume();
    if (!now) return std::unexpected(now.error());
    s->paused = paused;
    return protocol::make_report(run->session().plan(), *now, s->shape, std::nullopt, false,
                                 runtime_.engine().online_cpus());
}

std::vector<std::string> StandingCounters::sharing(const perf::Plan& plan) const {
    std::vector<std::string> out;
    for (const auto& s : sessions_) {
        const auto* run = run_of(s);
        if (run != nullptr && perf::shares_counters(plan, run->session().plan())) {
            out.push_back(s.config.name);
        }
    }
    return out;
}

}  // namespace monitord
