#include "http_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>

namespace exporter {

using monitor::fail;
using monitor::fail_errno;
using monitor::Result;
using monitor::Status;
using monitor::UniqueFd;

Result<UniqueFd> listen_on(const std::string& address) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon + 1 == address.size()) {
        return fail(Status::BadArg, "listen address \"" + address +
                                        "\" has no port: give ADDR:PORT, e.g. 127.0.0.1:10750, "
                                        "[::1]:10750 or :10750 for every address");
    }
    std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_family = host.empty() ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
        rc != 0) {
        return fail(Status::BadArg, "listen address \"" + address + "\": " + ::gai_strerror(rc) +
                                        " (give ADDR:PORT with a numeric port)");
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list{found, &::freeaddrinfo};
    int last_errno = 0;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        UniqueFd fd{
            ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol)};
        if (!fd) {
            last_errno = errno;
            continue;
        }
        const int on = 1;
        const int off = 0;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        // Every address means IPv4 too.
        if (a->ai_family == AF_INET6 && host.empty()) {
            ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        }
        if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 &&
            ::listen(fd.get(), SOMAXCONN) == 0) {
            return fd;
        }
        last_errno = errno;
    }
    return fail_errno(last_errno, "listening on " + address);
}

namespace {

// A printf format and its arguments from libmicrohttpd, as the attribute tells the compiler.
[[gnu::format(printf, 2, 0)]] void mhd_log(void* cls, const char* format, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, format, ap);
    std::string text{line};
    while (!text.empty() && text.back() == '\n') text.pop_back();
    (*static_cast<HttpServer::Logger*>(cls))(text);
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::start(sd_event* event, UniqueFd listener,
                                                      Handler handler, Logger log,
                                                      Options options) {
    std::unique_ptr<HttpServer> s{
        new HttpServer(std::move(handler), std::move(log), std::move(options))};
    const auto& o = s->options_;
    if (o.tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        return fail(Status::NoDev,
                    "this libmicrohttpd was built without TLS: serve plain HTTP "
                    "(no tls_server_config) or install one with GnuTLS");
    }
    const int fd = listener.release();
    std::vector<MHD_OptionItem> items{
        {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&mhd_log), &s->log_},
        {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
        {MHD_OPTION_CONNECTION_LIMIT, o.limits.connections, nullptr},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, o.limits.per_address, nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, o.limits.idle_timeout_s, nullptr},
        {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&HttpServer::completed), nullptr},
    };
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (o.tls) {
        flags |= MHD_USE_TLS;
        // libmicrohttpd keeps the pointers: the strings live in options_ as long as the daemon.
        items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(o.tls->cert_pem.c_str())});
        items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(o.tls->key_pem.c_str())});
        items.push_back(
            {MHD_OPTION_HTTPS_PRIORITIES, 0, const_cast<char*>(o.tls->priorities.c_str())});
    }
    items.push_back({MHD_OPTION_END, 0, nullptr});
    s->daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &HttpServer::on_request, s.get(),
                                  MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
    if (s->daemon_ == nullptr) {
        ::close(fd);
        return fail(Status::IoErr,
                    o.tls ? "libmicrohttpd could not start TLS with the web config's certificate "
                            "and key (its reason is logged above)"
                          : "libmicrohttpd could not start on the listening socket");
    }
    if (auto r = s->attach(event); !r) return std::unexpected(r.error());
    return s;
}

HttpServer::~HttpServer() {
    io_.reset();
    timer_.reset();
    // libmicrohttpd must not stop with a connection suspended: those left are resumed without
    // an answer, and closed by the stop.
    for (const auto& weak : suspended_) {
        if (auto p = weak.lock(); p && p->suspended) {
            p->suspended = false;
            MHD_resume_connection(p->connection);
        }
        if (auto p = weak.lock()) p->server = nullptr;
    }
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

Result<void> HttpServer::attach(sd_event* event) {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == nullptr) return fail(Status::IoErr, "libmicrohttpd has no epoll descriptor");
    sd_event_source* io = nullptr;
    int r = sd_event_add_io(
        event, &io, info->epoll_fd, EPOLLIN,
        [](sd_event_source*, int, uint32_t, void* self) {
            static_cast<HttpServer*>(self)->run();
            return 0;
        },
        this);
    if (r < 0) return fail_errno(-r, "watching libmicrohttpd's epoll descriptor");
    io_.reset(io);
    sd_event_source* timer = nullptr;
    r = sd_event_add_time_relative(
        event, &timer, CLOCK_MONOTONIC, 0, 1000,
        [](sd_event_source*, uint64_t, void* self) {
            static_cast<HttpServer*>(self)->run();
            return 0;
        },
        this);
    if (r < 0) return fail_errno(-r, "adding libmicrohttpd's timer");
    timer_.reset(timer);
    sd_event_source_set_enabled(timer, SD_EVENT_OFF);
    return {};
}

