#include "counter_service.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <system_error>

#include "perf_errors.hpp"

namespace monitord {

using monitor::Result;
using monitor::Status;
using monitor::varlink::Call;
using monitor::varlink::Reply;
using nlohmann::json;
namespace perf = monitor::perf;
namespace protocol = monitor::protocol;
namespace method = monitor::protocol::method;

namespace {

constexpr std::string_view kPrefix = "io.monitord.Monitor.";

std::string error_name(std::string_view member) {
    return std::string(kPrefix) + std::string(member);
}

}  // namespace

CounterService::CounterService(sd_event* event, VarlinkServer& server, monitor::Runtime& runtime,
                               std::function<void()> schedule_changed,
                               CounterServiceOptions options)
    : event_(event),
      server_(server),
      runtime_(runtime),
      schedule_changed_(std::move(schedule_changed)),
      options_(std::move(options)),
      standing_(
          runtime,
          [this](const protocol::CounterRequest& request)
              -> Result<std::unique_ptr<perf::PerfSession>> {
              if (!catalog_) return monitor::fail(Status::NoPmu, catalog_error_);
              // A standing session is root's configuration.
              std::vector<perf::PinnedProcess> pinned;
              auto session_options = options_for(request, perf::CallerRights::everything(), pinned);
              if (!session_options) return std::unexpected(session_options.error());
              auto session = open_session(*session_options);
              if (!session) return session;
              if (auto ok = opened_on_checked(pinned, *session_options); !ok) {
                  return std::unexpected(ok.error());
              }
              return session;
          },
          [this] { schedule_changed_(); }) {}

CounterService::~CounterService() {
    if (!active_) return;
    active_->sampling_watch.clear();
    for (auto id : active_->sampling) runtime_.remove_sampling(id);
    runtime_.remove_run(active_->run);
}

void CounterService::configure_standing(const std::vector<StandingSessionConfig>& tables,
                                        monitor::Runtime::Clock::time_point now) {
    standing_.configure(tables, now);
}

void CounterService::ticked(monitor::Runtime::Clock::time_point now) {
    standing_.retry_due(now);
}

protocol::CounterPlan CounterService::plan_message(const perf::Plan& plan) const {
    auto message = protocol::make_plan_message(plan);
    message.shared_with = standing_.sharing(plan);
    return message;
}

CounterService::Response CounterService::get_standing(
    const std::optional<std::string>& name) const {
    auto sessions = standing_.report(name);
    if (name && sessions.empty()) return no_such_session(*name);
    return protocol::reply_of(method::GetStandingCounters, {.sessions = std::move(sessions)});
}

Reply CounterService::no_such_session(const std::string& name) const {
    const auto names = standing_.names();
    return monitor::varlink::make_error(
        error_name("NoSuchSession"),
        json{{"message", names.empty() ? fmt::format("no standing session '{}': monitord.conf "
                                                     "has no [[counters]] tables",
                                                     name)
                                       : fmt::format("no standing session '{}'; there are {}", name,
                                                     fmt::join(names, ", "))},
             {"sessions", names}});
}

CounterService::Response CounterService::reset(const std::optional<std::string>& session,
                                               const Peer& peer) {
    if (session) {
        const auto& name = *session;
        if (!standing_.has(name)) return no_such_session(name);
        auto before = standing_.reset(name);
        if (!before) return error_reply(before.error());
        spdlog::info("Standing counter session '{}' reset to zero", name);
        return protocol::reply_of(method::ResetCounters, {.report = std::move(*before)});
    }
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    auto& r = run();
    auto before = r.reset();
    if (!before) return error_reply(before.error());
    spdlog::info("Counter session reset to zero ({})", active_->started_by);
    auto message = protocol::make_report(r.session().plan(), *before, active_->shape, std::nullopt,
                                         false, online());
    put_sampled_addresses(message, true, perf_rights(peer).kernel_addresses());
    // The sampled addresses start again too.
    for (auto& a : active_->last_address_ever) a.reset();
    return protocol::reply_of(method::ResetCounters, {.report = std::move(message)});
}

CounterService::Response CounterService::set_paused(const std::optional<std::string>& session,
                                                    bool paused, const Peer& peer) {
    const auto& which = paused ? method::PauseCounters : method::ResumeCounters;
    const char* done = paused ? "paused" : "resumed";
    if (session) {
        const auto& name = *session;
        if (!standing_.has(name)) return no_such_session(name);
        auto now = standing_.set_paused(name, paused);
        if (!now) return error_reply(now.error());
        spdlog::info("Standing counter session '{}' {}", name, done);
        return protocol::reply_of(which, {.report = std::move(*now)});
    }
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    auto& r = run();
    auto now = paused ? r.pause() : r.resume();
    if (!now) return error_reply(now.error());
    // Its sampling with it: no sample while its counters count nothing.
    for (auto id : active_->sampling) {
        auto* sampling = runtime_.sampling(id);
        if (sampling == nullptr) continue;
        if (auto s = paused ? sampling->pause() : sampling->resume(); !s) {
            spdlog::warn("Counter session {}, its sampling not: {} ({})", done, s.error().message,
                         active_->started_by);
        }
    }
    spdlog::info("Counter session {} ({})", done, active_->started_by);
    auto message = protocol::make_report(r.session().plan(), *now, active_->shape, std::nullopt,
                                         false, online());
    put_sampled_addresses(message, true, perf_rights(peer).kernel_addresses());
    return protocol::reply_of(which, {.report = std::move(message)});
}

void CounterService::setup() {
    auto catalog = perf::EventCatalog::create(options_.proc_root, options_.sys_root);
    if (catalog) {
        catalog_.emplace(std::move(*catalog));
    } else {
        catalog_error_ = catalog.error().message;
        spdlog::warn("Performance counters unavailable: {}", catalog_error_);
    }
    // Its methods are io.monitord.Monitor's: served whether or not another service added it.
    server_.add_interface(
        *monitor::varlink::builtin_interface(monitor::varlink::kMonitorInterface));
    using protocol::NoInput;
    server_.add_method(method::GetPmuInfo,
                       [this](const NoInput&, const Call&, const Peer&) { return get_pmu_info(); });
    server_.add_method(method::ListEvents, [this](const protocol::ListEventsIn& in, const Call&,
                                                  const Peer&) { return list_events(in); });
    server_.add_method(method::ListMetrics,
                       [this](const NoInput&, const Call&, const Peer&) { return list_metrics(); });
    server_.add_method(method::PlanCounters,
                       [this](const protocol::CounterRequestIn& in, const Call&, const Peer& peer) {
                           return plan(in.request, peer);
                       });
    server_.add_method(method::CollectCounters,
                       [this](const protocol::CollectCountersIn& in, const Call& c,
                              const Peer& peer) { return collect(in, c.more, peer); });
    server_.add_method(method::StartCounters,
                       [this](const protocol::CounterRequestIn& in, const Call&, const Peer& peer) {
                           return start(in.request, peer);
                       });
    server_.add_method(method::ReadCounters, [this](const NoInput&, const Call&, const Peer& peer) {
        return read(peer);
    });
    server_.add_method(method::StopCounters, [this](const NoInput&, const Call&, const Peer& peer) {
        return stop(peer);
    });
    server_.add_method(method::ResetCounters,
                       [this](const protocol::CounterSessionIn& in, const Call&, const Peer& peer) {
                           return reset(in.session, peer);
                       });
    server_.add_method(method::PauseCounters,
                       [this](const protocol::CounterSessionIn& in, const Call&, const Peer& peer) {
                           return set_paused(in.session, true, peer);
                       });
    server_.add_method(method::ResumeCounters,
                       [this](const protocol::CounterSessionIn& in, const Call&, const Peer& peer) {
                           return set_paused(in.session, false, peer);
                       });
    server_.add_method(method::GetStandingCounters,
                       [this](const protocol::StandingCountersIn& in, const Call&, const Peer&) {
                           return get_standing(in.name);
                       });
}

std::string CounterService::describe() const {
    if (!active_) return {};
    const auto n = runtime_.run(active_->run)->session().plan().events.size();
    // Its start in UTC, so that a session started and forgotten is told from a new one.
    const std::time_t t = std::chrono::system_clock::to_time_t(active_->started);
    std::tm utc{};
    ::gmtime_r(&t, &utc);
    return fmt::format("{} at {:%Y-%m-%d %H:%M:%S} UTC, counting {} event{}", active_->started_by,
                       utc, n, n == 1 ? "" : "s");
}

Reply CounterService::error_reply(const monitor::Error& e, const std::string& events) const {
    return perf_error_reply(e, catalog_ ? &*catalog_ : nullptr, events);
}

CounterService::Response CounterService::get_pmu_info() const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    protocol::PmuInfoOut out;
    out.pmus = catalog_->pmus();
    out.paranoid = perf::perf_event_paranoid();
    return protocol::reply_of(method::GetPmuInfo, out);
}

