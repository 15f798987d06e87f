#include "monitor/protocol/method_inputs.hpp"

namespace monitor::protocol {

using nlohmann::json;

namespace {

std::optional<std::string> optional_string(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return it->get<std::string>();
}

std::optional<std::chrono::milliseconds> optional_ms(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return std::chrono::milliseconds(it->get<std::int64_t>());
}

void put(json& j, const char* key, const std::optional<std::string>& v) {
    if (v) j[key] = *v;
}

void put(json& j, const char* key, const std::optional<std::chrono::milliseconds>& v) {
    if (v) j[key] = v->count();
}

}  // namespace

json to_json(const NoInput&) {
    return json::object();
}

json to_json(const InterfaceNameIn& in) {
    return json{{"interface", in.interface}};
}

json to_json(const HistoryRunsIn& in) {
    json j = json::object();
    if (in.most) j["most"] = *in.most;
    return j;
}

json to_json(const ListEventsIn& in) {
    json j = json::object();
    put(j, "pmu", in.pmu);
    return j;
}

json to_json(const CounterRequestIn& in) {
    return json{{"request", to_json(in.request)}};
}

json to_json(const CollectCountersIn& in) {
    json j{{"request", to_json(in.request)}, {"duration_ms", in.duration.count()}};
    put(j, "interval_ms", in.interval);
    return j;
}

json to_json(const CounterSessionIn& in) {
    json j = json::object();
    put(j, "session", in.session);
    return j;
}

json to_json(const StandingCountersIn& in) {
    json j = json::object();
    put(j, "name", in.name);
    return j;
}

json to_json(const ProfileIn& in) {
    json j{{"request", to_json(in.request)}};
    put(j, "duration_ms", in.duration);
    put(j, "interval_ms", in.interval);
    return j;
}

json to_json(const WatchOverflowsIn& in) {
    json j{{"request", to_json(in.request)}};
    put(j, "duration_ms", in.duration);
    put(j, "batch_ms", in.batch);
    return j;
}

void read_input(const json&, NoInput&) {}

void read_input(const json& j, InterfaceNameIn& in) {
    in.interface = j.at("interface").get<std::string>();
}

void read_input(const json& j, LoadingQuery& in) {
    in = loading_query_from_json(j);
}

void read_input(const json& j, HistoryRunsIn& in) {
    auto it = j.find("most");
    in.most = it == j.end() || it->is_null() ? std::nullopt
                                             : std::optional<std::int64_t>(it->get<std::int64_t>());
}

void read_input(const json& j, ListEventsIn& in) {
    in.pmu = optional_string(j, "pmu");
}

void read_input(const json& j, CounterRequestIn& in) {
    in.request = counter_request_from_json(j.at("request"));
}

void read_input(const json& j, CollectCountersIn& in) {
    in.request = counter_request_from_json(j.at("request"));
    in.duration = std::chrono::milliseconds(j.at("duration_ms").get<std::int64_t>());
    in.interval = optional_ms(j, "interval_ms");
}

void read_input(const json& j, CounterSessionIn& in) {
    in.session = optional_string(j, "session");
}

void read_input(const json& j, StandingCountersIn& in) {
    in.name = optional_string(j, "name");
}

void read_input(const json& j, ProfileIn& in) {
    in.request = profile_request_from_json(j.at("request"));
    in.duration = optional_ms(j, "duration_ms");
    in.interval = optional_ms(j, "interval_ms");
}

void read_input(const json& j, WatchOverflowsIn& in) {
    in.request = overflow_request_from_json(j.at("request"));
    in.duration = optional_ms(j, "duration_ms");
    in.batch = optional_ms(j, "batch_ms");
}

}  // namespace monitor::protocol
