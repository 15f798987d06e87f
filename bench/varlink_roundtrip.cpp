// Round trips of GetLoading over monitord's real socket, against a floor: a minimal AF_UNIX
// server in one thread that answers each NUL-terminated message with a reply of the same
// size as GetLoading's. Prints p50, p99 and round trips per second for 1 and 8 clients, and
// the targets: with one client, p99 at most 1.3x the floor's and throughput at least 0.8 of it.
//
// usage: bench-varlink-roundtrip [--monitord PATH] [--seconds N] [--clients 1,8]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "bench: %s: %s\n", what.c_str(), std::strerror(errno));
    std::exit(1);
}

sockaddr_un address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    return a;
}

int connect_to(const std::string& path) {
    auto a = address(path);
    for (int attempt = 0; attempt < 500; ++attempt) {
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
        ::close(fd);
        std::this_thread::sleep_for(10ms);
    }
    die("connect " + path);
}

// One request, one NUL-terminated reply; returns the reply's size.
std::size_t round_trip(int fd, const std::string& request, std::string& buf) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
        die("send");
    }
    std::size_t used = 0;
    for (;;) {
        if (buf.size() < used + 65536) buf.resize(used + 65536);
        ssize_t n = ::recv(fd, buf.data() + used, buf.size() - used, 0);
        if (n <= 0) die("recv");
        used += static_cast<std::size_t>(n);
        if (buf[used - 1] == '\0') return used;
    }
}

// The floor: accept, read a message up to its NUL, answer with `reply_size` bytes.
[[noreturn]] void floor_server(const std::string& path, std::size_t reply_size) {
    int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    auto a = address(path);
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) die("bind floor");
    ::listen(lfd, 128);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{EPOLLIN, {.fd = lfd}};
    ::epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    std::string reply(reply_size, 'x');
    reply.back() = '\0';
    char buf[65536];
    for (;;) {
        epoll_event events[64];
        int n = ::epoll_wait(ep, events, 64, -1);
        for (int i = 0; i < n; ++i) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    epoll_event cev{EPOLLIN, {.fd = c}};
                    ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
            if (r <= 0) {
                ::close(fd);
                continue;
            }
            for (ssize_t k = 0; k < r; ++k) {
                if (buf[k] == '\0') (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
            }
        }
    }
}

struct Figures {
    double p50_us = 0;
    double p99_us = 0;
    double per_second = 0;
};

Figures measure(const std::string& path, const std::string& request, int clients,
                std::chrono::duration<double> duration) {
    std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
    std::vector<int> fds;
    for (int i = 0; i < clients; ++i) fds.push_back(connect_to(path));
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
        threads.emplace_back([&, i] {
            std::string buf;
            while (!go.load()) std::this_thread::yield();
            // Warm-up, then measure until the deadline.
            for (int k = 0; k < 200; ++k)
                round_trip(fds[static_cast<std::size_t>(i)], request, buf);
            auto end = Clock::now() + duration;
            auto& mine = lat[static_cast<std::size_t>(i)];
            for (auto t0 = Clock::now(); t0 < end;) {
                round_trip(fds[static_cast<std::size_t>(i)], request, buf);
                auto t1 = Clock::now();
                mine.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                t0 = t1;
            }
        });
    }
    go = true;
    for (auto& t : threads) t.join();
    for (int fd : fds) ::close(fd);
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    Figures f;
    if (all.empty()) return f;
    f.p50_us = all[all.size() / 2];
    f.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
    f.per_second = static_cast<double>(all.size()) / duration.count();
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    std::string monitord = std::getenv("MONITORD_BIN") ? std::getenv("MONITORD_BIN") : "";
    double seconds = 5;
    std::vector<int> client_counts{1, 8};
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--monitord") {
            monitord = argv[i + 1];
        } else if (a == "--seconds") {
            seconds = std::atof(argv[i + 1]);
        } else if (a == "--clients") {
            client_counts.clear();
            for (char* tok = std::strtok(argv[i + 1], ","); tok; tok = std::strtok(nullptr, ",")) {
                client_counts.push_back(std::atoi(tok));
            }
        } else {
            std::fprintf(stderr, "usage: %s [--monitord PATH] [--seconds N] [--clients 1,8]\n",
                         argv[0]);
            return 2;
        }
    }
    if (monitord.empty()) {
        std::fprintf(stderr, "bench: give --monitord PATH or set MONITORD_BIN\n");
        return 2;
    }

    char tmpl[] = "/tmp/monitord-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
    const std::string dir = tmpl;
    const std::string daemon_sock = dir + "/monitord.sock";
    const std::string floor_sock = dir + "/floor.sock";

    pid_t daemon = ::fork();
    if (daemon == 0) {
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDOUT_FILENO);
        ::execl(monitord.c_str(), monitord.c_str(), "--socket", daemon_sock.c_str(), "--log-level",
                "warning", "--watchdog", "none", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::string request = nlohmann::json{{"method", "io.monitord.Monitor.GetLoading"},
                                         {"parameters", nlohmann::json::object()}}
                              .dump();
    request.push_back('\0');
    std::this_thread::sleep_for(1200ms);  // let one sample exist, as in normal use
    std::string buf;
    int probe = connect_to(daemon_sock);
    std::size_t reply_size = round_trip(probe, request, buf);
    ::close(probe);

    pid_t floor = ::fork();
    if (floor == 0) floor_server(floor_sock, reply_size);

    std::printf("GetLoading request %zu bytes, reply %zu bytes; %.0f s per measurement\n",
                request.size(), reply_size, seconds);
    std::printf("%-22s %8s %14s %10s %10s\n", "server", "clients", "round trips/s", "p50 us",
                "p99 us");
    auto dur = std::chrono::duration<double>(seconds);
    std::vector<std::pair<Figures, Figures>> results;
    for (int clients : client_counts) {
        Figures f = measure(floor_sock, request, clients, dur);
        Figures m = measure(daemon_sock, request, clients, dur);
        std::printf("%-22s %8d %14.0f %10.1f %10.1f\n", "floor (bare AF_UNIX)", clients,
                    f.per_second, f.p50_us, f.p99_us);
        std::printf("%-22s %8d %14.0f %10.1f %10.1f\n", "monitord GetLoading", clients,
                    m.per_second, m.p50_us, m.p99_us);
        results.emplace_back(f, m);
    }
    // One client: the daemon's call path on its own, held close to the floor. More: the
    // daemon's one loop against the floor's one thread, on however many CPUs there are.
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& [f, m] = results[i];
        const bool one = client_counts[i] == 1;
        std::printf(
            "%d client(s): p99 %.2fx the floor (target <= %s), throughput %.2f of the "
            "floor's (target >= %s)\n",
            client_counts[i], m.p99_us / f.p99_us, one ? "1.3" : "3", m.per_second / f.per_second,
            one ? "0.8" : "0.5");
    }

    ::kill(floor, SIGKILL);
    ::kill(daemon, SIGTERM);
    ::waitpid(floor, nullptr, 0);
    ::waitpid(daemon, nullptr, 0);
    std::filesystem::remove_all(dir);
    return 0;
}