CounterService::Response CounterService::list_events(const protocol::ListEventsIn& in) const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    auto events = catalog_->list(in.pmu.value_or(std::string{}));
    if (!events) return error_reply(events.error());
    protocol::EventsOut out;
    out.events.reserve(events->size());
    for (const auto& e : *events) out.events.push_back(protocol::event_listing(e));
    return protocol::reply_of(method::ListEvents, out);
}

CounterService::Response CounterService::list_metrics() const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    protocol::MetricsOut out;
    out.metrics.reserve(metrics_.size());
    // Each event opened once for this thread, to see whether the PMU counts it.
    auto device = options_.device ? options_.device() : std::make_unique<perf::PerfEventDevice>();
    const auto probe = perf::opening_probe(*device);
    for (const auto& d : metrics_) {
        out.metrics.push_back(protocol::metric_listing(d, *catalog_, probe));
    }
    return protocol::reply_of(method::ListMetrics, out);
}

Result<perf::SessionOptions> CounterService::options_for(
    const protocol::CounterRequest& request, const perf::CallerRights& rights,
    std::vector<perf::PinnedProcess>& pinned) const {
    auto options = protocol::session_options(request, options_.cgroup_root);
    if (!options) return options;
    if (auto ok = add_requested_metrics(request, *options); !ok) {
        return std::unexpected(ok.error());
    }
    // Pinned before the check, so that the processes checked are the ones counted. A thread
    // (its tid) has no pidfd on this kernel: it is not pinned.
    if (options->target.kind == perf::TargetKind::Process) {
        for (pid_t pid : perf::target_processes(options->target)) {
            auto pin = perf::PinnedProcess::pin(pid);
            if (!pin) return std::unexpected(pin.error());
            pinned.push_back(std::move(*pin));
        }
    }
    if (auto ok = rights.may_measure(options->target, "count"); !ok) {
        return std::unexpected(ok.error());
    }
    if (!rights.kernel()) options->user_only = rights.kernel_refusal();
    options->no_kernel_addresses = rights.kernel_breakpoint_refusal();
    if (!rights.privileged()) options->files = options_.files_per_session;
    options->cpus = runtime_.engine().online_cpus();
    options->visit_cpus = true;  // this loop's thread reads each CPU's counters on that CPU
    return options;
}

