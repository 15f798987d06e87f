// Varlink calls and replies: parsing, encoding and the nesting limit.
#include "monitor/protocol/varlink_message.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace monitor::varlink {
namespace {

using nlohmann::json;

// A call whose "parameters" holds `levels` nested arrays: the whole text nests levels + 2
// deep (the call object and the parameters object).
std::string nested_call(int levels) {
    std::string s = R"({"method":"org.example.a.M","parameters":{"v":)";
    s += std::string(static_cast<std::size_t>(levels), '[');
    s += std::string(static_cast<std::size_t>(levels), ']');
    s += "}}";
    return s;
}

TEST(VarlinkParseCall, MethodOnly) {
    auto c = parse_call(R"({"method":"io.monitord.Monitor.GetStatus"})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_EQ(c->method, "io.monitord.Monitor.GetStatus");
    EXPECT_TRUE(c->parameters.is_object());
    EXPECT_TRUE(c->parameters.empty());
    EXPECT_FALSE(c->oneway);
    EXPECT_FALSE(c->more);
    EXPECT_FALSE(c->upgrade);
}

TEST(VarlinkParseCall, WithParameters) {
    auto c = parse_call(R"({"method":"io.monitord.Monitor.GetLoading",)"
                        R"("parameters":{"per_cpu":true,"history":false}})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_EQ(c->parameters, (json{{"per_cpu", true}, {"history", false}}));
}

TEST(VarlinkParseCall, NullParametersAreEmpty) {
    auto c = parse_call(R"({"method":"a.b.C","parameters":null})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_TRUE(c->parameters.is_object());
    EXPECT_TRUE(c->parameters.empty());
}

TEST(VarlinkParseCall, Flags) {
    auto c = parse_call(R"({"method":"a.b.C","oneway":true})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_TRUE(c->oneway);
    EXPECT_FALSE(c->more);

    c = parse_call(R"({"method":"a.b.C","more":true,"oneway":false})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_FALSE(c->oneway);
    EXPECT_TRUE(c->more);

    c = parse_call(R"({"method":"a.b.C","upgrade":true,"more":null})");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_TRUE(c->upgrade);
    EXPECT_FALSE(c->more);
}

TEST(VarlinkParseCall, WhitespaceAndUnknownKeysAreAccepted) {
    auto c = parse_call(" \n{ \"method\" : \"a.b.C\" , \"extension\" : [1, 2] }\n ");
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_EQ(c->method, "a.b.C");
}

struct BadCall {
    const char* what;
    std::string text;
    std::string says;
};

TEST(VarlinkParseCall, Errors) {
    const std::vector<BadCall> cases{
        {"empty", "", "JSON"},
        {"not JSON", "hello", "JSON"},
        {"truncated JSON", R"({"method":"a.b.C")", "JSON"},
        {"two values", R"({"method":"a.b.C"} {})", "JSON"},
        {"JSON array", R"([{"method":"a.b.C"}])", "object"},
        {"JSON string", R"("a.b.C")", "object"},
        {"JSON null", "null", "object"},
        {"no method", R"({"parameters":{}})", "method"},
        {"method not a string", R"({"method":42})", "method"},
        {"method null", R"({"method":null})", "method"},
        {"parameters not an object", R"({"method":"a.b.C","parameters":[1]})", "parameters"},
        {"parameters a string", R"({"method":"a.b.C","parameters":"x"})", "parameters"},
        {"oneway not a bool", R"({"method":"a.b.C","oneway":1})", "oneway"},
        {"more not a bool", R"({"method":"a.b.C","more":"yes"})", "more"},
        {"upgrade not a bool", R"({"method":"a.b.C","upgrade":{}})", "upgrade"},
        {"too deep", nested_call(kMaxJsonDepth), "nested deeper"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.what);
        auto r = parse_call(c.text);
        ASSERT_FALSE(r.has_value());
        EXPECT_EQ(r.error().status, Status::BadData);
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    }
}

TEST(VarlinkParseCall, DepthLimit) {
    // kMaxJsonDepth - 2 arrays inside the two objects: exactly at the limit.
    auto at_limit = parse_call(nested_call(kMaxJsonDepth - 2));
    ASSERT_TRUE(at_limit.has_value()) << at_limit.error().to_string();
    EXPECT_TRUE(at_limit->parameters["v"].is_array());

    auto over = parse_call(nested_call(kMaxJsonDepth - 1));
    ASSERT_FALSE(over.has_value());
    EXPECT_EQ(over.error().status, Status::BadData);
    EXPECT_NE(over.error().message.find(std::to_string(kMaxJsonDepth)), std::string::npos)
        << over.error().message;

    // Far deeper than any parser should be asked to recurse.
    auto huge = parse_call(nested_call(100000));
    ASSERT_FALSE(huge.has_value());
    EXPECT_EQ(huge.error().status, Status::BadData);
}

TEST(VarlinkParseCall, BracketsInsideStringsDoNotCount) {
    std::string deep_text(1000, '[');
    deep_text += std::string(1000, '{');
    json params{{"s", deep_text}, {"t", "\"[[[{{{\\\""}};
    std::string text = json{{"method", "a.b.C"}, {"parameters", params}}.dump();
    auto c = parse_call(text);
    ASSERT_TRUE(c.has_value()) << c.error().to_string();
    EXPECT_EQ(c->parameters, params);

    // Escaped quotes and backslashes do not end a string early.
    std::string escaped = R"({"method":"a.b.C","parameters":{"s":"\")" + std::string(100, '[') +
                          R"(\\","t":"\\\")" + std::string(100, '{') + R"("}})";
    auto e = parse_call(escaped);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    EXPECT_EQ(e->parameters["s"], "\"" + std::string(100, '[') + "\\");
    EXPECT_EQ(e->parameters["t"], "\\\"" + std::string(100, '{'));
}

TEST(VarlinkParseCall, ClosingBracketsInsideStringsDoNotLowerTheDepth) {
    // If "]]]" in a string were counted, the arrays after it could nest deeper unnoticed.
    std::string text = R"({"method":"a.b.C","parameters":{"s":")" + std::string(100, ']') +
                       R"(","v":)" + std::string(100, '[') + std::string(100, ']') + "}}";
    auto c = parse_call(text);
    ASSERT_FALSE(c.has_value());
    EXPECT_EQ(c.error().status, Status::BadData);
    EXPECT_NE(c.error().message.find("nested deeper"), std::string::npos) << c.error().message;
}

