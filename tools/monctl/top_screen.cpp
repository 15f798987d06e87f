// ncurses' macros (move, erase, timeout, ...) would collide with C++ names: the functions
// are called by their window forms instead.
#define NCURSES_NOMACROS 1
#include "top_screen.hpp"

#include <curses.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace monctl::top {
namespace {

SCREEN* as_screen(void* s) {
    return static_cast<SCREEN*>(s);
}

// Colour pairs, one per coloured style.
struct Colour {
    Style style;
    short foreground;
    attr_t extra;
};
constexpr Colour kColours[] = {
    {Style::User, COLOR_GREEN, A_NORMAL},    {Style::Nice, COLOR_BLUE, A_BOLD},
    {Style::System, COLOR_RED, A_NORMAL},    {Style::Irq, COLOR_YELLOW, A_NORMAL},
    {Style::Guest, COLOR_MAGENTA, A_NORMAL}, {Style::Steal, COLOR_CYAN, A_NORMAL},
    {Style::IoWait, COLOR_WHITE, A_DIM},     {Style::Load, COLOR_GREEN, A_NORMAL},
    {Style::Warning, COLOR_RED, A_BOLD},
};

attr_t attributes(Style s, bool colour) {
    if (colour) {
        for (std::size_t i = 0; i < std::size(kColours); ++i) {
            if (kColours[i].style == s) {
                return static_cast<attr_t>(COLOR_PAIR(static_cast<int>(i) + 1)) | kColours[i].extra;
            }
        }
    }
    switch (s) {
        case Style::Title:
        case Style::Heading:
        case Style::Machine:
            return A_BOLD;
        case Style::Warning:
            return A_BOLD | A_REVERSE;
        case Style::Offline:
        case Style::Dim:
            return A_DIM;
        default:
            return A_NORMAL;
    }
}

std::optional<Action> action_of(int key) {
    switch (key) {
        case 'q':
        case 'Q':
        case KEY_F(10):  // htop's
            return Action::Quit;
        case 'h':
        case 'H':
        case '?':
        case KEY_F(1):
            return Action::Help;
        case 's':
        case 'S':
            return Action::NextSource;
        case 'o':
        case 'O':
            return Action::ToggleSort;
        case 'u':
        case 'U':
            return Action::ToggleUnits;
        case 'c':
        case 'C':
            return Action::ToggleContext;
        case 't':
        case 'T':
            return Action::ToggleTasks;
        case '>':
        case '.':
            return Action::NextTaskSort;
        case '<':
        case ',':
            return Action::PrevTaskSort;
        case KEY_UP:
        case 'k':
            return Action::Up;
        case KEY_DOWN:
        case 'j':
            return Action::Down;
        case KEY_PPAGE:
            return Action::PageUp;
        case KEY_NPAGE:
        case ' ':
            return Action::PageDown;
        case KEY_HOME:
        case 'g':
            return Action::Home;
        case KEY_END:
        case 'G':
            return Action::End;
        case '[':
        case KEY_LEFT:
            return Action::Earlier;
        case ']':
        case KEY_RIGHT:
            return Action::Later;
        case '{':
            return Action::MuchEarlier;
        case '}':
            return Action::MuchLater;
        case 'n':
        case 'N':
            return Action::Now;
        default:
            return std::nullopt;
    }
}

}  // namespace