Result<void> CounterService::add_requested_metrics(const protocol::CounterRequest& request,
                                                   perf::SessionOptions& options) const {
    if (request.metrics.empty()) return {};
    // A group's metrics whose events the PMU does not count (a generic event it maps to
    // nothing) are left out rather than fail the session.
    auto device = options_.device ? options_.device() : std::make_unique<perf::PerfEventDevice>();
    auto chosen =
        perf::choose_metrics(metrics_, request.metrics, *catalog_, perf::opening_probe(*device));
    if (!chosen) return std::unexpected(chosen.error());
    return perf::add_metrics(options, *chosen, *catalog_);
}

Result<void> CounterService::opened_on_checked(const std::vector<perf::PinnedProcess>& pinned,
                                               const perf::SessionOptions& options) {
    const auto pids = perf::target_processes(options.target);
    for (std::size_t i = 0; i < pinned.size() && i < pids.size(); ++i) {
        if (!pinned[i].exited()) continue;
        return monitor::fail(Status::NoDev,
                             fmt::format("process {} exited while its counters were opened: "
                                         "nothing was counted",
                                         pids[i]));
    }
    return {};
}

CounterService::Response CounterService::plan(const protocol::CounterRequest& request,
                                              const Peer& peer) const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    auto options = protocol::counting_options(request);
    if (!options) return error_reply(options.error(), request.events);
    if (auto ok = add_requested_metrics(request, *options); !ok) {
        return error_reply(ok.error(), request.events);
    }
    // The events as this caller would count them (":u" when it may count user mode only).
    const auto rights = perf_rights(peer);
    if (!rights.kernel()) options->user_only = rights.kernel_refusal();
    options->no_kernel_addresses = rights.kernel_breakpoint_refusal();
    auto plan = perf::make_plan(*catalog_, *options);
    if (!plan) return error_reply(plan.error(), request.events);
    return protocol::reply_of(method::PlanCounters, {.plan = plan_message(*plan)});
}

