// The varlink interface-definition parser and the JSON type checker built on it.
#include "monitor/protocol/varlink_idl.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "monitor/loading/loading_report.hpp"
#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/method_inputs.hpp"
#include "monitor/protocol/method_outputs.hpp"
#include "monitor/protocol/varlink_message.hpp"

namespace monitor::varlink {
namespace {

using nlohmann::json;
using K = Type::Kind;

std::set<std::string> method_names(const Interface& iface) {
    std::set<std::string> names;
    for (const auto& [name, m] : iface.methods()) names.insert(name);
    return names;
}

const Field* field(const Type& t, std::string_view name) {
    for (const auto& f : t.fields) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

// ---- the embedded interfaces ----

// Each method of both interfaces has exactly one descriptor, and each descriptor names a
// method of its interface (a method added to the interface file without one fails here, and
// is refused to everyone until it has one).
TEST(MethodDescriptors, EveryMethodOfTheInterfacesHasExactlyOne) {
    std::set<std::string> served;
    for (auto name : {kMonitorInterface, kServiceInterface}) {
        const auto* iface = builtin_interface(name);
        ASSERT_NE(iface, nullptr) << name;
        for (const auto& [method, _] : iface->methods()) {
            const std::string qualified = std::string{name} + "." + method;
            served.insert(qualified);
            const auto* d = protocol::find_method(qualified);
            ASSERT_NE(d, nullptr) << qualified
                                  << " has no descriptor (monitor/protocol/method_descriptors.hpp)";
            EXPECT_EQ(d->interface(), name);
            EXPECT_EQ(d->name(), method);
        }
    }
    std::set<std::string> listed;
    for (const auto* d : protocol::method_descriptors()) {
        const std::string qualified{d->qualified};
        EXPECT_TRUE(listed.insert(qualified).second) << qualified << " twice";
        EXPECT_TRUE(served.contains(qualified)) << qualified << " is in no interface";
        if (d->access == protocol::Access::Control) {
            EXPECT_FALSE(d->action.empty()) << qualified << ": a refusal must say what it is";
        }
    }
}

// `in`, every field set, is a call its method takes (as the daemon checks calls: no field the
// interface does not declare), and reads back to the same parameters.
template <typename In, typename Out>
void expect_call_of(const protocol::Method<In, Out>& m, const In& in) {
    const auto* iface = builtin_interface(m.interface());
    ASSERT_NE(iface, nullptr) << m.qualified;
    const auto* method = iface->method(m.name());
    ASSERT_NE(method, nullptr) << m.qualified;
    const json j = protocol::to_json(in);
    const auto mismatch = iface->check(*method->input, j, Extra::Reject);
    EXPECT_FALSE(mismatch) << m.qualified << " " << j.dump() << ": " << mismatch->path << ": "
                           << mismatch->reason;
    EXPECT_EQ(protocol::to_json(protocol::input_from_json<In>(j)), j)
        << m.qualified << ": a parameter is lost between JSON and C++";
}

TEST(MethodInputs, EachMethodsParametersAreACallOfItAndReadBack) {
    namespace method = protocol::method;
    const protocol::TargetRequest process{.kind = protocol::TargetRequest::Kind::Process,
                                          .pid = 42};
    const protocol::CounterRequest counters{.events = "perf::TASK-CLOCK,{a,b}",
                                            .target = process,
                                            .mux = perf::MuxMode::Kernel,
                                            .slice_ms = 20,
                                            .counter_budget = 3,
                                            .sample_every = 1000,
                                            .metrics = "sched,ipc"};
    expect_call_of(method::GetInfo, protocol::NoInput{});
    expect_call_of(method::GetInterfaceDescription,
                   protocol::InterfaceNameIn{.interface = "io.monitord.Monitor"});
    expect_call_of(method::GetStatus, protocol::NoInput{});
    expect_call_of(method::GetLoading,
                   LoadingQuery{.per_cpu = true, .history = true, .states = true, .totals = true});
    expect_call_of(method::GetHistoryRuns, protocol::HistoryRunsIn{.most = 5});
    expect_call_of(method::GetPmuInfo, protocol::NoInput{});
    expect_call_of(method::ListEvents, protocol::ListEventsIn{.pmu = "perf"});
    expect_call_of(method::ListMetrics, protocol::NoInput{});
    expect_call_of(method::PlanCounters, protocol::CounterRequestIn{counters});
    expect_call_of(method::CollectCounters,
                   protocol::CollectCountersIn{.request = counters,
                                               .duration = std::chrono::milliseconds(1500),
                                               .interval = std::chrono::milliseconds(250)});
    expect_call_of(method::StartCounters, protocol::CounterRequestIn{counters});
    expect_call_of(method::ReadCounters, protocol::NoInput{});
    expect_call_of(method::StopCounters, protocol::NoInput{});
    expect_call_of(method::ResetCounters, protocol::CounterSessionIn{.session = "cycles"});
    expect_call_of(method::PauseCounters, protocol::CounterSessionIn{.session = "cycles"});
    expect_call_of(method::ResumeCounters, protocol::CounterSessionIn{});
    expect_call_of(method::GetStandingCounters, protocol::StandingCountersIn{.name = "cycles"});
    expect_call_of(method::Profile,
                   protocol::ProfileIn{
                       .request = {.event = "perf::CPU-CLOCK",
                                   .period = 100000,
                                   .target = process,
                                   .mode = protocol::SampledModes::User,
                                   .top = 5,
                                   .range = protocol::AddressRange{.start = 0x1000, .end = 0x2000},
                                   .start_at_exec = true,
                                   .callchain = true,
                                   .call_graph = perf::CallGraph::Dwarf,
                                   .stack_size = 16384},
                       .duration = std::chrono::milliseconds(2000),
                       .interval = std::chrono::milliseconds(500)});
    expect_call_of(method::WatchOverflows,
                   protocol::WatchOverflowsIn{.request = {.event = "perf::TASK-CLOCK",
                                                          .period = 10000000,
                                                          .target = process,
                                                          .mode = protocol::SampledModes::Kernel},
                                              .duration = std::chrono::milliseconds(1000),
                                              .batch = std::chrono::milliseconds(100)});
    // The optional parameters left out are left out of the call.
    EXPECT_EQ(protocol::to_json(protocol::ProfileIn{}).size(), 1u) << "only the request";
    EXPECT_EQ(protocol::to_json(protocol::CounterSessionIn{}), json::object());
}

// How much of a type's optional parts an example fills in: Full, every nullable field and an
// element in each array and map; Required, none of them (nullable fields left out, arrays
// and maps empty); Sparse, the nullable fields that hold a structure or an array, filled
// sparsely themselves, with an element in each array (so that the optional fields inside
// those structures are left out too).
enum class Fill { Full, Required, Sparse };

bool holds_structure(const Interface& iface, const Type& t) {
    switch (t.kind) {
        case K::Struct:
        case K::Array:
        case K::Map:
            return true;
        case K::Named:
            return holds_structure(iface, *iface.type(t.name));
        case K::Maybe:
            return holds_structure(iface, *t.element);
        default:
            return false;
    }
}

// A value of `type` as a reply could carry it, filled as `fill` says. Strings are "0x10",
// which reads as an address where the interface carries one as a string.
json example_of(const Interface& iface, const Type& t, Fill fill) {
    switch (t.kind) {
        case K::Bool:
            return true;
        case K::Int:
            return 3;
        case K::Float:
            return 1.5;
        case K::String:
            return "0x10";
        case K::Object:
            return json::object();
        case K::Named: {
            const Type* named = iface.type(t.name);
            if (named == nullptr) throw std::logic_error("no type " + t.name);
            return example_of(iface, *named, fill);
        }
        case K::Struct: {
            json o = json::object();
            for (const auto& f : t.fields) {
                const bool optional = f.type->kind == K::Maybe;
                if (optional && fill == Fill::Required) continue;
                if (optional && fill == Fill::Sparse && !holds_structure(iface, *f.type)) continue;
                o[f.name] = example_of(iface, *f.type, fill);
            }
            return o;
        }
        // The last value: the first is often the default a reader falls back to.
        case K::Enum:
            return t.values.back();
        case K::Array:
            if (fill == Fill::Required) return json::array();
            return json::array({example_of(iface, *t.element, fill)});
        case K::Map:
            if (fill == Fill::Required) return json::object();
            return json{{"a", example_of(iface, *t.element, fill)}};
        case K::Maybe:
            return example_of(iface, *t.element, fill);
    }
    return nullptr;
}

// `j` without its null members, at every depth: to varlink a nullable field that is null and
// one left out are the same.
json without_nulls(const json& j) {
    if (j.is_object()) {
        json o = json::object();
        for (const auto& [k, v] : j.items()) {
            if (!v.is_null()) o[k] = without_nulls(v);
        }
        return o;
    }
    if (j.is_array()) {
        json a = json::array();
        for (const auto& v : j) a.push_back(without_nulls(v));
        return a;
    }
    return j;
}

// Every reply `m` can make, with every field set, with only the required ones and sparsely,
// reads into its Out and writes back to the same JSON (a field the Out drops, misnames, or
// writes when it was not sent fails), and what Out writes is a reply of `m` with nothing the
// interface does not declare. `consistent` makes an example's derived fields agree with what
// they derive from.
template <typename In, typename Out>
void expect_reply_of(const protocol::Method<In, Out>& m,
                     const std::function<void(json&)>& consistent = {}) {
    const auto* iface = builtin_interface(m.interface());
    ASSERT_NE(iface, nullptr) << m.qualified;
    const auto* method = iface->method(m.name());
    ASSERT_NE(method, nullptr) << m.qualified;
    for (const Fill fill : {Fill::Full, Fill::Required, Fill::Sparse}) {
        json j = example_of(*iface, *method->output, fill);
        if (consistent) consistent(j);
        SCOPED_TRACE(std::string{m.qualified} + ", fill " + std::to_string(static_cast<int>(fill)) +
                     ": " + j.dump());
        Out out;
        try {
            out = protocol::output_from_json<Out>(j);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "does not read: " << e.what();
            continue;
        }
        const json back = protocol::to_json(out);
        EXPECT_EQ(without_nulls(back), j) << "written back: " << back.dump();
        const auto mismatch = iface->check(*method->output, back, Extra::Reject);
        EXPECT_FALSE(mismatch) << mismatch->path << ": " << mismatch->reason;
    }
}

TEST(MethodOutputs, EachMethodsRepliesReadIntoItsOutAndBack) {
    namespace method = protocol::method;
    expect_reply_of(method::GetInfo);
    expect_reply_of(method::GetInterfaceDescription);
    expect_reply_of(method::GetStatus);
    expect_reply_of(method::GetLoading);
    expect_reply_of(method::GetHistoryRuns);
    expect_reply_of(method::GetPmuInfo);
    expect_reply_of(method::ListEvents);
    expect_reply_of(method::ListMetrics);
    expect_reply_of(method::PlanCounters);
    expect_reply_of(method::CollectCounters);
    expect_reply_of(method::StartCounters);
    expect_reply_of(method::ReadCounters);
    expect_reply_of(method::StopCounters);
    expect_reply_of(method::ResetCounters);
    expect_reply_of(method::PauseCounters);
    expect_reply_of(method::ResumeCounters);
    // A session's request carries its mux mode, the default ("daemon") when its table gave
    // none.
    expect_reply_of(method::GetStandingCounters, [](json& j) {
        for (auto& session : j["sessions"]) {
            if (!session["request"].contains("mux")) session["request"]["mux"] = "daemon";
        }
    });
    expect_reply_of(method::Profile);
    // An overflow batch's count is its total of overflows times the period.
    expect_reply_of(method::WatchOverflows, [](json& j) {
        if (auto b = j.find("batch"); b != j.end()) {
            (*b)["count"] = (*b)["total"].get<std::int64_t>() * (*b)["period"].get<std::int64_t>();
        }
    });
    EXPECT_EQ(protocol::method_descriptors().size(), 19u)
        << "a method was added: give its replies a line above";
}

TEST(VarlinkIdlBuiltin, BothEmbeddedInterfacesAreListed) {
    std::set<std::string> names;
    for (const auto& e : embedded_interfaces()) {
        names.emplace(e.name);
        EXPECT_FALSE(e.text.empty()) << e.name;
    }
    EXPECT_EQ(names, (std::set<std::string>{"io.monitord.Monitor", "org.varlink.service"}));
}

TEST(VarlinkIdlBuiltin, EveryEmbeddedInterfaceParses) {
    for (const auto& e : embedded_interfaces()) {
        auto iface = Interface::parse(e.text);
        ASSERT_TRUE(iface.has_value()) << e.name << ": " << iface.error().to_string();
        EXPECT_EQ(iface->name(), e.name);
        EXPECT_EQ(iface->text(), e.text);
    }
}

TEST(VarlinkIdlBuiltin, MonitorInterface) {
    const Interface* iface = nullptr;
    ASSERT_NO_THROW(iface = builtin_interface(kMonitorInterface));
    ASSERT_NE(iface, nullptr);
    EXPECT_EQ(iface->name(), "io.monitord.Monitor");
    EXPECT_EQ(method_names(*iface),
              (std::set<std::string>{"GetLoading", "GetStatus", "GetHistoryRuns", "GetPmuInfo",
                                     "ListEvents", "ListMetrics", "PlanCounters", "CollectCounters",
                                     "StartCounters", "ResetCounters", "PauseCounters",
                                     "ResumeCounters", "ReadCounters", "StopCounters",
                                     "GetStandingCounters", "Profile", "WatchOverflows"}));
    EXPECT_NE(iface->error("InvalidMessage"), nullptr);
    for (auto e : {"PerfRunning", "PerfNotRunning", "NoSuchEvent", "PermissionDenied", "NoPmu",
                   "NoSuchTarget", "InvalidRequest", "CounterFailure", "NoSuchSession",
                   "LimitExceeded", "NoHistory"}) {
        EXPECT_NE(iface->error(e), nullptr) << e;
    }
    EXPECT_EQ(iface->method("NoSuchMethod"), nullptr);
    EXPECT_EQ(iface->error("NoSuchError"), nullptr);

    const Method* get_loading = iface->method("GetLoading");
    ASSERT_NE(get_loading, nullptr);
    EXPECT_EQ(get_loading->name, "GetLoading");
    ASSERT_EQ(get_loading->input->kind, K::Struct);
    ASSERT_EQ(get_loading->input->fields.size(), 9u);
    EXPECT_EQ(get_loading->input->fields[2].name, "states");
    EXPECT_EQ(get_loading->input->fields[3].name, "totals");
    EXPECT_EQ(get_loading->input->fields[4].name, "units");
    EXPECT_EQ(get_loading->input->fields[5].name, "context");
    EXPECT_EQ(get_loading->input->fields[4].type->element->kind, K::Int);
    EXPECT_EQ(get_loading->input->fields[6].name, "tasks");
    EXPECT_EQ(get_loading->input->fields[6].type->element->kind, K::Int);
    EXPECT_EQ(get_loading->input->fields[7].name, "since");
    EXPECT_EQ(get_loading->input->fields[8].name, "until");
    EXPECT_EQ(get_loading->input->fields[8].type->element->kind, K::Int);
    EXPECT_EQ(get_loading->input->fields[0].name, "per_cpu");
    EXPECT_EQ(get_loading->input->fields[0].type->kind, K::Maybe);
    EXPECT_EQ(get_loading->input->fields[0].type->element->kind, K::Bool);
    const Field* cpus = field(*get_loading->output, "cpus");
    ASSERT_NE(cpus, nullptr);
    ASSERT_EQ(cpus->type->kind, K::Maybe);
    ASSERT_EQ(cpus->type->element->kind, K::Array);
    EXPECT_EQ(cpus->type->element->element->kind, K::Named);
    EXPECT_EQ(cpus->type->element->element->name, "CpuLoading");

    const Method* get_status = iface->method("GetStatus");
    ASSERT_NE(get_status, nullptr);
    EXPECT_TRUE(get_status->input->fields.empty());
    const Field* state = field(*get_status->output, "state");
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(state->type->kind, K::Enum);
    EXPECT_EQ(state->type->values,
              (std::vector<std::string>{"starting", "running", "reloading", "stopping"}));
}

TEST(VarlinkIdlBuiltin, ServiceInterface) {
    const Interface* iface = builtin_interface(kServiceInterface);
    ASSERT_NE(iface, nullptr);
    EXPECT_EQ(iface->name(), "org.varlink.service");
    EXPECT_EQ(method_names(*iface), (std::set<std::string>{"GetInfo", "GetInterfaceDescription"}));
    for (const char* e : {"InterfaceNotFound", "MethodNotFound", "MethodNotImplemented",
                          "InvalidParameter", "PermissionDenied", "ExpectedMore"}) {
        EXPECT_NE(iface->error(e), nullptr) << e;
    }
    const ErrorDef* invalid = iface->error("InvalidParameter");
    ASSERT_NE(invalid, nullptr);
    ASSERT_EQ(invalid->parameters->fields.size(), 1u);
    EXPECT_EQ(invalid->parameters->fields[0].name, "parameter");
    EXPECT_EQ(invalid->parameters->fields[0].type->kind, K::String);
}

TEST(VarlinkIdlBuiltin, UnknownNameIsNull) {
    EXPECT_EQ(builtin_interface("org.example.Nothing"), nullptr);
    EXPECT_EQ(builtin_interface(""), nullptr);
    // Same object every time: the files are parsed once.
    EXPECT_EQ(builtin_interface(kMonitorInterface), builtin_interface(kMonitorInterface));
}

TEST(VarlinkIdlBuiltin, BuiltinChecksAGetLoadingCall) {
    const Interface* iface = builtin_interface(kMonitorInterface);
    ASSERT_NE(iface, nullptr);
    const Method* m = iface->method("GetLoading");
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(iface->check(*m->input, json::object(), Extra::Reject));
    EXPECT_FALSE(
        iface->check(*m->input, json{{"per_cpu", true}, {"history", nullptr}}, Extra::Reject));
    auto bad = iface->check(*m->input, json{{"per_cpu", "yes"}}, Extra::Reject);
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->path, "per_cpu");
    auto extra = iface->check(*m->input, json{{"verbose", true}}, Extra::Reject);
    ASSERT_TRUE(extra);
    EXPECT_EQ(extra->parameter(), "verbose");
}

// ---- valid interfaces ----

constexpr std::string_view kAllTypes = R"(# A comment before the keyword.
interface org.example.all   # after the name

# Before a type.
type Scalars (
  # Before a field.
  b: bool,     # after a field
  i: int,
  f: float,
  s: string,
  o: object
)

type Color (red, green, blue)   # an enum

type Empty ()

# A type used before it is defined, and a recursive one.
type Tree (value: Leaf, children: []Tree)
type Leaf (v: ?int)

method Everything(
  n: ?int,
  a: []string,
  m: [string]float,
  named: Scalars,
  inline_struct: (x: int, y: ?(z: bool)),
  inline_enum: (one, two),
  nested: ?[]?[string][]Scalars,
  empty: Empty,
  color: Color,
  snake_case_name: int
) -> (
  # Comment inside the output.
  tree: Tree
)

method # a comment between the keyword and the name
  NoArgs() -> ()

error Failed (why: string, code: ?int)
error Plain ()
)";

TEST(VarlinkIdlParse, AllTypes) {
    auto iface = Interface::parse(kAllTypes);
    ASSERT_TRUE(iface.has_value()) << iface.error().to_string();
    EXPECT_EQ(iface->name(), "org.example.all");
    EXPECT_EQ(iface->text(), kAllTypes);
    EXPECT_EQ(method_names(*iface), (std::set<std::string>{"Everything", "NoArgs"}));
    ASSERT_NE(iface->error("Failed"), nullptr);
    EXPECT_EQ(iface->error("Failed")->parameters->fields.size(), 2u);
    ASSERT_NE(iface->error("Plain"), nullptr);
    EXPECT_TRUE(iface->error("Plain")->parameters->fields.empty());

    const Method* m = iface->method("Everything");
    ASSERT_NE(m, nullptr);
    const Type& in = *m->input;
    ASSERT_EQ(in.kind, K::Struct);
    ASSERT_EQ(in.fields.size(), 10u);

    EXPECT_EQ(in.fields[0].type->kind, K::Maybe);
    EXPECT_EQ(in.fields[0].type->element->kind, K::Int);
    EXPECT_EQ(in.fields[1].type->kind, K::Array);
    EXPECT_EQ(in.fields[1].type->element->kind, K::String);
    EXPECT_EQ(in.fields[2].type->kind, K::Map);
    EXPECT_EQ(in.fields[2].type->element->kind, K::Float);
    EXPECT_EQ(in.fields[3].type->kind, K::Named);
    EXPECT_EQ(in.fields[3].type->name, "Scalars");

    const Type& inline_struct = *in.fields[4].type;
    ASSERT_EQ(inline_struct.kind, K::Struct);
    ASSERT_EQ(inline_struct.fields.size(), 2u);
    EXPECT_EQ(inline_struct.fields[1].type->kind, K::Maybe);
    EXPECT_EQ(inline_struct.fields[1].type->element->kind, K::Struct);

    const Type& inline_enum = *in.fields[5].type;
    ASSERT_EQ(inline_enum.kind, K::Enum);
    EXPECT_EQ(inline_enum.values, (std::vector<std::string>{"one", "two"}));

    // ?[]?[string][]Scalars
    const Type* t = in.fields[6].type.get();
    for (K k : {K::Maybe, K::Array, K::Maybe, K::Map, K::Array}) {
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->kind, k);
        t = t->element.get();
    }
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->kind, K::Named);
    EXPECT_EQ(t->name, "Scalars");

    EXPECT_EQ(in.fields[7].type->kind, K::Named);
    EXPECT_EQ(in.fields[9].name, "snake_case_name");

    const Method* no_args = iface->method("NoArgs");
    ASSERT_NE(no_args, nullptr);
    EXPECT_TRUE(no_args->input->fields.empty());
    EXPECT_TRUE(no_args->output->fields.empty());
}

