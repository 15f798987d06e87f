// The exporter's --web.config.file: TLS and basic authentication in the format of
// Prometheus's exporter-toolkit (the file node_exporter reads), so that one file serves both.
//
//   tls_server_config:
//     cert_file: /etc/monitord/exporter.crt     # relative paths: from the file's directory
//     key_file: /etc/monitord/exporter.key
//     min_version: TLS12                        # TLS10 .. TLS13; max_version too
//   http_server_config:
//     headers:
//       Strict-Transport-Security: max-age=31536000
//   basic_auth_users:
//     prometheus: $2y$10$...                    # bcrypt, as htpasswd -nBC 10 prints it
//
// What exporter-toolkit has and libmicrohttpd cannot do (client certificates, cipher suite and
// curve lists, HTTP/2) is refused by name; so is a key it does not know.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/status.hpp"

namespace exporter {

struct TlsSettings {
    std::string cert_pem;    // the certificate (chain), PEM
    std::string key_pem;     // its private key, PEM
    std::string priorities;  // GnuTLS priority string: the protocol versions allowed
};

struct WebConfig {
    std::optional<TlsSettings> tls;                            // none: plain HTTP
    std::map<std::string, std::string> users;                  // user -> bcrypt hash; none: no auth
    std::vector<std::pair<std::string, std::string>> headers;  // added to every response
};

// Reads and checks `file`. BADARG names the file, the key (as a path: tls_server_config.
// min_version) and what would work; NOENT or another errno's status when a file cannot be read.
monitor::Result<WebConfig> read_web_config(const std::filesystem::path& file);

// The same from the file's text; `file` names it in errors and places relative paths.
monitor::Result<WebConfig> parse_web_config(std::string_view text,
                                            const std::filesystem::path& file);

}  // namespace exporter
