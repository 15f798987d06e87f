#include "monitor/protocol/message_buffer.hpp"

#include <algorithm>
#include <cstring>

namespace monitor::varlink {

std::span<char> MessageBuffer::prepare(std::size_t n) {
    if (start_ > 0 && (start_ == end_ || start_ >= data_.size() / 2)) {
        std::memmove(data_.data(), data_.data() + start_, end_ - start_);
        end_ -= start_;
        scan_ -= start_;
        start_ = 0;
    }
    if (data_.size() < end_ + n) data_.resize(std::max(end_ + n, data_.size() * 2));
    return {data_.data() + end_, n};
}

void MessageBuffer::commit(std::size_t n) {
    end_ = std::min(end_ + n, data_.size());
}

void MessageBuffer::append(std::string_view bytes) {
    auto space = prepare(bytes.size());
    std::memcpy(space.data(), bytes.data(), bytes.size());
    commit(bytes.size());
}

void MessageBuffer::discard() {
    std::string().swap(data_);
    start_ = scan_ = end_ = 0;
}

std::optional<std::string_view> MessageBuffer::next() {
    if (too_large_) return std::nullopt;
    const char* base = data_.data();
    const void* nul = std::memchr(base + scan_, '\0', end_ - scan_);
    if (nul == nullptr) {
        scan_ = end_;
        if (end_ - start_ > max_) too_large_ = true;
        return std::nullopt;
    }
    auto at = static_cast<std::size_t>(static_cast<const char*>(nul) - base);
    if (at - start_ > max_) {
        too_large_ = true;
        return std::nullopt;
    }
    std::string_view msg{base + start_, at - start_};
    start_ = scan_ = at + 1;
    return msg;
}

}  // namespace monitor::varlink