TEST(VarlinkIdlParse, ScalarKindsAndNamedTypesResolve) {
    auto iface = Interface::parse(kAllTypes);
    ASSERT_TRUE(iface.has_value()) << iface.error().to_string();
    const Method* m = iface->method("Everything");
    ASSERT_NE(m, nullptr);
    // The named types are usable by check(): Scalars' fields have the declared kinds.
    const json call = json::parse(R"({
        "a": ["x"],
        "m": {"k": 1.0},
        "named": {"b": true, "i": 1, "f": 1.5, "s": "x", "o": {}},
        "inline_struct": {"x": 1},
        "inline_enum": "two",
        "nested": [null, {"k": [{"b": false, "i": 0, "f": 0, "s": "", "o": {"z": 1}}]}],
        "empty": {},
        "color": "blue",
        "snake_case_name": 3
    })");
    auto mm = iface->check(*m->input, call, Extra::Reject);
    EXPECT_FALSE(mm) << mm->path << ": " << mm->reason;

    json tree = json::parse(R"({
        "tree": {"value": {"v": 1}, "children": [{"value": {"v": null}, "children": []}]}
    })");
    mm = iface->check(*m->output, tree, Extra::Reject);
    EXPECT_FALSE(mm) << mm->path << ": " << mm->reason;

    tree["tree"]["children"][0]["value"]["v"] = "deep";
    mm = iface->check(*m->output, tree, Extra::Reject);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "tree.children[0].value.v");
}

