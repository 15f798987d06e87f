// monctl top: a full-screen live view of the daemon's figures (top_screen draws top_frame's
// layout of top_model), or with --once one frame as text.
#pragma once

#include <string>

namespace monctl {

struct TopOptions {
    std::string socket;
    bool once = false;
    std::string interval = "1";  // seconds (or a duration: 500ms), 0.1 to 60
    // A moment of the past to show first (--at, journalctl's times); empty: the live view.
    std::string at;
};

// The exit status: 0 when the view was left (q, ^C, SIGTERM) or the frame printed, 1 when
// the daemon cannot be reached or the terminal cannot be used (or, with --at, keeps no history
// of that moment), 2 for a bad interval or time.
int run_top(const TopOptions& o);

}  // namespace monctl
