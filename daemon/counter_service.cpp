#include "counter_service.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <system_error>

namespace monitord {

using monitor::Result;
using monitor::Status;
using monitor::varlink::Call;
using monitor::varlink::Reply;
using nlohmann::json;
namespace perf = monitor::perf;
namespace protocol = monitor::protocol;

namespace {

constexpr std::string_view kPrefix = "io.monitord.Monitor.";
constexpr std::int64_t kMinIntervalMs = 10;
constexpr std::int64_t kMaxDurationMs = 7 * 24 * 3600 * 1000LL;

std::uint64_t now_usec() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

std::string error_name(std::string_view member) {
    return std::string(kPrefix) + std::string(member);
}

// The cgroup of a systemd unit: the directory of that name in the cgroup tree
// (system.slice/NAME.service, or deeper for units in other slices).
Result<std::string> unit_cgroup(const std::filesystem::path& root, std::string unit) {
    if (unit.find('/') != std::string::npos) {
        return monitor::fail(Status::BadArg, fmt::format("'{}' is not a unit name", unit));
    }
    if (unit.find('.') == std::string::npos) unit += ".service";
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(
        root, std::filesystem::directory_options::skip_permission_denied, ec);
    for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it.depth() > 4) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_directory(ec) && it->path().filename() == unit) {
            return std::filesystem::relative(it->path(), root).string();
        }
    }
    return monitor::fail(Status::NoDev,
                         fmt::format("no cgroup for unit {} under {} (is the unit running? "
                                     "`systemctl status {}`)",
                                     unit, root.string(), unit));
}

// How often a session's timer fires: every slice when its sets rotate, else every second.
std::chrono::nanoseconds tick_of(const perf::PerfSession& s) {
    return s.rotates() ? s.options().slice : std::chrono::nanoseconds(std::chrono::seconds(1));
}

}  // namespace

CounterService::CounterService(sd_event* event, VarlinkServer& server,
                               std::function<std::vector<int>()> online_cpus,
                               CounterServiceOptions options)
    : event_(event),
      server_(server),
      online_cpus_(std::move(online_cpus)),
      options_(std::move(options)) {}

CounterService::~CounterService() = default;

void CounterService::setup() {
    auto catalog = perf::EventCatalog::create(options_.proc_root, options_.sys_root);
    if (catalog) {
        catalog_.emplace(std::move(*catalog));
    } else {
        catalog_error_ = catalog.error().message;
        spdlog::warn("Performance counters unavailable: {}", catalog_error_);
    }
    const std::string p(kPrefix);
    server_.add_method(p + "GetPmuInfo",
                       [this](const Call&, const Peer&) -> Response { return get_pmu_info(); });
    server_.add_method(p + "ListEvents",
                       [this](const Call& c, const Peer&) -> Response { return list_events(c); });
    server_.add_method(p + "PlanCounters",
                       [this](const Call& c, const Peer&) -> Response { return plan(c); });
    server_.add_method(p + "CollectCounters", [this](const Call& c, const Peer& peer) -> Response {
        return collect(c, peer);
    });
    server_.add_method(p + "StartCounters", [this](const Call& c, const Peer& peer) -> Response {
        return start(c, peer);
    });
    server_.add_method(p + "ReadCounters",
                       [this](const Call&, const Peer&) -> Response { return read(); });
    server_.add_method(p + "StopCounters", [this](const Call&, const Peer& peer) -> Response {
        if (auto refused = refuse(peer)) return error_reply(*refused);
        return stop();
    });
}

std::string CounterService::describe() const {
    if (!active_) return {};
    const auto n = active_->session->plan().events.size();
    return fmt::format("{}, counting {} event{}", active_->started_by, n, n == 1 ? "" : "s");
}