TEST(VarlinkIdlParse, MinimalInterfaces) {
    for (std::string_view text : {
             "interface a.b\nmethod M() -> ()",
             "interface org.example.x\nerror E ()\n",
             "interface org.example.x type T (a: int)",
             "interface org.example.my-service\nmethod M()->()",
             "interface org.example.x\nmethod M(a:int,b:?[]int)->(c:[string]bool)",
             "\n\n  interface  org.example.x  \n\n  method  M ( )  ->  ( )  \n\n",
             "interface org.example.x\ntype T (\n  a: int # no comma before the comment\n)\n",
             "interface com.example.x2\ntype V1 (a1: int, b_2: string)\n",
         }) {
        auto iface = Interface::parse(text);
        EXPECT_TRUE(iface.has_value()) << text << "\n-> " << iface.error().to_string();
    }
}

// ---- invalid interfaces ----

struct BadCase {
    const char* what;
    std::string_view text;
    int line;
    std::string_view says;  // a part of the message
};

TEST(VarlinkIdlParse, InvalidInterfacesNameTheLine) {
    const std::vector<BadCase> cases{
        {"missing interface keyword", "# no keyword\n\nmethod Foo() -> ()\n", 3, "interface"},
        {"bad interface name", "# first\ninterface foo\nmethod Foo() -> ()\n", 2, "interface name"},
        {"interface name with an empty part", "interface org..example\nmethod M() -> ()\n", 1,
         "interface name"},
        {"interface name starting with a dash", "interface -org.example\nmethod M() -> ()\n", 1,
         "interface name"},
        {"no members", "interface org.example.empty", 1, "at least one member"},
        {"lower-case member name", "interface org.example.t\n\nmethod foo() -> ()\n", 3,
         "upper-case"},
        {"lower-case type name", "interface org.example.t\ntype point (x: int)\n", 2, "upper-case"},
        {"duplicate member", "interface org.example.t\ntype Foo (a: int)\n\nmethod Foo() -> ()\n",
         4, "'Foo' is defined twice"},
        {"duplicate method",
         "interface org.example.t\nmethod Foo() -> ()\nerror Bar ()\nmethod Foo() -> ()\n", 4,
         "twice"},
        {"duplicate field",
         "interface org.example.t\nmethod Foo(\n  a: int,\n  b: int,\n  a: string\n) -> ()\n", 5,
         "'a' appears twice"},
        {"unknown named type",
         "interface org.example.t\ntype A (x: int)\nmethod Foo(\n  a: A,\n  b: Missing\n) -> ()\n",
         5, "unknown type 'Missing'"},
        {"unknown lower-case type", "interface org.example.t\n\ntype T (a: integer)\n", 3,
         "unknown type 'integer'"},
        {"trailing comma",
         "interface org.example.t\nmethod Foo() -> ()\ntype T (a: int, b: int,)\n", 3, ""},
        {"trailing comma in an enum", "interface org.example.t\n#\n#\ntype T (a, b,)\n", 4, ""},
        {"double optional", "interface org.example.t\nmethod Foo(\n  a: ??int\n) -> ()\n", 3, "?"},
        {"mixed enum and struct", "interface org.example.t\ntype T (\n  a,\n  b: int\n)\n", 4,
         "mixes"},
        {"mixed struct and enum", "interface org.example.t\n\ntype T (a: int, b)\n", 3, "mixes"},
        {"method without ->", "interface org.example.t\nmethod Foo(a: int) (b: int)\n", 2, "->"},
        {"method with an enum input", "interface org.example.t\n\nmethod Foo(a, b) -> ()\n", 3,
         "struct"},
        {"unknown keyword", "interface org.example.t\nfunction Foo() -> ()\n", 2, "function"},
        {"unterminated struct", "interface org.example.t\nmethod Foo(a: int -> ()\n", 2, "')'"},
        {"map with a non-string key", "interface org.example.t\ntype T (m: [int]int)\n", 2,
         "[string]"},
        {"field name with a leading underscore", "interface org.example.t\ntype T (_a: int)\n", 2,
         "field"},
        {"field name with a double underscore", "interface org.example.t\ntype T (a__b: int)\n", 2,
         "field"},
        {"field without a type", "interface org.example.t\ntype T (a: )\n", 2, "type"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.what);
        auto iface = Interface::parse(c.text);
        ASSERT_FALSE(iface.has_value());
        EXPECT_EQ(iface.error().status, Status::BadData);
        const std::string& msg = iface.error().message;
        std::string prefix = "line " + std::to_string(c.line) + ": ";
        EXPECT_EQ(msg.substr(0, prefix.size()), prefix) << msg;
        EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
    }
}

