// The history on disk at 2, 64 and 1,024 CPUs: the bytes a second takes (deflated, with
// SQLite's own), the disk per day of seconds and per day of minutes after the fold, and the
// time to write a second and to read an hour back. The machines are made up: each CPU's load
// wanders (a random walk) over user, system, softirq and idle, as a busy machine's does; an
// idle machine's CPUs sit near 0 %. Prints a table, and beside it what sysstat's sadc (sar's
// collector, run as Debian's cron job runs it: -S DISK, but every second) writes in the same
// minute on this machine.
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "history_store.hpp"
#include "monitor/loading/history_range.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using monitor::HistorySecond;

struct Machine {
    int cpus;
    bool busy;
    std::mt19937 random{42};
    std::vector<double> load;

    HistorySecond next() {
        load.resize(static_cast<std::size_t>(cpus), busy ? 50.0 : 1.0);
        std::normal_distribution<double> step(0, busy ? 8 : 0.5);
        std::uniform_real_distribution<double> share(0, 1);
        HistorySecond s;
        s.seconds = 1.0;
        monitor::HistorySource procstat{.name = "procstat",
                                        .machine = 0,
                                        .has_states = true,
                                        .machine_states = monitor::StateShares{},
                                        .cpus = {}};
        monitor::HistorySource probe{.name = "probe",
                                     .machine = 0,
                                     .has_states = false,
                                     .machine_states = std::nullopt,
                                     .cpus = {}};
        double total = 0;
        for (int c = 0; c < cpus; ++c) {
            double& l = load[static_cast<std::size_t>(c)];
            l = std::clamp(l + step(random), 0.0, 100.0);
            monitor::StateShares st;
            const double system = l * (busy ? share(random) * 0.4 : 0.3);
            const double softirq = busy ? std::min(l - system, share(random) * 2) : 0;
            st[monitor::TimeState::System] = system;
            st[monitor::TimeState::SoftIrq] = softirq;
            st[monitor::TimeState::User] = l - system - softirq;
            st[monitor::TimeState::Idle] = 100 - l;
            procstat.cpus.push_back({c, l, st});
            probe.cpus.push_back({c, std::max(0.0, l - 0.3), std::nullopt});
            total += l;
        }
        procstat.machine = total / cpus;
        probe.machine = total / cpus;
        s.sources = {probe, procstat};
        return s;
    }
};

// The mean bytes of a minute's row: its three values and SQLite's record of them (about 20
// bytes: the header, the key and the run).
double minute_row_bytes(const std::filesystem::path& file) {
    sqlite3* db = nullptr;
    double bytes = 0;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_exec(
            db, "SELECT avg(length(data) + length(low) + length(high)) + 20 FROM minutes",
            [](void* out, int, char** v, char**) {
                *static_cast<double*>(out) = v[0] != nullptr ? std::atof(v[0]) : 0;
                return 0;
            },
            &bytes, nullptr);
    }
    sqlite3_close(db);
    return bytes;
}

}  // namespace

// sadc every second for a minute into `file`, in the background: its pid, or -1.
pid_t start_sadc(const std::filesystem::path& file) {
    const char* sadc = "/usr/lib/sysstat/sadc";
    if (::access(sadc, X_OK) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execl(sadc, sadc, "-S", "DISK", "1", "61", file.c_str(), nullptr);
        ::_exit(127);
    }
    return pid;
}

int main() {
    const auto sa_file = std::filesystem::temp_directory_path() /
                         ("monitord-history-bench-sa-" + std::to_string(::getpid()));
    std::filesystem::remove(sa_file);
    const pid_t sadc = start_sadc(sa_file);
    const auto dir = std::filesystem::temp_directory_path() /
                     ("monitord-history-bench-" + std::to_string(::getpid()));
    fmt::print(
        "The history on disk: SQLite (WAL), a row a second, deflated; minutes after a day\n");
    fmt::print("{:>6} {:>5} {:>9} {:>11} {:>12} {:>10} {:>10} {:>12}\n", "CPUs", "load", "B/second",
               "MB/day s", "MB/day min", "write ms", "max ms", "read 1h s");
    for (int cpus : {2, 64, 1024}) {
        for (bool busy : {false, true}) {
            std::filesystem::remove_all(dir);
            auto store = monitord::HistoryStore::open(dir, {});
            if (!store) {
                fmt::print(stderr, "{}\n", store.error().message);
                return 1;
            }
            (void)(*store)->start_run("bench", std::chrono::system_clock::now());
            Machine m{cpus, busy};
            const int seconds = cpus >= 1024 ? 600 : 3600;
            const auto t0 = std::chrono::system_clock::time_point{} + std::chrono::hours{490'000};
            const auto before = (*store)->bytes_used().value_or(0);
            double write_total = 0;
            double write_max = 0;
            for (int i = 1; i <= seconds; ++i) {
                const auto second = m.next();
                const auto start = Clock::now();
                if (auto r = (*store)->append(t0 + std::chrono::seconds{i}, second); !r) {
                    fmt::print(stderr, "{}\n", r.error().message);
                    return 1;
                }
                const double ms =
                    std::chrono::duration<double, std::milli>(Clock::now() - start).count();
                write_total += ms;
                write_max = std::max(write_max, ms);
            }
            const auto after = (*store)->bytes_used().value_or(0);
            const double per_second = static_cast<double>(after - before) / seconds;
            // Reading: the seconds written, summed up per CPU as --since does, scaled to an hour.
            const auto read_start = Clock::now();
            monitor::HistoryRange range(monitor::LoadingQuery{.per_cpu = true, .states = true});
            (void)(*store)->read(t0, t0 + std::chrono::seconds{seconds + 1},
                                 [&](auto at, const HistorySecond& s, const HistorySecond* lo,
                                     const HistorySecond* hi) { range.add(at, s, lo, hi); });
            (void)range.report();
            const double read_hour =
                std::chrono::duration<double>(Clock::now() - read_start).count() * 3600 / seconds;
            // The fold: every second older than a day, from a moment two days on. A minute's
            // bytes are its row's (page-exact sizes would need hours of minutes).
            (void)(*store)->prune(t0 + std::chrono::seconds{seconds} + std::chrono::hours{48});
            const double minute_bytes = minute_row_bytes((*store)->file());
            fmt::print("{:>6} {:>5} {:>9.0f} {:>11.1f} {:>12.2f} {:>10.3f} {:>10.2f} {:>12.2f}\n",
                       cpus, busy ? "busy" : "idle", per_second, per_second * 86400 / 1e6,
                       minute_bytes * 1440 / 1e6, write_total / seconds, write_max, read_hour);
        }
    }
    std::filesystem::remove_all(dir);
    if (sadc > 0) {
        int status = 0;
        ::waitpid(sadc, &status, 0);
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(sa_file, ec);
        if (!ec && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
            fmt::print(
                "{:>6} {:>5} {:>9.0f} {:>11.1f}   sysstat's sadc -S DISK every second, this "
                "machine (all of sar's activities)\n",
                cpus, "here", bytes / 60.0, bytes / 60.0 * 86400 / 1e6);
        }
        std::filesystem::remove(sa_file);
    } else {
        fmt::print("(sysstat's sadc is not installed: no figure beside)\n");
    }
    fmt::print(
        "MB/day s: a day of seconds; MB/day min: a day of minutes (mean, lowest, highest)\n"
        "write ms: the mean time to write a second (every 10th synced: max)\n"
        "read 1h s: reading an hour of seconds per CPU with states, as --since -1h does\n");
    return 0;
}