Result<std::unique_ptr<perf::PerfSession>> CounterService::open_session(
    const perf::SessionOptions& options) const {
    std::unique_ptr<perf::CounterDevice> device =
        options_.device ? options_.device() : std::make_unique<perf::PerfEventDevice>();
    return perf::PerfSession::start(*catalog_, std::move(device), options);
}

CounterService::Response CounterService::collect(const protocol::CollectCountersIn& in, bool more,
                                                 const Peer& peer) {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    const auto& request = in.request;
    const std::int64_t duration_ms = in.duration.count();
    const monitor::CounterRunOptions run{.duration = in.duration, .interval = in.interval};
    if (auto ok = run.check(); !ok) return error_reply(ok.error());
    Session s;
    s.owner = peer.connection;
    s.stream = more && run.interval.has_value();
    s.started_by = fmt::format("a collect of {} ms by pid {} (uid {})", duration_ms, peer.cred.pid,
                               peer.cred.uid);
    if (auto refused = begin(request, run, std::move(s), perf_rights(peer))) return *refused;
    return Response::later();
}

std::optional<Reply> CounterService::begin(const protocol::CounterRequest& request,
                                           monitor::CounterRunOptions run, Session s,
                                           const perf::CallerRights& rights) {
    if (active_) {
        return error_reply({Status::PrfRun, fmt::format("already collecting: {}; `monctl "
                                                        "perf stop` ends a started session",
                                                        describe())});
    }
    std::vector<perf::PinnedProcess> pinned;
    auto options = options_for(request, rights, pinned);
    if (!options) return error_reply(options.error(), request.events);
    s.owner_kernel_addresses = rights.kernel_addresses();
    auto session = open_session(*options);
    if (!session && options->files.refused(session.error())) {
        return limit_exceeded("perf-files-per-session", session.error().message);
    }
    if (!session) return error_reply(session.error(), request.events);
    if (auto ok = opened_on_checked(pinned, *options); !ok) {
        return error_reply(ok.error(), request.events);
    }
    auto shape = protocol::report_shape(request.target, (*session)->instances(), options_.sys_root);
    if (!shape) return error_reply(shape.error(), request.events);
    s.shape = std::move(*shape);
    std::vector<std::unique_ptr<perf::ProfileSession>> sampling;
    if (request.sample_every) {
        if (auto refused = start_sampling(request, *options, **session, sampling)) {
            return refused;
        }
    }
    // A collect counts for its whole duration from here: finding a unit's cgroup and opening
    // a counter per CPU (milliseconds each for a cgroup, when the kernel has to wake an idle
    // CPU) does not come out of it.
    s.run = runtime_.add_run(std::move(*session), run, std::chrono::steady_clock::now());
    s.started = std::chrono::system_clock::now();
    active_.emplace(std::move(s));
    run_sampling(std::move(sampling));
    schedule_changed_();
    spdlog::info("Counter session started: {} ({})", request.events, active_->started_by);
    return std::nullopt;
}

CounterService::Response CounterService::start(const protocol::CounterRequest& request,
                                               const Peer& peer) {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    Session s;
    s.started_by =
        fmt::format("a session started by pid {} (uid {})", peer.cred.pid, peer.cred.uid);
    if (auto refused = begin(request, {}, std::move(s), perf_rights(peer))) return *refused;
    const auto& session = run().session();
    protocol::StartCountersOut out{.plan = plan_message(session.plan()), .threads = {}};
    if (const int threads = session.threads(); threads > 0) out.threads = threads;
    return protocol::reply_of(method::StartCounters, out);
}

