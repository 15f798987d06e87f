// An enum's names as one table that printing and parsing both read, so that the name a value
// is printed with is always the name it is parsed from, and a list of the accepted names
// cannot miss one.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace monitor {

template <typename E>
struct EnumName {
    E value;
    std::string_view name;
};

// The value's name, or "" for a value the table lacks.
template <typename E, std::size_t N>
constexpr std::string_view name_of(const std::array<EnumName<E>, N>& names, E value) noexcept {
    for (const auto& n : names) {
        if (n.value == value) return n.name;
    }
    return {};
}

template <typename E, std::size_t N>
constexpr std::optional<E> value_named(const std::array<EnumName<E>, N>& names,
                                       std::string_view name) noexcept {
    for (const auto& n : names) {
        if (n.name == name) return n.value;
    }
    return std::nullopt;
}

// The names as a sentence lists them: "spin, sleep or off".
template <typename E, std::size_t N>
std::string names_list(const std::array<EnumName<E>, N>& names) {
    std::string s;
    for (std::size_t i = 0; i < N; ++i) {
        if (i > 0) s += i + 1 == N ? " or " : ", ";
        s += names[i].name;
    }
    return s;
}

}  // namespace monitor
