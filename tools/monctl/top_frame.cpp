#include "top_frame.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cwchar>

#include "perf_views.hpp"
#include "views.hpp"

namespace monctl::top {
namespace {

using monitor::TimeState;

// The states a bar draws, in order, and what each is the sum of.
struct DrawnState {
    Style style;
    std::initializer_list<TimeState> states;
    std::string_view word;   // in the column title, with colours
    std::string_view abbr;   // the same, shorter (top(1)'s)
    std::string_view named;  // without colours: what the letter stands for
};
const DrawnState kDrawnStates[] = {
    {Style::User, {TimeState::User}, "user", "us", "user"},
    {Style::Nice, {TimeState::Nice}, "nice", "ni", "nice"},
    {Style::System, {TimeState::System}, "sys", "sy", "system"},
    {Style::Irq, {TimeState::Irq, TimeState::SoftIrq}, "irq", "hi", "irq+softirq"},
    {Style::Guest, {TimeState::Guest, TimeState::GuestNice}, "guest", "gu", "guest"},
    {Style::Steal, {TimeState::Steal}, "steal", "st", "steal"},
    {Style::IoWait, {TimeState::IoWait}, "io", "wa", "iowait"},
};

constexpr std::string_view kUtf8Levels[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
constexpr std::string_view kAsciiLevels[] = {" ", ".", ":", "-", "=", "+", "*", "#", "@"};

// The number of bytes of the UTF-8 sequence starting at s[i] when it is a complete, valid one
// for a character of one column this locale can show; 0 otherwise.
std::size_t printable_utf8(std::string_view s, std::size_t i) {
    const auto lead = static_cast<unsigned char>(s[i]);
    std::size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
    if (n == 0 || lead > 0xF4 || i + n > s.size()) return 0;
    char32_t cp = lead & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < 0xA0 || (cp >= 0xD800 && cp < 0xE000)) return 0;  // C1 controls, surrogates
    return ::wcwidth(static_cast<wchar_t>(cp)) == 1 ? n : 0;
}

// Puts cells on a line, no further than its width.
class LineBuilder {
  public:
    LineBuilder(int width, bool utf8) : width_(std::max(width, 0)), utf8_(utf8) {}

    int column() const { return static_cast<int>(line_.size()); }
    int room() const { return width_ - column(); }

    void glyph(std::string_view g, Style style) {
        if (column() < width_) line_.push_back(Cell{std::string{g}, style});
    }
    // A cell per character. Control characters, and what the locale cannot show in one
    // column, are '?': a reply never moves the cursor or changes the terminal.
    void text(std::string_view s, Style style) {
        for (std::size_t i = 0; i < s.size() && column() < width_;) {
            const auto c = static_cast<unsigned char>(s[i]);
            if (c >= 0x20 && c < 0x7F) {
                glyph(s.substr(i, 1), style);
                ++i;
            } else if (std::size_t n = utf8_ && c >= 0x80 ? printable_utf8(s, i) : 0; n > 0) {
                glyph(s.substr(i, n), style);
                i += n;
            } else {
                glyph("?", style);
                // Skip the rest of a multi-byte sequence.
                for (++i; i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;) ++i;
            }
        }
    }
    void pad_to(int col, Style style = Style::Plain) {
        while (column() < std::min(col, width_)) glyph(" ", style);
    }

    Line take() { return std::move(line_); }

