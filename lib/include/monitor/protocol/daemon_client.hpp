// A client's link to monitord (monctl, monitord-exporter): finds the socket, makes a call,
// checks the reply against the interface file.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/method_inputs.hpp"
#include "monitor/protocol/varlink_client.hpp"

namespace monitor::protocol {

// The status code of one of the daemon's own errors ("io.monitord.Monitor.PerfRunning" ->
// PRFRUN); nullopt for the others.
std::optional<monitor::Status> status_of_error(std::string_view error);

class DaemonClient {
  public:
    // Connects to `socket`, or when empty to the first of the usual places that answers.
    // The error says where it looked and how to start the daemon.
    static monitor::Result<DaemonClient> connect(const std::string& socket);

    // Calls `method`. A varlink error reply becomes an Error naming it and its parameters; a
    // reply that does not match the interface is BADDATA.
    monitor::Result<nlohmann::json> call(
        const MethodDescriptor& method,
        const nlohmann::json& parameters = nlohmann::json::object());

    // The same, where the daemon's error `absent` ("PerfNotRunning") says there is nothing to
    // show rather than that something failed: nullopt then.
    monitor::Result<std::optional<nlohmann::json>> call_unless(
        const MethodDescriptor& method, std::string_view absent,
        const nlohmann::json& parameters = nlohmann::json::object());

    // Calls `method` with "more" and hands each reply to `on_reply` until the daemon ends
    // the stream, closes the connection, or `on_reply` returns false.
    monitor::Result<void> stream(const MethodDescriptor& method, const nlohmann::json& parameters,
                                 const std::function<bool(const nlohmann::json&)>& on_reply);

    // The same, with the method's parameters as C++ (method_inputs.hpp).
    template <typename In>
    monitor::Result<nlohmann::json> call(const Method<In>& method, const In& in) {
        return call(method, to_json(in));
    }
    template <typename In>
    monitor::Result<std::optional<nlohmann::json>> call_unless(const Method<In>& method,
                                                               std::string_view absent,
                                                               const In& in) {
        return call_unless(method, absent, to_json(in));
    }
    template <typename In>
    monitor::Result<void> stream(const Method<In>& method, const In& in,
                                 const std::function<bool(const nlohmann::json&)>& on_reply) {
        return stream(method, to_json(in), on_reply);
    }

    const std::string& path() const { return path_; }
    // How long call() waits for a reply; 0 waits as long as it takes.
    void set_timeout(std::chrono::milliseconds t) { client_.set_timeout(t); }

  private:
    monitor::Result<nlohmann::json> checked(const MethodDescriptor& method,
                                            monitor::Result<monitor::varlink::Reply> reply) const;

    DaemonClient(monitor::varlink::Client client, std::string path)
        : client_(std::move(client)), path_(std::move(path)) {}

    monitor::varlink::Client client_;
    std::string path_;
};

}  // namespace monitor::protocol
