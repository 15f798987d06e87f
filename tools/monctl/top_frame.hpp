// monctl top's frame: the model laid out for a screen of a given size as lines of cells, each
// cell one column with a glyph and a style. The curses screen draws it with colours; --once
// prints it as text. Nothing is drawn here.
//
//   monitord 0.1.0, up 02:03:04, 4 CPUs, 14:02:11              source procstat, by cpu
//   watchdog /dev/watchdog: armed, timeout 10 s, 7 s left, last pet 0.10 s ago, 1,234 pets
//   tasks 5 running, 0 blocked, 1.20 waiting  pressure 12.0% (10 s 8.5%)  irq 1,234/s ...
//   counters, 12.0 s: ...          (and a line per event, while a session runs)
//   UNIT (3 of 40)                 last   user    sys    avg    max
//   nginx.service                 150.0  120.0   30.0   80.0  200.0   (the busiest units)
//   CPU  [user nice sys irq guest steal io]   last    avg    min    max last 22 s
//   all  [uuuuusss                        ]   12.4    8.0    0.4   49.9 ▁▂▁▃▄
//   cpu0 [uuuuuuusssi                     ]   21.9   10.9    0.9   59.9 ▁▁▂▇█
//   ...
//   cpu 1-18 of 256   q quit  h help  s source  o order  ↑↓ PgUp PgDn Home End
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "monitor/loading/cpu_states.hpp"
#include "top_model.hpp"

namespace monctl::top {

enum class Style : std::uint8_t {
    Plain,
    Title,    // the first line
    Heading,  // the column titles, the counter panel's title
    Machine,  // the machine's row
    Offline,  // a CPU that went offline
    Warning,  // the daemon is gone; a watchdog in trouble
    Dim,      // the keys
    // The bar's segments, in the order they are drawn.
    User,    // user
    Nice,    // nice
    System,  // system
    Irq,     // irq and softirq
    Guest,   // guest and guest_nice
    Steal,   // steal
    IoWait,  // iowait: not load, drawn after it
    Load,    // a source without states (probe): the load
};

struct Cell {
    std::string glyph = " ";  // one column: a character, UTF-8 encoded
    Style style = Style::Plain;
};
using Line = std::vector<Cell>;

struct FrameOptions {
    int width = 80;
    // 0: as tall as the content (--once): every CPU, no key line.
    int height = 24;
    bool utf8 = false;    // block characters for the sparklines (ASCII otherwise)
    bool colour = false;  // the screen colours the styles; otherwise bars say the state by letter
    double interval = 1;  // seconds between fetches, for the reconnect message
};

// The widths of a row's parts: label, bar (inside its brackets; 0 for none), the context's
// figures (0 for none), and sparkline (0 for none). The load's figures (4 x 7 columns) always
// keep their place; the sparkline shrinks and goes, then the bar narrows, before they would.
struct Columns {
    int label = 3;
    int bar = 0;
    int context = 0;
    int spark = 0;
};
inline constexpr int kFigureWidth = 7;  // "  100.0"
// Each CPU's context, when shown: waiting tasks, MHz, interrupts and softirqs per second.
inline constexpr int kContextWidth = 4 * kFigureWidth;
inline constexpr int kMinBar = 5;
inline constexpr int kMaxBar = 50;
inline constexpr int kMinSpark = 8;
Columns fit_columns(int width, int label, std::size_t history, int context = 0);

// The bar of a load by state: each drawn state's share of `cells`, rounded on the running
// sum so that the segments add up to the busy share (all but idle) of the bar.
struct Segment {
    Style style;
    int cells = 0;
};
std::vector<Segment> state_segments(const monitor::StateShares& shares, int cells);

// The letter a segment shows without colour: u n s i g t w, and # for a load.
char style_letter(Style s);

// A sparkline of `values` (oldest first), the newest `cells` right-aligned: ▁▂▃▄▅▆▇█ (ASCII
// .:-=+*#@) from the lowest to the highest load, a blank for no load or no measurement.
std::vector<std::string> sparkline(const std::vector<std::optional<double>>& values, int cells,
                                   bool utf8);

struct Frame {
    std::vector<Line> lines;
    Columns columns;
    int first_row = 0;  // the index in TopModel::rows() of the first CPU row shown
    int page = 0;       // how many CPU rows are shown
    int rows = 0;       // how many CPU rows there are
};

Frame build_frame(const TopModel& model, const FrameOptions& options);

// A line's glyphs, without the blanks at its end.
std::string line_text(const Line& line);
// Every line, each ended by a newline.
std::string frame_text(const Frame& frame);

}  // namespace monctl::top
