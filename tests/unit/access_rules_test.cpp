// The access rules of the methods' descriptors (varlink_idl_test holds the descriptors to the
// interface files): reading is open to whoever reaches the socket, control needs root, the
// daemon's own user or the control group; a method without a descriptor is refused.
#include "access_rules.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>

#include "monitor/protocol/varlink_idl.hpp"
#include "varlink_server.hpp"

namespace monitord {
namespace {

Peer peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
    Peer p;
    p.cred.uid = uid;
    p.cred.gid = gid;
    p.cred.pid = 4242;
    p.groups = std::move(groups);
    return p;
}

std::string message_of(const monitor::varlink::Reply& r) {
    return r.parameters.value("message", std::string{});
}

// A uid that is neither root nor the test's own.
constexpr uid_t kStranger = 54321;
constexpr gid_t kStrangersGroup = 54321;
constexpr gid_t kControlGroup = 4711;

TEST(AccessTable, CountingAndSamplingControlAndEverythingElseReads) {
    const std::set<std::string_view> control = {
        "io.monitord.Monitor.CollectCounters", "io.monitord.Monitor.StartCounters",
        "io.monitord.Monitor.StopCounters",    "io.monitord.Monitor.ResetCounters",
        "io.monitord.Monitor.PauseCounters",   "io.monitord.Monitor.ResumeCounters",
        "io.monitord.Monitor.Profile",         "io.monitord.Monitor.WatchOverflows"};
    for (const auto* rule : monitor::protocol::method_descriptors()) {
        EXPECT_EQ(rule->access, control.contains(rule->qualified) ? Access::Control : Access::Read)
            << rule->qualified;
    }
}

TEST(AccessRulesTest, ReadingIsOpenToAnyone) {
    AccessRules rules;
    for (const auto* rule : monitor::protocol::method_descriptors()) {
        if (rule->access != Access::Read) continue;
        EXPECT_FALSE(rules.refusal(rule->qualified, peer(kStranger, kStrangersGroup)))
            << rule->qualified;
    }
}

TEST(AccessRulesTest, ControlNeedsRootOrTheDaemonsUserAndTheRefusalSaysWhatWouldDo) {
    AccessRules rules;
    constexpr std::string_view kStart = "io.monitord.Monitor.StartCounters";
    EXPECT_FALSE(rules.refusal(kStart, peer(0, 0)));
    EXPECT_FALSE(rules.refusal(kStart, peer(::geteuid(), ::getegid())));
    auto refused = rules.refusal(kStart, peer(kStranger, kStrangersGroup));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->error, "io.monitord.Monitor.PermissionDenied");
    const std::string m = message_of(*refused);
    EXPECT_NE(m.find("counting needs root (monitord.conf's [access] control-group"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("uid 54321"), std::string::npos) << m;
    EXPECT_NE(m.find("monctl perf stat -- CMD"), std::string::npos) << m;

    auto sampling = rules.refusal("io.monitord.Monitor.Profile", peer(kStranger, kStrangersGroup));
    ASSERT_TRUE(sampling);
    const std::string s = message_of(*sampling);
    EXPECT_NE(s.find("sampling needs root"), std::string::npos) << s;
    EXPECT_NE(s.find("`perf record` samples your own command"), std::string::npos) << s;
}

TEST(AccessRulesTest, TheControlGroupMayControlByItsPrimaryOrASupplementaryGroup) {
    AccessRules rules;
    rules.set_control_group(kControlGroup, "counters");
    // The group database lists the stranger in the control group.
    rules.set_group_lookup([](uid_t u, gid_t g) { return u == kStranger && g == kControlGroup; });
    constexpr std::string_view kStop = "io.monitord.Monitor.StopCounters";
    EXPECT_FALSE(rules.refusal(kStop, peer(kStranger, kControlGroup)));
    EXPECT_FALSE(rules.refusal(kStop, peer(kStranger, kStrangersGroup, {7, kControlGroup})));
    auto refused = rules.refusal(kStop, peer(kStranger, kStrangersGroup, {7}));
    ASSERT_TRUE(refused);
    EXPECT_NE(message_of(*refused).find("root or membership of group 'counters'"),
              std::string::npos)
        << message_of(*refused);
    // Taken back (a reload without control-group): root only again.
    rules.set_control_group(std::nullopt, "");
    EXPECT_TRUE(rules.refusal(kStop, peer(kStranger, kControlGroup)));
}

TEST(AccessRulesTest, AMemberRemovedFromTheGroupLosesControlAtItsNextCall) {
    AccessRules rules;
    rules.set_control_group(kControlGroup, "counters");
    bool listed = true;
    int lookups = 0;
    rules.set_group_lookup([&](uid_t u, gid_t g) {
        ++lookups;
        return listed && u == kStranger && g == kControlGroup;
    });
    constexpr std::string_view kStop = "io.monitord.Monitor.StopCounters";
    // Its process holds the group (from its login) on the same connection throughout.
    const Peer member = peer(kStranger, kStrangersGroup, {kControlGroup});
    EXPECT_FALSE(rules.refusal(kStop, member));
    listed = false;  // gpasswd -d stranger counters
    auto refused = rules.refusal(kStop, member);
    ASSERT_TRUE(refused);
    const std::string m = message_of(*refused);
    EXPECT_NE(m.find("the group database no longer lists uid 54321 in it"), std::string::npos) << m;
    EXPECT_EQ(lookups, 2) << "looked up at each call of a control method";
    // Reading needs no membership, and looks nothing up.
    EXPECT_FALSE(rules.refusal("io.monitord.Monitor.GetLoading", member));
    EXPECT_EQ(lookups, 2);
    // Credentials without the group are not enough either, whatever the database says.
    listed = true;
    EXPECT_TRUE(rules.refusal(kStop, peer(kStranger, kStrangersGroup, {7})));
}

TEST(AccessRulesTest, TheGroupDatabaseListsUsersByPrimaryAndSupplementaryGroup) {
    // root's primary group is root (0) on every Debian system; nobody is in no group of
    // root's; a uid without a passwd entry is in no group.
    EXPECT_TRUE(listed_in_group(0, 0));
    EXPECT_FALSE(listed_in_group(65534, 0));
    EXPECT_FALSE(listed_in_group(kStranger, kStrangersGroup));
}

TEST(AccessRulesTest, AMethodWithoutAnEntryIsRefusedToEveryone) {
    AccessRules rules;
    for (auto method : {"io.monitord.Monitor.SetWatchdog", "org.example.Other.Call"}) {
        auto refused = rules.refusal(method, peer(0, 0));
        ASSERT_TRUE(refused) << method;
        EXPECT_NE(message_of(*refused).find("has no access rule"), std::string::npos)
            << message_of(*refused);
    }
    EXPECT_EQ(rules.refusal("org.example.Other.Call", peer(0, 0))->error,
              "org.varlink.service.PermissionDenied");
}

}  // namespace
}  // namespace monitord