CounterService::Response CounterService::read(const Peer& peer) {
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    auto& session = run().session();
    auto report = session.read();
    if (!report) return error_reply(report.error());
    auto message = protocol::make_report(session.plan(), *report, active_->shape, std::nullopt,
                                         false, online());
    put_sampled_addresses(message, true, perf_rights(peer).kernel_addresses());
    return protocol::reply_of(method::ReadCounters, {.report = std::move(message)});
}

CounterService::Response CounterService::stop(const Peer& peer) {
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    if (active_->owner) {
        return error_reply({Status::BadState, fmt::format("the running session is {}; it ends "
                                                          "with its duration or its client",
                                                          describe())});
    }
    auto& r = run();
    Reply reply;
    if (auto finished = r.finish(); !finished) {
        reply = error_reply(finished.error());
    } else {
        auto message = protocol::make_report(r.session().plan(), r.totals(), active_->shape,
                                             std::nullopt, true, online());
        put_sampled_addresses(message, true, perf_rights(peer).kernel_addresses());
        reply = protocol::reply_of(method::StopCounters, {.report = std::move(message)});
    }
    spdlog::info("Counter session stopped ({})", active_->started_by);
    end_session();
    return reply;
}

void CounterService::run_stepped(const monitor::Runtime::Due::RunStep& step,
                                 monitor::Runtime::Clock::time_point now) {
    if (standing_.run_stepped(step, now)) return;
    if (!active_ || active_->run != step.id) return;
    if (!step.step) {
        spdlog::warn("Counter session ended: {} ({})", step.step.error().message,
                     active_->started_by);
        const auto owner = active_->owner;
        end_session();
        if (owner) server_.send(*owner, Response{error_reply(step.step.error())});
        return;
    }
    if (!active_->owner) return;  // a started session: its counts wait for a read or the stop
    if (step.step->period_ended && active_->stream && !send_period()) {
        if (active_) end_session();  // its client is gone
        return;
    }
    if (!step.step->finished) return;
    auto& r = run();
    auto message = protocol::make_report(r.session().plan(), r.totals(), active_->shape,
                                         std::nullopt, true, online());
    put_sampled_addresses(message, true, active_->owner_kernel_addresses);
    auto reply = protocol::reply_of(
        method::CollectCounters,
        {.plan = plan_message(r.session().plan()), .report = std::move(message)});
    const auto owner = *active_->owner;
    spdlog::info("Counter session ended ({})", active_->started_by);
    end_session();
    server_.send(owner, Response{std::move(reply)});
}

std::optional<Reply> CounterService::start_sampling(
    const protocol::CounterRequest& request, const perf::SessionOptions& options,
    const perf::PerfSession& counting,
    std::vector<std::unique_ptr<perf::ProfileSession>>& sampling) {
    const auto& plan = counting.plan();
    // The session's budget: what its counters left, for its sampled events together.
    std::size_t opened = counting.files();
    for (std::size_t k = 0; k < plan.events.size(); ++k) {
        // The event as requested: the plan's name has ":u" added when the caller may count
        // user mode only, which the plan's event says.
        perf::ProfileOptions o{
            .event = options.events[k].name,
            .rate = {.period = static_cast<std::uint64_t>(*request.sample_every)},
            .target = options.target,
            .cpus = options.cpus,
            .cgroup_root = options.cgroup_root,
            .kernel = !plan.events[k].exclude_kernel,
            .profile = false};
        if (options.files.most > 0) {
            if (opened >= options.files.most) {
                return limit_exceeded(
                    "perf-files-per-session",
                    fmt::format("sampling every {} events: the counters took all {} perf_event "
                                "files allowed ({}): count fewer events, CPUs or threads",
                                *request.sample_every, opened, options.files.source));
            }
            o.files = options.files;
            o.files.most -= opened;
        }
        const perf::FileBudget files = o.files;
        auto sampled = perf::ProfileSession::start(*catalog_, std::move(o));
        if (!sampled && files.refused(sampled.error())) {
            return limit_exceeded(
                "perf-files-per-session",
                fmt::format("sampling every {} events: {} (its counters took {} of the {})",
                            *request.sample_every, sampled.error().message, opened,
                            options.files.most));
        }
        if (!sampled) {
            return error_reply({sampled.error().status,
                                fmt::format("sampling every {} events: {}", *request.sample_every,
                                            sampled.error().message)},
                               request.events);
        }
        opened += (*sampled)->files();
        sampling.push_back(std::move(*sampled));
    }
    return std::nullopt;
}