Reply CounterService::error_reply(const monitor::Error& e, const std::string& events) const {
    switch (e.status) {
        case Status::PrfRun:
            return monitor::varlink::make_error(error_name("PerfRunning"),
                                                json{{"message", e.message}});
        case Status::NotRdy:
            return monitor::varlink::make_error(error_name("PerfNotRunning"),
                                                json{{"message", e.message}});
        case Status::NoEvent: {
            json suggestions = json::array();
            // The first name that does not resolve is the one the message is about.
            if (catalog_) {
                if (auto list = perf::parse_event_list(events)) {
                    for (const auto& r : *list) {
                        if (!catalog_->resolve(r.name)) {
                            for (auto& s : catalog_->closest(r.name)) suggestions.push_back(s);
                            break;
                        }
                    }
                }
            }
            return monitor::varlink::make_error(
                error_name("NoSuchEvent"),
                json{{"message", e.message}, {"suggestions", std::move(suggestions)}});
        }
        case Status::Perm:
            return monitor::varlink::make_error(error_name("PermissionDenied"),
                                                json{{"message", e.message}});
        case Status::NoPmu:
            return monitor::varlink::make_error(error_name("NoPmu"), json{{"message", e.message}});
        case Status::NoDev:
            return monitor::varlink::make_error(error_name("NoSuchTarget"),
                                                json{{"message", e.message}});
        case Status::BadArg:
            return monitor::varlink::make_error(error_name("InvalidRequest"),
                                                json{{"message", e.message}});
        default:
            return monitor::varlink::make_error(
                error_name("CounterFailure"),
                json{{"status", std::string(monitor::status_name(e.status))},
                     {"message", e.message}});
    }
}

CounterService::Response CounterService::get_pmu_info() const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    json pmus = json::array();
    for (const auto& p : catalog_->pmus()) pmus.push_back(protocol::to_json(p));
    Reply r;
    r.parameters = json{{"pmus", std::move(pmus)}};
    if (auto level = perf::perf_event_paranoid()) r.parameters["paranoid"] = *level;
    return r;
}

CounterService::Response CounterService::list_events(const Call& call) const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    std::string pmu;
    if (auto it = call.parameters.find("pmu"); it != call.parameters.end() && !it->is_null()) {
        pmu = it->get<std::string>();
    }
    auto events = catalog_->list(pmu);
    if (!events) return error_reply(events.error());
    json list = json::array();
    for (const auto& e : *events) list.push_back(protocol::to_json(e));
    Reply r;
    r.parameters = json{{"events", std::move(list)}};
    return r;
}

Result<perf::SessionOptions> CounterService::options_for(
    const protocol::CounterRequest& request) const {
    auto options = protocol::session_options(request);
    if (!options) return options;
    options->cpus = online_cpus_();
    options->cgroup_root = options_.cgroup_root.string();
    options->visit_cpus = true;  // this loop's thread reads each CPU's counters on that CPU
    if (request.target == "unit") {
        auto path = unit_cgroup(options_.cgroup_root, request.unit);
        if (!path) return std::unexpected(path.error());
        options->target.cgroup = *path;
    }
    return options;
}

CounterService::Response CounterService::plan(const Call& call) const {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    auto request = protocol::counter_request_from_json(call.parameters.at("request"));
    auto options = protocol::session_options(request);
    if (!options) return error_reply(options.error(), request.events);
    auto plan = perf::make_plan(*catalog_, *options);
    if (!plan) return error_reply(plan.error(), request.events);
    Reply r;
    r.parameters = json{{"plan", protocol::to_json(protocol::make_plan_message(*plan))}};
    return r;
}

Result<std::unique_ptr<perf::PerfSession>> CounterService::open_session(
    const perf::SessionOptions& options) const {
    std::unique_ptr<perf::CounterDevice> device =
        options_.device ? options_.device() : std::make_unique<perf::PerfEventDevice>();
    return perf::PerfSession::start(*catalog_, std::move(device), options);
}

void CounterService::set_control_group(std::optional<gid_t> gid, std::string name) {
    control_gid_ = gid;
    control_group_ = std::move(name);
}

