#include "monitor/protocol/varlink_idl.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "monitor/protocol/varlink_message.hpp"

namespace monitor::varlink {
namespace {

bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

bool is_type_name(std::string_view s) {
    if (s.empty() || !std::isupper(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c))) return false;
    }
    return true;
}

// [A-Za-z](_?[A-Za-z0-9])*
bool is_field_name(std::string_view s) {
    if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
    for (std::size_t i = 1; i < s.size(); ++i) {
        char c = s[i];
        if (c == '_') {
            if (i + 1 == s.size() || s[i + 1] == '_') return false;
        } else if (!std::isalnum(static_cast<unsigned char>(c))) {
            return false;
        }
    }
    return true;
}

// Reverse-domain name with at least two parts, each [A-Za-z0-9] with inner dashes; the first
// part starts with a letter.
bool is_interface_name(std::string_view s) {
    if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
    std::size_t parts = 0;
    while (true) {
        auto dot = s.find('.');
        auto part = s.substr(0, dot);
        if (part.empty() || part.front() == '-' || part.back() == '-') return false;
        for (char c : part) {
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
        }
        ++parts;
        if (dot == std::string_view::npos) break;
        s.remove_prefix(dot + 1);
    }
    return parts >= 2;
}

const char* json_kind(const nlohmann::json& v) {
    switch (v.type()) {
        case nlohmann::json::value_t::null:
            return "null";
        case nlohmann::json::value_t::boolean:
            return "bool";
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned:
            return "int";
        case nlohmann::json::value_t::number_float:
            return "float";
        case nlohmann::json::value_t::string:
            return "string";
        case nlohmann::json::value_t::array:
            return "array";
        case nlohmann::json::value_t::object:
            return "object";
        default:
            return "other";
    }
}

}  // namespace

class Parser {
  public:
    explicit Parser(std::string_view text) : text_(text) {}

    Result<Interface> run() {
        Interface iface;
        iface.text_ = std::string{text_};
        if (!expect_word("interface")) return error();
        auto name = word();
        if (!name || !is_interface_name(*name)) {
            return fail_here("expected an interface name like org.example.Name");
        }
        iface.name_ = std::string{*name};
        skip();
        if (pos_ == text_.size()) return fail_here("an interface needs at least one member");
        while (skip(), pos_ < text_.size()) {
            auto kw = word();
            if (!kw) return fail_here("expected 'type', 'method' or 'error'");
            auto member = word();
            if (!member || !is_type_name(*member)) {
                return fail_here("expected a name starting with an upper-case letter");
            }
            std::string mname{*member};
            if (iface.types_.contains(mname) || iface.methods_.contains(mname) ||
                iface.errors_.contains(mname)) {
                return fail_here("'" + mname + "' is defined twice");
            }
            if (*kw == "type") {
                auto t = struct_or_enum();
                if (!t) return error();
                iface.types_.emplace(mname, t);
            } else if (*kw == "method") {
                auto in = struct_only();
                if (!in) return error();
                if (!punct("->")) return fail_here("expected '->' after the method's input");
                auto out = struct_only();
                if (!out) return error();
                iface.methods_.emplace(mname, Method{mname, in, out});
            } else if (*kw == "error") {
                auto params = struct_only();
                if (!params) return error();
                iface.errors_.emplace(mname, ErrorDef{mname, params});
            } else {
                return fail_here("expected 'type', 'method' or 'error', not '" + std::string{*kw} +
                                 "'");
            }
        }
        for (const auto& ref : named_refs_) {
            if (!iface.types_.contains(ref.first)) {
                return fail(Status::BadData, "line " + std::to_string(ref.second) +
                                                 ": unknown type '" + ref.first + "'");
            }
        }
        return iface;
    }

  private:
    std::unexpected<Error> error() const { return std::unexpected(error_); }

    std::unexpected<Error> fail_here(const std::string& why) {
        error_ = Error{Status::BadData, "line " + std::to_string(line()) + ": " + why};
        return std::unexpected(error_);
    }

    std::size_t line() const {
        // At the end of the text, the line of the last character rather than the one after.
        std::size_t end = std::min(pos_, text_.size());
        while (end == text_.size() && end > 0 && text_[end - 1] == '\n') --end;
        std::size_t n = 1;
        for (std::size_t i = 0; i < end; ++i) n += text_[i] == '\n';
        return n;
    }