// ---- check() ----

constexpr std::string_view kCheckPrelude = R"(interface org.example.check
type Named (x: int)
type Color (red, green, blue)
type Cpu (cpu: int, online: bool, load: ?float)
)";

struct CheckCase {
    std::string_view input;           // the method's input struct
    std::string_view value;           // JSON text
    std::optional<std::string> path;  // nullopt: the value conforms
    Extra extra = Extra::Reject;
};

std::string extra_name(Extra e) {
    return e == Extra::Reject ? "Reject" : "Allow";
}

TEST(VarlinkIdlCheck, Table) {
    using P = std::optional<std::string>;
    const P ok;
    const std::vector<CheckCase> cases{
        // bool
        {"(v: bool)", R"({"v": true})", ok},
        {"(v: bool)", R"({"v": false})", ok},
        {"(v: bool)", R"({"v": 1})", "v"},
        {"(v: bool)", R"({"v": "true"})", "v"},
        // int
        {"(v: int)", R"({"v": 2})", ok},
        {"(v: int)", R"({"v": -3})", ok},
        {"(v: int)", R"({"v": 9223372036854775807})", ok},
        {"(v: int)", R"({"v": -9223372036854775808})", ok},
        {"(v: int)", R"({"v": 1.5})", "v"},
        {"(v: int)", R"({"v": "2"})", "v"},
        {"(v: int)", R"({"v": true})", "v"},
        {"(v: int)", R"({"v": [2]})", "v"},
        // float
        {"(v: float)", R"({"v": 1.5})", ok},
        {"(v: float)", R"({"v": 2})", ok},
        {"(v: float)", R"({"v": -1e300})", ok},
        {"(v: float)", R"({"v": "1.5"})", "v"},
        {"(v: float)", R"({"v": false})", "v"},
        // string
        {"(v: string)", R"({"v": ""})", ok},
        {"(v: string)", R"({"v": "x"})", ok},
        {"(v: string)", R"({"v": 1})", "v"},
        {"(v: string)", R"({"v": ["x"]})", "v"},
        // object
        {"(v: object)", R"({"v": {}})", ok},
        {"(v: object)", R"({"v": {"any": [1, "two", null]}})", ok},
        {"(v: object)", R"({"v": []})", "v"},
        {"(v: object)", R"({"v": "{}"})", "v"},
        // nullable: missing and null are both fine, a wrong type is not
        {"(v: ?int)", R"({})", ok},
        {"(v: ?int)", R"({"v": null})", ok},
        {"(v: ?int)", R"({"v": 3})", ok},
        {"(v: ?int)", R"({"v": "3"})", "v"},
        // required: missing and null are both wrong
        {"(v: int)", R"({})", "v"},
        {"(v: int)", R"({"v": null})", "v"},
        {"(a: int, b: string)", R"({"a": 1})", "b"},
        // arrays
        {"(v: []int)", R"({"v": []})", ok},
        {"(v: []int)", R"({"v": [1, 2, 3]})", ok},
        {"(v: []int)", R"({"v": [1, "2"]})", "v[1]"},
        {"(v: []int)", R"({"v": [1, 2, null]})", "v[2]"},
        {"(v: []?int)", R"({"v": [1, 2, null]})", ok},
        {"(v: []int)", R"({"v": {}})", "v"},
        {"(v: [][]int)", R"({"v": [[1], [2, 3.5]]})", "v[1][1]"},
        // maps
        {"(v: [string]int)", R"({"v": {}})", ok},
        {"(v: [string]int)", R"({"v": {"a": 1, "b": 2}})", ok},
        {"(v: [string]int)", R"({"v": {"a": 1, "b": "x"}})", "v[b]"},
        {"(v: [string]int)", R"({"v": [1]})", "v"},
        {"(m: [string]Named)", R"({"m": {"k": {"x": "no"}}})", "m[k].x"},
        {"(m: [string][]int)", R"({"m": {"k": [0, false]}})", "m[k][1]"},
        // named types
        {"(v: Named)", R"({"v": {"x": 1}})", ok},
        {"(v: Named)", R"({"v": {"x": "1"}})", "v.x"},
        {"(v: Named)", R"({"v": {}})", "v.x"},
        {"(v: Named)", R"({"v": 1})", "v"},
        // enums, named and inline
        {"(v: Color)", R"({"v": "green"})", ok},
        {"(v: Color)", R"({"v": "purple"})", "v"},
        {"(v: Color)", R"({"v": "Green"})", "v"},
        {"(v: Color)", R"({"v": 0})", "v"},
        {"(v: (a, b))", R"({"v": "b"})", ok},
        {"(v: (a, b))", R"({"v": "c"})", "v"},
        // inline and empty structs
        {"(v: (a: int, b: ?string))", R"({"v": {"a": 1}})", ok},
        {"(v: (a: int, b: ?string))", R"({"v": {"a": 1, "b": 2}})", "v.b"},
        {"(v: ())", R"({"v": {}})", ok},
        {"(v: ())", R"({"v": {"z": 1}})", "v.z"},
        {"(v: ())", R"({"v": {"z": 1}})", ok, Extra::Allow},
        {"()", R"({})", ok},
        {"()", R"({"a": 1})", "a"},
        {"()", R"({"a": 1})", ok, Extra::Allow},
        // unknown fields
        {"(a: int)", R"({"a": 1, "b": 2})", "b"},
        {"(a: int)", R"({"a": 1, "b": 2})", ok, Extra::Allow},
        {"(a: Named)", R"({"a": {"x": 1, "y": 2}})", "a.y"},
        {"(a: Named)", R"({"a": {"x": 1, "y": 2}})", ok, Extra::Allow},
        // Allow does not excuse a wrong type or a missing field
        {"(a: int)", R"({"a": "1", "b": 2})", "a", Extra::Allow},
        {"(a: Named)", R"({"a": {"y": 2}})", "a.x", Extra::Allow},
        // nested paths
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true}, {"cpu": 1, "online": false}]})",
         ok},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true}, {"cpu": "1", "online": true}]})",
         "cpus[1].cpu"},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true, "load": null}]})", ok},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true, "load": "high"}]})",
         "cpus[0].load"},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0}]})", "cpus[0].online"},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true, "extra": 1}]})", "cpus[0].extra"},
        {"(cpus: []Cpu)", R"({"cpus": [{"cpu": 0, "online": true, "extra": 1}]})", ok,
         Extra::Allow},
        {"(h: ?[]?float)", R"({"h": [1.0, null, 2]})", ok},
        {"(h: ?[]?float)", R"({"h": [1.0, "x"]})", "h[1]"},
        {"(a: (b: (c: int)))", R"({"a": {"b": {"c": 1.25}}})", "a.b.c"},
    };

    for (const auto& c : cases) {
        SCOPED_TRACE(std::string{c.input} + " " + std::string{c.value} + " " + extra_name(c.extra));
        std::string text{kCheckPrelude};
        text += "method M";
        text += c.input;
        text += " -> ()\n";
        auto iface = Interface::parse(text);
        ASSERT_TRUE(iface.has_value()) << iface.error().to_string();
        const Method* m = iface->method("M");
        ASSERT_NE(m, nullptr);
        json value = json::parse(c.value);
        auto mm = iface->check(*m->input, value, c.extra);
        if (!c.path) {
            EXPECT_FALSE(mm) << "unexpected mismatch at '" << mm->path << "': " << mm->reason;
        } else {
            ASSERT_TRUE(mm) << "expected a mismatch at " << *c.path;
            EXPECT_EQ(mm->path, *c.path) << mm->reason;
            EXPECT_FALSE(mm->reason.empty());
        }
    }
}

