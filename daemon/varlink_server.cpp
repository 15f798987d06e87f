#include "varlink_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "monitor/status.hpp"

namespace monitord {

namespace {

// The supplementary groups of a connected peer, as they were when it connected (Linux 4.13).
std::vector<gid_t> peer_groups(int fd) {
    std::vector<gid_t> groups(64);
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) < 0) {
        if (errno != ERANGE) return {};
        groups.resize(len / sizeof(gid_t));
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) < 0) return {};
    }
    groups.resize(len / sizeof(gid_t));
    return groups;
}

}  // namespace

using monitor::varlink::Call;
using monitor::varlink::make_error;
using monitor::varlink::Reply;
using nlohmann::json;

namespace {

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kReadPerWakeup = 4 * kReadChunk;  // then let other clients run
constexpr int kAcceptPerWakeup = 64;
constexpr std::uint64_t kAcceptRetryUsec = 100'000;  // after EMFILE

constexpr const char* kInvalidMessage = "io.monitord.Monitor.InvalidMessage";

Reply invalid_message(std::string reason) {
    return make_error(kInvalidMessage, json{{"reason", std::move(reason)}});
}

}  // namespace

struct VarlinkServer::Connection {
    VarlinkServer* server;
    monitor::UniqueFd fd;
    SourcePtr source;
    monitor::varlink::MessageBuffer in;
    std::string out;
    std::size_t out_sent = 0;
    Peer peer;
    bool peer_closed = false;  // read returned EOF
    bool closing = false;      // close once the output is sent
    bool dead = false;         // close now
    bool streaming = false;    // a "more" call is answered by send(): no further calls
    // Its replies count against its user's reply-memory-per-user (not a privileged peer's).
    bool budgeted = false;
    // When the client last sent a byte, or its last call under way ended.
    std::chrono::steady_clock::time_point last_input = std::chrono::steady_clock::now();

    Connection(VarlinkServer* s, std::size_t max_message) : server(s), in(max_message) {}
    std::size_t pending() const { return out.size() - out_sent; }
};

VarlinkServer::VarlinkServer(sd_event* event, int listen_fd, Info info, const AccessRules& access,
                             ServerLimits limits)
    : event_(event),
      listen_fd_(listen_fd),
      info_(std::move(info)),
      access_(access),
      limits_(limits) {
    const auto* service = monitor::varlink::builtin_interface(monitor::varlink::kServiceInterface);
    add_interface(*service);
    namespace method = monitor::protocol::method;
    add_method(method::GetInfo,
               [this](const monitor::protocol::NoInput&, const Call&, const Peer&) -> Response {
                   return get_info();
               });
    add_method(method::GetInterfaceDescription,
               [this](const monitor::protocol::InterfaceNameIn& in, const Call&,
                      const Peer&) -> Response { return get_interface_description(in.interface); });
}

VarlinkServer::~VarlinkServer() = default;

void VarlinkServer::add_interface(const monitor::varlink::Interface& iface) {
    interfaces_[iface.name()] = &iface;
}

void VarlinkServer::add_method(const monitor::protocol::MethodDescriptor& method, Handler handler) {
    handlers_[std::string{method.qualified}] = std::move(handler);
}

void VarlinkServer::add_method(const std::string& method, Handler handler) {
    handlers_[method] = std::move(handler);
}

monitor::Result<void> VarlinkServer::start() {
    sd_event_source* s = nullptr;
    int r = sd_event_add_io(event_, &s, listen_fd_, EPOLLIN, on_accept, this);
    if (r < 0) return monitor::fail_errno(-r, "watch the control socket");
    accept_source_.reset(s);
    sd_event_source_set_description(s, "varlink-accept");
    arm_idle_check();
    return {};
}

void VarlinkServer::set_idle_timeout(std::chrono::milliseconds timeout) {
    limits_.idle_timeout = timeout;
    if (accept_source_) arm_idle_check();
}