  private:
    int width_;
    bool utf8_;
    Line line_;
};

// How many cells a plain text takes (each character one).
int text_cells(std::string_view s) {
    int n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
}

std::string figure(const std::optional<double>& v) {
    return v ? fmt::format("{:>{}.1f}", *v, kFigureWidth)
             : fmt::format("{:>{}}", "-", kFigureWidth);
}

std::string title_left(const TopModel& m) {
    const auto* s = m.snapshot();
    if (s == nullptr) return "monitord: no reply yet";
    const auto& st = s->status;
    std::string out =
        fmt::format("monitord {}, up {}, {} CPU{}", st.version, format_duration(st.uptime),
                    st.cpus.size(), st.cpus.size() == 1 ? "" : "s");
    if (m.at()) {
        // A moment of the past: the history's minute up to it (its newest second may be
        // earlier, where the daemon was not running).
        const auto t = std::chrono::system_clock::to_time_t(*m.at());
        out += fmt::format(", history at {:%Y-%m-%d %H:%M:%S}", fmt::localtime(t));
        if (!s->loading.timestamp) out += ", nothing kept";
    } else if (s->loading.timestamp) {
        const auto t = std::chrono::system_clock::to_time_t(*s->loading.timestamp);
        out += fmt::format(", {:%H:%M:%S}", fmt::localtime(t));
    } else {
        out += ", no sample yet";
    }
    if (m.stale()) out += " (stale)";
    return out;
}

Line title_line(const TopModel& m, const FrameOptions& o) {
    LineBuilder b(o.width, o.utf8);
    const std::string left = title_left(m);
    const std::string right = fmt::format("source {}, by {}", m.source(), sort_name(m.sort()));
    const int right_cells = text_cells(right);
    // A moment of the past is said whole: the source and the order give way to it.
    if (m.at() && text_cells(left) + 2 + right_cells > o.width) {
        b.text(left, Style::Title);
    } else if (o.width >= right_cells + 2 + 20) {
        // The choices at the right end, the rest cut to make room.
        b.text(left.substr(0, static_cast<std::size_t>(o.width - right_cells - 2)), Style::Title);
        b.pad_to(o.width - right_cells, Style::Title);
        b.text(right, Style::Title);
    } else {
        b.text(left + "; " + right, Style::Title);
    }
    return b.take();
}

Line watchdog_line(const TopModel& m, const FrameOptions& o) {
    LineBuilder b(o.width, o.utf8);
    const auto* s = m.snapshot();
    if (s == nullptr || !s->status.watchdog) {
        b.text("watchdog: none", Style::Plain);
        return b.take();
    }
    const auto& w = *s->status.watchdog;
    std::string text = fmt::format("watchdog {}: {}", w.device, w.armed ? "armed" : "disarmed");
    if (w.timeout) text += fmt::format(", timeout {} s", *w.timeout);
    if (w.armed && w.time_left) text += fmt::format(", {} s left", *w.time_left);
    text += w.since_last_pet ? fmt::format(", last pet {:.2f} s ago", *w.since_last_pet)
                             : std::string{", no pet yet"};
    text += fmt::format(", {} pets", format_count(w.pets));
    if (w.pet_errors > 0) text += fmt::format(", {} failed", format_count(w.pet_errors));
    if (w.late_pets > 0) {
        text += fmt::format(", {} late (longest gap {:.1f} s)", format_count(w.late_pets),
                            w.longest_pet_gap);
    }
    b.text(text, w.pet_errors > 0 || w.late_pets > 0 ? Style::Warning : Style::Plain);
    return b.take();
}

// The machine's context, as top(1)'s Tasks line: the tasks that run and wait, the CPU
// pressure, the interrupts and softirqs per second with the busiest source of each. Rates from
// the daemon's second reading on; before the first, or on a machine without the files, says so.
Line context_line(const TopModel& m, const FrameOptions& o) {
    LineBuilder b(o.width, o.utf8);
    const auto* s = m.snapshot();
    const auto* c = m.context_sample();
    if (c == nullptr) {
        const bool none =
            s != nullptr && s->loading.context && !s->loading.context->unavailable.empty();
        b.text(none ? "context: " + s->loading.context->unavailable
                    : std::string{"context: first reading"},
               Style::Dim);
        return b.take();
    }
    std::vector<std::string> tasks;
    if (c->procs_running) tasks.push_back(fmt::format("{} running", *c->procs_running));
    if (c->procs_blocked) tasks.push_back(fmt::format("{} blocked", *c->procs_blocked));
    if (c->seconds > 0 && c->waiting) tasks.push_back(fmt::format("{:.2f} waiting", *c->waiting));
    std::string text;
    for (const auto& t : tasks) text += (text.empty() ? "tasks " : ", ") + t;
    auto part = [&](std::string p) {
        if (!text.empty()) text += "  ";
        text += p;
    };
    if (c->seconds <= 0) {
        part("(rates from the next second)");
        b.text(text, Style::Plain);
        return b.take();
    }
    if (c->pressure_some) {
        part(fmt::format("pressure {:.1f}%", *c->pressure_some * 100) +
             (c->pressure_avg10 ? fmt::format(" (10 s {:.1f}%)", *c->pressure_avg10)
                                : std::string{}));
    }
    auto rate = [&](const char* what, const std::optional<double>& total,
                    const std::vector<monitor::InterruptRate>& busiest) {
        if (!total) return;
        std::string p = fmt::format("{} {}/s", what,
                                    format_count(static_cast<std::uint64_t>(std::llround(*total))));
        if (!busiest.empty()) {
            p += fmt::format(
                " ({} {})", busiest.front().source,
                format_count(static_cast<std::uint64_t>(std::llround(busiest.front().per_second))));
        }
        part(p);
    };
    rate("irq", c->interrupts, c->interrupt_sources);
    rate("softirq", c->softirqs, c->softirq_kinds);
    b.text(text, Style::Plain);
    return b.take();
}

// A CPU's context in the row's figures: waiting tasks, MHz, interrupts and softirqs per second
// ("-" for what the machine or the interval lacks).
std::string context_figures(const monitor::CpuContextFigures* c, bool rates) {
    auto put = [](const std::optional<double>& v, int decimals) {
        if (!v) return fmt::format("{:>{}}", "-", kFigureWidth);
        // A figure too wide for its column in thousands ("1234k"), not shifting the rest.
        if (decimals == 0 && *v >= 999'999.5) {
            return fmt::format("{:>{}}", fmt::format("{:.0f}k", *v / 1000), kFigureWidth);
        }
        return fmt::format("{:>{}.{}f}", *v, kFigureWidth, decimals);
    };
    if (c == nullptr) return put({}, 0) + put({}, 0) + put({}, 0) + put({}, 0);
    const std::optional<double> none;
    return put(rates ? c->waiting : none, 2) + put(c->frequency_mhz, 0) +
           put(rates ? c->interrupts : none, 0) + put(rates ? c->softirqs : none, 0);
}

// The counter session: a title, then a line per event, in at most `max_lines` lines.
void counter_lines(const TopModel& m, const FrameOptions& o, std::size_t max_lines,
                   std::vector<Line>& out) {
    const auto* s = m.snapshot();
    if (s == nullptr || !s->counters || max_lines == 0) return;
    const auto& r = *s->counters;
    {
        LineBuilder b(o.width, o.utf8);
        b.text(fmt::format(
                   "counters, {:.1f} s{}: count, and per second over the last {}", r.elapsed,
                   r.slots > 1 ? fmt::format(" ({} sets taking turns)", r.slots) : std::string{},
                   o.interval == 1 ? std::string{"second"} : fmt::format("{:g} s", o.interval)),
               Style::Heading);
        out.push_back(b.take());
    }
    const auto& rates = m.rates();
    std::size_t name_width = 0;
    std::size_t count_width = 0;
    std::vector<std::string> counts;
    for (const auto& e : rates) {
        name_width = std::max<std::size_t>(name_width, std::min<int>(text_cells(e.name), 32));
        // An estimate in brackets when the event was not counted all the time, as elsewhere.
        counts.push_back(e.running < 1
                             ? fmt::format("[{}]", format_count(static_cast<std::uint64_t>(
                                                       std::max(0.0, e.scaled))))
                             : format_count(e.count));
        count_width = std::max(count_width, counts.back().size());
    }
    const std::size_t room = max_lines - 1;
    const bool cut = rates.size() > room;
    const std::size_t shown = cut ? room - std::min<std::size_t>(room, 1) : rates.size();
    for (std::size_t i = 0; i < shown; ++i) {
        const auto& e = rates[i];
        LineBuilder b(o.width, o.utf8);
        b.text("  ", Style::Plain);
        b.text(e.name.substr(0, 32), Style::Plain);
        b.pad_to(static_cast<int>(2 + name_width + 2));
        b.text(fmt::format("{:>{}}  {:>15}/s", counts[i], count_width,
                           format_count(static_cast<std::uint64_t>(std::llround(e.per_second)))),
               Style::Plain);
        if (e.running < 1) b.text(fmt::format("  ({:.1f}% counted)", e.running * 100), Style::Dim);
        out.push_back(b.take());
    }
    if (cut && room > 0) {
        LineBuilder b(o.width, o.utf8);
        b.text(fmt::format("  and {} more: monctl perf read shows them all", rates.size() - shown),
               Style::Dim);
        out.push_back(b.take());
    }
}

// The legend over the bars: the states in their colours, or their letters.
void bar_legend(LineBuilder& b, bool states, int cells, const FrameOptions& o) {
    if (!states) {
        b.text(std::string_view{"load"}.substr(0, static_cast<std::size_t>(cells)), Style::Load);
        return;
    }
    auto width = [](auto word) {
        int n = -1;
        for (const auto& d : kDrawnStates) n += static_cast<int>(word(d).size()) + 1;
        return n;
    };
    auto put = [&](auto word) {
        for (const auto& d : kDrawnStates) {
            if (&d != kDrawnStates) b.glyph(" ", Style::Heading);
            b.text(word(d), o.colour ? d.style : Style::Heading);
        }
    };
    if (o.colour) {
        const auto full = [](const DrawnState& d) { return d.word; };
        const auto abbr = [](const DrawnState& d) { return d.abbr; };
        if (width(full) <= cells) {
            put(full);
        } else if (width(abbr) <= cells) {
            put(abbr);
        }
        return;
    }
    // u=user n=nice ...
    std::string full, abbr;
    for (const auto& d : kDrawnStates) {
        if (!full.empty()) full += ' ', abbr += ' ';
        full += fmt::format("{}={}", style_letter(d.style), d.word);
        abbr += fmt::format("{}={}", style_letter(d.style), d.abbr);
    }
    if (text_cells(full) <= cells) {
        b.text(full, Style::Heading);
    } else if (text_cells(abbr) <= cells) {
        b.text(abbr, Style::Heading);
    }
}

Line heading_line(const Columns& c, bool states, const FrameOptions& o) {
    LineBuilder b(o.width, o.utf8);
    b.text("CPU", Style::Heading);
    b.pad_to(c.label + 1, Style::Heading);
    if (c.bar > 0) {
        const int start = b.column();
        b.glyph("[", Style::Heading);
        bar_legend(b, states, c.bar, o);
        b.pad_to(start + 1 + c.bar, Style::Heading);
        b.glyph("]", Style::Heading);
    }
    for (auto t : {"last", "avg", "min", "max"}) {
        b.text(fmt::format("{:>{}}", t, kFigureWidth), Style::Heading);
    }
    if (c.context > 0) {
        for (auto t : {"wait", "MHz", "irq/s", "sirq/s"}) {
            b.text(fmt::format("{:>{}}", t, kFigureWidth), Style::Heading);
        }
    }
    if (c.spark > 0) {
        const auto title = fmt::format("last {} s", c.spark);
        b.text(fmt::format(" {:<{}}",
                           title.size() <= static_cast<std::size_t>(c.spark)
                               ? title
                               : title.substr(0, static_cast<std::size_t>(c.spark)),
                           c.spark),
               Style::Heading);
    }
    return b.take();
}

void bar_cells(LineBuilder& b, const monitor::SourceLoad* load, int cells, const FrameOptions& o) {
    std::vector<Segment> segments;
    if (load != nullptr && load->states && load->states->last) {
        segments = state_segments(*load->states->last, cells);
    } else if (load != nullptr && load->stats && load->stats->avg_prev_sec) {
        const double share = std::clamp(*load->stats->avg_prev_sec, 0.0, 100.0);
        segments.push_back({Style::Load, static_cast<int>(std::lround(share / 100 * cells))});
    }
    const int start = b.column();
    for (const auto& s : segments) {
        const std::string glyph =
            o.colour ? std::string{"|"} : std::string(1, style_letter(s.style));
        for (int i = 0; i < s.cells; ++i) b.glyph(glyph, s.style);
    }
    b.pad_to(start + cells);
}

// `rates`: whether the context's rates are there (from the daemon's second reading).
Line row_line(const Row& r, Style label_style, const Columns& c, const FrameOptions& o,
              bool rates) {
    LineBuilder b(o.width, o.utf8);
    b.text(r.label, label_style);
    b.pad_to(c.label + 1);
    if (c.bar > 0) {
        b.glyph("[", Style::Plain);
        bar_cells(b, r.load, c.bar, o);
        b.glyph("]", Style::Plain);
    }
    const auto* stats = r.load != nullptr && r.load->stats ? &*r.load->stats : nullptr;
    if (stats != nullptr) {
        b.text(figure(stats->avg_prev_sec) + figure(stats->avg_prev_min) +
                   figure(stats->min_prev_min) + figure(stats->max_prev_min),
               Style::Plain);
    } else {
        b.text(figure({}) + figure({}) + figure({}) + figure({}), Style::Plain);
    }
    if (c.context > 0) b.text(context_figures(r.context, rates), Style::Plain);
    if (c.spark > 0) {
        b.glyph(" ", Style::Plain);
        static const std::vector<std::optional<double>> kNone;
        for (const auto& g :
             sparkline(r.load != nullptr ? r.load->history : kNone, c.spark, o.utf8)) {
            b.glyph(g, Style::Plain);
        }
    }
    return b.take();
}

// The busiest units, in percent of one CPU, as many as `max_lines` leaves room for after the
// heading. None on a machine without cgroup accounting (monctl loading --units says why).
void unit_lines(const monitor::UnitLoading& units, const FrameOptions& o, std::size_t max_lines,
                std::vector<Line>& out) {
    if (max_lines == 0 || !units.unavailable.empty()) return;
    if (units.top.empty()) {
        LineBuilder b(o.width, o.utf8);
        b.text(units.count == 0
                   ? std::string{"units: none in the cgroup tree"}
                   : fmt::format("units: none of the {} used CPU time in the window", units.count),
               Style::Dim);
        out.push_back(b.take());
        return;
    }
    if (max_lines < 2) return;  // no room for a unit below the heading
    // A sixth figure, the pressure, where the kernel keeps one per unit (cgroup2 with PSI).
    const bool pressure = std::ranges::any_of(
        units.top, [](const monitor::UnitLoad& u) { return u.pressure.has_value(); });
    const int figures = pressure ? 6 : 5;
    // The name takes what the figures leave.
    const int name = std::max(8, o.width - figures * kFigureWidth - 1);
    LineBuilder h(o.width, o.utf8);
    h.text(fmt::format("UNIT ({} of {})", std::min(units.top.size(), max_lines - 1), units.count),
           Style::Heading);
    h.pad_to(name + 1, Style::Heading);
    h.text(fmt::format("{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}", "last", kFigureWidth, "user", kFigureWidth,
                       "sys", kFigureWidth, "avg", kFigureWidth, "max", kFigureWidth),
           Style::Heading);
    if (pressure) h.text(fmt::format("{:>{}}", "psi10", kFigureWidth), Style::Heading);
    out.push_back(h.take());
    for (std::size_t i = 0; i + 1 < max_lines && i < units.top.size(); ++i) {
        const auto& u = units.top[i];
        LineBuilder b(o.width, o.utf8);
        // A long name keeps its end: the unit's kind and what tells it from its siblings.
        const auto cells = static_cast<std::size_t>(name);
        b.text(u.unit.size() > cells ? "~" + u.unit.substr(u.unit.size() - cells + 1) : u.unit,
               Style::Plain);
        b.pad_to(name + 1);
        b.text(figure(u.cpu) + figure(u.user) + figure(u.system) + figure(u.window_avg) +
                   figure(u.window_max) + (pressure ? figure(u.pressure) : std::string{}),
               Style::Plain);
        out.push_back(b.take());
    }
}

// Each CPU's busiest tasks in the pane's order, as many as `max_lines` leaves room for after
// the heading; or a line saying why there are none yet.
void task_lines(const TopModel& m, const FrameOptions& o, std::size_t max_lines,
                std::vector<Line>& out) {
    if (max_lines == 0) return;
    const auto* snapshot = m.snapshot();
    const auto* tasks =
        snapshot != nullptr && snapshot->loading.tasks ? &*snapshot->loading.tasks : nullptr;
    const auto rows = m.task_rows();
    auto say = [&](const std::string& text) {
        LineBuilder b(o.width, o.utf8);
        b.text(text, Style::Dim);
        out.push_back(b.take());
    };
    if (tasks == nullptr) return say("tasks: asked for; the daemon's first figures come in 2 s");
    if (!tasks->unavailable.empty()) return say("tasks: " + tasks->unavailable);
    if (tasks->seconds <= 0) return say("tasks: the daemon reads them from its next second on");
    if (rows.empty()) {
        return say(fmt::format("tasks: none of the {} threads had CPU time in the last second",
                               tasks->count));
    }
    if (max_lines < 2) return;
    // cpu, pid, tid and the name keep their widths; the unit takes what the figures leave.
    constexpr int kId = 8;
    constexpr int kComm = 16;
    const int fixed = 4 + 2 * kId + 1 + kComm + 1;
    const int unit = std::max(4, o.width - fixed - 3 * kFigureWidth - 1);
    // The column the pane is ordered by has its title in capitals, as htop marks it.
    const auto sort = m.task_sort();
    auto title = [&](TaskSort column, std::string_view name) {
        std::string t{name};
        if (column == sort)
            std::ranges::transform(t, t.begin(), [](char c) {
                return static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
            });
        return t;
    };
    LineBuilder h(o.width, o.utf8);
    h.text(fmt::format("{:>4}{:>{}}{:>{}} {:<{}} ", title(TaskSort::Cpu, "cpu"),
                       title(TaskSort::Pid, "pid"), kId, "tid", kId, title(TaskSort::Name, "comm"),
                       kComm),
           Style::Heading);
    const std::string what = fmt::format("{} ({} of {})", title(TaskSort::Unit, "unit"),
                                         std::min(rows.size(), max_lines - 1), tasks->count);
    h.text(what.substr(0, static_cast<std::size_t>(unit)), Style::Heading);
    h.pad_to(fixed + unit + 1, Style::Heading);
    h.text(fmt::format("{:>{}}{:>{}}{:>{}}", title(TaskSort::Load, "load"), kFigureWidth, "user",
                       kFigureWidth, "sys", kFigureWidth),
           Style::Heading);
    out.push_back(h.take());
    for (std::size_t i = 0; i + 1 < max_lines && i < rows.size(); ++i) {
        const auto& t = *rows[i];
        LineBuilder b(o.width, o.utf8);
        b.text(fmt::format("{:>4}{:>{}}{:>{}} ", t.cpu, t.pid, kId, t.tid, kId), Style::Plain);
        b.text(t.comm, Style::Plain);  // a thread names itself: LineBuilder shows no control
        b.pad_to(fixed);
        const auto cells = static_cast<std::size_t>(unit);
        const std::string name = t.unit.empty() ? std::string{"-"} : t.unit;
        b.text(name.size() > cells ? "~" + name.substr(name.size() - cells + 1) : name,
               Style::Plain);
        b.pad_to(fixed + unit + 1);
        b.text(figure(t.load) + figure(t.user) + figure(t.system), Style::Plain);
        out.push_back(b.take());
    }
}

Line footer_line(const TopModel& m, const Frame& f, const FrameOptions& o) {
    LineBuilder b(o.width, o.utf8);
    if (m.stale()) {
        b.text(fmt::format("daemon gone, reconnecting every {:g} s (q quits): {}", o.interval,
                           m.lost_reason()),
               Style::Warning);
        return b.take();
    }
    if (!m.history_error().empty()) {
        b.text("no history there: " + m.history_error(), Style::Warning);
        return b.take();
    }
    const std::string where =
        f.rows == 0 ? std::string{"no CPUs"}
                    : fmt::format("cpu {}-{} of {}", f.rows > 0 && f.page > 0 ? f.first_row + 1 : 0,
                                  f.first_row + std::min(f.page, f.rows), f.rows);
    b.text(where, Style::Dim);
    // In the history, the keys that move in time come first: the scroll keys still work.
    if (m.at()) {
        b.text(fmt::format("   history on disk: [ ] a minute back or on  {{ }} an hour  n now  "
                           "q quit  {} PgUp PgDn Home End",
                           o.utf8 ? "↑↓" : "Up Down"),
               Style::Dim);
        return b.take();
    }
    b.text(fmt::format("   q quit  h help  s source  o order  u units  t tasks  c context  {} "
                       "PgUp PgDn Home End",
                       o.utf8 ? "↑↓" : "Up Down"),
           Style::Dim);
    return b.take();
}

// The help, shown instead of the CPUs: the keys, and what the columns and the bar say.
void help_lines(const FrameOptions& o, std::vector<Line>& out) {
    auto line = [&](std::string_view text, Style style = Style::Plain) {
        LineBuilder b(o.width, o.utf8);
        b.text(text, style);
        out.push_back(b.take());
    };
    line("");
    line("Keys", Style::Heading);
    line("  q  F10  Ctrl-C      quit");
    line("  h  ?  F1            this help; any other key takes it away");
    line("  s                   the next source: procstat (/proc/stat, by state) or probe");
    line("  o                   order the CPUs by number, or by the last second's load");
    line("  u  t  c  < >        busiest units, or tasks (< > their order); CPU context");
    line(o.utf8 ? "  [ ]  ← →  { }  n    a minute back or on, an hour back or on; n: now"
                : "  [ ]  Left Right  { }  n   a minute back or on, an hour; n: now");
    line(o.utf8 ? "  ↑ ↓  k j            scroll a row" : "  Up Down  k j        scroll a row");
    line("  PgUp PgDn Space     scroll a page; Home End g G: the first or the last page");
    line("Columns", Style::Heading);
    line("  last                the load of the last second, in percent");
    line("  avg  min  max       the average, lowest and highest second of the window");
    line("  last N s            one mark a second, from a blank (idle) to a full block");
    line("  UNIT                last, user, sys: percent of one CPU over the last second;");
    line("                      avg and max over the window (a unit on 2 CPUs has 200)");
    line("  wait MHz irq/s sirq/s  tasks waiting for the CPU, its clock, interrupts/s (c)");
    line("  pressure            the share of the last second some task waited for a CPU");
    line("The bar", Style::Heading);
    std::string states = " ";
    for (const auto& d : kDrawnStates) {
        states += &d == kDrawnStates ? " " : ", ";
        if (!o.colour) states += fmt::format("{} ", style_letter(d.style));
        states += d.named;
    }
    line(states);
    line("  in this order, in their colours (none with NO_COLOR) or by letter; iowait is not");
    line("  load. A CPU marked * went offline: its figures are from before.");
}

}  // namespace

char style_letter(Style s) {
    switch (s) {
        case Style::User:
            return 'u';
        case Style::Nice:
            return 'n';
        case Style::System:
            return 's';
        case Style::Irq:
            return 'i';
        case Style::Guest:
            return 'g';
        case Style::Steal:
            return 't';
        case Style::IoWait:
            return 'w';
        case Style::Load:
            return '#';
        default:
            return ' ';
    }
}

Columns fit_columns(int width, int label, std::size_t history, int context) {
    Columns c;
    c.label = label;
    c.context = context;
    const int rest = width - label - 1 - 4 * kFigureWidth - context;
    if (rest < kMinBar + 2) return c;  // the figures only
    c.bar = std::clamp(rest / 2 - 2, kMinBar, kMaxBar);
    const int room = rest - (c.bar + 2) - 1;
    if (room >= kMinSpark && history > 0) {
        c.spark = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(room), history));
    }
    const int left = rest - (c.bar + 2) - (c.spark > 0 ? c.spark + 1 : 0);
    c.bar = std::min(kMaxBar, c.bar + left);
    return c;
}

