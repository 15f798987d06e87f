// monctl top's terminal, through ncurses: curses mode and colours, the keys, a new size, and
// SIGINT, SIGTERM and SIGWINCH read from a signalfd (blocked otherwise), so that every way
// out passes through endwin() and leaves the terminal as it was found.
#pragma once

#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"
#include "top_frame.hpp"

namespace monctl::top {

class TopScreen {
  public:
    // Takes the terminal on stdin and stdout; fails when they are not a terminal curses knows.
    static monitor::Result<std::unique_ptr<TopScreen>> open();
    ~TopScreen();
    TopScreen(const TopScreen&) = delete;
    TopScreen& operator=(const TopScreen&) = delete;

    int width() const;
    int height() const;
    bool colour() const { return colour_; }

    // Draws the frame: only the cells that changed reach the terminal (werase, wnoutrefresh,
    // doupdate; never clear).
    void draw(const Frame& frame);

    // What happened while waiting.
    struct Input {
        std::vector<Action> actions;  // the keys pressed, in order; Quit for a signal too
        bool resized = false;
    };
    // Waits for a key, a signal or the deadline, whichever comes first.
    Input wait(std::chrono::steady_clock::time_point deadline);

  private:
    TopScreen() = default;

    monitor::UniqueFd signals_;
    std::optional<sigset_t> old_mask_;
    void* screen_ = nullptr;  // SCREEN*
    bool colour_ = false;
};

}  // namespace monctl::top
