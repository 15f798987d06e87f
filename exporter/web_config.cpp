#include "web_config.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <regex>

#include "monitor/text_file.hpp"

namespace exporter {

using monitor::fail;
using monitor::Result;
using monitor::Status;

namespace {

constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxPemBytes = std::size_t{1} << 20;

// exporter-toolkit's names of the versions, oldest first, and GnuTLS's.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kVersions{{
    {"TLS10", "VERS-TLS1.0"},
    {"TLS11", "VERS-TLS1.1"},
    {"TLS12", "VERS-TLS1.2"},
    {"TLS13", "VERS-TLS1.3"},
}};

// The headers exporter-toolkit lets a config set, and no others.
constexpr std::array<std::string_view, 5> kHeaders{"Content-Security-Policy", "X-Frame-Options",
                                                   "X-Content-Type-Options", "X-XSS-Protection",
                                                   "Strict-Transport-Security"};

// Reads one file's keys, saying which key and what would work when one is wrong.
class Reader {
  public:
    explicit Reader(const std::filesystem::path& file) : file_(file.string()) {}

    std::unexpected<monitor::Error> bad(const YAML::Node& at, const std::string& key,
                                        const std::string& what) const {
        std::string where = file_;
        if (const auto mark = at.Mark(); !mark.is_null()) {
            where += ":" + std::to_string(mark.line + 1);
        }
        return fail(Status::BadArg, where + ": " + key + ": " + what);
    }

    // The keys of a mapping, each one of `known` (others: an error naming them and the known).
    Result<void> only(const YAML::Node& map, const std::string& path,
                      std::initializer_list<std::string_view> known) const {
        if (!map.IsMap()) return bad(map, path, "should be a mapping of keys to values");
        for (const auto& item : map) {
            const auto key = item.first.as<std::string>();
            bool found = false;
            for (auto k : known) found = found || k == key;
            if (!found) {
                std::string where = path;
                if (!where.empty()) where += '.';
                where += key;
                std::string list = "unknown key; monitord-exporter reads ";
                for (auto k : known) {
                    if (k != *known.begin()) list += ", ";
                    list += k;
                }
                return bad(item.first, where, list);
            }
        }
        return {};
    }

    Result<std::string> text(const YAML::Node& value, const std::string& key) const {
        if (!value.IsScalar()) return bad(value, key, "should be a string");
        return value.as<std::string>();
    }

    Result<bool> boolean(const YAML::Node& value, const std::string& key) const {
        bool b = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, b)) {
            return bad(value, key, "should be true or false");
        }
        return b;
    }

  private:
    std::string file_;
};

// A PEM given inline (`cert`, `key`) or by a file relative to the config's directory.
Result<std::string> pem(const Reader& r, const YAML::Node& section, const std::string& name,
                        const std::filesystem::path& dir) {
    const auto inline_value = section[name];
    const auto file_value = section[name + "_file"];
    const std::string path = "tls_server_config." + name;
    if (inline_value && file_value) {
        return r.bad(inline_value, path, "give " + name + " or " + name + "_file, not both");
    }
    if (inline_value) return r.text(inline_value, path);
    auto named = r.text(file_value, path + "_file");
    if (!named) return named;
    std::filesystem::path p{*named};
    if (p.is_relative()) p = dir / p;
    auto content = monitor::read_text_file(p, kMaxPemBytes);
    if (!content) {
        return r.bad(file_value, path + "_file",
                     "cannot read " + p.string() + ": " + content.error().message);
    }
    return content;
}

Result<std::string> priorities(const Reader& r, const YAML::Node& tls) {
    auto index = [&](const char* key, std::size_t fallback) -> Result<std::size_t> {
        const auto node = tls[key];
        if (!node) return fallback;
        auto name = r.text(node, std::string{"tls_server_config."} + key);
        if (!name) return std::unexpected(name.error());
        for (std::size_t i = 0; i < kVersions.size(); ++i) {
            if (kVersions[i].first == *name) return i;
        }
        return r.bad(node, std::string{"tls_server_config."} + key,
                     "\"" + *name + "\" is not a version: use TLS10, TLS11, TLS12 or TLS13");
    };
    auto min = index("min_version", 2);  // exporter-toolkit's default: TLS12
    if (!min) return std::unexpected(min.error());
    auto max = index("max_version", kVersions.size() - 1);
    if (!max) return std::unexpected(max.error());
    if (*min > *max) {
        return r.bad(tls["min_version"], "tls_server_config.min_version",
                     "is above max_version: no version would be left");
    }
    std::string p = "NORMAL:-VERS-ALL";
    for (std::size_t i = *max + 1; i-- > *min;) p += ":+" + std::string{kVersions[i].second};
    return p;
}

