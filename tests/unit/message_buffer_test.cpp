// Varlink framing: NUL-terminated messages, split and joined across reads, and the size limit.
#include "monitor/protocol/message_buffer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace monitor::varlink {
namespace {

using namespace std::string_literals;

// Every complete message in the buffer, as owned strings.
std::vector<std::string> drain(MessageBuffer& buf) {
    std::vector<std::string> out;
    while (auto m = buf.next()) out.emplace_back(*m);
    return out;
}

TEST(MessageBuffer, EmptyBufferHasNothing) {
    MessageBuffer buf;
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_FALSE(buf.has_partial());
    EXPECT_FALSE(buf.too_large());
    EXPECT_EQ(buf.max_message(), kMaxMessageSize);
    EXPECT_EQ(kMaxMessageSize, 1024u * 1024u);
}

TEST(MessageBuffer, OneMessage) {
    MessageBuffer buf;
    buf.append("{\"method\":\"a.b.C\"}\0"s);
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, "{\"method\":\"a.b.C\"}");
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_FALSE(buf.has_partial());
    EXPECT_FALSE(buf.too_large());
}

TEST(MessageBuffer, SeveralMessagesInOneAppend) {
    MessageBuffer buf;
    buf.append("one\0two\0three\0"s);
    EXPECT_EQ(drain(buf), (std::vector<std::string>{"one", "two", "three"}));
    EXPECT_FALSE(buf.has_partial());
}

TEST(MessageBuffer, TrailingPartialStaysUntilTerminated) {
    MessageBuffer buf;
    buf.append("one\0tw"s);
    EXPECT_EQ(drain(buf), std::vector<std::string>{"one"});
    EXPECT_TRUE(buf.has_partial());
    buf.append("o\0"s);
    EXPECT_EQ(drain(buf), std::vector<std::string>{"two"});
    EXPECT_FALSE(buf.has_partial());
}

TEST(MessageBuffer, MessageSplitByteByByte) {
    const std::string msg = R"({"method":"io.monitord.Monitor.GetLoading","parameters":{}})";
    MessageBuffer buf;
    for (char c : msg) {
        buf.append(std::string_view{&c, 1});
        EXPECT_FALSE(buf.next().has_value());
        EXPECT_TRUE(buf.has_partial());
    }
    buf.append("\0"s);
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, msg);
    EXPECT_FALSE(buf.has_partial());
    EXPECT_FALSE(buf.next().has_value());
}

TEST(MessageBuffer, EmptyMessage) {
    MessageBuffer buf;
    buf.append("\0"s);
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_TRUE(m->empty());
    EXPECT_FALSE(buf.next().has_value());

    buf.append("\0\0x\0"s);
    EXPECT_EQ(drain(buf), (std::vector<std::string>{"", "", "x"}));
}

TEST(MessageBuffer, HasPartial) {
    MessageBuffer buf;
    EXPECT_FALSE(buf.has_partial());
    buf.append("abc");
    EXPECT_TRUE(buf.has_partial());
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.has_partial());
    buf.append("\0"s);
    ASSERT_TRUE(buf.next().has_value());
    EXPECT_FALSE(buf.has_partial());
}

TEST(MessageBuffer, MessageOfExactlyTheLimitPasses) {
    constexpr std::size_t kLimit = 64;
    MessageBuffer buf{kLimit};
    EXPECT_EQ(buf.max_message(), kLimit);
    const std::string body(kLimit, 'x');
    buf.append(body);
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_FALSE(buf.too_large());
    buf.append("\0"s);
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, body);
    EXPECT_FALSE(buf.too_large());
}

TEST(MessageBuffer, UnterminatedMessageOverTheLimitIsTooLarge) {
    constexpr std::size_t kLimit = 64;
    MessageBuffer buf{kLimit};
    buf.append(std::string(kLimit + 1, 'x'));
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.too_large());
    // Once the framing is lost, nothing more comes out, even after a NUL.
    buf.append("\0ok\0"s);
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.too_large());
}

TEST(MessageBuffer, UnterminatedMessageGrowingPastTheLimitIsTooLarge) {
    constexpr std::size_t kLimit = 64;
    MessageBuffer buf{kLimit};
    buf.append("first\0"s);
    ASSERT_TRUE(buf.next().has_value());
    for (std::size_t i = 0; i < kLimit; ++i) {
        buf.append("y");
        EXPECT_FALSE(buf.next().has_value());
        EXPECT_FALSE(buf.too_large()) << "after " << i + 1 << " bytes";
    }
    buf.append("y");
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.too_large());
}

TEST(MessageBuffer, TerminatedMessageOverTheLimitIsRefused) {
    constexpr std::size_t kLimit = 64;
    MessageBuffer buf{kLimit};
    buf.append(std::string(kLimit + 1, 'x') + "\0"s);
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.too_large());
}