// Counting runs with the daemon's privileges (every CPU, any process), so only root, the
// daemon's own user and members of the control group may start or end a session; the others
// may look (info, list, plan, read).
std::optional<monitor::Error> CounterService::refuse(const Peer& peer) const {
    if (peer.cred.uid == 0 || peer.cred.uid == ::geteuid()) return std::nullopt;
    if (control_gid_ && peer.in_group(*control_gid_)) return std::nullopt;
    const std::string who = control_gid_
                                ? fmt::format("root or membership of group '{}'", control_group_)
                                : std::string{
                                      "root (monitord.conf's [access] control-group may name a "
                                      "group whose members may count too)"};
    return monitor::Error{Status::Perm,
                          fmt::format("counting needs {}; uid {} asked: a session counts with "
                                      "the daemon's privileges. `monctl perf stat -- CMD` "
                                      "counts your own command without them",
                                      who, peer.cred.uid)};
}

CounterService::Response CounterService::collect(const Call& call, const Peer& peer) {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    if (auto refused = refuse(peer)) return error_reply(*refused);
    auto request = protocol::counter_request_from_json(call.parameters.at("request"));
    const std::int64_t duration_ms = call.parameters.at("duration_ms").get<std::int64_t>();
    std::optional<std::int64_t> interval_ms;
    if (auto it = call.parameters.find("interval_ms");
        it != call.parameters.end() && !it->is_null()) {
        interval_ms = it->get<std::int64_t>();
    }
    if (duration_ms < 1 || duration_ms > kMaxDurationMs) {
        return error_reply({Status::BadArg, fmt::format("duration of {} ms: choose from 1 ms to "
                                                        "7 days",
                                                        duration_ms)});
    }
    if (interval_ms && (*interval_ms < kMinIntervalMs || *interval_ms > duration_ms)) {
        return error_reply(
            {Status::BadArg, fmt::format("interval of {} ms: choose from {} ms to the duration "
                                         "({} ms)",
                                         *interval_ms, kMinIntervalMs, duration_ms)});
    }
    Session s;
    s.owner = peer.connection;
    s.stream = call.more && interval_ms.has_value();
    if (interval_ms) s.interval = std::chrono::milliseconds(*interval_ms);
    s.ends = std::chrono::steady_clock::now() + std::chrono::milliseconds(duration_ms);
    s.started_by = fmt::format("a collect of {} ms by pid {} (uid {})", duration_ms, peer.cred.pid,
                               peer.cred.uid);
    if (auto refused = begin(request, std::move(s))) return *refused;
    return Response::later();
}

std::optional<Reply> CounterService::begin(const protocol::CounterRequest& request, Session s) {
    if (active_) {
        return error_reply({Status::PrfRun, fmt::format("already collecting: {}; `monctl "
                                                        "perf stop` ends a started session",
                                                        describe())});
    }
    const auto asked = std::chrono::steady_clock::now();
    auto options = options_for(request);
    if (!options) return error_reply(options.error(), request.events);
    auto session = open_session(*options);
    if (!session) return error_reply(session.error(), request.events);
    // A collect counts for its whole duration: finding a unit's cgroup and opening a counter
    // per CPU (milliseconds each for a cgroup, when the kernel has to wake an idle CPU) must
    // not come out of it.
    s.ends += std::chrono::steady_clock::now() - asked;
    s.session = std::move(*session);
    s.per_cpu = request.target == "each";
    active_.emplace(std::move(s));
    if (auto r = arm_timers(); !r) {
        end_session();
        return error_reply(r.error());
    }
    spdlog::info("Counter session started: {} ({})", request.events, active_->started_by);
    return std::nullopt;
}