TEST(VarlinkCall, InterfaceAndMemberName) {
    Call c;
    c.method = "io.monitord.Monitor.GetLoading";
    EXPECT_EQ(c.interface_name(), "io.monitord.Monitor");
    EXPECT_EQ(c.member_name(), "GetLoading");

    c.method = "org.varlink.service.GetInfo";
    EXPECT_EQ(c.interface_name(), "org.varlink.service");
    EXPECT_EQ(c.member_name(), "GetInfo");

    c.method = "GetInfo";
    EXPECT_EQ(c.interface_name(), "");
    EXPECT_EQ(c.member_name(), "GetInfo");

    c.method = "a.b.";
    EXPECT_EQ(c.interface_name(), "a.b");
    EXPECT_EQ(c.member_name(), "");

    c.method = "";
    EXPECT_EQ(c.interface_name(), "");
    EXPECT_EQ(c.member_name(), "");
}

TEST(VarlinkEncode, CallRoundTrip) {
    Call c;
    c.method = "io.monitord.Monitor.GetLoading";
    c.parameters = json{{"per_cpu", true}, {"nested", {{"list", {1, 2, 3}}}}};
    c.more = true;
    std::string text = encode(c);
    EXPECT_EQ(text.find('\0'), std::string::npos);
    auto back = parse_call(text);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_EQ(back->method, c.method);
    EXPECT_EQ(back->parameters, c.parameters);
    EXPECT_FALSE(back->oneway);
    EXPECT_TRUE(back->more);
    EXPECT_FALSE(back->upgrade);

    c.more = false;
    c.oneway = true;
    c.upgrade = true;
    back = parse_call(encode(c));
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_TRUE(back->oneway);
    EXPECT_FALSE(back->more);
    EXPECT_TRUE(back->upgrade);
}

TEST(VarlinkEncode, CallOmitsEmptyParametersAndFalseFlags) {
    Call c;
    c.method = "a.b.C";
    EXPECT_EQ(json::parse(encode(c)), (json{{"method", "a.b.C"}}));
    auto back = parse_call(encode(c));
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(back->parameters.is_object());
    EXPECT_TRUE(back->parameters.empty());
}

