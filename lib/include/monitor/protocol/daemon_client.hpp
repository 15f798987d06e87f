// A client's link to monitord (monctl, monitord-exporter): finds the socket, makes a call,
// and reads the reply into the method's type (or, for an untyped call, checks it against the
// interface file).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/method_inputs.hpp"
#include "monitor/protocol/method_outputs.hpp"
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

    // The same, with the method's parameters and replies as C++ (method_inputs.hpp,
    // method_outputs.hpp). A reply that cannot be read into the method's Out is BADDATA: the
    // reader is the check (it reads every field the interface gives the reply, a test holds
    // it to that), so the reply is not walked a second time against the interface file.
    template <typename In, typename Out>
    monitor::Result<Out> call(const Method<In, Out>& method, const In& in) {
        auto reply = call(method, to_json(in), Check::ByReader);
        if (!reply) return std::unexpected(reply.error());
        return read<Out>(method, *reply);
    }
    // A method without parameters, or with only optional ones left out.
    template <typename In, typename Out>
    monitor::Result<Out> call(const Method<In, Out>& method) {
        return call(method, In{});
    }
    template <typename In, typename Out>
    monitor::Result<std::optional<Out>> call_unless(const Method<In, Out>& method,
                                                    std::string_view absent, const In& in = In{}) {
        auto reply = call_unless(method, absent, to_json(in), Check::ByReader);
        if (!reply) return std::unexpected(reply.error());
        if (!*reply) return std::optional<Out>{};
        auto out = read<Out>(method, **reply);
        if (!out) return std::unexpected(out.error());
        return std::optional<Out>{std::move(*out)};
    }
    template <typename In, typename Out>
    monitor::Result<void> stream(
        const Method<In, Out>& method, const In& in,
        const std::type_identity_t<std::function<bool(const Out&)>>& on_reply) {
        std::optional<monitor::Error> bad;
        auto r = stream(
            method, to_json(in),
            [&](const nlohmann::json& reply) {
                auto out = read<Out>(method, reply);
                if (!out) {
                    bad = out.error();
                    return false;
                }
                return on_reply(*out);
            },
            Check::ByReader);
        if (bad) return std::unexpected(std::move(*bad));
        return r;
    }

    const std::string& path() const { return path_; }
    // How long call() waits for a reply; 0 waits as long as it takes.
    void set_timeout(std::chrono::milliseconds t) { client_.set_timeout(t); }

  private:
    // Who checks a reply against the interface: the client, or the typed caller's reader.
    enum class Check { Interface, ByReader };
    monitor::Result<nlohmann::json> call(const MethodDescriptor& method,
                                         const nlohmann::json& parameters, Check check);
    monitor::Result<std::optional<nlohmann::json>> call_unless(const MethodDescriptor& method,
                                                               std::string_view absent,
                                                               const nlohmann::json& parameters,
                                                               Check check);
    monitor::Result<void> stream(const MethodDescriptor& method, const nlohmann::json& parameters,
                                 const std::function<bool(const nlohmann::json&)>& on_reply,
                                 Check check);

    // The reply's parameters read into `Out`; BADDATA naming what does not fit.
    template <typename Out>
    monitor::Result<Out> read(const MethodDescriptor& method, const nlohmann::json& reply) const {
        try {
            return output_from_json<Out>(reply);
        } catch (const std::exception& e) {
            return std::unexpected(mismatch(method, e.what()));
        }
    }
    monitor::Error mismatch(const MethodDescriptor& method, std::string_view why) const;

    monitor::Result<nlohmann::json> checked(const MethodDescriptor& method,
                                            monitor::Result<monitor::varlink::Reply> reply,
                                            Check check) const;

    DaemonClient(monitor::varlink::Client client, std::string path)
        : client_(std::move(client)), path_(std::move(path)) {}

    monitor::varlink::Client client_;
    std::string path_;
};

}  // namespace monitor::protocol