CounterService::Response CounterService::start(const Call& call, const Peer& peer) {
    if (!catalog_) return error_reply({Status::NoPmu, catalog_error_});
    if (auto refused = refuse(peer)) return error_reply(*refused);
    auto request = protocol::counter_request_from_json(call.parameters.at("request"));
    Session s;
    s.started_by =
        fmt::format("a session started by pid {} (uid {})", peer.cred.pid, peer.cred.uid);
    if (auto refused = begin(request, std::move(s))) return *refused;
    Reply r;
    r.parameters =
        json{{"plan", protocol::to_json(protocol::make_plan_message(active_->session->plan()))}};
    if (const int threads = active_->session->threads(); threads > 0) {
        r.parameters["threads"] = threads;
    }
    return r;
}

CounterService::Response CounterService::read() {
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    auto report = active_->session->read();
    if (!report) return error_reply(report.error());
    Reply r;
    r.parameters = json{
        {"report", protocol::to_json(protocol::make_report(
                       active_->session->plan(), *report, active_->per_cpu, std::nullopt, false))}};
    return r;
}

CounterService::Response CounterService::stop() {
    if (!active_) return error_reply({Status::NotRdy, "no counter session is running"});
    if (active_->owner) {
        return error_reply({Status::BadState, fmt::format("the running session is {}; it ends "
                                                          "with its duration or its client",
                                                          describe())});
    }
    auto stopped = active_->session->stop();
    auto report = active_->session->read();
    Reply r;
    if (!stopped || !report) {
        r = error_reply(!stopped ? stopped.error() : report.error());
    } else {
        r.parameters =
            json{{"report",
                  protocol::to_json(protocol::make_report(active_->session->plan(), *report,
                                                          active_->per_cpu, std::nullopt, true))}};
    }
    spdlog::info("Counter session stopped ({})", active_->started_by);
    end_session();
    return r;
}

Result<void> CounterService::arm_timers() {
    const auto& s = *active_;
    const std::uint64_t now = now_usec();
    if (s.session->rotates() || s.session->narrow()) {
        // Every slice the sets rotate; without rotation narrow counters are still read once a
        // second, so that they (a 750's 32 bits wrap in 21 s at 200 MHz) never wrap twice
        // between two reads. The kernel's 64-bit counts need neither.
        const auto slice =
            std::chrono::duration_cast<std::chrono::microseconds>(tick_of(*s.session)).count();
        sd_event_source* src = nullptr;
        int r =
            sd_event_add_time(event_, &src, CLOCK_MONOTONIC,
                              now + static_cast<std::uint64_t>(slice), 1000, on_slice_timer, this);
        if (r < 0) return monitor::fail_errno(-r, "create the multiplexing timer");
        slice_timer_.reset(src);
        sd_event_source_set_enabled(src, SD_EVENT_ON);
    }
    if (s.owner) {
        const auto due =
            s.interval ? period_end(std::chrono::steady_clock::now() + *s.interval) : s.ends;
        const std::uint64_t at = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(due.time_since_epoch()).count());
        sd_event_source* src = nullptr;
        int r = sd_event_add_time(event_, &src, CLOCK_MONOTONIC, at, 1000, on_period_timer, this);
        if (r < 0) return monitor::fail_errno(-r, "create the collection timer");
        period_timer_.reset(src);
    }
    return {};
}

std::chrono::steady_clock::time_point CounterService::period_end(
    std::chrono::steady_clock::time_point target) const {
    using namespace std::chrono;
    const auto& s = *active_;
    if (options_.next_tick_usec && s.interval && s.interval->count() % 1000 == 0) {
        const steady_clock::time_point tick{microseconds(options_.next_tick_usec())};
        // Ticks come every second from `tick` on: the nearest one to the target, so the first
        // period lasts its interval give or take half a second, the next ones their interval.
        const auto seconds =
            std::max<std::int64_t>(0, std::llround(duration<double>(target - tick).count()));
        target = tick + std::chrono::seconds(seconds);
    }
    return std::min(target, s.ends);
}

