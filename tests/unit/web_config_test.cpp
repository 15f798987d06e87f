// monitord-exporter's --web.config.file (exporter-toolkit's format) and the basic
// authentication it configures.
#include "web_config.hpp"

#include <crypt.h>
#include <gtest/gtest.h>

#include <fstream>

#include "basic_auth.hpp"
#include "test_support.hpp"

namespace exporter {
namespace {

constexpr const char* kCert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr const char* kKey = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

// A bcrypt hash of `password` at `cost`, as htpasswd -B makes one.
std::string bcrypt(const std::string& password, unsigned long cost = 5) {
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    EXPECT_NE(crypt_gensalt_rn("$2y$", cost, nullptr, 0, setting, sizeof setting), nullptr);
    crypt_data data{};
    const char* h = crypt_r(password.c_str(), setting, &data);
    EXPECT_NE(h, nullptr);
    return h != nullptr ? h : "";
}

std::string error_of(const std::string& yaml) {
    auto c = parse_web_config(yaml, "/etc/monitord/web.yml");
    EXPECT_FALSE(c) << yaml;
    return c ? "" : c.error().message;
}

TEST(WebConfig, AnEmptyFileIsPlainHttpWithoutAuthentication) {
    for (const char* text : {"", "# nothing\n", "tls_server_config:\nbasic_auth_users:\n"}) {
        auto c = parse_web_config(text, "web.yml");
        ASSERT_TRUE(c) << c.error().message;
        EXPECT_FALSE(c->tls);
        EXPECT_TRUE(c->users.empty());
    }
}

TEST(WebConfig, ReadsTheFilesExporterToolkitNames) {
    test_support::ScratchDir dir("web-config");
    std::ofstream(dir.path() / "server.crt") << kCert;
    std::ofstream(dir.path() / "server.key") << kKey;
    const std::string hash = bcrypt("scrape-me");
    std::ofstream(dir.path() / "web.yml")
        << "tls_server_config:\n"
           "  cert_file: server.crt\n"  // relative to the config's directory
           "  key_file: "
        << (dir.path() / "server.key").string()
        << "\n"
           "  client_auth_type: NoClientCert\n"
           "  prefer_server_cipher_suites: true\n"
           "http_server_config:\n"
           "  http2: true\n"
           "  headers:\n"
           "    Strict-Transport-Security: max-age=31536000\n"
           "basic_auth_users:\n"
           "  prometheus: '"
        << hash << "'\n";
    auto c = read_web_config(dir.path() / "web.yml");
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_TRUE(c->tls);
    EXPECT_EQ(c->tls->cert_pem, kCert);
    EXPECT_EQ(c->tls->key_pem, kKey);
    // exporter-toolkit's defaults: TLS 1.2 and 1.3.
    EXPECT_EQ(c->tls->priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2");
    ASSERT_EQ(c->users.size(), 1U);
    EXPECT_EQ(c->users.at("prometheus"), hash);
    ASSERT_EQ(c->headers.size(), 1U);
    EXPECT_EQ(c->headers[0].first, "Strict-Transport-Security");
}

TEST(WebConfig, VersionsChooseThePriorities) {
    const std::string tls = std::string{"tls_server_config:\n  cert: |\n    "} +
                            "-----BEGIN CERTIFICATE-----\n  key: |\n    -----BEGIN PRIVATE " +
                            "KEY-----\n";
    auto c = parse_web_config(tls + "  min_version: TLS13\n", "web.yml");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->tls->priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.3");
    c = parse_web_config(tls + "  min_version: TLS10\n  max_version: TLS11\n", "web.yml");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->tls->priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.1:+VERS-TLS1.0");

    EXPECT_EQ(error_of(tls + "  min_version: TLS14\n"),
              "/etc/monitord/web.yml:6: tls_server_config.min_version: \"TLS14\" is not a "
              "version: use TLS10, TLS11, TLS12 or TLS13");
    EXPECT_NE(error_of(tls + "  min_version: TLS13\n  max_version: TLS12\n")
                  .find("min_version: is above max_version"),
              std::string::npos);
}

// Every mistake is named by file, line and key, with what would work.
TEST(WebConfig, MistakesAreNamed) {
    EXPECT_EQ(error_of("tls_server_config:\n  certfile: a.crt\n"),
              "/etc/monitord/web.yml:2: tls_server_config.certfile: unknown key; "
              "monitord-exporter reads cert_file, key_file, cert, key, min_version, "
              "max_version, client_auth_type, client_ca_file, client_ca, cipher_suites, "
              "prefer_server_cipher_suites, curve_preferences, client_allowed_sans");
    EXPECT_NE(error_of("rate_limit:\n  interval: 1s\n").find("rate_limit: unknown key"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  cert_file: a.crt\n")
                  .find("has a certificate but no key_file (or key)"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  min_version: TLS12\n").find("names no certificate"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  cert_file: /nonexistent/a.crt\n  key_file: b\n")
                  .find("tls_server_config.cert_file: cannot read /nonexistent/a.crt"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  cert: x\n  key: y\n  client_ca_file: ca.crt\n")
                  .find("client certificates are not supported"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n")
                  .find("only NoClientCert"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config:\n  cert: x\n  key: y\n")
                  .find("tls_server_config.cert: holds no PEM certificate"),
              std::string::npos);
    EXPECT_NE(error_of("basic_auth_users:\n  alice: secret\n")
                  .find(":2: basic_auth_users.alice: is not a bcrypt hash"),
              std::string::npos);
    const std::string slow = "$2y$13$" + std::string(53, 'a');  // well formed, cost 13
    EXPECT_NE(
        error_of("basic_auth_users:\n  alice: '" + slow + "'\n").find("has cost 13: use 4 to 12"),
        std::string::npos);
    EXPECT_NE(error_of("basic_auth_users: [alice]\n").find("should map user names to hashes"),
              std::string::npos);
    EXPECT_NE(error_of("http_server_config:\n  headers:\n    Server: x\n")
                  .find("http_server_config.headers.Server: cannot be set"),
              std::string::npos);
    EXPECT_NE(error_of("http_server_config:\n  http2: maybe\n").find("should be true or false"),
              std::string::npos);
    EXPECT_NE(error_of("tls_server_config: [\n").find("/etc/monitord/web.yml:"), std::string::npos);
    EXPECT_NE(error_of("- a\n- b\n").find("should be a mapping"), std::string::npos);
    EXPECT_NE(error_of("? [a, b]\n: c\n").find("/etc/monitord/web.yml:"), std::string::npos);

    auto missing = read_web_config("/nonexistent/web.yml");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("/nonexistent/web.yml"), std::string::npos)
        << missing.error().message;
}

TEST(BasicAuth, TheRightPasswordPassesAndNoOther) {
    BasicAuth none{{}};
    EXPECT_FALSE(none.required());

    BasicAuth auth{{{"prometheus", bcrypt("scrape-me")}, {"grafana", bcrypt("look")}}};
    EXPECT_TRUE(auth.required());
    EXPECT_TRUE(auth.allows("prometheus", "scrape-me"));
    EXPECT_TRUE(auth.allows("prometheus", "scrape-me"));  // from what it remembers
    EXPECT_TRUE(auth.allows("grafana", "look"));
    EXPECT_FALSE(auth.allows("prometheus", "look"));
    EXPECT_FALSE(auth.allows("prometheus", "scrape-m"));
    EXPECT_FALSE(auth.allows("prometheus", ""));
    EXPECT_FALSE(auth.allows("nobody", "scrape-me"));
    EXPECT_FALSE(auth.allows("", ""));
    // A password that passed once does not open another user's door.
    EXPECT_FALSE(auth.allows("grafana", "scrape-me"));
    EXPECT_TRUE(auth.allows("prometheus", "scrape-me"));
}

// Prometheus sends the same credentials every scrape: after the first, they are not checked
// by bcrypt again (at cost 10, about 50 ms each); a wrong password always is.
TEST(BasicAuth, APasswordThatPassedIsNotCheckedByBcryptAgain) {
    BasicAuth auth{{{"prometheus", bcrypt("scrape-me", 10)}}};
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(auth.allows("prometheus", "scrape-me"));
    EXPECT_EQ(auth.bcrypt_checks(), 1U);
    EXPECT_FALSE(auth.allows("prometheus", "scrape-you"));
    EXPECT_FALSE(auth.allows("someone", "scrape-me"));  // the decoy hash: a check as well
    EXPECT_EQ(auth.bcrypt_checks(), 3U);
}

}  // namespace
}  // namespace exporter
