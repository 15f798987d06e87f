#include "daemon_components.hpp"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace test_support {

namespace {

// Where the runtime's first tick is put with manual_ticks: beyond any test.
constexpr auto kManualTicksAway = std::chrono::hours(1);

}  // namespace

monitor::varlink::Call make_call(std::string method, nlohmann::json parameters, bool more) {
    monitor::varlink::Call c;
    c.method = std::move(method);
    c.parameters = std::move(parameters);
    c.more = more;
    return c;
}

testing::AssertionResult NoReplyWithin(monitor::varlink::Client& client,
                                       std::chrono::milliseconds wait) {
    client.set_timeout(wait);
    auto r = client.receive();
    client.set_timeout(std::chrono::seconds(30));
    if (!r && r.error().status == monitor::Status::NotRdy) return testing::AssertionSuccess();
    return testing::AssertionFailure()
           << (r ? "a reply came: " + monitor::varlink::encode(*r) : r.error().message);
}

DaemonComponents::DaemonComponents(ComponentOptions options)
    : options_(std::move(options)), machine_(options_.cpuinfo, options_.core_pmu) {
    socket_path_ = (socket_dir_ / "io.monitord.Monitor").string();
    write_file(machine_.proc() / "stat", stat_text(options_.stat));
    write_file(machine_.sys() / "devices/system/cpu/online", options_.online + "\n");
    for (const auto& [path, text] : options_.proc_files) {
        test_support::write_file(machine_.proc() / path, text);
    }
    for (const auto& [path, text] : options_.cgroups) {
        write_file(machine_.sys() / "fs/cgroup" / path, text);
    }
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_) {
        error_ = std::string{"eventfd: "} + std::strerror(errno);
        return;
    }
    // The thread owns the promise: set_value may still be inside it when the waiting
    // constructor goes on.
    std::promise<std::string> started;
    auto result = started.get_future();
    loop_ = std::thread([this, started = std::move(started)]() mutable {
        if (auto r = setup(); !r) {
            teardown();
            started.set_value(r.error().to_string());
            return;
        }
        started.set_value({});
        if (int r = sd_event_loop(event_.get()); r < 0) {
            ADD_FAILURE() << "the event loop failed: " << std::strerror(-r);
        }
        teardown();
    });
    error_ = result.get();
    if (!error_.empty()) loop_.join();
}

DaemonComponents::~DaemonComponents() {
    if (!loop_.joinable()) return;
    post([this] { sd_event_exit(event_.get(), 0); });
    loop_.join();
}

monitor::Result<void> DaemonComponents::setup() {
    sd_event* e = nullptr;
    if (int r = sd_event_new(&e); r < 0) return monitor::fail_errno(-r, "sd_event_new");
    event_.reset(e);
    sd_event_source* s = nullptr;
    if (int r = sd_event_add_io(e, &s, wake_fd_.get(), EPOLLIN, on_wake, this); r < 0) {
        return monitor::fail_errno(-r, "watch the eventfd");
    }
    wake_source_.reset(s);

    listen_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_fd_) return monitor::fail_errno(errno, "socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path_.size() >= sizeof addr.sun_path) {
        return monitor::fail(monitor::Status::BadArg, socket_path_ + ": too long for a socket");
    }
    std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
    if (::bind(listen_fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0) {
        return monitor::fail_errno(errno, "bind " + socket_path_);
    }
    // Open to every user: the access tests connect as nobody.
    ::chmod(socket_path_.c_str(), 0666);
    if (::listen(listen_fd_.get(), 64) < 0) return monitor::fail_errno(errno, "listen");

    if (options_.bare_server) {
        server_ = std::make_unique<monitord::VarlinkServer>(
            e, listen_fd_.get(),
            monitord::VarlinkServer::Info{"monitord", "monitord", "test", "man:monitord(8)"},
            access_, options_.limits);
        options_.bare_server(*server_);
        return server_->start();
    }
    monitord::DaemonParts parts;
    parts.event = e;
    parts.listen_fd = listen_fd_.get();
    parts.version = "test";
    parts.proc_root = machine_.proc();
    parts.sys_root = machine_.sys();
    parts.probe = options_.probe;
    parts.watchdog = options_.watchdog;
    const auto away = options_.manual_ticks ? Clock::duration{kManualTicksAway} : Clock::duration{};
    parts.clock = [away] { return Clock::now() + away; };
    parts.limits = options_.limits;
    parts.counters = options_.counters;
    parts.on_timer = options_.on_timer;
    auto daemon = monitord::Daemon::create(std::move(parts), options_.config);
    if (!daemon) return std::unexpected(daemon.error());
    daemon_ = std::move(*daemon);
    return daemon_->start();
}

void DaemonComponents::teardown() {
    // As Manager's destructor: the daemon before its socket and loop.
    if (daemon_ && daemon_->runtime().watchdog() != nullptr &&
        daemon_->runtime().watchdog()->status().armed) {
        EXPECT_TRUE(daemon_->runtime().watchdog()->disarm());
    }
    daemon_.reset();
    server_.reset();
    listen_fd_.reset();
    wake_source_.reset();
    event_.reset();
}

monitor::varlink::Client DaemonComponents::connect() const {
    auto c = monitor::varlink::Client::connect(socket_path_);
    if (!c) throw std::runtime_error(c.error().message);
    return std::move(*c);
}

void DaemonComponents::post(std::function<void()> fn) {
    {
        std::lock_guard lock(mutex_);
        posted_.push_back(std::move(fn));
    }
    const std::uint64_t one = 1;
    if (::write(wake_fd_.get(), &one, sizeof one) != sizeof one) {
        ADD_FAILURE() << "waking the loop: " << std::strerror(errno);
    }
}

int DaemonComponents::on_wake(sd_event_source*, int fd, uint32_t, void* userdata) {
    auto* self = static_cast<DaemonComponents*>(userdata);
    std::uint64_t count = 0;
    (void)!::read(fd, &count, sizeof count);
    std::deque<std::function<void()>> work;
    {
        std::lock_guard lock(self->mutex_);
        work.swap(self->posted_);
    }
    for (auto& fn : work) fn();
    return 0;
}

void DaemonComponents::write_stat(const std::map<int, Ticks>& cpus) {
    on_loop([&] { write_file(machine_.proc() / "stat", stat_text(cpus)); });
}

void DaemonComponents::tick() {
    on_loop([this] { daemon_->run_due(daemon_->runtime().ticks().next()); });
}

}  // namespace test_support
