// Basic authentication against the bcrypt hashes of the web config's basic_auth_users.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace exporter {

class BasicAuth {
  public:
    // user -> bcrypt hash, as WebConfig::users holds them (checked there).
    explicit BasicAuth(std::map<std::string, std::string> users);

    // Whether any user is configured: none means every request is let in.
    bool required() const { return !users_.empty(); }

    // Whether `password` is `user`'s. A bcrypt check takes tens of milliseconds and Prometheus
    // sends the same credentials every scrape: a password that passed is remembered as a
    // salted SHA-256 crypt of it (about 0.3 ms to check), never in the clear, until another
    // passes for that user. An unknown user costs a bcrypt check too, so that timing does not
    // tell which users exist.
    bool allows(const std::string& user, const std::string& password);

    // How many passwords were checked by bcrypt (not from what was remembered).
    std::uint64_t bcrypt_checks() const { return bcrypt_checks_; }

  private:
    std::map<std::string, std::string> users_;
    std::map<std::string, std::string> passed_;  // user -> fast crypt of the last password
    std::string fast_setting_;                   // "$5$rounds=1000$<salt of this run>$"
    std::string decoy_;                          // a bcrypt hash for unknown users
    std::uint64_t bcrypt_checks_ = 0;
};

}  // namespace exporter
