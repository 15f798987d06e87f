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

// The daemon's accuracy for its timer.
constexpr std::uint64_t kTimerAccuracyUsec = 1'000;
// Where the runtime's first tick is put with manual_ticks: beyond any test.
constexpr auto kManualTicksAway = std::chrono::hours(1);

// sd-event's CLOCK_MONOTONIC and std::chrono::steady_clock are one clock.
DaemonComponents::Clock::time_point steady_from_usec(std::uint64_t usec) {
    return DaemonComponents::Clock::time_point{std::chrono::microseconds{usec}};
}

std::uint64_t usec_from_steady(DaemonComponents::Clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

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

    monitor::EngineOptions eo;
    eo.proc_root = machine_.proc();
    eo.sys_root = machine_.sys();
    eo.probe = options_.probe;
    const auto away = options_.manual_ticks ? Clock::duration{kManualTicksAway} : Clock::duration{};
    auto runtime =
        monitor::Runtime::create(eo, options_.watchdog, [away] { return Clock::now() + away; });
    if (!runtime) return std::unexpected(runtime.error());
    runtime_ = std::move(*runtime);

    server_ = std::make_unique<monitord::VarlinkServer>(
        e, listen_fd_.get(),
        monitord::VarlinkServer::Info{"monitord", "monitord", "test", "man:monitord(8)"}, access_,
        options_.limits);
    if (options_.loading_service) {
        loading_ = std::make_unique<monitord::LoadingService>(*server_, *runtime_);
        loading_->setup();
    }
    if (options_.counter_service) {
        auto counter_options = *options_.counter_service;
        counter_options.proc_root = machine_.proc();
        counter_options.sys_root = machine_.sys();
        counters_ = std::make_unique<monitord::CounterService>(
            *server_, *runtime_, [this] { schedule(); }, std::move(counter_options));
        counters_->setup();
        server_->set_close_handler(
            [this](std::uint64_t connection) { counters_->connection_closed(connection); });
    }
    if (options_.setup) options_.setup(*server_);
    if (auto r = server_->start(); !r) return r;

    sd_event_source* t = nullptr;
    if (int r = sd_event_add_time(e, &t, CLOCK_MONOTONIC, usec_from_steady(runtime_->next_due()),
                                  kTimerAccuracyUsec, on_timer, this);
        r < 0) {
        return monitor::fail_errno(-r, "create the runtime's timer");
    }
    timer_.reset(t);
    return {};
}

void DaemonComponents::teardown() {
    // As Manager's destructor: the runs before the runtime, the server before its socket.
    if (runtime_ && runtime_->watchdog() != nullptr && runtime_->watchdog()->status().armed) {
        EXPECT_TRUE(runtime_->watchdog()->disarm());
    }
    if (server_) server_->set_close_handler({});
    counters_.reset();
    loading_.reset();
    server_.reset();
    listen_fd_.reset();
    timer_.reset();
    runtime_.reset();
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
    on_loop([this] {
        run_due(runtime_->ticks().next());
        schedule();
    });
}

int DaemonComponents::on_timer(sd_event_source*, uint64_t, void* userdata) {
    auto* self = static_cast<DaemonComponents*>(userdata);
    if (self->options_.on_timer) self->options_.on_timer();
    std::uint64_t now = 0;
    sd_event_now(self->event_.get(), CLOCK_MONOTONIC, &now);
    self->run_due(steady_from_usec(now));
    self->schedule();
    return 0;
}

void DaemonComponents::run_due(Clock::time_point now) {
    auto due = runtime_->run_due(now);
    if (counters_) {
        for (const auto& step : due.runs) counters_->run_stepped(step, now);
        if (due.ticked) counters_->ticked(now);
    }
    if (due.ticked && loading_) loading_->loading_changed();
}

void DaemonComponents::schedule() {
    if (!timer_) return;
    sd_event_source_set_time(timer_.get(), usec_from_steady(runtime_->next_due()));
    sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
}

}  // namespace test_support