    void skip() {
        while (pos_ < text_.size()) {
            char c = text_[pos_];
            if (c == '#') {
                while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
            } else if (std::isspace(static_cast<unsigned char>(c))) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::optional<std::string_view> word() {
        skip();
        std::size_t b = pos_;
        while (pos_ < text_.size() && is_word_char(text_[pos_])) ++pos_;
        if (pos_ == b) return std::nullopt;
        return text_.substr(b, pos_ - b);
    }

    std::optional<std::string_view> peek_word() {
        auto save = pos_;
        auto w = word();
        pos_ = save;
        return w;
    }

    bool expect_word(std::string_view w) {
        auto got = word();
        if (got && *got == w) return true;
        fail_here("expected '" + std::string{w} + "'");
        return false;
    }

    bool punct(std::string_view p) {
        skip();
        if (text_.substr(pos_, p.size()) != p) return false;
        pos_ += p.size();
        return true;
    }

    bool peek_punct(std::string_view p) {
        skip();
        return text_.substr(pos_, p.size()) == p;
    }

    TypePtr struct_only() {
        auto t = struct_or_enum();
        if (t && t->kind != Type::Kind::Struct) {
            fail_here("expected a struct of 'name: type' fields");
            return nullptr;
        }
        return t;
    }

    // The type grammar is recursive, as deep as a text nests its types, which type() stops
    // at kMaxJsonDepth levels.
    // NOLINTBEGIN(misc-no-recursion)

    // '(' ')' | '(' field {',' field} ')' | '(' name {',' name} ')'
    TypePtr struct_or_enum() {
        if (!punct("(")) {
            fail_here("expected '('");
            return nullptr;
        }
        auto t = std::make_shared<Type>();
        t->kind = Type::Kind::Struct;
        if (punct(")")) return t;
        bool first = true;
        do {
            auto name = word();
            if (!name || !is_field_name(*name)) {
                fail_here("expected a field or enum value name");
                return nullptr;
            }
            bool is_field = peek_punct(":");
            if (first) t->kind = is_field ? Type::Kind::Struct : Type::Kind::Enum;
            first = false;
            if (is_field != (t->kind == Type::Kind::Struct)) {
                fail_here("mixes 'name: type' fields and enum values");
                return nullptr;
            }
            if (is_field) {
                punct(":");
                for (const auto& f : t->fields) {
                    if (f.name == *name) {
                        fail_here("field '" + std::string{*name} + "' appears twice");
                        return nullptr;
                    }
                }
                auto ft = type();
                if (!ft) return nullptr;
                t->fields.push_back({std::string{*name}, ft});
            } else {
                t->values.emplace_back(*name);
            }
        } while (punct(","));
        if (!punct(")")) {
            fail_here("expected ',' or ')'");
            return nullptr;
        }
        return t;
    }

    TypePtr type() {
        // A type within kMaxJsonDepth others: the values it describes nest no deeper than a
        // message may, and the parser's recursion (one call per level) is bounded.
        if (depth_ == kMaxJsonDepth) {
            fail_here("types nest deeper than " + std::to_string(kMaxJsonDepth) + " levels");
            return nullptr;
        }
        ++depth_;
        auto t = optional_or_plain_type();
        --depth_;
        return t;
    }

    TypePtr optional_or_plain_type() {
        if (punct("?")) {
            if (peek_punct("?")) {
                fail_here("a '?' type cannot be optional again");
                return nullptr;
            }
            auto inner = plain_type();
            if (!inner) return nullptr;
            auto t = std::make_shared<Type>();
            t->kind = Type::Kind::Maybe;
            t->element = inner;
            return t;
        }
        return plain_type();
    }

    TypePtr plain_type() {
        auto t = std::make_shared<Type>();
        if (peek_punct("(")) return struct_or_enum();
        if (punct("[")) {
            if (punct("]")) {
                t->kind = Type::Kind::Array;
            } else if (auto w = word(); w && *w == "string" && punct("]")) {
                t->kind = Type::Kind::Map;
            } else {
                fail_here("expected '[]' or '[string]'");
                return nullptr;
            }
            t->element = type();
            return t->element ? t : nullptr;
        }
        auto w = peek_word();
        if (!w) {
            fail_here("expected a type");
            return nullptr;
        }
        word();
        if (*w == "bool") {
            t->kind = Type::Kind::Bool;
        } else if (*w == "int") {
            t->kind = Type::Kind::Int;
        } else if (*w == "float") {
            t->kind = Type::Kind::Float;
        } else if (*w == "string") {
            t->kind = Type::Kind::String;
        } else if (*w == "object") {
            t->kind = Type::Kind::Object;
        } else if (is_type_name(*w)) {
            t->kind = Type::Kind::Named;
            t->name = std::string{*w};
            named_refs_.emplace_back(t->name, line());
        } else {
            fail_here("unknown type '" + std::string{*w} + "'");
            return nullptr;
        }
        return t;
    }
    // NOLINTEND(misc-no-recursion)

    std::string_view text_;
    std::size_t pos_ = 0;
    int depth_ = 0;  // of the type being parsed
    Error error_;
    std::vector<std::pair<std::string, std::size_t>> named_refs_;
};

Result<Interface> Interface::parse(std::string_view text) {
    return Parser{text}.run();
}

const Method* Interface::method(std::string_view name) const {
    auto it = methods_.find(name);
    return it == methods_.end() ? nullptr : &it->second;
}

const ErrorDef* Interface::error(std::string_view name) const {
    auto it = errors_.find(name);
    return it == errors_.end() ? nullptr : &it->second;
}

const Type* Interface::type(std::string_view name) const {
    auto it = types_.find(name);
    return it == types_.end() ? nullptr : it->second.get();
}

std::string Mismatch::parameter() const {
    return path.substr(0, path.find_first_of(".["));
}

std::optional<Mismatch> Interface::check(const Type& type, const nlohmann::json& value,
                                         Extra extra) const {
    std::string path;
    return check_at(type, value, extra, path);
}

// As deep as `type` nests (kMaxJsonDepth levels at most, as parsed), whatever the value's own
// nesting: no type refers to itself.
// NOLINTNEXTLINE(misc-no-recursion): see above
std::optional<Mismatch> Interface::check_at(const Type& type, const nlohmann::json& value,
                                            Extra extra, std::string& path) const {
    auto mismatch = [&](std::string why) { return Mismatch{path, std::move(why)}; };
    auto expected = [&](std::string_view what) {
        return mismatch("expected " + std::string{what} + ", got " + json_kind(value));
    };
    using K = Type::Kind;
    switch (type.kind) {
        case K::Maybe:
            if (value.is_null()) return std::nullopt;
            return check_at(*type.element, value, extra, path);
        case K::Bool:
            return value.is_boolean() ? std::nullopt : std::optional{expected("bool")};
        case K::Int:
            if (value.is_number_unsigned() &&
                value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
                return mismatch("integer out of the 64-bit signed range");
            }
            return value.is_number_integer() ? std::nullopt : std::optional{expected("int")};
        case K::Float:
            return value.is_number() ? std::nullopt : std::optional{expected("float")};
        case K::String:
            return value.is_string() ? std::nullopt : std::optional{expected("string")};
        case K::Object:
            return value.is_object() ? std::nullopt : std::optional{expected("object")};
        case K::Named: {
            auto it = types_.find(type.name);
            if (it == types_.end()) return mismatch("unknown type " + type.name);
            return check_at(*it->second, value, extra, path);
        }
        case K::Enum: {
            if (!value.is_string()) return expected("string");
            const auto& s = value.get_ref<const std::string&>();
            for (const auto& v : type.values) {
                if (v == s) return std::nullopt;
            }
            std::string allowed;
            for (const auto& v : type.values) allowed += (allowed.empty() ? "" : ", ") + v;
            return mismatch("'" + s + "' is not one of " + allowed);
        }
        case K::Array: {
            if (!value.is_array()) return expected("array");
            const auto base = path.size();
            for (std::size_t i = 0; i < value.size(); ++i) {
                path += "[" + std::to_string(i) + "]";
                if (auto m = check_at(*type.element, value[i], extra, path)) return m;
                path.resize(base);
            }
            return std::nullopt;
        }
        case K::Map: {
            if (!value.is_object()) return expected("object");
            const auto base = path.size();
            for (const auto& [k, v] : value.items()) {
                path += "[" + k + "]";
                if (auto m = check_at(*type.element, v, extra, path)) return m;
                path.resize(base);
            }
            return std::nullopt;
        }
        case K::Struct: {
            if (!value.is_object()) return expected("object");
            const auto base = path.size();
            auto enter = [&](std::string_view field) {
                path.resize(base);
                if (!path.empty()) path += '.';
                path += field;
            };
            for (const auto& f : type.fields) {
                enter(f.name);
                auto it = value.find(f.name);
                if (it == value.end()) {
                    if (f.type->kind == K::Maybe) continue;
                    return mismatch("missing");
                }
                if (auto m = check_at(*f.type, *it, extra, path)) return m;
            }
            if (extra == Extra::Reject) {
                for (const auto& [k, v] : value.items()) {
                    bool known = false;
                    for (const auto& f : type.fields) known = known || f.name == k;
                    if (!known) {
                        enter(k);
                        return mismatch("unknown field");
                    }
                }
            }
            path.resize(base);
            return std::nullopt;
        }
    }
    return mismatch("unhandled type");
}

const Interface* builtin_interface(std::string_view name) {
    static const std::map<std::string, Interface, std::less<>> parsed = [] {
        std::map<std::string, Interface, std::less<>> m;
        for (const auto& e : embedded_interfaces()) {
            auto iface = Interface::parse(e.text);
            if (!iface) {
                throw std::logic_error("embedded interface " + std::string{e.name} +
                                       " does not parse: " + iface.error().message);
            }
            m.emplace(std::string{e.name}, std::move(*iface));
        }
        return m;
    }();
    auto it = parsed.find(name);
    return it == parsed.end() ? nullptr : &it->second;
}

}  // namespace monitor::varlink