TEST(VarlinkEncode, ReplyRoundTrip) {
    Reply r;
    r.parameters = json{{"version", "0.1.0"}, {"cpus", {0, 1, 2}}, {"uptime", 1.5}};
    r.continues = true;
    std::string text = encode(r);
    auto back = parse_reply(text);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_EQ(back->parameters, r.parameters);
    EXPECT_FALSE(back->error.has_value());
    EXPECT_TRUE(back->continues);

    Reply e = make_error("org.varlink.service.InvalidParameter", json{{"parameter", "per_cpu"}});
    back = parse_reply(encode(e));
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    ASSERT_TRUE(back->error.has_value());
    EXPECT_EQ(*back->error, "org.varlink.service.InvalidParameter");
    EXPECT_EQ(back->parameters, (json{{"parameter", "per_cpu"}}));
    EXPECT_FALSE(back->continues);
}

TEST(VarlinkEncode, ReplyAlwaysHasParameters) {
    Reply r;
    json j = json::parse(encode(r));
    ASSERT_TRUE(j.contains("parameters"));
    EXPECT_TRUE(j["parameters"].is_object());
    EXPECT_FALSE(j.contains("error"));
    EXPECT_FALSE(j.contains("continues"));
}

TEST(VarlinkEncode, InvalidUtf8DoesNotThrow) {
    const std::string bad = "cpu\xff\xfe name \xc3";
    Reply r;
    r.parameters = json{{"reason", bad}};
    std::string text;
    ASSERT_NO_THROW(text = encode(r));
    auto back = parse_reply(text);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    ASSERT_TRUE(back->parameters["reason"].is_string());
    EXPECT_EQ(back->parameters["reason"].get<std::string>().rfind("cpu", 0), 0u);

    Reply e = make_error("org.example.Bad\xff");
    ASSERT_NO_THROW(text = encode(e));
    EXPECT_TRUE(parse_reply(text).has_value());

    Call c;
    c.method = "a.b.C";
    c.parameters = json{{"s", bad}};
    ASSERT_NO_THROW(text = encode(c));
    EXPECT_TRUE(parse_call(text).has_value());
}

TEST(VarlinkParseReply, Errors) {
    const std::vector<BadCall> cases{
        {"not JSON", "}{", "JSON"},
        {"array", "[]", "object"},
        {"parameters not an object", R"({"parameters":3})", "parameters"},
        {"error not a string", R"({"parameters":{},"error":1})", "error"},
        {"continues not a bool", R"({"parameters":{},"continues":"no"})", "continues"},
        {"too deep", std::string(100, '[') + std::string(100, ']'), "nested deeper"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.what);
        auto r = parse_reply(c.text);
        ASSERT_FALSE(r.has_value());
        EXPECT_EQ(r.error().status, Status::BadData);
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    }
}

TEST(VarlinkParseReply, MinimalReply) {
    auto r = parse_reply("{}");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_TRUE(r->parameters.is_object());
    EXPECT_TRUE(r->parameters.empty());
    EXPECT_FALSE(r->error.has_value());
    EXPECT_FALSE(r->continues);

    r = parse_reply(R"({"parameters":null,"error":null,"continues":null})");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_FALSE(r->error.has_value());
}

TEST(VarlinkMakeError, SetsNameAndParameters) {
    Reply r = make_error("org.varlink.service.MethodNotFound", json{{"method", "Nope"}});
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(*r.error, "org.varlink.service.MethodNotFound");
    EXPECT_EQ(r.parameters, (json{{"method", "Nope"}}));
    EXPECT_FALSE(r.continues);

    Reply bare = make_error("org.varlink.service.PermissionDenied");
    ASSERT_TRUE(bare.error.has_value());
    EXPECT_TRUE(bare.parameters.is_object());
    EXPECT_TRUE(bare.parameters.empty());
    json j = json::parse(encode(bare));
    EXPECT_EQ(j, (json{{"parameters", json::object()},
                       {"error", "org.varlink.service.PermissionDenied"}}));
}

}  // namespace
}  // namespace monitor::varlink