void VarlinkServer::arm_idle_check() {
    if (limits_.idle_timeout <= std::chrono::milliseconds::zero()) {
        idle_check_.reset();
        return;
    }
    // A connection closes between one and one and a quarter timeouts after its last byte: one
    // wake-up per quarter of the timeout (75 s by default), whatever the number of clients.
    const auto period = std::max<std::chrono::microseconds>(limits_.idle_timeout / 4,
                                                            std::chrono::milliseconds(10));
    const auto usec = static_cast<std::uint64_t>(period.count());
    if (idle_check_) {
        sd_event_source_set_time_relative(idle_check_.get(), usec);
        sd_event_source_set_enabled(idle_check_.get(), SD_EVENT_ONESHOT);
        return;
    }
    sd_event_source* t = nullptr;
    if (sd_event_add_time_relative(event_, &t, CLOCK_MONOTONIC, usec, usec / 10, on_idle_check,
                                   this) < 0) {
        spdlog::warn("Cannot watch for idle control connections: they stay open");
        return;
    }
    idle_check_.reset(t);
    sd_event_source_set_description(t, "varlink-idle");
}

int VarlinkServer::on_idle_check(sd_event_source*, uint64_t, void* userdata) {
    static_cast<VarlinkServer*>(userdata)->close_idle();
    return 0;
}

void VarlinkServer::close_idle() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<Connection*> idle;
    for (const auto& [id, c] : connections_) {
        // A stream or a deferred reply is under way: the daemon is the one to speak.
        if (!c->streaming && now - c->last_input >= limits_.idle_timeout) idle.push_back(c.get());
    }
    for (Connection* c : idle) close_connection(*c, "closed: idle for [limits] idle-timeout");
    arm_idle_check();
}

int VarlinkServer::on_accept(sd_event_source*, int, uint32_t, void* userdata) {
    static_cast<VarlinkServer*>(userdata)->accept_all();
    return 0;
}

int VarlinkServer::on_accept_retry(sd_event_source*, uint64_t, void* userdata) {
    auto* self = static_cast<VarlinkServer*>(userdata);
    sd_event_source_set_enabled(self->accept_source_.get(), SD_EVENT_ON);
    self->accept_retry_.reset();
    return 0;
}

void VarlinkServer::accept_all() {
    for (int i = 0; i < kAcceptPerWakeup; ++i) {
        monitor::UniqueFd fd{::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
        if (!fd) {
            int err = errno;
            if (err == EAGAIN || err == EINTR || err == ECONNABORTED) return;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                // Out of descriptors or memory: pause accepting instead of spinning, and say so
                // once a minute rather than at every retry.
                const auto now = std::chrono::steady_clock::now();
                if (!starved_since_ || now - last_starved_log_ >= std::chrono::minutes(1)) {
                    rlimit nofile{};
                    ::getrlimit(RLIMIT_NOFILE, &nofile);
                    spdlog::warn(
                        "Cannot accept control connections: {} ({} connections open, open "
                        "descriptors limited to {}); the clients wait in the socket's queue, "
                        "retried every 100 ms",
                        monitor::errno_message(err), connections_.size(), nofile.rlim_cur);
                    last_starved_log_ = now;
                    if (!starved_since_) starved_since_ = now;
                }
                sd_event_source_set_enabled(accept_source_.get(), SD_EVENT_OFF);
                sd_event_source* t = nullptr;
                if (sd_event_add_time_relative(event_, &t, CLOCK_MONOTONIC, kAcceptRetryUsec, 0,
                                               on_accept_retry, this) >= 0) {
                    accept_retry_.reset(t);
                } else {
                    sd_event_source_set_enabled(accept_source_.get(), SD_EVENT_ON);
                }
                return;
            }
            spdlog::warn("Failed to accept a control connection: {}", monitor::errno_message(err));
            return;
        }
        if (starved_since_) {
            spdlog::info(
                "Accepting control connections again, after {:.1f} s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - *starved_since_)
                    .count());
            starved_since_.reset();
        }
        auto c = std::make_unique<Connection>(this, limits_.max_message);
        c->peer.connection = next_id_++;
        socklen_t len = sizeof(c->peer.cred);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &c->peer.cred, &len) < 0) {
            c->peer.cred = ucred{0, static_cast<uid_t>(-1), static_cast<gid_t>(-1)};
        }
        c->peer.groups = peer_groups(fd.get());
        c->budgeted = !c->peer.privileged();
        const uid_t uid = c->peer.cred.uid;
        if (connections_.size() >= limits_.max_connections) {
            warn_refusal(fmt::format("uid {}: {} clients are connected (the limit)", uid,
                                     connections_.size()));
            continue;  // fd closes here
        }
        if (uid != 0 && per_user_[uid] >= limits_.max_per_user) {
            warn_refusal(fmt::format("uid {}: it has {} connections (the limit per user)", uid,
                                     per_user_[uid]));
            continue;
        }
        sd_event_source* s = nullptr;
        int r = sd_event_add_io(event_, &s, fd.get(), EPOLLIN, on_io, c.get());
        if (r < 0) {
            spdlog::warn("Failed to watch a control connection: {}", monitor::errno_message(-r));
            continue;
        }
        c->source.reset(s);
        c->fd = std::move(fd);
        spdlog::debug("Control connection {} from pid {} uid {}", c->peer.connection,
                      c->peer.cred.pid, c->peer.cred.uid);
        auto id = c->peer.connection;
        ++per_user_[uid];
        connections_.emplace(id, std::move(c));
    }
}