Result<std::optional<TlsSettings>> tls_settings(const Reader& r, const YAML::Node& tls,
                                                const std::filesystem::path& dir) {
    if (!tls || tls.IsNull()) return std::nullopt;
    if (auto ok =
            r.only(tls, "tls_server_config",
                   {"cert_file", "key_file", "cert", "key", "min_version", "max_version",
                    "client_auth_type", "client_ca_file", "client_ca", "cipher_suites",
                    "prefer_server_cipher_suites", "curve_preferences", "client_allowed_sans"});
        !ok) {
        return std::unexpected(ok.error());
    }
    // Keys of exporter-toolkit that libmicrohttpd has no way to honour: refused, not ignored.
    for (const char* key : {"client_ca_file", "client_ca", "client_allowed_sans"}) {
        if (tls[key]) {
            return r.bad(tls[key], std::string{"tls_server_config."} + key,
                         "client certificates are not supported by monitord-exporter; use "
                         "basic_auth_users, or a TLS proxy in front that checks them");
        }
    }
    if (const auto auth = tls["client_auth_type"]) {
        auto type = r.text(auth, "tls_server_config.client_auth_type");
        if (!type) return std::unexpected(type.error());
        if (*type != "NoClientCert") {
            return r.bad(auth, "tls_server_config.client_auth_type",
                         "\"" + *type +
                             "\": only NoClientCert is supported (monitord-exporter does not "
                             "check client certificates)");
        }
    }
    for (const char* key : {"cipher_suites", "curve_preferences"}) {
        if (tls[key]) {
            return r.bad(tls[key], std::string{"tls_server_config."} + key,
                         "not supported: GnuTLS's defaults apply; min_version and max_version "
                         "choose the protocol versions");
        }
    }
    if (const auto prefer = tls["prefer_server_cipher_suites"]) {
        if (auto b = r.boolean(prefer, "tls_server_config.prefer_server_cipher_suites"); !b) {
            return std::unexpected(b.error());
        }
    }
    const bool has_cert = tls["cert"] || tls["cert_file"];
    const bool has_key = tls["key"] || tls["key_file"];
    if (!has_cert && !has_key) {
        return r.bad(tls, "tls_server_config",
                     "names no certificate: give cert_file and key_file (or leave "
                     "tls_server_config out for plain HTTP)");
    }
    if (!has_cert || !has_key) {
        return r.bad(tls, "tls_server_config",
                     std::string{"has a "} + (has_cert ? "certificate but no key_file (or key)"
                                                       : "key but no cert_file (or cert)"));
    }
    TlsSettings s;
    auto cert = pem(r, tls, "cert", dir);
    if (!cert) return std::unexpected(cert.error());
    auto key = pem(r, tls, "key", dir);
    if (!key) return std::unexpected(key.error());
    auto p = priorities(r, tls);
    if (!p) return std::unexpected(p.error());
    if (cert->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        return r.bad(tls["cert"] ? tls["cert"] : tls["cert_file"], "tls_server_config.cert",
                     "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
    if (key->find("PRIVATE KEY-----") == std::string::npos) {
        return r.bad(tls["key"] ? tls["key"] : tls["key_file"], "tls_server_config.key",
                     "holds no PEM private key (-----BEGIN PRIVATE KEY-----)");
    }
    s.cert_pem = std::move(*cert);
    s.key_pem = std::move(*key);
    s.priorities = std::move(*p);
    return s;
}

// The highest bcrypt cost accepted: each check of a password takes the exporter's loop for
// 2^cost rounds (about 0.25 s at 12 on a 2020 server), and anyone who reaches the port can ask
// for one; htpasswd's default is 5, exporter-toolkit's example 10.
constexpr int kMaxBcryptCost = 12;

// Whether `hash` is bcrypt's "$2y$CC$" + 53 characters of its base 64, at a cost up to the
// limit; "" when it is, else what is wrong.
std::string bcrypt_problem(const std::string& hash) {
    static const std::regex form{R"(^\$2[aby]\$([0-9]{2})\$[./A-Za-z0-9]{53}$)"};
    std::smatch m;
    if (!std::regex_match(hash, m, form)) {
        return "is not a bcrypt hash ($2y$10$ and 53 characters, as `htpasswd -nBC 10 USER` "
               "prints it after the colon)";
    }
    const int cost = std::stoi(m[1].str());
    if (cost < 4 || cost > kMaxBcryptCost) {
        return "has cost " + m[1].str() + ": use 4 to " + std::to_string(kMaxBcryptCost) +
               " (every check of a password runs 2^cost rounds on the exporter's loop)";
    }
    return "";
}

Result<std::map<std::string, std::string>> users(const Reader& r, const YAML::Node& node) {
    std::map<std::string, std::string> out;
    if (!node || node.IsNull()) return out;
    if (!node.IsMap()) return r.bad(node, "basic_auth_users", "should map user names to hashes");
    for (const auto& item : node) {
        const auto user = item.first.as<std::string>();
        const std::string key = "basic_auth_users." + user;
        if (user.empty() || user.find(':') != std::string::npos) {
            return r.bad(item.first, key, "a user name is not empty and has no ':'");
        }
        auto hash = r.text(item.second, key);
        if (!hash) return std::unexpected(hash.error());
        if (auto problem = bcrypt_problem(*hash); !problem.empty()) {
            return r.bad(item.second, key, problem);
        }
        out.emplace(user, std::move(*hash));
    }
    return out;
}

Result<std::vector<std::pair<std::string, std::string>>> http_headers(const Reader& r,
                                                                      const YAML::Node& http) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!http || http.IsNull()) return out;
    if (auto ok = r.only(http, "http_server_config", {"http2", "headers"}); !ok) {
        return std::unexpected(ok.error());
    }
    // HTTP/2 is on by default in exporter-toolkit, so configs carry `http2: true`: accepted,
    // and served as HTTP/1.1, which every Prometheus speaks.
    if (const auto h2 = http["http2"]) {
        if (auto b = r.boolean(h2, "http_server_config.http2"); !b) {
            return std::unexpected(b.error());
        }
    }
    const auto headers = http["headers"];
    if (!headers || headers.IsNull()) return out;
    if (!headers.IsMap()) {
        return r.bad(headers, "http_server_config.headers", "should map header names to values");
    }
    for (const auto& item : headers) {
        const auto name = item.first.as<std::string>();
        const std::string key = "http_server_config.headers." + name;
        bool allowed = false;
        for (auto h : kHeaders) allowed = allowed || h == name;
        if (!allowed) {
            std::string list = "cannot be set; these can: ";
            for (auto h : kHeaders) {
                if (h != kHeaders.front()) list += ", ";
                list += h;
            }
            return r.bad(item.first, key, list);
        }
        auto value = r.text(item.second, key);
        if (!value) return std::unexpected(value.error());
        if (value->find_first_of("\r\n") != std::string::npos) {
            return r.bad(item.second, key, "a header's value is one line");
        }
        out.emplace_back(name, std::move(*value));
    }
    return out;
}

}  // namespace