int CounterService::on_slice_timer(sd_event_source* s, uint64_t usec, void* userdata) {
    auto* self = static_cast<CounterService*>(userdata);
    self->on_slice();
    if (self->active_ && self->slice_timer_.get() == s) {
        const auto slice =
            std::chrono::duration_cast<std::chrono::microseconds>(tick_of(*self->active_->session))
                .count();
        std::uint64_t next = usec + static_cast<std::uint64_t>(slice);
        const std::uint64_t now = now_usec();
        if (next <= now) next = now + static_cast<std::uint64_t>(slice);
        sd_event_source_set_time(s, next);
        sd_event_source_set_enabled(s, SD_EVENT_ON);
    }
    return 0;
}

void CounterService::on_slice() {
    if (!active_) return;
    Result<void> r;
    if (active_->session->rotates()) {
        r = active_->session->rotate();
    } else {
        // Between two periods `now` is free: the next period reads it again first.
        r = active_->session->read(active_->now);
    }
    if (!r) {
        spdlog::warn("Counter session ended: {}", r.error().message);
        if (active_->owner) server_.send(*active_->owner, Response{error_reply(r.error())});
        end_session();
    }
}

int CounterService::on_period_timer(sd_event_source*, uint64_t, void* userdata) {
    static_cast<CounterService*>(userdata)->on_period();
    return 0;
}

void CounterService::on_period() {
    if (!active_ || !active_->owner) return;
    Session& s = *active_;
    const auto now = std::chrono::steady_clock::now();
    // Within a millisecond of the end counts as the end (the timer's accuracy).
    const bool final = now + std::chrono::milliseconds(1) >= s.ends;
    if (final) {
        if (auto r = s.session->stop(); !r) {
            server_.send(*s.owner, Response{error_reply(r.error())});
            end_session();
            return;
        }
    }
    // Every period reads into the same reports and writes the same JSON tree, so that a
    // stream's records allocate (almost) nothing: only their numbers change.
    if (auto r = s.session->read(s.now); !r) {
        server_.send(*s.owner, Response{error_reply(r.error())});
        end_session();
        return;
    }
    const std::uint64_t owner = *s.owner;
    if (s.stream) {
        ++s.period;
        s.delta = s.now;  // assigned element by element: no allocation once the sizes hold
        s.delta.subtract(s.last);
        protocol::make_report(s.session->plan(), s.delta, s.per_cpu, s.period, false, s.record);
        if (!protocol::update_json(s.record_json, s.record)) {
            s.record_json = protocol::to_json(s.record);
        }
        Reply r;
        r.parameters["report"] = std::move(s.record_json);
        // The plan does not change: the first record and the totals carry it.
        if (s.period == 1) {
            r.parameters["plan"] =
                protocol::to_json(protocol::make_plan_message(s.session->plan()));
        }
        r.continues = true;
        auto text = std::make_shared<const std::string>(monitor::varlink::encode(r));
        s.record_json = std::move(r.parameters["report"]);
        // The next period starts here; after the final one the totals below still need it.
        if (!final) std::swap(s.last, s.now);
        if (!server_.send(owner, Response{std::move(text), true})) return;  // the session ended
    }
    if (final) {
        Reply r;
        r.parameters =
            json{{"plan", protocol::to_json(protocol::make_plan_message(active_->session->plan()))},
                 {"report",
                  protocol::to_json(protocol::make_report(active_->session->plan(), s.now,
                                                          active_->per_cpu, std::nullopt, true))}};
        spdlog::info("Counter session ended ({})", active_->started_by);
        end_session();
        server_.send(owner, Response{std::move(r)});
        return;
    }
    const auto next = period_end(now + *s.interval);
    sd_event_source_set_time(
        period_timer_.get(),
        static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(next.time_since_epoch())
                .count()));
    sd_event_source_set_enabled(period_timer_.get(), SD_EVENT_ONESHOT);
}

void CounterService::connection_closed(std::uint64_t connection) {
    if (active_ && active_->owner == connection) {
        spdlog::info("Counter session ended: its client went away ({})", active_->started_by);
        end_session();
    }
}

void CounterService::end_session() {
    slice_timer_.reset();
    period_timer_.reset();
    active_.reset();  // closes every counter
}

}  // namespace monitord