class VarlinkIdlCheckReason : public ::testing::Test {
  protected:
    void SetUp() override {
        auto parsed = Interface::parse(std::string{kCheckPrelude} +
                                       "method M(i: int, c: Color, n: Named, f: ?float) -> ()\n");
        ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
        iface_ = std::move(*parsed);
        input_ = iface_.method("M")->input.get();
    }

    std::optional<Mismatch> check(const json& v, Extra e = Extra::Reject) const {
        return iface_.check(*input_, v, e);
    }

    Interface iface_;
    const Type* input_ = nullptr;
};

TEST_F(VarlinkIdlCheckReason, ReasonsSayWhatWasExpected) {
    json good{{"i", 1}, {"c", "red"}, {"n", {{"x", 2}}}};
    ASSERT_FALSE(check(good));

    auto j = good;
    j["i"] = 1.5;
    auto mm = check(j);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "i");
    EXPECT_EQ(mm->reason, "expected int, got float");

    j = good;
    j["f"] = "fast";
    mm = check(j);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "f");
    EXPECT_EQ(mm->reason, "expected float, got string");

    j = good;
    j["c"] = "purple";
    mm = check(j);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "c");
    EXPECT_NE(mm->reason.find("purple"), std::string::npos) << mm->reason;
    EXPECT_NE(mm->reason.find("red, green, blue"), std::string::npos) << mm->reason;

    j = good;
    j.erase("n");
    mm = check(j);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "n");
    EXPECT_EQ(mm->reason, "missing");

    j = good;
    j["zzz"] = 1;
    mm = check(j);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "zzz");
    EXPECT_EQ(mm->reason, "unknown field");
    EXPECT_FALSE(check(j, Extra::Allow));
}