Result<WebConfig> parse_web_config(std::string_view text, const std::filesystem::path& file) {
    const Reader r{file};
    YAML::Node root;
    try {
        root = YAML::Load(std::string{text});
    } catch (const YAML::Exception& e) {
        return fail(Status::BadArg,
                    file.string() + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg);
    }
    WebConfig config;
    if (root.IsNull()) return config;  // an empty file: plain HTTP, no authentication
    try {
        if (auto ok =
                r.only(root, "", {"tls_server_config", "http_server_config", "basic_auth_users"});
            !ok) {
            return std::unexpected(ok.error());
        }
        auto tls = tls_settings(r, root["tls_server_config"], file.parent_path());
        if (!tls) return std::unexpected(tls.error());
        auto u = users(r, root["basic_auth_users"]);
        if (!u) return std::unexpected(u.error());
        auto h = http_headers(r, root["http_server_config"]);
        if (!h) return std::unexpected(h.error());
        config.tls = std::move(*tls);
        config.users = std::move(*u);
        config.headers = std::move(*h);
    } catch (const YAML::Exception& e) {
        // A key that is not a scalar (as<std::string> on a sequence), and the like.
        return fail(Status::BadArg,
                    file.string() + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    return config;
}

Result<WebConfig> read_web_config(const std::filesystem::path& file) {
    auto text = monitor::read_text_file(file, kMaxConfigBytes);
    if (!text) return std::unexpected(text.error());
    return parse_web_config(*text, file);
}

}  // namespace exporter