void CounterService::run_sampling(std::vector<std::unique_ptr<perf::ProfileSession>> sampling) {
    Session& s = *active_;
    s.last_address.assign(sampling.size(), std::nullopt);
    s.last_address_ever.assign(sampling.size(), std::nullopt);
    // Read on the ticks: only the last address of each event counts, and a ring read once a
    // second holds thousands of samples.
    const monitor::SampleRunOptions pace{.drain = std::chrono::seconds(1)};
    for (std::size_t k = 0; k < sampling.size(); ++k) {
        auto observer = [this, k](const perf::Sample& sample) {
            const SampledAddress a{.ip = sample.ip,
                                   .kernel = sample.mode != perf::SampleMode::User};
            active_->last_address[k] = a;
            active_->last_address_ever[k] = a;
        };
        // With an observer, a run starts without fail (it has no namer to start).
        auto run =
            monitor::SampleRun::start(std::move(sampling[k]), pace,
                                      std::chrono::steady_clock::now(), {}, std::move(observer));
        if (!run) continue;
        const auto id = runtime_.add_sampling(std::move(*run));
        s.sampling.push_back(id);
        // Read when a ring is half full too, so that a fast event's newest address is not
        // among the samples a full ring loses.
        auto watch = std::make_unique<SampleRunWatch>(event_, [this, id] {
            if (auto* r = runtime_.sampling(id)) (void)r->advance(std::chrono::steady_clock::now());
            schedule_changed_();
        });
        if (watch->watch(runtime_.sampling(id)->fds())) {
            s.sampling_watch.push_back(std::move(watch));
        }
    }
}

void CounterService::put_sampled_addresses(protocol::CounterReport& report, bool whole,
                                           bool kernel_addresses) {
    Session& s = *active_;
    if (s.sampling.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < s.sampling.size(); ++k) {
        // Reads what its rings hold (the observer keeps the addresses); it has no end to fail.
        if (auto* run = runtime_.sampling(s.sampling[k])) (void)run->advance(now);
        if (k < report.events.size()) {
            const auto& a = whole ? s.last_address_ever[k] : s.last_address[k];
            report.events[k].sampled_address.reset();
            if (a) report.events[k].sampled_address = a->kernel && !kernel_addresses ? 0 : a->ip;
        }
        if (!whole) s.last_address[k].reset();
    }
}

bool CounterService::send_period() {
    Session& s = *active_;
    const auto& r = run();
    // Every period writes the same record, so that a stream's records allocate (almost)
    // nothing: only their numbers change.
    protocol::make_report(r.session().plan(), r.period(), s.shape, r.periods(), false, online(),
                          s.record.report);
    put_sampled_addresses(s.record.report, false, s.owner_kernel_addresses);
    // The plan does not change: the first record and the totals carry it.
    if (r.periods() == 1) {
        s.record.plan = plan_message(r.session().plan());
    } else {
        s.record.plan.reset();
    }
    auto text = std::make_shared<const std::string>(s.records.encode(s.record, true));
    // A client that is gone ends the session (the server's close handler).
    return server_.send(*s.owner, Response{std::move(text), true});
}

void CounterService::connection_closed(std::uint64_t connection) {
    if (active_ && active_->owner == connection) {
        spdlog::info("Counter session ended: its client went away ({})", active_->started_by);
        end_session();
    }
}

void CounterService::end_session() {
    if (!active_) return;
    active_->sampling_watch.clear();
    for (auto id : active_->sampling) runtime_.remove_sampling(id);
    runtime_.remove_run(active_->run);  // closes every counter
    active_.reset();
    schedule_changed_();
}

}  // namespace monitord
