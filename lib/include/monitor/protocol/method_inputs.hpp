// The parameters of each method of the interfaces, as C++ (the `In` of its Method descriptor):
// what a client fills in and sends with to_json(), and what the daemon's handler receives,
// read once with read_input() from a call already checked against the interface file. Shapes
// as in lib/protocol/io.monitord.Monitor.varlink and org.varlink.service.varlink.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "monitor/protocol/counter_messages.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitor/protocol/profile_messages.hpp"

namespace monitor::protocol {

// A method without parameters.
struct NoInput {
    bool operator==(const NoInput&) const = default;
};

// org.varlink.service.GetInterfaceDescription
struct InterfaceNameIn {
    std::string interface;
    bool operator==(const InterfaceNameIn&) const = default;
};

// GetLoading: the LoadingQuery of monitor_messages.hpp.

// GetHistoryRuns: the newest `most` runs.
struct HistoryRunsIn {
    std::optional<std::int64_t> most;
    bool operator==(const HistoryRunsIn&) const = default;
};

// ListEvents: only the events of one PMU, or every PMU's.
struct ListEventsIn {
    std::optional<std::string> pmu;
    bool operator==(const ListEventsIn&) const = default;
};

// PlanCounters, StartCounters.
struct CounterRequestIn {
    CounterRequest request;
    bool operator==(const CounterRequestIn&) const = default;
};

struct CollectCountersIn {
    CounterRequest request;
    std::chrono::milliseconds duration{0};
    std::optional<std::chrono::milliseconds> interval;  // interval_ms
    bool operator==(const CollectCountersIn&) const = default;
};

// ResetCounters, PauseCounters, ResumeCounters: the standing session named, or the running
// one.
struct CounterSessionIn {
    std::optional<std::string> session;
    bool operator==(const CounterSessionIn&) const = default;
};

// GetStandingCounters: only the session named, or every one.
struct StandingCountersIn {
    std::optional<std::string> name;
    bool operator==(const StandingCountersIn&) const = default;
};

struct ProfileIn {
    ProfileRequest request;
    std::optional<std::chrono::milliseconds> duration;
    std::optional<std::chrono::milliseconds> interval;  // interval_ms
    bool operator==(const ProfileIn&) const = default;
};

struct WatchOverflowsIn {
    OverflowRequest request;
    std::optional<std::chrono::milliseconds> duration;
    std::optional<std::chrono::milliseconds> batch;  // batch_ms
    bool operator==(const WatchOverflowsIn&) const = default;
};

nlohmann::json to_json(const NoInput& in);
nlohmann::json to_json(const InterfaceNameIn& in);
nlohmann::json to_json(const HistoryRunsIn& in);
nlohmann::json to_json(const ListEventsIn& in);
nlohmann::json to_json(const CounterRequestIn& in);
nlohmann::json to_json(const CollectCountersIn& in);
nlohmann::json to_json(const CounterSessionIn& in);
nlohmann::json to_json(const StandingCountersIn& in);
nlohmann::json to_json(const ProfileIn& in);
nlohmann::json to_json(const WatchOverflowsIn& in);

// Reads a call's parameters into `in` (std::invalid_argument for a value the interface does
// not name, which a checked call has none of).
void read_input(const nlohmann::json& j, NoInput& in);
void read_input(const nlohmann::json& j, InterfaceNameIn& in);
void read_input(const nlohmann::json& j, LoadingQuery& in);
void read_input(const nlohmann::json& j, HistoryRunsIn& in);
void read_input(const nlohmann::json& j, ListEventsIn& in);
void read_input(const nlohmann::json& j, CounterRequestIn& in);
void read_input(const nlohmann::json& j, CollectCountersIn& in);
void read_input(const nlohmann::json& j, CounterSessionIn& in);
void read_input(const nlohmann::json& j, StandingCountersIn& in);
void read_input(const nlohmann::json& j, ProfileIn& in);
void read_input(const nlohmann::json& j, WatchOverflowsIn& in);

template <typename In>
In input_from_json(const nlohmann::json& j) {
    In in{};
    read_input(j, in);
    return in;
}

}  // namespace monitor::protocol
