// A derived metric's formula (perf's -M metrics, likwid's groups, rpistat's ratios): arithmetic
// over the counts of events. "instructions / cycles", "branch-misses * 1000 / instructions",
// "context-switches / seconds".
//
// The grammar: numbers (1000, 1e9, 0.5), + - * / and parentheses, the word `seconds` (the
// time the session counted, its pauses left out), and event names as the catalog takes them.
// A name is letters, digits and _ . : @ =, with a '-' inside it when a name character stands
// on both sides ("branch-misses"): a minus between two names is written with spaces around it.
// Anything else is written in braces: "{cpu/event=0x3c/}".
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::perf {

class MetricFormula {
  public:
    // BADARG saying what is wrong and where ("at 12: ')' expected").
    static Result<MetricFormula> parse(std::string_view text);

    // The text it was parsed from.
    const std::string& text() const { return text_; }
    // The events it reads, each once, in the order they first appear.
    const std::vector<std::string>& events() const { return events_; }
    // Whether it reads `seconds`: its value is a rate, not a ratio of counts.
    bool uses_seconds() const { return uses_seconds_; }

    // The value for `counts` (one per events(), in that order) over `seconds`; none for a
    // division by zero.
    std::optional<double> evaluate(std::span<const double> counts, double seconds) const;

    bool operator==(const MetricFormula& o) const { return text_ == o.text_; }

  private:
    enum class Op { Count, Number, Seconds, Negate, Add, Subtract, Multiply, Divide };
    struct Step {
        Op op;
        double number = 0;      // Op::Number
        std::size_t event = 0;  // Op::Count: index into events_
    };
    class Parser;

    std::string text_;
    std::vector<std::string> events_;
    bool uses_seconds_ = false;
    std::vector<Step> steps_;  // postfix
    std::size_t depth_ = 0;    // the most values evaluate() holds at once
};

}  // namespace monitor::perf