TEST_F(VarlinkIdlCheckReason, NonObjectAtTheTopHasAnEmptyPath) {
    for (const json& v : {json::array(), json(nullptr), json(1), json("x")}) {
        auto mm = check(v);
        ASSERT_TRUE(mm) << v.dump();
        EXPECT_EQ(mm->path, "");
        EXPECT_EQ(mm->parameter(), "");
        EXPECT_EQ(mm->reason.rfind("expected object", 0), 0u) << mm->reason;
    }
}

TEST_F(VarlinkIdlCheckReason, CheckIsRepeatable) {
    // A failed check must not leave state behind that changes the next one.
    json bad{{"i", "x"}, {"c", "red"}, {"n", {{"x", 2}}}};
    json good{{"i", 1}, {"c", "red"}, {"n", {{"x", 2}}}};
    for (int i = 0; i < 3; ++i) {
        auto mm = check(bad);
        ASSERT_TRUE(mm);
        EXPECT_EQ(mm->path, "i");
        EXPECT_FALSE(check(good));
    }
}

TEST(VarlinkIdlMismatch, ParameterIsTheTopLevelName) {
    EXPECT_EQ((Mismatch{"cpus[1].cpu", ""}).parameter(), "cpus");
    EXPECT_EQ((Mismatch{"machine.procstat.samples", ""}).parameter(), "machine");
    EXPECT_EQ((Mismatch{"counts[b]", ""}).parameter(), "counts");
    EXPECT_EQ((Mismatch{"per_cpu", ""}).parameter(), "per_cpu");
    EXPECT_EQ((Mismatch{"", ""}).parameter(), "");
}