monitor::Result<std::unique_ptr<TopScreen>> TopScreen::open() {
    if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0) {
        return monitor::fail(monitor::Status::BadArg,
                             "top needs a terminal on its input and output; --once prints one "
                             "frame as text");
    }
    std::unique_ptr<TopScreen> s{new TopScreen};
    // The signals come through a descriptor, so that the wait sees them and the loop ends the
    // way q ends it, through endwin.
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGWINCH);
    if (const int r = ::pthread_sigmask(SIG_BLOCK, &mask, &old); r != 0) {
        return monitor::fail_errno(r, "pthread_sigmask");
    }
    s->old_mask_ = old;
    s->signals_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!s->signals_) return monitor::fail_errno(errno, "signalfd");

    SCREEN* screen = ::newterm(nullptr, stdout, stdin);
    if (screen == nullptr) {
        const char* term = std::getenv("TERM");  // NOLINT(concurrency-mt-unsafe): one thread
        return monitor::fail(monitor::Status::BadArg,
                             std::string{"cannot use the terminal (TERM="} +
                                 (term != nullptr ? term : "") +
                                 "): curses does not know it; --once prints one frame as text");
    }
    s->screen_ = screen;
    ::set_term(screen);
    ::cbreak();
    ::noecho();
    ::nonl();
    ::keypad(stdscr, TRUE);
    ::nodelay(stdscr, TRUE);
    ::set_escdelay(25);
    ::curs_set(0);
    // NO_COLOR (no-color.org): present and not empty, no colours; the bars then say each
    // state by its letter, as --once does.
    const char* no_color = std::getenv("NO_COLOR");  // NOLINT(concurrency-mt-unsafe): one thread
    if (::has_colors() && (no_color == nullptr || *no_color == '\0')) {
        ::start_color();
        const short background = ::use_default_colors() == OK ? -1 : COLOR_BLACK;
        for (std::size_t i = 0; i < std::size(kColours); ++i) {
            ::init_pair(static_cast<short>(i + 1), kColours[i].foreground, background);
        }
        s->colour_ = true;
    }
    return s;
}

TopScreen::~TopScreen() {
    if (screen_ != nullptr) {
        ::endwin();
        ::delscreen(as_screen(screen_));
    }
    // Signals already taken are consumed; the others get their usual handling again.
    if (signals_) {
        signalfd_siginfo info;
        while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
        }
    }
    if (old_mask_) ::pthread_sigmask(SIG_SETMASK, &*old_mask_, nullptr);
}

int TopScreen::width() const {
    return getmaxx(stdscr);
}

int TopScreen::height() const {
    return getmaxy(stdscr);
}

void TopScreen::draw(const Frame& frame) {
    ::werase(stdscr);
    const int rows = height();
    for (std::size_t y = 0; y < frame.lines.size() && static_cast<int>(y) < rows; ++y) {
        const auto& line = frame.lines[y];
        ::wmove(stdscr, static_cast<int>(y), 0);
        // A run of cells of one style at a time.
        for (std::size_t i = 0; i < line.size();) {
            std::string run;
            std::size_t j = i;
            for (; j < line.size() && line[j].style == line[i].style; ++j) run += line[j].glyph;
            ::wattrset(stdscr, static_cast<int>(attributes(line[i].style, colour_)));
            // The last cell of the last line cannot be written without scrolling: ERR there
            // is expected, and the cells before it are drawn.
            ::waddstr(stdscr, run.c_str());
            i = j;
        }
    }
    ::wattrset(stdscr, A_NORMAL);
    ::wnoutrefresh(stdscr);
    ::doupdate();
}

TopScreen::Input TopScreen::wait(std::chrono::steady_clock::time_point deadline) {
    Input in;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals_.get(), POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (n <= 0) return in;
    if ((fds[1].revents & POLLIN) != 0) {
        signalfd_siginfo info;
        while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
            if (info.ssi_signo == SIGWINCH) {
                winsize ws{};
                if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
                    ws.ws_col > 0) {
                    ::resizeterm(ws.ws_row, ws.ws_col);
                }
                in.resized = true;
            } else {
                in.actions.push_back(Action::Quit);
            }
        }
    }
    if ((fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 && (fds[0].revents & POLLIN) == 0) {
        in.actions.push_back(Action::Quit);  // the terminal went away
    }
    if ((fds[0].revents & POLLIN) != 0) {
        for (int key; (key = ::wgetch(stdscr)) != ERR;) {
            if (key == KEY_RESIZE) {
                in.resized = true;
            } else if (auto a = action_of(key)) {
                in.actions.push_back(*a);
            }
        }
    }
    return in;
}

}  // namespace monctl::top
