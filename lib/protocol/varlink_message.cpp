#include "monitor/protocol/varlink_message.hpp"

namespace monitor::varlink {
namespace {

// Nesting depth of a JSON text, counted outside strings, so that a hostile message cannot
// make the parser or the value's destructor recurse without bound.
bool depth_within(std::string_view text, int limit) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return false;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return true;
}

Result<nlohmann::json> parse_object(std::string_view text) {
    if (!depth_within(text, kMaxJsonDepth)) {
        return fail(Status::BadData,
                    "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return fail(Status::BadData, "not valid JSON");
    if (!j.is_object()) return fail(Status::BadData, "not a JSON object");
    return j;
}

// A flag field: absent, null or a bool.
Result<bool> flag(const nlohmann::json& msg, const char* key) {
    auto it = msg.find(key);
    if (it == msg.end() || it->is_null()) return false;
    if (!it->is_boolean()) return fail(Status::BadData, std::string{"'"} + key + "' is not a bool");
    return it->get<bool>();
}

}  // namespace

std::string_view Call::interface_name() const {
    auto dot = method.rfind('.');
    return dot == std::string::npos ? std::string_view{} : std::string_view{method}.substr(0, dot);
}

std::string_view Call::member_name() const {
    auto dot = method.rfind('.');
    return dot == std::string::npos ? std::string_view{method}
                                    : std::string_view{method}.substr(dot + 1);
}

Result<Call> parse_call(std::string_view text) {
    auto j = parse_object(text);
    if (!j) return std::unexpected(j.error());
    Call call;
    auto m = j->find("method");
    if (m == j->end() || !m->is_string()) {
        return fail(Status::BadData, "no \"method\" string in the call");
    }
    call.method = m->get<std::string>();
    if (auto p = j->find("parameters"); p != j->end() && !p->is_null()) {
        if (!p->is_object()) return fail(Status::BadData, "\"parameters\" is not an object");
        call.parameters = std::move(*p);
    }
    for (auto [key, field] : {std::pair{"oneway", &call.oneway}, std::pair{"more", &call.more},
                              std::pair{"upgrade", &call.upgrade}}) {
        auto v = flag(*j, key);
        if (!v) return std::unexpected(v.error());
        *field = *v;
    }
    return call;
}

Result<Reply> parse_reply(std::string_view text) {
    auto j = parse_object(text);
    if (!j) return std::unexpected(j.error());
    Reply reply;
    if (auto p = j->find("parameters"); p != j->end() && !p->is_null()) {
        if (!p->is_object()) return fail(Status::BadData, "\"parameters\" is not an object");
        reply.parameters = std::move(*p);
    }
    if (auto e = j->find("error"); e != j->end() && !e->is_null()) {
        if (!e->is_string()) return fail(Status::BadData, "\"error\" is not a string");
        reply.error = e->get<std::string>();
    }
    auto c = flag(*j, "continues");
    if (!c) return std::unexpected(c.error());
    reply.continues = *c;
    return reply;
}

std::string encode(const Call& call) {
    nlohmann::json j{{"method", call.method}};
    if (!call.parameters.empty()) j["parameters"] = call.parameters;
    if (call.oneway) j["oneway"] = true;
    if (call.more) j["more"] = true;
    if (call.upgrade) j["upgrade"] = true;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string encode(const Reply& reply) {
    // Replies may carry text from the kernel or a peer: replace invalid UTF-8, never throw.
    auto dump = [](const nlohmann::json& j) {
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    // The envelope around the parameters as text: streamed records are large, and an
    // envelope object would copy them.
    std::string out = "{";
    if (reply.continues) out += "\"continues\":true,";
    if (reply.error) {
        out += "\"error\":";
        out += dump(*reply.error);
        out += ',';
    }
    out += "\"parameters\":";
    out += reply.parameters.is_null() ? std::string{"{}"} : dump(reply.parameters);
    out += '}';
    return out;
}

Reply make_error(std::string_view name, nlohmann::json parameters) {
    Reply r;
    r.error = std::string{name};
    r.parameters = std::move(parameters);
    return r;
}

}  // namespace monitor::varlink
