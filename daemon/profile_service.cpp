#include "profile_service.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "monitor/perf/caller_rights.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/protocol/profile_messages.hpp"
#include "monitor/runtime/sample_run.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"
#include "perf_errors.hpp"

namespace monitord {

using monitor::Status;
using monitor::varlink::Call;
using monitor::varlink::Reply;
using nlohmann::json;
namespace perf = monitor::perf;
namespace protocol = monitor::protocol;
namespace method = monitor::protocol::method;
using Clock = std::chrono::steady_clock;

struct ProfileService::Run {
    ProfileService* service = nullptr;
    monitor::Runtime::RunId id = 0;  // its SampleRun in the runtime; 0 before it is there
    std::uint64_t connection = 0;
    uid_t uid = 0;  // of the client that started it
    // A profile's request; or, for a watch of overflows, its request and what it saw.
    protocol::ProfileRequest request;
    std::optional<protocol::OverflowRequest> overflows;
    std::uint64_t batch_overflows = 0;
    std::uint64_t total_overflows = 0;
    std::optional<perf::Sample> last;
    pid_t pid = 0;       // a process target
    std::string target;  // target_text
    // Its client may sample user mode only (perf_rights): the event is named with ":u"
    // added, as perf names it then.
    bool user_only = false;
    bool kernel_addresses = true;  // its client may see kernel addresses (perf_rights)
    // Why it ends at its duration, when that is a limit rather than the duration asked for.
    std::string end_reason;
    std::string started_by;      // "pid 42 (uid 0)"
    std::string kernel_unnamed;  // why kernel functions go unnamed; empty when they are named
    bool stream = false;         // "more": the started reply, and the intervals with interval_ms
    std::int64_t intervals = 0;
    std::string ended;  // sampling ended, a profile's whole asked of the namer: why
    // The run's descriptors on the loop (its rings, the process's pidfd, the namer's).
    std::optional<SampleRunWatch> watch;

    ~Run() {
        watch.reset();
        if (id != 0) service->runtime_.remove_sampling(id);
    }
    monitor::SampleRun& sampling() const { return *service->runtime_.sampling(id); }
    std::string event_name() const {
        return sampling().session().event().name + (user_only ? ":u" : "");
    }