std::vector<Segment> state_segments(const monitor::StateShares& shares, int cells) {
    std::vector<Segment> out;
    double sum = 0;
    int drawn = 0;
    for (const auto& d : kDrawnStates) {
        for (auto s : d.states) sum += std::max(0.0, shares[s]);
        const int end = static_cast<int>(std::lround(std::min(sum, 100.0) / 100 * cells));
        out.push_back({d.style, end - drawn});
        drawn = end;
    }
    return out;
}

std::vector<std::string> sparkline(const std::vector<std::optional<double>>& values, int cells,
                                   bool utf8) {
    const auto& levels = utf8 ? kUtf8Levels : kAsciiLevels;
    std::vector<std::string> out;
    const std::size_t n = static_cast<std::size_t>(std::max(cells, 0));
    const std::size_t shown = std::min(n, values.size());
    out.assign(n - shown, " ");
    for (std::size_t i = values.size() - shown; i < values.size(); ++i) {
        std::size_t level = 0;
        if (const auto& v = values[i]; v && *v > 0) {
            level = static_cast<std::size_t>(std::clamp(std::ceil(*v / 12.5), 1.0, 8.0));
        }
        out.emplace_back(levels[level]);
    }
    return out;
}

Frame build_frame(const TopModel& m, const FrameOptions& o) {
    Frame f;
    const auto machine = m.machine();
    const auto rows = m.rows();
    f.rows = static_cast<int>(rows.size());

    int label = 3;
    for (const auto& r : rows) label = std::max(label, text_cells(r.label));
    std::size_t history = machine.load != nullptr ? machine.load->history.size() : 0;
    for (const auto& r : rows) {
        if (r.load != nullptr) history = std::max(history, r.load->history.size());
    }
    const auto* snapshot = m.snapshot();
    if (snapshot != nullptr) history = std::max(history, snapshot->loading.window_seconds);
    f.columns = fit_columns(o.width, label, history, m.context() ? kContextWidth : 0);

    f.lines.push_back(title_line(m, o));
    if (m.help() && o.height > 0) {
        help_lines(o, f.lines);
        if (static_cast<int>(f.lines.size()) >= o.height) {
            f.lines.resize(static_cast<std::size_t>(o.height - 1));
        }
        LineBuilder b(o.width, o.utf8);
        b.text("any key returns to the CPUs; q quits", Style::Dim);
        f.lines.push_back(b.take());
        return f;
    }
    // The watchdog is shown as it is now: not at a moment of the past.
    if (!m.at()) f.lines.push_back(watchdog_line(m, o));
    if (snapshot != nullptr && snapshot->loading.context) f.lines.push_back(context_line(m, o));
    if (snapshot != nullptr && snapshot->counters) {
        const std::size_t events = snapshot->counters->events.size();
        // Leave the CPUs at least five rows below the panel.
        const int room = o.height - static_cast<int>(f.lines.size()) - 2 - 1 - 5;
        counter_lines(m, o,
                      o.height == 0 ? events + 1 : static_cast<std::size_t>(std::max(room, 0)),
                      f.lines);
    }
    if (m.at()) {
        // The history keeps the CPUs' loads and states: nothing of the units, tasks, counters.
        if (m.tasks() || m.units()) {
            LineBuilder b(o.width, o.utf8);
            b.text("units and tasks: live only (n returns to now)", Style::Dim);
            f.lines.push_back(b.take());
        }
    } else if (m.tasks()) {
        // In the units' place, with as much room.
        const int room = o.height - static_cast<int>(f.lines.size()) - 2 - 1 - 5;
        const std::size_t all = snapshot != nullptr && snapshot->loading.tasks
                                    ? snapshot->loading.tasks->top.size()
                                    : 0;
        task_lines(m, o, o.height == 0 ? all + 1 : static_cast<std::size_t>(std::max(room, 0)),
                   f.lines);
    } else if (snapshot != nullptr && snapshot->loading.units && m.units()) {
        // As the counters: the CPUs keep at least five rows below.
        const int room = o.height - static_cast<int>(f.lines.size()) - 2 - 1 - 5;
        unit_lines(*snapshot->loading.units, o,
                   o.height == 0 ? snapshot->loading.units->top.size() + 1
                                 : static_cast<std::size_t>(std::max(room, 0)),
                   f.lines);
    }
    const bool states = machine.load != nullptr && machine.load->states.has_value();
    f.lines.push_back(heading_line(f.columns, states, o));
    // The machine's context: the sums over the CPUs (no one clock).
    const auto* context = m.context_sample();
    const bool rates = context != nullptr && context->seconds > 0;
    monitor::CpuContextFigures sums;
    if (context != nullptr) {
        sums.waiting = context->waiting;
        sums.interrupts = context->interrupts;
        sums.softirqs = context->softirqs;
    }
    auto machine_row = machine;
    machine_row.context = context != nullptr ? &sums : nullptr;
    f.lines.push_back(row_line(machine_row, Style::Machine, f.columns, o, rates));

    const int top = static_cast<int>(f.lines.size());
    f.page = o.height == 0 ? f.rows : std::clamp(o.height - top - 1, 0, f.rows);
    f.first_row = std::clamp(m.scroll(), 0, f.rows - f.page);
    for (int i = f.first_row; i < f.first_row + f.page; ++i) {
        const auto& r = rows[static_cast<std::size_t>(i)];
        f.lines.push_back(
            row_line(r, r.online ? Style::Plain : Style::Offline, f.columns, o, rates));
    }
    if (o.height > 0) {
        // The keys (or the daemon's absence) on the last line, whatever else has to go.
        if (static_cast<int>(f.lines.size()) >= o.height) {
            f.lines.resize(static_cast<std::size_t>(o.height - 1));
        }
        f.lines.push_back(footer_line(m, f, o));
    } else {
        // Printed once: what the letters of the bars stand for, and what offline means.
        if (!o.colour && states) {
            std::string legend = "bar:";
            for (const auto& d : kDrawnStates) {
                legend += fmt::format(" {} {}{}", style_letter(d.style), d.named,
                                      &d == std::end(kDrawnStates) - 1 ? "" : ",");
            }
            LineBuilder b(o.width, o.utf8);
            b.text(legend, Style::Dim);
            f.lines.push_back(b.take());
        }
        if (std::ranges::any_of(rows, [](const Row& r) { return !r.online; })) {
            LineBuilder b(o.width, o.utf8);
            b.text("* offline now; figures from the time it was online", Style::Dim);
            f.lines.push_back(b.take());
        }
    }
    return f;
}

std::string line_text(const Line& line) {
    std::string out;
    for (const auto& c : line) out += c.glyph;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

std::string frame_text(const Frame& frame) {
    std::string out;
    for (const auto& l : frame.lines) out += line_text(l) + '\n';
    return out;
}

}  // namespace monctl::top
