// monctl's exit statuses, as monctl(1) gives them: 0 done, 1 an error (the daemon cannot be
// reached, a call failed), 2 a usage error (a bad option or value).
#pragma once

namespace monctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

}  // namespace monctl
