// Varlink framing: each message is a JSON text terminated by a NUL byte.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace monitor::varlink {

inline constexpr std::size_t kMaxMessageSize = std::size_t{1} << 20;  // calls: 1 MiB
inline constexpr std::size_t kMaxReplySize = std::size_t{64} << 20;   // replies: 64 MiB

// Collects received bytes and splits them into messages.
class MessageBuffer {
  public:
    explicit MessageBuffer(std::size_t max_message = kMaxMessageSize) : max_(max_message) {}

    // Space to receive up to `n` more bytes into; call commit() with what arrived.
    std::span<char> prepare(std::size_t n);
    void commit(std::size_t n);
    void append(std::string_view bytes);

    // The next complete message without its NUL, valid until the next prepare()/append();
    // nullopt when none is complete yet.
    std::optional<std::string_view> next();

    // True once an unterminated message has grown past the limit: the framing is lost.
    bool too_large() const { return too_large_; }
    // Bytes of an unterminated message are waiting.
    bool has_partial() const { return end_ > start_; }
    // Bytes received and not yet returned by next(): complete messages not asked for yet and
    // the start of the next one.
    std::size_t buffered() const { return end_ - start_; }
    // The memory it holds for them, in bytes.
    std::size_t held() const { return data_.capacity(); }
    // Drops every byte received and gives the memory back: for a connection that will read
    // no more (refused, closing), whose buffer would otherwise stay as long as it does.
    void discard();
    std::size_t max_message() const { return max_; }

  private:
    std::string data_;
    std::size_t start_ = 0;  // first byte not yet returned
    std::size_t scan_ = 0;   // bytes before this hold no NUL
    std::size_t end_ = 0;    // bytes received
    std::size_t max_;
    bool too_large_ = false;
};

}  // namespace monitor::varlink