    std::size_t top() const {
        return static_cast<std::size_t>(request.top.value_or(protocol::kDefaultProfileTop));
    }
    protocol::ProfileMessage message(const monitor::SampleRun::Named& named) const {
        auto m = protocol::make_profile_message(named.profile, top(), request.range);
        m.event = event_name();
        m.target = target;
        m.elapsed = std::chrono::duration<double>(named.to - named.from).count();
        if (const auto threads = sampling().session().threads(); threads > 0) {
            m.threads = static_cast<int>(threads);
        }
        m.kernel_symbols = kernel_unnamed;
        return m;
    }
    // The observer of a watch of overflows' samples.
    monitor::SampleRun::Observer observer() {
        return [this](const perf::Sample& s) {
            ++batch_overflows;
            ++total_overflows;
            last = s;
            last->callchain = {};  // the drain's, gone after it
            last->user_regs = {};
            last->user_stack = {};
        };
    }
    // The batch since the last one, and a new batch.
    protocol::OverflowBatch batch(Clock::time_point now) {
        if (last && !kernel_addresses && last->mode != perf::SampleMode::User) {
            last->ip = 0;  // as the kernel shows a kernel address to such a reader
        }
        const auto& run = sampling();
        protocol::OverflowBatch b{
            .event = event_name(),
            .period = overflows->period,
            .overflows = std::exchange(batch_overflows, 0),
            .total = total_overflows,
            .elapsed = std::chrono::duration<double>(now - run.started()).count(),
            .last = std::exchange(last, std::nullopt)};
        const auto report = run.session().profile().report(1);
        b.lost = report.lost;
        b.throttled = report.throttled;
        return b;
    }
};

ProfileService::ProfileService(sd_event* event, VarlinkServer& server, monitor::Runtime& runtime,
                               std::function<void()> schedule, const perf::EventCatalog* catalog,
                               std::string catalog_error,
                               std::function<std::vector<int>()> online_cpus,
                               ProfileServiceOptions options)
    : event_(event),
      server_(server),
      runtime_(runtime),
      schedule_(std::move(schedule)),
      catalog_(catalog),
      catalog_error_(std::move(catalog_error)),
      online_cpus_(std::move(online_cpus)),
      options_(std::move(options)),
      kernel_symbols_(options_.kallsyms, options_.modules) {}

ProfileService::~ProfileService() = default;

void ProfileService::setup() {
    server_.add_method(protocol::method::Profile,
                       [this](const protocol::ProfileIn& in, const Call& c, const Peer& peer) {
                           return profile(in, c.more, peer);
                       });
    server_.add_method(protocol::method::WatchOverflows,
                       [this](const protocol::WatchOverflowsIn& in, const Call& c,
                              const Peer& peer) { return watch_overflows(in, c.more, peer); });
}

ProfileService::Response ProfileService::profile(const protocol::ProfileIn& in, bool more,
                                                 const Peer& peer) {
    if (catalog_ == nullptr) return perf_error_reply({Status::NoPmu, catalog_error_}, nullptr);
    auto options = protocol::profile_options(in.request, options_.cgroup_root);
    if (!options) return perf_error_reply(options.error(), catalog_, in.request.event);
    auto run = std::make_unique<Run>();
    run->request = in.request;
    run->target = protocol::target_text(in.request.target);
    return start_run(std::move(run), std::move(*options),
                     {.duration = in.duration, .interval = in.interval}, more, peer);
}

ProfileService::Response ProfileService::watch_overflows(const protocol::WatchOverflowsIn& in,
                                                         bool more, const Peer& peer) {
    if (catalog_ == nullptr) return perf_error_reply({Status::NoPmu, catalog_error_}, nullptr);
    auto options = protocol::overflow_options(in.request, options_.cgroup_root);
    if (!options) return perf_error_reply(options.error(), catalog_, in.request.event);
    auto run = std::make_unique<Run>();
    run->overflows = in.request;
    run->target = protocol::target_text(in.request.target);
    // The default batch: 100 ms, or the whole of a shorter watch.
    const auto batch = in.batch.value_or(std::min(
        std::chrono::milliseconds(100), in.duration.value_or(std::chrono::milliseconds(100))));
    return start_run(std::move(run), std::move(*options),
                     {.duration = in.duration, .interval = batch}, more, peer);
}

std::optional<Reply> ProfileService::limit_to_rights(Run& run, perf::ProfileOptions& options,
                                                     const perf::CallerRights& rights) const {
    const char* what = run.overflows ? "watching overflows of" : "profiling";
    if (auto ok = rights.may_measure(options.target, what); !ok) {
        return perf_error_reply(ok.error(), catalog_);
    }
    run.kernel_addresses = rights.kernel_addresses();
    options.no_kernel_addresses = rights.kernel_breakpoint_refusal();
    if (!rights.kernel()) {
        // The event's own ":k" asks for kernel mode only, as mode kernel does.
        auto event = catalog_->resolve(options.event);
        const bool kernel_only = !options.user || (event && event->exclude_user);
        if (kernel_only) {
            auto ok = rights.may_measure_kernel(options.event, "mode user, monctl's --user");
            return perf_error_reply(ok.error(), catalog_);
        }
        run.user_only = options.kernel && !(event && event->exclude_kernel);
        options.kernel = false;
    }
    if (options.kernel && !run.kernel_addresses && run.request.range) {
        return perf_error_reply(
            {Status::Perm,
             "an address histogram with kernel samples shows kernel addresses, "
             "which kernel.kptr_restrict and kernel.perf_event_paranoid hide from "
             "a user other than root here: sample user mode (mode user, monctl's "
             "--user) for a histogram, or ask root"},
            catalog_);
    }
    return std::nullopt;
}

ProfileService::Response ProfileService::start_run(std::unique_ptr<Run> run,
                                                   perf::ProfileOptions options,
                                                   monitor::SampleRunOptions times, bool more,
                                                   const Peer& peer) {
    if (runs_.contains(peer.connection)) {
        // A connection reads no further calls while its run goes on; this is a safeguard.
        return perf_error_reply({Status::PrfRun, "this connection already samples"}, nullptr);
    }
    if (const uid_t uid = peer.cred.uid; !peer.privileged()) {
        const auto own = static_cast<std::size_t>(
            std::ranges::count_if(runs_, [uid](const auto& r) { return r.second->uid == uid; }));
        if (own >= options_.max_profiles_per_user) {
            return limit_exceeded(
                "profiles-per-user",
                fmt::format("uid {} runs {} profiles and watches of overflows already, the most "
                            "for a user other than root ([limits] profiles-per-user in "
                            "monitord.conf(5)); end one first",
                            uid, own));
        }
    }
    if (runs_.size() >= options_.max_profiles) {
        return perf_error_reply(
            {Status::Busy, fmt::format("{} profiles and watches of overflows are running "
                                       "already, the most at once",
                                       runs_.size())},
            nullptr);
    }
    if (auto ok = times.check(); !ok) return perf_error_reply(ok.error(), catalog_);
    const bool process = options.target.kind == perf::TargetKind::Process;
    if (!times.duration && !process) {
        return perf_error_reply(
            {Status::BadArg, fmt::format("sampling {} needs a duration; only a process can be "
                                         "sampled until it exits",
                                         run->target)},
            catalog_);
    }
    if (!peer.privileged()) {
        const auto most = options_.max_duration_per_user;
        if (times.duration && *times.duration > most) {
            return limit_exceeded(
                "profile-duration",
                fmt::format("{} ms is longer than a user other than root may sample ({} s, "
                            "[limits] profile-duration in monitord.conf(5)): sample {} s or less, "
                            "or ask root",
                            times.duration->count(), most.count(), most.count()));
        }
        if (!times.duration) {
            times.duration = most;
            run->end_reason = fmt::format(
                "process {} still ran after {} s, the most a user other "
                "than root may sample ([limits] profile-duration)",
                options.target.pid, most.count());
        }
    }
    options.cpus = online_cpus_();
    options.kallsyms = options_.kallsyms;
    if (options.profile && options.kernel) {
        options.kernel_symbols = kernel_symbols_.get(Clock::now());
        if (options.kernel_symbols) run->kernel_unnamed = options.kernel_symbols->unavailable();
    }
    run->pid = options.target.pid;

    run->service = this;
    run->connection = peer.connection;
    run->started_by = fmt::format("pid {} (uid {})", peer.cred.pid, peer.cred.uid);
    run->uid = peer.cred.uid;
    run->stream = more;
    std::optional<perf::PinnedProcess> pinned;
    if (process) {
        // Opened before the rings: a pid reused after the process ended is then not followed.
        auto pin = perf::PinnedProcess::pin(options.target.pid);
        if (!pin) return perf_error_reply(pin.error(), catalog_);
        pinned.emplace(std::move(*pin));
    }
    // After the pin: the process checked is the one sampled.
    if (auto refused = limit_to_rights(*run, options, perf_rights(peer))) return *refused;
    if (!peer.privileged()) options.files = options_.files_per_session;
    const std::string event = options.event;
    const pid_t pid = options.target.pid;
    const perf::FileBudget files = options.files;
    auto session = perf::ProfileSession::start(*catalog_, std::move(options));
    if (!session && files.refused(session.error())) {
        return limit_exceeded("perf-files-per-session", session.error().message);
    }
    if (!session) return perf_error_reply(session.error(), catalog_, event);
    if (pinned && pinned->exited()) {
        // Its pid may be another process's by now: the rings would sample that one.
        return perf_error_reply({Status::NoDev, fmt::format("process {} exited while its sampling "
                                                            "was set up: nothing was sampled",
                                                            pid)},
                                catalog_);
    }
    // Intervals are sent only to a client that reads more than one reply.
    if (!run->stream) times.interval.reset();
    auto sampling = monitor::SampleRun::start(
        std::move(*session), times, Clock::now(), pinned ? pinned->release() : monitor::UniqueFd{},
        run->overflows ? run->observer() : monitor::SampleRun::Observer{});
    if (!sampling) return perf_error_reply(sampling.error(), catalog_);
    run->id = runtime_.add_sampling(std::move(*sampling));
    run->watch.emplace(event_, [this, r = run.get()] { ready(*r); });
    if (!run->watch->watch(run->sampling().fds())) {
        return perf_error_reply({Status::IoErr, "cannot watch the sample rings on the event loop"},
                                catalog_);
    }
    spdlog::info("{} started: {} of {}{} ({})", run->overflows ? "Watch of overflows" : "Profile",
                 run->event_name(), run->target,
                 times.duration ? fmt::format(" for {} ms", times.duration->count())
                                : std::string{" until it exits"},
                 run->started_by);
    const bool stream = run->stream;
    const bool overflows = run->overflows.has_value();
    runs_.emplace(peer.connection, std::move(run));
    schedule_();
    if (!stream) return Response::later();
    if (overflows) return protocol::reply_of(method::WatchOverflows, {.started = true}, true);
    return protocol::reply_of(method::Profile, {.started = true}, true);
}

void ProfileService::run_stepped(monitor::Runtime::Due::SampleStep& step) {
    auto it = std::ranges::find_if(runs_, [&](const auto& r) { return r.second->id == step.id; });
    if (it == runs_.end()) return;  // ended by an earlier step's reply
    stepped(*it->second, step.step);
}

void ProfileService::stepped(Run& run, monitor::Result<monitor::SampleRun::Step>& step) {
    if (!step) {
        end(run, perf_error_reply(step.error(), catalog_), 0);
        return;
    }
    const auto now = Clock::now();
    if (step->interval_ended && run.overflows && run.batch_overflows > 0) {
        // A batch is sent when it has overflows.
        auto reply = protocol::reply_of(method::WatchOverflows, {.batch = run.batch(now)}, true);
        if (!send_or_end(run, std::move(reply))) return;  // `run` is gone
    }
    if (step->ended) {
        run.ended = *step->ended == monitor::SampleRun::End::Exited
                        ? fmt::format("process {} exited", run.pid)
                        : run.end_reason;
        if (run.overflows) {
            auto b = run.batch(now);
            b.final = true;
            b.ended = run.ended;
            const auto samples = run.sampling().session().profile().report(1).samples;
            end(run, protocol::reply_of(method::WatchOverflows, {.batch = std::move(b)}), samples);
            return;  // `run` is gone
        }
        // Only the namer's descriptor is left to watch: the whole profile comes through it.
        if (!run.watch->watch(run.sampling().fds())) {
            end(run,
                perf_error_reply({Status::IoErr, "cannot watch the namer on the event loop"},
                                 catalog_),
                0);
            return;
        }
    }
    for (auto& named : step->named) {
        auto m = run.message(named);
        if (named.whole) {
            m.final = true;
            m.ended = run.ended;
            const auto samples = named.profile.report(1).samples;
            end(run, protocol::reply_of(method::Profile, {.report = std::move(m)}), samples);
            return;  // `run` is gone
        }
        m.interval = ++run.intervals;
        auto reply = protocol::reply_of(method::Profile, {.report = std::move(m)}, true);
        if (!send_or_end(run, std::move(reply))) return;  // `run` is gone
    }
}

bool ProfileService::send_or_end(Run& run, Reply reply) {
    // A send that drops the connection (its reader fell behind) runs the close handler,
    // which ends the run: `run` may be gone after it.
    const auto connection = run.connection;
    if (server_.send(connection, Response{std::move(reply)})) return true;
    runs_.erase(connection);  // its client is gone
    return false;
}

void ProfileService::end(Run& run, Reply reply, std::uint64_t samples) {
    spdlog::info("{} ended: {} of {}, {} samples{} ({})",
                 run.overflows ? "Watch of overflows" : "Profile", run.event_name(), run.target,
                 samples, reply.error ? fmt::format(": {}", *reply.error) : std::string{},
                 run.started_by);
    const auto connection = run.connection;
    runs_.erase(connection);  // `run` is gone from here
    server_.send(connection, Response{std::move(reply)});
}

void ProfileService::connection_closed(std::uint64_t connection) {
    auto it = runs_.find(connection);
    if (it == runs_.end()) return;
    spdlog::info("Profile ended: its client went away ({})", it->second->started_by);
    runs_.erase(it);
}

void ProfileService::ready(Run& run) {
    auto step = run.sampling().advance(Clock::now());
    stepped(run, step);  // may end the run
    schedule_();
}

}  // namespace monitord
