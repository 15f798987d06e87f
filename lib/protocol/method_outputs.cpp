#include "monitor/protocol/method_outputs.hpp"

namespace monitor::protocol {

using nlohmann::json;

namespace {

template <typename T, typename F>
json array_of(const std::vector<T>& items, F&& to) {
    json a = json::array();
    for (const auto& item : items) a.push_back(to(item));
    return a;
}

template <typename T, typename F>
std::vector<T> vector_of(const json& a, F&& from) {
    std::vector<T> items;
    items.reserve(a.size());
    for (const auto& j : a) items.push_back(from(j));
    return items;
}

// The member `key` when it is there and not null.
const json* member(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

json to_json(const HistoryRunInfo& r) {
    json j{{"id", r.id},
           {"boot_id", r.boot_id},
           {"started", r.started},
           {"ended", r.ended},
           {"last_seconds", array_of(r.last_seconds, [](const HistoryRunSecond& s) {
                return json{{"at", s.at}, {"machine", array_of(s.machine, [](const auto& v) {
                                               json l{{"source", v.source}};
                                               if (v.load) l["load"] = *v.load;
                                               return l;
                                           })}};
            })}};
    if (r.last) j["last"] = *r.last;
    if (r.stopped) j["stopped"] = *r.stopped;
    if (r.watchdog) j["watchdog"] = *r.watchdog;
    if (r.boot_reset_by_watchdog) j["boot_reset_by_watchdog"] = *r.boot_reset_by_watchdog;
    return j;
}

HistoryRunInfo history_run_from_json(const json& j) {
    HistoryRunInfo r;
    r.id = j.at("id").get<std::int64_t>();
    r.boot_id = j.at("boot_id").get<std::string>();
    r.started = j.at("started").get<std::int64_t>();
    r.ended = j.at("ended").get<std::string>();
    if (const auto* v = member(j, "last")) r.last = v->get<std::int64_t>();
    if (const auto* v = member(j, "stopped")) r.stopped = v->get<std::int64_t>();
    if (const auto* v = member(j, "watchdog")) r.watchdog = v->get<std::string>();
    if (const auto* v = member(j, "boot_reset_by_watchdog")) {
        r.boot_reset_by_watchdog = v->get<bool>();
    }
    r.last_seconds = vector_of<HistoryRunSecond>(j.at("last_seconds"), [](const json& s) {
        return HistoryRunSecond{
            s.at("at").get<std::int64_t>(),
            vector_of<SourceLoadValue>(s.at("machine"), [](const json& v) {
                const auto* load = member(v, "load");
                return SourceLoadValue{
                    v.at("source").get<std::string>(),
                    load ? std::optional<double>(load->get<double>()) : std::nullopt};
            })};
    });
    return r;
}

}  // namespace

json to_json(const HistoryRunsOut& out) {
    return json{{"file", out.file},
                {"runs", array_of(out.runs, [](const HistoryRunInfo& r) { return to_json(r); })}};
}

void read_output(const json& j, HistoryRunsOut& out) {
    out.file = j.at("file").get<std::string>();
    out.runs = vector_of<HistoryRunInfo>(j.at("runs"), history_run_from_json);
}

json to_json(const ServiceInfo& out) {
    return json{{"vendor", out.vendor},
                {"product", out.product},
                {"version", out.version},
                {"url", out.url},
                {"interfaces", out.interfaces}};
}

json to_json(const InterfaceDescription& out) {
    return json{{"description", out.description}};
}

json to_json(const PmuInfoOut& out) {
    json j{{"pmus", array_of(out.pmus, [](const perf::PmuInfo& p) { return to_json(p); })}};
    if (out.paranoid) j["paranoid"] = *out.paranoid;
    return j;
}

json to_json(const EventsOut& out) {
    return json{{"events", array_of(out.events, [](const EventListing& e) { return to_json(e); })}};
}

json to_json(const MetricsOut& out) {
    return json{
        {"metrics", array_of(out.metrics, [](const MetricListing& m) { return to_json(m); })}};
}

json to_json(const PlanOut& out) {
    return json{{"plan", to_json(out.plan)}};
}

json to_json(const CollectOut& out) {
    json j(json::value_t::object);
    if (out.plan) j["plan"] = to_json(*out.plan);
    j["report"] = to_json(out.report);
    return j;
}

json to_json(const StartCountersOut& out) {
    json j{{"plan", to_json(out.plan)}};
    if (out.threads) j["threads"] = *out.threads;
    return j;
}

json to_json(const ReportOut& out) {
    return json{{"report", to_json(out.report)}};
}

json to_json(const StandingSessionsOut& out) {
    return json{
        {"sessions", array_of(out.sessions, [](const StandingSession& s) { return to_json(s); })}};
}

json to_json(const ProfileOut& out) {
    json j(json::value_t::object);
    if (out.started) j["started"] = *out.started;
    if (out.report) j["report"] = to_json(*out.report);
    return j;
}

json to_json(const OverflowsOut& out) {
    json j(json::value_t::object);
    if (out.started) j["started"] = *out.started;
    if (out.batch) j["batch"] = to_json(*out.batch);
    return j;
}

std::string CollectRecords::encode(const CollectOut& out, bool continues) {
    if (!update_json(report_, out.report)) report_ = to_json(out.report);
    varlink::Reply reply;
    reply.parameters = json(json::value_t::object);
    if (out.plan) reply.parameters["plan"] = to_json(*out.plan);
    reply.parameters["report"] = std::move(report_);
    reply.continues = continues;
    auto text = varlink::encode(reply);
    report_ = std::move(reply.parameters["report"]);
    return text;
}

void read_output(const json& j, ServiceInfo& out) {
    out.vendor = j.at("vendor").get<std::string>();
    out.product = j.at("product").get<std::string>();
    out.version = j.at("version").get<std::string>();
    out.url = j.at("url").get<std::string>();
    out.interfaces = j.at("interfaces").get<std::vector<std::string>>();
}

void read_output(const json& j, InterfaceDescription& out) {
    out.description = j.at("description").get<std::string>();
}

void read_output(const json& j, DaemonStatus& out) {
    out = status_from_json(j);
}

void read_output(const json& j, LoadingReport& out) {
    out = loading_from_json(j);
}

void read_output(const json& j, PmuInfoOut& out) {
    out.pmus = vector_of<perf::PmuInfo>(j.at("pmus"), pmu_from_json);
    out.paranoid.reset();
    if (const auto* p = member(j, "paranoid")) out.paranoid = p->get<int>();
}

void read_output(const json& j, EventsOut& out) {
    out.events = vector_of<EventListing>(j.at("events"), event_from_json);
}

void read_output(const json& j, MetricsOut& out) {
    out.metrics = vector_of<MetricListing>(j.at("metrics"), metric_listing_from_json);
}

void read_output(const json& j, PlanOut& out) {
    out.plan = counter_plan_from_json(j.at("plan"));
}

void read_output(const json& j, CollectOut& out) {
    out.plan.reset();
    if (const auto* p = member(j, "plan")) out.plan = counter_plan_from_json(*p);
    out.report = counter_report_from_json(j.at("report"));
}

void read_output(const json& j, StartCountersOut& out) {
    out.plan = counter_plan_from_json(j.at("plan"));
    out.threads.reset();
    if (const auto* t = member(j, "threads")) out.threads = t->get<int>();
}

void read_output(const json& j, ReportOut& out) {
    out.report = counter_report_from_json(j.at("report"));
}

void read_output(const json& j, StandingSessionsOut& out) {
    out.sessions = vector_of<StandingSession>(j.at("sessions"), standing_session_from_json);
}

void read_output(const json& j, ProfileOut& out) {
    out.started.reset();
    out.report.reset();
    if (const auto* s = member(j, "started")) out.started = s->get<bool>();
    if (const auto* r = member(j, "report")) out.report = profile_message_from_json(*r);
}

void read_output(const json& j, OverflowsOut& out) {
    out.started.reset();
    out.batch.reset();
    if (const auto* s = member(j, "started")) out.started = s->get<bool>();
    if (const auto* b = member(j, "batch")) out.batch = overflow_batch_from_json(*b);
}

}  // namespace monitor::protocol
