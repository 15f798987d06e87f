// Varlink interface definitions (https://varlink.org/Interface-Definition): parsed from the
// .varlink files compiled into libmonitor, and used to check every call and reply against
// them, so the interface file is the one definition of the wire format.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::varlink {

struct Type;
using TypePtr = std::shared_ptr<const Type>;

struct Field {
    std::string name;
    TypePtr type;
};

struct Type {
    enum class Kind { Bool, Int, Float, String, Object, Named, Struct, Enum, Array, Map, Maybe };
    Kind kind = Kind::Object;
    std::string name;                 // Named: the type's name
    std::vector<Field> fields;        // Struct
    std::vector<std::string> values;  // Enum
    TypePtr element;                  // Array, Map (values), Maybe
};

struct Method {
    std::string name;
    TypePtr input;   // a Struct
    TypePtr output;  // a Struct
};

struct ErrorDef {
    std::string name;
    TypePtr parameters;  // a Struct
};

// Where a JSON value departs from its type: the path ("machine.procstat.samples",
// "cpus[3].cpu") and why.
struct Mismatch {
    std::string path;
    std::string reason;

    // The top-level parameter the path starts with: what InvalidParameter names.
    std::string parameter() const;
};

enum class Extra { Reject, Allow };  // fields the type does not declare

class Interface {
  public:
    // Parses an interface file; syntax errors are BADDATA naming the line.
    static Result<Interface> parse(std::string_view text);

    const std::string& name() const { return name_; }
    const std::string& text() const { return text_; }
    const Method* method(std::string_view name) const;
    const ErrorDef* error(std::string_view name) const;
    // The type the interface names `name` ("CounterReport"), or nullptr.
    const Type* type(std::string_view name) const;
    const std::map<std::string, Method, std::less<>>& methods() const { return methods_; }

    // Checks `value` against `type`. Calls are checked with Extra::Reject; replies with
    // Extra::Allow, so that an older client accepts a newer daemon's added fields.
    std::optional<Mismatch> check(const Type& type, const nlohmann::json& value, Extra extra) const;

  private:
    friend class Parser;
    std::optional<Mismatch> check_at(const Type& type, const nlohmann::json& value, Extra extra,
                                     std::string& path) const;

    std::string name_;
    std::string text_;
    std::map<std::string, TypePtr, std::less<>> types_;
    std::map<std::string, Method, std::less<>> methods_;
    std::map<std::string, ErrorDef, std::less<>> errors_;
};

// The interface files compiled into libmonitor (lib/protocol/*.varlink).
struct EmbeddedInterface {
    std::string_view name;
    std::string_view text;
};
std::span<const EmbeddedInterface> embedded_interfaces();

// The parsed embedded interface of that name, or nullptr. The files are parsed once; a file
// that does not parse is a build defect the unit tests catch, and throws std::logic_error.
const Interface* builtin_interface(std::string_view name);

inline constexpr std::string_view kMonitorInterface = "io.monitord.Monitor";
inline constexpr std::string_view kServiceInterface = "org.varlink.service";

}  // namespace monitor::varlink
