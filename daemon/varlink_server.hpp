// A varlink server on sd-event: accepts connections on the control socket, splits the byte
// stream into NUL-terminated messages, checks each call against the interface files and the
// access rules, and dispatches it to the method's handler. One thread, non-blocking I/O
// throughout.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "access_rules.hpp"
#include "monitor/protocol/message_buffer.hpp"
#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/method_inputs.hpp"
#include "monitor/protocol/method_outputs.hpp"
#include "monitor/protocol/varlink_idl.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "monitor/unique_fd.hpp"
#include "peer.hpp"
#include "sd_event_ptr.hpp"

namespace monitord {

struct ServerLimits {
    std::size_t max_connections = 1024;  // lowered to fit RLIMIT_NOFILE by the caller
    std::size_t max_per_user = 128;      // for peers other than root, so one user cannot
                                         // take every connection
    std::size_t max_message = monitor::varlink::kMaxMessageSize;
    std::size_t max_pending_output = std::size_t{1} << 20;  // stop reading above this
    // What the replies waiting to be read by one user's connections may take, root's and the
    // daemon's own user's excepted ([limits] reply-memory-per-user): a reply past it is
    // replaced by the error LimitExceeded, which ends its stream.
    std::size_t max_pending_per_user = std::size_t{64} << 20;
    // A connection with no call under way closes after this long without a byte from its
    // client ([limits] idle-timeout); zero: never.
    std::chrono::milliseconds idle_timeout = std::chrono::minutes(5);
};

class VarlinkServer {
  public:
    // A reply already encoded (the message text without its NUL), for replies that many
    // calls share: encoding dominates the cost of a call.
    using EncodedReply = std::shared_ptr<const std::string>;
    struct Response {
        // Implicit, so that a handler returns a Reply, or a reply already encoded, as it is.
        // NOLINTBEGIN(google-explicit-constructor)
        Response(monitor::varlink::Reply r) : continues(r.continues) { message = std::move(r); }
        Response(EncodedReply r, bool more = false) : message(std::move(r)), continues(more) {}
        // NOLINTEND(google-explicit-constructor)
        // No reply now: the handler answers later with send(), the last reply without
        // "continues". Until then the connection reads no further calls.
        static Response later() {
            Response r{monitor::varlink::Reply{}};
            r.deferred = true;
            return r;
        }
        std::variant<monitor::varlink::Reply, EncodedReply> message;
        // More replies follow (the reply's "continues" is true): the call became a stream,
        // which the handler feeds with send(). The connection reads no further calls.
        bool continues = false;
        bool deferred = false;
    };
    // Handlers get calls whose parameters match the method's input type.
    using Handler = std::function<Response(const monitor::varlink::Call&, const Peer&)>;

    struct Info {
        std::string vendor;
        std::string product;
        std::string version;
        std::string url;
    };

    // `listen_fd` and `access` stay owned by the caller and must outlive the server. Every
    // call is checked against `access` before its handler runs.
    VarlinkServer(sd_event* event, int listen_fd, Info info, const AccessRules& access,
                  ServerLimits limits = {});
    ~VarlinkServer();
    VarlinkServer(const VarlinkServer&) = delete;
    VarlinkServer& operator=(const VarlinkServer&) = delete;

    // Serves `iface`, which must be one of the embedded interfaces. org.varlink.service is
    // always served.
    void add_interface(const monitor::varlink::Interface& iface);
    // Handles the method `method` describes, its parameters read into the method's `In` for
    // `handler` (called with them, the call and its peer).
    // The handler replies with the method's Out: monitor::protocol::reply_of(method, out).
    template <typename In, typename Out, typename F>
    requires std::is_invocable_r_v<Response, F, const In&, const monitor::varlink::Call&,
                                   const Peer&>
    void add_method(const monitor::protocol::Method<In, Out>& method, F handler) {
        add_method(static_cast<const monitor::protocol::MethodDescriptor&>(method),
                   [handler = std::move(handler)](const monitor::varlink::Call& call,
                                                  const Peer& peer) -> Response {
                       return handler(monitor::protocol::input_from_json<In>(call.parameters), call,
                                      peer);
                   });
    }
    // The same, for a handler that reads the call itself.
    void add_method(const monitor::protocol::MethodDescriptor& method, Handler handler);
    // A method by its qualified name ("io.monitord.Monitor.GetLoading"): the server's tests,
    // which serve methods of their own (without a descriptor, the access rules refuse them).
    void add_method(const std::string& method, Handler handler);

