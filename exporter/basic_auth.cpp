#include "basic_auth.hpp"

#include <crypt.h>

#include <memory>
#include <utility>

namespace exporter {

namespace {

// crypt_r of `key` with `setting`; "" when libcrypt refuses.
std::string crypt_of(const std::string& key, const std::string& setting) {
    auto data = std::make_unique<crypt_data>();
    const char* out = ::crypt_r(key.c_str(), setting.c_str(), data.get());
    if (out == nullptr || out[0] == '*') return "";
    return out;
}

// Equal, in a time that depends on the lengths only.
bool same(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    }
    return diff == 0;
}

// A setting of `prefix` with a salt from libcrypt's own source of randomness.
std::string salted(const char* prefix, unsigned long cost) {
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    const char* s = ::crypt_gensalt_rn(prefix, cost, nullptr, 0, setting, sizeof setting);
    return s != nullptr ? s : "";
}

}  // namespace

BasicAuth::BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {
    if (users_.empty()) return;
    fast_setting_ = salted("$5$", 1000);
    // Unknown users are checked against a hash of the cost the configured users have.
    const std::string& sample = users_.begin()->second;
    const unsigned long cost = std::stoul(sample.substr(4, 2));
    decoy_ = crypt_of("", salted("$2b$", cost));
}

bool BasicAuth::allows(const std::string& user, const std::string& password) {
    const auto known = users_.find(user);
    if (known == users_.end()) {
        ++bcrypt_checks_;
        (void)crypt_of(password, decoy_);
        return false;
    }
    const std::string fast = fast_setting_.empty() ? "" : crypt_of(password, fast_setting_);
    if (const auto p = passed_.find(user); p != passed_.end() && !fast.empty()) {
        if (same(p->second, fast)) return true;
    }
    const std::string& hash = known->second;
    ++bcrypt_checks_;
    if (!same(crypt_of(password, hash), hash)) return false;
    if (!fast.empty()) passed_[user] = fast;
    return true;
}

}  // namespace exporter