TEST(VarlinkIdlMismatch, ParameterOfARealMismatch) {
    auto iface = Interface::parse(std::string{kCheckPrelude} + "method M(cpus: []Cpu) -> ()\n");
    ASSERT_TRUE(iface.has_value()) << iface.error().to_string();
    auto mm = iface->check(*iface->method("M")->input,
                           json::parse(R"({"cpus": [{"cpu": 0, "online": 1}]})"), Extra::Reject);
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->path, "cpus[0].online");
    EXPECT_EQ(mm->parameter(), "cpus");
}

// ---- nesting ----

// A method parameter of `levels` nested types: structs, arrays and maybes in turn.
std::string nested_interface(int levels) {
    std::string open, close;
    for (int i = 0; i < levels - 1; ++i) {
        const char* kinds[] = {"(n: ", "[]", "?(m: "};
        open += kinds[i % 3];
        if (i % 3 != 1) close = ")" + close;
    }
    return "interface org.example.deep\nmethod Deep(v: " + open + "int" + close + ") -> ()\n";
}

TEST(VarlinkIdlNesting, AsDeepAsAMessageMayBe) {
    auto iface = Interface::parse(nested_interface(kMaxJsonDepth));
    EXPECT_TRUE(iface.has_value()) << iface.error().to_string();
}

// Found by fuzzing (tests/fuzz/regressions/varlink_idl): each level was a call of the parser,
// and 20,000 of them overflowed its stack.
TEST(VarlinkIdlNesting, DeeperFailsSayingSo) {
    for (int levels : {kMaxJsonDepth + 1, 20'000}) {
        auto iface = Interface::parse(nested_interface(levels));
        ASSERT_FALSE(iface.has_value()) << levels;
        EXPECT_NE(iface.error().message.find("types nest deeper than 64 levels"), std::string::npos)
            << iface.error().to_string();
    }
}

}  // namespace
}  // namespace monitor::varlink