void HttpServer::run() {
    MHD_run(daemon_);
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(daemon_, &ms) == MHD_YES) {
        uint64_t now = 0;
        sd_event_now(sd_event_source_get_event(timer_.get()), CLOCK_MONOTONIC, &now);
        sd_event_source_set_time(timer_.get(), now + ms * 1000);
        sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
    } else {
        sd_event_source_set_enabled(timer_.get(), SD_EVENT_OFF);
    }
}

MHD_Result HttpServer::on_request(void* self, MHD_Connection* connection, const char* url,
                                  const char* method, const char*, const char*,
                                  size_t* upload_data_size, void** request_state) {
    auto* server = static_cast<HttpServer*>(self);
    // Answered on the first call, which has the headers: a body, if any, is not read.
    *upload_data_size = 0;
    if (*request_state != nullptr) {
        // Called again once resumed: the answer has come.
        const auto& pending = *static_cast<std::shared_ptr<Pending>*>(*request_state);
        if (!pending->response) return MHD_YES;
        return server->queue(connection, *pending->response);
    }
    auto header = [&](const char* name) {
        const char* v = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
        return std::string{v != nullptr ? v : ""};
    };
    if (server->options_.authorize) {
        char* password = nullptr;
        char* user = MHD_basic_auth_get_username_password(connection, &password);
        const bool allowed =
            user != nullptr && password != nullptr && server->options_.authorize(user, password);
        if (password != nullptr) MHD_free(password);
        if (user != nullptr) MHD_free(user);
        if (!allowed) {
            HttpResponse denied;
            denied.status = MHD_HTTP_UNAUTHORIZED;
            denied.body = "Unauthorized: this exporter asks for a user and password.\n";
            return server->queue(connection, denied);
        }
    }
    auto pending = std::make_shared<Pending>(Pending{server, connection, std::nullopt});
    *request_state = new std::shared_ptr<Pending>(pending);
    HttpRequest req{method, url, header(MHD_HTTP_HEADER_ACCEPT),
                    header(MHD_HTTP_HEADER_ACCEPT_ENCODING)};
    server->handler_(req, [pending](HttpResponse res) { answer(pending, std::move(res)); });
    if (pending->response) return server->queue(connection, *pending->response);
    // Later: the connection waits, and the loop serves the others.
    MHD_suspend_connection(connection);
    pending->suspended = true;
    std::erase_if(server->suspended_, [](const auto& w) { return w.expired(); });
    server->suspended_.push_back(pending);
    return MHD_YES;
}

void HttpServer::answer(const std::shared_ptr<Pending>& pending, HttpResponse response) {
    if (pending->response) return;  // answered already
    pending->response = std::move(response);
    if (pending->suspended && pending->server != nullptr) {
        pending->suspended = false;
        MHD_resume_connection(pending->connection);
        pending->server->run();  // as libmicrohttpd asks after a resume
    }
}

void HttpServer::completed(void*, MHD_Connection*, void** request_state,
                           MHD_RequestTerminationCode) {
    delete static_cast<std::shared_ptr<Pending>*>(*request_state);
    *request_state = nullptr;
}

MHD_Result HttpServer::queue(MHD_Connection* connection, const HttpResponse& res) const {
    MHD_Response* response = MHD_create_response_from_buffer(
        res.body.size(), const_cast<char*>(res.body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, res.content_type.c_str());
    for (const auto& [name, value] : options_.headers) {
        MHD_add_response_header(response, name.c_str(), value.c_str());
    }
    for (const auto& [name, value] : res.headers) {
        MHD_add_response_header(response, name.c_str(), value.c_str());
    }
    const MHD_Result queued =
        res.status == MHD_HTTP_UNAUTHORIZED
            ? MHD_queue_basic_auth_fail_response(connection, "monitord-exporter", response)
            : MHD_queue_response(connection, res.status, response);
    MHD_destroy_response(response);
    return queued;
}

}  // namespace exporter
