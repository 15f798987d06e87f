#include "monitor/perf/metric_formula.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <locale>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace monitor::perf {
namespace {

// The most values a formula holds at once while evaluated, and the longest formula: bounds
// that a written formula never nears, and that keep a hostile one from the stack.
constexpr std::size_t kMaxDepth = 64;
constexpr std::size_t kMaxLength = 4096;

// A number at the start of `text` ("1000", "1e9", ".5"), and the characters it takes: in the C
// locale's form whatever the process's locale.
std::optional<std::pair<double, std::size_t>> parse_number(std::string_view text) {
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{}) return std::nullopt;
    return std::pair{v, static_cast<std::size_t>(end - text.data())};
#else
    // libc++ 16 (the static analysis' build) has no from_chars of a double.
    std::istringstream in{std::string{text}};
    in.imbue(std::locale::classic());
    double v = 0;
    if (!(in >> v)) return std::nullopt;
    const auto taken = in.eof() ? text.size() : static_cast<std::size_t>(in.tellg());
    return std::pair{v, taken};
#endif
}

bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == ':' ||
           c == '@' || c == '=';
}

}  // namespace

// A recursive descent over the grammar of metric_formula.hpp: each level of parentheses or
// unary minus is a call, and kMaxDepth bounds them (misc-no-recursion's concern).
// NOLINTBEGIN(misc-no-recursion)
class MetricFormula::Parser {
  public:
    Parser(std::string_view text, MetricFormula& out) : text_(text), out_(out) {}

    Result<void> run() {
        if (auto r = expression(0); !r) return r;
        skip_spaces();
        if (at_ < text_.size())
            return error(fmt::format("'{}' where the formula should end", text_[at_]));
        return {};
    }

  private:
    std::unexpected<Error> error(std::string_view what) const {
        return fail(Status::BadArg, fmt::format("formula \"{}\": at {}: {}", text_, at_ + 1, what));
    }

    void skip_spaces() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])) != 0) {
            ++at_;
        }
    }

    // Values on the evaluation stack after each step, to size it.
    void push(Step s) {
        switch (s.op) {
            case Op::Count:
            case Op::Number:
            case Op::Seconds:
                ++held_;
                break;
            case Op::Negate:
                break;
            default:
                --held_;
                break;
        }
        out_.depth_ = std::max(out_.depth_, held_);
        out_.steps_.push_back(s);
    }

    Result<void> expression(std::size_t nesting) {
        if (auto r = term(nesting); !r) return r;
        for (;;) {
            skip_spaces();
            if (at_ >= text_.size() || (text_[at_] != '+' && text_[at_] != '-')) return {};
            const Op op = text_[at_++] == '+' ? Op::Add : Op::Subtract;
            if (auto r = term(nesting); !r) return r;
            push({op});
        }
    }

    Result<void> term(std::size_t nesting) {
        if (auto r = unary(nesting); !r) return r;
        for (;;) {
            skip_spaces();
            if (at_ >= text_.size() || (text_[at_] != '*' && text_[at_] != '/')) return {};
            const Op op = text_[at_++] == '*' ? Op::Multiply : Op::Divide;
            if (auto r = unary(nesting); !r) return r;
            push({op});
        }
    }

    Result<void> unary(std::size_t nesting) {
        skip_spaces();
        if (at_ < text_.size() && text_[at_] == '-') {
            ++at_;
            if (nesting + 1 > kMaxDepth) return error("nested too deeply");
            if (auto r = unary(nesting + 1); !r) return r;
            push({Op::Negate});
            return {};
        }
        return primary(nesting);
    }

    Result<void> primary(std::size_t nesting) {
        skip_spaces();
        if (at_ >= text_.size()) return error("a number, an event or '(' expected");
        const char c = text_[at_];
        if (c == '(') {
            if (nesting + 1 > kMaxDepth) return error("nested too deeply");
            ++at_;
            if (auto r = expression(nesting + 1); !r) return r;
            skip_spaces();
            if (at_ >= text_.size() || text_[at_] != ')') return error("')' expected");
            ++at_;
            return {};
        }
        if (c == '{') {
            const auto close = text_.find('}', at_ + 1);
            if (close == std::string_view::npos) return error("'}' expected");
            const auto name = text_.substr(at_ + 1, close - at_ - 1);
            if (name.empty()) return error("an event name expected in the braces");
            at_ = close + 1;
            return count(name);
        }
        if (std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.') {
            auto number = parse_number(text_.substr(at_));
            if (!number || !std::isfinite(number->first)) return error("a number expected");
            const double v = number->first;
            at_ += number->second;
            if (at_ < text_.size() && name_char(text_[at_])) {
                return error(fmt::format("'{}' after a number", text_[at_]));
            }
            Step s{Op::Number};
            s.number = v;
            push(s);
            return {};
        }
        if (!name_char(c)) return error(fmt::format("'{}': a number, an event or '(' expected", c));
        const std::size_t start = at_;
        while (at_ < text_.size() && (name_char(text_[at_]) ||
                                      (text_[at_] == '-' && at_ + 1 < text_.size() &&
                                       name_char(text_[at_ + 1]) && name_char(text_[at_ - 1])))) {
            ++at_;
        }
        const auto name = text_.substr(start, at_ - start);
        if (name == "seconds") {
            out_.uses_seconds_ = true;
            push({Op::Seconds});
            return {};
        }
        return count(name);
    }

    Result<void> count(std::string_view name) {
        std::size_t i = 0;
        while (i < out_.events_.size() && out_.events_[i] != name) ++i;
        if (i == out_.events_.size()) out_.events_.emplace_back(name);
        Step s{Op::Count};
        s.event = i;
        push(s);
        return {};
    }

    std::string_view text_;
    MetricFormula& out_;
    std::size_t at_ = 0;
    std::size_t held_ = 0;
};
// NOLINTEND(misc-no-recursion)

Result<MetricFormula> MetricFormula::parse(std::string_view text) {
    if (text.size() > kMaxLength) {
        return fail(Status::BadArg,
                    fmt::format("a formula of {} characters: at most {}", text.size(), kMaxLength));
    }
    MetricFormula f;
    f.text_.assign(text);
    Parser p(f.text_, f);
    if (auto r = p.run(); !r) return std::unexpected(r.error());
    if (f.depth_ > kMaxDepth) {
        return fail(Status::BadArg,
                    fmt::format("formula \"{}\": holds too many values at once", text));
    }
    return f;
}

std::optional<double> MetricFormula::evaluate(std::span<const double> counts,
                                              double seconds) const {
    std::array<double, kMaxDepth> stack{};
    std::size_t n = 0;
    for (const auto& s : steps_) {
        switch (s.op) {
            case Op::Count:
                stack[n++] = s.event < counts.size() ? counts[s.event] : 0;
                break;
            case Op::Number:
                stack[n++] = s.number;
                break;
            case Op::Seconds:
                stack[n++] = seconds;
                break;
            case Op::Negate:
                stack[n - 1] = -stack[n - 1];
                break;
            case Op::Add:
                --n;
                stack[n - 1] += stack[n];
                break;
            case Op::Subtract:
                --n;
                stack[n - 1] -= stack[n];
                break;
            case Op::Multiply:
                --n;
                stack[n - 1] *= stack[n];
                break;
            case Op::Divide:
                --n;
                if (stack[n] == 0) return std::nullopt;
                stack[n - 1] /= stack[n];
                break;
        }
    }
    if (n != 1 || !std::isfinite(stack[0])) return std::nullopt;
    return stack[0];
}

}  // namespace monitor::perf
