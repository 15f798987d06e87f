#include "top_command.hpp"

#include <langinfo.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "duration.hpp"
#include "exit_status.hpp"
#include "monitor/protocol/daemon_client.hpp"
#include "perf_commands.hpp"
#include "timestamp.hpp"
#include "top_frame.hpp"
#include "top_model.hpp"
#include "top_screen.hpp"

namespace monctl {
namespace {

using namespace std::chrono_literals;
namespace protocol = monitor::protocol;
using protocol::DaemonClient;

constexpr std::chrono::milliseconds kMinInterval{100};
constexpr std::chrono::milliseconds kMaxInterval{60'000};
// How long a call may take before the daemon counts as gone: it answers in milliseconds.
constexpr std::chrono::milliseconds kCallTimeout{3'000};

int report(const monitor::Error& e) {
    std::fprintf(stderr, "monctl: %s\n", e.message.c_str());
    return kExitError;
}

// The first line of a message (the rest says how to start a daemon: not for the screen).
std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

std::int64_t microseconds_of(top::WallTime t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// What an interval could not fetch: the daemon's answer to a moment of the past (no history,
// a range it will not read), after which the connection serves on; or anything else, after
// which it is dropped.
struct FetchError {
    monitor::Error error;
    bool history = false;
};

// Everything one interval shows, in three calls (the units and the CPUs' context asked for
// whether shown or not: the daemon has them at hand, and the context's rates need a reading
// a second before; the tasks only while their pane is shown, since they cost the daemon a
// read of every process). At a moment of the past (`at`), the history's minute up to it in
// place of the window, and no counters (they are not kept).
std::expected<top::Snapshot, FetchError> fetch(DaemonClient& c, bool tasks,
                                               std::optional<top::WallTime> at) {
    auto status = c.call(monitor::protocol::method::GetStatus);
    if (!status) return std::unexpected(FetchError{status.error()});
    top::Snapshot s;
    s.status = std::move(*status);
    if (at) {
        auto loading =
            c.call(monitor::protocol::method::GetLoading,
                   monitor::LoadingQuery{.per_cpu = true,
                                         .history = true,
                                         .states = true,
                                         .since = microseconds_of(*at - top::kPastWindow),
                                         .until = microseconds_of(*at)});
        if (!loading) return std::unexpected(FetchError{loading.error(), true});
        s.loading = std::move(*loading);
        return s;
    }
    auto loading = c.call(monitor::protocol::method::GetLoading,
                          monitor::LoadingQuery{.per_cpu = true,
                                                .history = true,
                                                .states = true,
                                                .units = top::kTopUnits,
                                                .context = true,
                                                .tasks = tasks ? top::kTopTasksPerCpu : 0});
    if (!loading) return std::unexpected(FetchError{loading.error()});
    auto counters = c.call_unless(monitor::protocol::method::ReadCounters, "PerfNotRunning");
    if (!counters) return std::unexpected(FetchError{counters.error()});
    s.loading = std::move(*loading);
    if (*counters) s.counters = std::move((*counters)->report);
    return s;
}

// The width --once lays its frame out for: the terminal's, else $COLUMNS, else 80.
int text_width() {
    winsize ws{};
    if (::isatty(STDOUT_FILENO) != 0 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
        ws.ws_col > 0) {
        return ws.ws_col;
    }
    // NOLINTNEXTLINE(concurrency-mt-unsafe): monctl has one thread
    if (const char* c = std::getenv("COLUMNS"); c != nullptr) {
        char* end = nullptr;
        const long n = std::strtol(c, &end, 10);
        if (end != c && *end == '\0' && n > 0 && n <= 1000) return static_cast<int>(n);
    }
    return 80;
}

// What `model` shows: a moment of the past the daemon will not show (no history, a range it
// will not read) gives way to now at once, with the daemon's reason on the last line.
std::expected<top::Snapshot, FetchError> fetch_shown(DaemonClient& c, top::TopModel& model) {
    auto snapshot = fetch(c, model.tasks(), model.at());
    if (snapshot || !snapshot.error().history) return snapshot;
    model.history_failed(first_line(snapshot.error().error.message));
    return fetch(c, model.tasks(), std::nullopt);
}

// One interval's fetch into `model`, through `link` (connected to `path` again when it is
// not). A daemon that went away is looked for again every interval, where it was; a connection
// that fails is tried once more at once: a daemon restarted since the last interval is there
// already.
void refresh(std::optional<DaemonClient>& link, const std::string& path, top::TopModel& model) {
    for (int attempt = link ? 2 : 1; attempt > 0; --attempt) {
        if (!link) {
            auto c = DaemonClient::connect(path);
            if (!c) return;
            c->set_timeout(kCallTimeout);
            link.emplace(std::move(*c));
        }
        auto snapshot = fetch_shown(*link, model);
        if (snapshot) {
            model.update(std::move(*snapshot));
            return;
        }
        // The first reason stays: why it went, not that it is still away.
        if (!model.stale()) model.lost(first_line(snapshot.error().error.message));
        link.reset();
    }
}

int live(DaemonClient client, top::TopModel& model, top::FrameOptions fo,
         std::chrono::milliseconds interval) {
    auto screen = top::TopScreen::open();
    if (!screen) return report(screen.error());
    auto& s = **screen;
    const std::string path = client.path();
    std::optional<DaemonClient> link{std::move(client)};
    int page = 1;
    auto redraw = [&] {
        fo.width = s.width();
        fo.height = s.height();
        fo.colour = s.colour();
        const auto frame = top::build_frame(model, fo);
        model.clamp_scroll(frame.rows, frame.page);
        page = frame.page;
        s.draw(frame);
    };
    redraw();
    auto next = std::chrono::steady_clock::now() + interval;
    for (;;) {
        const auto in = s.wait(next);
        bool dirty = in.resized;
        const auto was = model.at();
        for (auto a : in.actions) {
            if (!model.apply(a, page)) return kExitOk;
            dirty = true;
        }
        // Another moment is fetched at once.
        if (model.at() != was) next = std::chrono::steady_clock::now();
        const auto now = std::chrono::steady_clock::now();
        if (now >= next) {
            refresh(link, path, model);
            next += interval;
            if (next <= now) next = now + interval;
            dirty = true;
        }
        if (dirty) redraw();
    }
}

}  // namespace

int run_top(const TopOptions& o) {
    auto interval = parse_duration_ms(o.interval);
    if (!interval || *interval < kMinInterval.count() || *interval > kMaxInterval.count()) {
        std::fprintf(stderr,
                     "monctl: --interval takes seconds from 0.1 to 60 (0.5, 2, 250ms), not '%s'\n",
                     o.interval.c_str());
        return kExitUsage;
    }
    // The terminal's character set: block characters for the sparklines when it is UTF-8.
    // (setlocale and nl_langinfo race with other threads; monctl has one.)
    std::setlocale(LC_CTYPE, "");  // NOLINT(concurrency-mt-unsafe): one thread
    top::FrameOptions fo;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): one thread
    fo.utf8 = std::strcmp(::nl_langinfo(CODESET), "UTF-8") == 0;
    fo.interval = static_cast<double>(*interval) / 1000;

    auto c = DaemonClient::connect(o.socket);
    if (!c) return report(c.error());
    c->set_timeout(kCallTimeout);
    top::TopModel model;
    if (!o.at.empty()) {
        auto at = parse_timestamp(o.at, std::chrono::system_clock::now());
        if (!at) {
            std::fprintf(stderr, "monctl: --at: %s\n", at.error().message.c_str());
            return kExitUsage;
        }
        model.set_at(*at);
    }
    auto snapshot = fetch(*c, false, model.at());
    if (!snapshot) return report(snapshot.error().error);
    model.update(std::move(*snapshot));
    if (o.once) {
        fo.width = text_width();
        fo.height = 0;
        std::cout << top::frame_text(top::build_frame(model, fo)) << std::flush;
        return std::cout ? kExitOk : kExitError;
    }
    return live(std::move(*c), model, fo, std::chrono::milliseconds(*interval));
}

}  // namespace monctl