void VarlinkServer::warn_refusal(const std::string& why) {
    ++refused_;
    auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log_ < std::chrono::seconds(10)) return;  // a flood: once in a while
    spdlog::warn("Refusing control connections ({} so far); the latest from {}", refused_, why);
    last_refusal_log_ = now;
}

int VarlinkServer::on_io(sd_event_source*, int, uint32_t revents, void* userdata) {
    auto* c = static_cast<Connection*>(userdata);
    c->server->handle_io(*c, revents);
    return 0;
}

void VarlinkServer::handle_io(Connection& c, uint32_t revents) {
    if (c.pending() > 0) flush(c);
    if (!c.dead && c.pending() == 0) {
        process_messages(c);  // those left over while output was pending
        if (c.pending() == 0 && !c.closing && !c.peer_closed &&
            (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
            read_input(c);
            if (!c.dead) process_messages(c);
        }
        if (!c.dead && !c.closing && c.in.too_large()) {
            queue(c, invalid_message("message larger than " + std::to_string(c.in.max_message()) +
                                     " bytes; closing the connection"));
            c.closing = true;
            c.in.discard();  // nothing more is read: the connection keeps no input meanwhile
        } else if (!c.dead && !c.closing && c.in.buffered() > max_unread(c)) {
            // While a stream runs no call is read: what is sent meanwhile waits, up to a
            // message's limit, so that a client cannot make the daemon buffer without bound.
            queue(c, invalid_message(fmt::format(
                         "{} bytes sent while a reply was under way, past the limit of {} (a "
                         "message's {} and one read's {}); send the next call once the reply "
                         "ends; closing the connection",
                         c.in.buffered(), max_unread(c), c.in.max_message(), kReadPerWakeup)));
            c.closing = true;
            c.in.discard();
        }
        if (!c.dead && !c.closing && c.peer_closed && c.pending() == 0) {
            // Everything complete was answered; what is left is an unterminated message.
            if (c.in.has_partial()) {
                queue(c, invalid_message("connection closed before the message's NUL terminator"));
            }
            c.closing = true;
        }
        if (!c.dead && c.pending() > 0) flush(c);
    }
    if (!c.dead && c.closing && c.pending() == 0) c.dead = true;
    if (c.dead) {
        close_connection(c, "closed");
        return;
    }
    update_events(c);
}

std::size_t VarlinkServer::max_unread(const Connection& c) {
    // A whole message and one wake-up's reading: only input that no call can use comes past
    // it (a call is read as soon as no reply is under way).
    return c.in.max_message() + kReadPerWakeup;
}

void VarlinkServer::read_input(Connection& c) {
    std::size_t total = 0;
    while (total < kReadPerWakeup) {
        auto space = c.in.prepare(kReadChunk);
        ssize_t n = ::recv(c.fd.get(), space.data(), space.size(), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return;
            spdlog::debug("Control connection {}: receive failed: {}", c.peer.connection,
                          monitor::errno_message(errno));
            c.dead = true;
            return;
        }
        if (n == 0) {
            c.peer_closed = true;
            return;
        }
        c.in.commit(static_cast<std::size_t>(n));
        c.last_input = std::chrono::steady_clock::now();
        total += static_cast<std::size_t>(n);
        // A short read drained the socket: skip the recv that would only say EAGAIN.
        if (static_cast<std::size_t>(n) < space.size()) return;
    }
}

void VarlinkServer::process_messages(Connection& c) {
    while (!c.closing && !c.dead && !c.streaming && c.pending() < limits_.max_pending_output) {
        auto msg = c.in.next();
        if (!msg) return;
        handle_message(c, *msg);
    }
}

void VarlinkServer::handle_message(Connection& c, std::string_view text) {
    auto call = monitor::varlink::parse_call(text);
    if (!call) {
        spdlog::debug("Control connection {}: {}", c.peer.connection, call.error().message);
        queue(c, invalid_message(call.error().message));
        return;
    }
    std::optional<Response> reply;
    try {
        reply.emplace(dispatch(*call, c.peer));
    } catch (const std::exception& e) {
        spdlog::error("Call {} failed: {}; closing the connection", call->method, e.what());
        c.dead = true;
        return;
    }
    if (reply->deferred) {
        c.streaming = true;  // the reply comes from send()
        return;
    }
    if (call->oneway) return;
    if (queue(c, *reply) && reply->continues && call->more) c.streaming = true;
}

VarlinkServer::Response VarlinkServer::dispatch(const Call& call, const Peer& peer) {
    const std::string_view iface_name = call.interface_name();
    if (iface_name.empty()) {
        return invalid_message("method '" + call.method +
                               "' is not qualified: use INTERFACE.Method, e.g. "
                               "io.monitord.Monitor.GetStatus");
    }
    auto iface = interfaces_.find(iface_name);
    if (iface == interfaces_.end()) {
        return make_error("org.varlink.service.InterfaceNotFound",
                          json{{"interface", std::string{iface_name}}});
    }
    const auto* method = iface->second->method(call.member_name());
    if (method == nullptr) {
        return make_error("org.varlink.service.MethodNotFound", json{{"method", call.method}});
    }
    if (call.upgrade) {
        return make_error("org.varlink.service.InvalidParameter", json{{"parameter", "upgrade"}});
    }
    // Before anything of the call is looked at further: a refused caller learns nothing more.
    if (auto refused = access_.refusal(call.method, peer)) return *refused;
    if (auto bad = iface->second->check(*method->input, call.parameters,
                                        monitor::varlink::Extra::Reject)) {
        spdlog::debug("{}: parameter {}: {}", call.method, bad->path, bad->reason);
        return make_error("org.varlink.service.InvalidParameter",
                          json{{"parameter", bad->parameter()}});
    }
    auto handler = handlers_.find(call.method);
    if (handler == handlers_.end()) {
        return make_error("org.varlink.service.MethodNotImplemented",
                          json{{"method", call.method}});
    }
    return handler->second(call, peer);
}

bool VarlinkServer::queue(Connection& c, const Reply& reply) {
    return append(c, monitor::varlink::encode(reply));
}

bool VarlinkServer::append(Connection& c, std::string_view text) {
    if (!c.budgeted) {  // held to each connection's limit only
        c.out.append(text);
        c.out.push_back('\0');
        return true;
    }
    const uid_t uid = c.peer.cred.uid;
    const std::size_t waiting = pending_of(uid);
    bool as_is = true;
    std::string refusal;
    if (waiting + text.size() + 1 > limits_.max_pending_per_user) {
        refusal = monitor::varlink::encode(make_error(
            "io.monitord.Monitor.LimitExceeded",
            json{{"limit", "reply-memory-per-user"},
                 {"message",
                  fmt::format("a reply of {} bytes would take the replies waiting for uid {}'s "
                              "connections to read them past {} bytes, the limit "
                              "([limits] reply-memory-per-user in monitord.conf(5)); read the "
                              "replies of its other connections, or ask for less (a shorter "
                              "window, fewer CPUs)",
                              text.size(), uid, limits_.max_pending_per_user)}}));
        text = refusal;
        as_is = false;
    }
    c.out.append(text);
    c.out.push_back('\0');
    pending_per_user_[uid] = waiting + text.size() + 1;
    return as_is;
}

void VarlinkServer::release(const Connection& c, std::size_t bytes) {
    if (!c.budgeted) return;
    auto it = pending_per_user_.find(c.peer.cred.uid);
    if (it == pending_per_user_.end()) return;
    it->second -= std::min(it->second, bytes);
    if (it->second == 0) pending_per_user_.erase(it);
}

std::size_t VarlinkServer::pending_of(uid_t uid) const {
    auto it = pending_per_user_.find(uid);
    return it == pending_per_user_.end() ? 0 : it->second;
}

bool VarlinkServer::send(std::uint64_t connection, const Response& response) {
    auto it = connections_.find(connection);
    if (it == connections_.end()) return false;
    Connection& c = *it->second;
    if (c.dead || c.closing || !c.streaming) return false;
    bool ends = !response.continues;
    // A reader that fell far behind is dropped rather than buffered without bound.
    if (c.pending() > limits_.max_pending_output * 4) {
        spdlog::debug("Control connection {}: stream reader too slow, closing", connection);
        c.dead = true;
    } else if (!queue(c, response)) {
        ends = true;  // LimitExceeded went instead: an error ends the stream
    }
    if (!c.dead) flush(c);
    if (c.dead) {
        close_connection(c, "closed");
        return false;
    }
    update_events(c);
    if (ends) {
        // The stream ended: calls the client sent meanwhile wait in the input buffer. A
        // writable socket wakes handle_io at once, which processes them.
        c.streaming = false;
        c.last_input = std::chrono::steady_clock::now();  // its next call may come now
        sd_event_source_set_io_events(c.source.get(), EPOLLIN | EPOLLOUT);
    }
    return true;
}

bool VarlinkServer::queue(Connection& c, const Response& response) {
    if (const auto* encoded = std::get_if<EncodedReply>(&response.message)) {
        return append(c, **encoded);
    }
    return queue(c, std::get<Reply>(response.message));
}

bool VarlinkServer::flush(Connection& c) {
    while (c.pending() > 0) {
        ssize_t n =
            ::send(c.fd.get(), c.out.data() + c.out_sent, c.pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return true;
            spdlog::debug("Control connection {}: send failed: {}", c.peer.connection,
                          monitor::errno_message(errno));
            c.dead = true;
            return false;
        }
        c.out_sent += static_cast<std::size_t>(n);
        release(c, static_cast<std::size_t>(n));
    }
    c.out.clear();
    c.out_sent = 0;
    return true;
}

void VarlinkServer::update_events(Connection& c) {
    // While a reply is waiting to be sent, read nothing more: a client that does not read
    // its replies cannot make the daemon buffer without bound.
    uint32_t events = c.pending() > 0 ? EPOLLOUT : EPOLLIN;
    sd_event_source_set_io_events(c.source.get(), events);
}

void VarlinkServer::close_connection(Connection& c, const char* why) {
    spdlog::debug("Control connection {} {}", c.peer.connection, why);
    if (on_close_) on_close_(c.peer.connection);
    release(c, c.pending());
    if (auto it = per_user_.find(c.peer.cred.uid); it != per_user_.end() && --it->second == 0) {
        per_user_.erase(it);
    }
    connections_.erase(c.peer.connection);  // destroys c
}

Reply VarlinkServer::get_info() const {
    monitor::protocol::ServiceInfo out{.vendor = info_.vendor,
                                       .product = info_.product,
                                       .version = info_.version,
                                       .url = info_.url,
                                       .interfaces = {}};
    for (const auto& [name, iface] : interfaces_) out.interfaces.push_back(name);
    return monitor::protocol::reply_of(monitor::protocol::method::GetInfo, out);
}

Reply VarlinkServer::get_interface_description(const std::string& name) const {
    auto it = interfaces_.find(name);
    if (it == interfaces_.end()) {
        return make_error("org.varlink.service.InterfaceNotFound", json{{"interface", name}});
    }
    return monitor::protocol::reply_of(monitor::protocol::method::GetInterfaceDescription,
                                       {.description = it->second->text()});
}

}  // namespace monitord