    monitor::Result<void> start();

    // Sends one more reply of a stream, or the reply of a deferred call, to `connection`;
    // false when the connection is gone (the caller then forgets the stream). A reply without
    // "continues" ends the stream: the connection reads calls again.
    bool send(std::uint64_t connection, const Response& response);

    // Called with the connection's id when a connection closes, so that what it owned (a
    // stream, a counting session) can be released.
    void set_close_handler(std::function<void(std::uint64_t)> handler) {
        on_close_ = std::move(handler);
    }

    std::size_t connection_count() const { return connections_.size(); }

    // From now on (a reload): connections idle for longer close at the next check.
    void set_idle_timeout(std::chrono::milliseconds timeout);
    // From now on (a reload): replies are held to it as they are queued.
    void set_max_pending_per_user(std::size_t bytes) { limits_.max_pending_per_user = bytes; }
    const ServerLimits& limits() const { return limits_; }
    // The bytes of replies waiting for `uid`'s connections to read them.
    std::size_t pending_of(uid_t uid) const;

  private:
    struct Connection;

    static int on_accept(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    static int on_accept_retry(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_idle_check(sd_event_source* s, uint64_t usec, void* userdata);

    void accept_all();
    void handle_io(Connection& c, uint32_t revents);
    void read_input(Connection& c);
    // The most input a connection may have waiting unread (InvalidMessage and close past it).
    static std::size_t max_unread(const Connection& c);
    void process_messages(Connection& c);
    void handle_message(Connection& c, std::string_view text);
    Response dispatch(const monitor::varlink::Call& call, const Peer& peer);
    // Queue a reply for `c`; false when the user's budget for waiting replies had no room and
    // the error LimitExceeded went instead.
    bool queue(Connection& c, const monitor::varlink::Reply& reply);
    bool queue(Connection& c, const Response& response);
    bool append(Connection& c, std::string_view text);
    void release(const Connection& c, std::size_t bytes);
    bool flush(Connection& c);
    void update_events(Connection& c);
    void close_connection(Connection& c, const char* why);
    void warn_refusal(const std::string& why);
    // Closes the connections idle for the timeout, then looks again in a quarter of it.
    void close_idle();
    void arm_idle_check();

    monitor::varlink::Reply get_info() const;
    monitor::varlink::Reply get_interface_description(const std::string& name) const;

    sd_event* event_;
    int listen_fd_;
    Info info_;
    const AccessRules& access_;
    ServerLimits limits_;
    SourcePtr accept_source_;
    SourcePtr accept_retry_;
    SourcePtr idle_check_;
    std::map<std::string, const monitor::varlink::Interface*, std::less<>> interfaces_;
    std::map<std::string, Handler, std::less<>> handlers_;
    std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> connections_;
    std::unordered_map<uid_t, std::size_t> per_user_;
    std::unordered_map<uid_t, std::size_t> pending_per_user_;
    std::uint64_t refused_ = 0;
    std::chrono::steady_clock::time_point last_refusal_log_{};
    // Since when accept() has failed for want of descriptors or memory, and when that was
    // last logged.
    std::optional<std::chrono::steady_clock::time_point> starved_since_;
    std::chrono::steady_clock::time_point last_starved_log_{};
    std::uint64_t next_id_ = 1;
    std::function<void(std::uint64_t)> on_close_;
};

}  // namespace monitord