TEST(MessageBuffer, TerminatedMessageOverTheLimitAfterSmallOnesIsRefused) {
    constexpr std::size_t kLimit = 16;
    MessageBuffer buf{kLimit};
    buf.append("small\0"s + std::string(kLimit + 1, 'z') + "\0after\0"s);
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, "small");
    EXPECT_FALSE(buf.next().has_value());
    EXPECT_TRUE(buf.too_large());
}

// A refused connection reads no more: its buffer gives its memory back at once.
TEST(MessageBuffer, DiscardGivesTheMemoryBack) {
    MessageBuffer buf(1024);
    buf.append(std::string(4096, 'x'));
    EXPECT_FALSE(buf.next());
    EXPECT_TRUE(buf.too_large());
    EXPECT_GE(buf.held(), 4096u);
    buf.discard();
    EXPECT_EQ(buf.buffered(), 0u);
    EXPECT_FALSE(buf.has_partial());
    EXPECT_LT(buf.held(), 4096u) << "bytes still held";
    EXPECT_FALSE(buf.next()) << "the framing stays lost";
}

TEST(MessageBuffer, DefaultLimitIsOneMebibyte) {
    MessageBuffer ok;
    const std::string body(kMaxMessageSize, 'a');
    ok.append(body + "\0"s);
    auto m = ok.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->size(), kMaxMessageSize);
    EXPECT_FALSE(ok.too_large());

    MessageBuffer big;
    big.append(body + "a");
    EXPECT_FALSE(big.next().has_value());
    EXPECT_TRUE(big.too_large());
}

TEST(MessageBuffer, PrepareAndCommit) {
    MessageBuffer buf;
    const std::string data = "hello\0wor"s;
    auto space = buf.prepare(100);
    ASSERT_GE(space.size(), data.size());
    std::memcpy(space.data(), data.data(), data.size());
    buf.commit(data.size());
    EXPECT_EQ(drain(buf), std::vector<std::string>{"hello"});
    EXPECT_TRUE(buf.has_partial());

    space = buf.prepare(8);
    ASSERT_EQ(space.size(), 8u);
    std::memcpy(space.data(), "ld\0", 3);
    buf.commit(3);  // less than prepared, as a short read()
    EXPECT_EQ(drain(buf), std::vector<std::string>{"world"});
    EXPECT_FALSE(buf.has_partial());

    // Committing nothing changes nothing.
    buf.prepare(16);
    buf.commit(0);
    EXPECT_FALSE(buf.has_partial());
    EXPECT_FALSE(buf.next().has_value());
}

TEST(MessageBuffer, PreparedSpaceIsWritable) {
    MessageBuffer buf;
    buf.append("abc");
    auto space = buf.prepare(4096);
    ASSERT_EQ(space.size(), 4096u);
    std::fill(space.begin(), space.end(), 'q');
    space.back() = '\0';
    buf.commit(space.size());
    auto m = buf.next();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, "abc" + std::string(4095, 'q'));
}

// Random messages in random chunks, through both append() and prepare()/commit(), read back
// in between: compaction must never move or lose a byte.
TEST(MessageBuffer, RandomisedRoundTripSurvivesCompaction) {
    std::mt19937 rng{20240611};
    std::uniform_int_distribution<int> letter{1, 255};  // anything but NUL
    std::uniform_int_distribution<std::size_t> msg_len{0, 300};
    std::uniform_int_distribution<std::size_t> chunk_len{1, 700};
    std::uniform_int_distribution<int> coin{0, 1};

    for (int round = 0; round < 50; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        std::vector<std::string> sent;
        std::string stream;
        const int count = 1 + static_cast<int>(rng() % 200);
        for (int i = 0; i < count; ++i) {
            std::string m(msg_len(rng), '\0');
            for (auto& c : m) c = static_cast<char>(letter(rng));
            stream += m;
            stream += '\0';
            sent.push_back(std::move(m));
        }

        MessageBuffer buf{512};
        std::vector<std::string> received;
        std::size_t pos = 0;
        while (pos < stream.size()) {
            std::size_t n = std::min(chunk_len(rng), stream.size() - pos);
            if (coin(rng) != 0) {
                buf.append(std::string_view{stream}.substr(pos, n));
            } else {
                auto space = buf.prepare(n + static_cast<std::size_t>(coin(rng)) * 64);
                ASSERT_GE(space.size(), n);
                std::memcpy(space.data(), stream.data() + pos, n);
                buf.commit(n);
            }
            pos += n;
            // Sometimes leave messages unread so that they pile up before compaction.
            if (coin(rng) != 0) {
                auto got = drain(buf);
                received.insert(received.end(), got.begin(), got.end());
            }
            ASSERT_FALSE(buf.too_large());
        }
        auto got = drain(buf);
        received.insert(received.end(), got.begin(), got.end());
        EXPECT_FALSE(buf.has_partial());
        ASSERT_EQ(received.size(), sent.size());
        EXPECT_EQ(received, sent);
    }
}

}  // namespace
}  // namespace monitor::varlink
