// SPDX-License-Identifier: Apache-2.0
// Resource accounting: slot ranges, QPNs, tree ids, and nothing left behind
// after many allocate/free cycles (allocator level and through the manager).
#include <gtest/gtest.h>

#include <random>

#include "am/convert.h"
#include "am/manager.h"
#include "am/resources.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "am/tree_builder.h"

namespace inc::am {
namespace {

TEST(RangeAllocatorTest, FirstFitAndCoalescingOnFree) {
  RangeAllocator a(100);
  auto x = a.Allocate(30), y = a.Allocate(30), z = a.Allocate(30);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 30u);
  EXPECT_EQ(*z, 60u);
  EXPECT_EQ(a.free_total(), 10u);
  a.Free(*y, 30);
  auto w = a.Allocate(20);  // first fit: the hole at 30
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 30u);
  auto big = a.Allocate(25);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kResourceExhausted);
  a.Free(*w, 20);
  a.Free(*x, 30);
  a.Free(*z, 30);
  EXPECT_EQ(a.free_total(), 100u);
  EXPECT_EQ(a.fragments(), 1u);
  EXPECT_EQ(a.largest_free(), 100u);
}

TEST(NumberAllocatorTest, ReusesReleasedNumbersAndShrinksTheHighWaterMark) {
  NumberAllocator q(kFirstSwitchQpn, 0xFFFFFF);
  auto a = q.Allocate("qpn"), b = q.Allocate("qpn"), c = q.Allocate("qpn");
  EXPECT_EQ(*a, 0x100u);
  EXPECT_EQ(*c, 0x102u);
  q.Free(*b);
  EXPECT_EQ(*q.Allocate("qpn"), 0x101u);
  q.Free(*a);
  q.Free(0x101);
  q.Free(*c);
  EXPECT_EQ(q.in_use(), 0u);
  EXPECT_EQ(q.high_water(), kFirstSwitchQpn);
}

TEST(TreeIdAllocatorTest, HandsOutIds1To1023AndReusesFreedOnes) {
  TreeIdAllocator ids;
  std::set<uint32_t> seen;
  for (int i = 0; i < 1023; ++i) {
    auto id = ids.Allocate();
    ASSERT_TRUE(id.ok());
    EXPECT_GE(*id, 1u);
    EXPECT_LE(*id, 1023u);
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 1023u);
  auto none = ids.Allocate();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kResourceExhausted);
  ids.Free(77);
  EXPECT_EQ(*ids.Allocate(), 77u);
}

class PoolCycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = testing::MakeFabric(4, 2, 8);
    topo_ = *TopologyFromProto(file_);
    for (const auto& s : file_.switches()) {
      pool_.SetSwitchCapacity(s.name(), 4096);
      auto reg = testing::MakeRegistration(file_, s.name(), "127.0.0.1:1", 4096);
      SwitchView v;
      v.name = s.name();
      v.registered = v.alive = true;
      v.caps = *CapsFromProto(reg.capabilities());
      for (const auto& p : reg.ports()) v.ports[p.name()] = *PortFromProto(p);
      views_[v.name] = v;
    }
  }
  Expected<TreePlan> Plan(const std::vector<std::string>& hosts, uint32_t pool) {
    std::map<std::string, SwitchView> views = views_;
    for (auto& [n, v] : views) pool_.Describe(n, &v);
    std::vector<MemberPlacement> m;
    for (uint32_t r = 0; r < hosts.size(); ++r) m.push_back({r, hosts[r]});
    Requirements req;
    req.pool_size = pool;
    return BuildTreePlan(topo_, views, m, req);
  }
  v1::TopologyFile file_;
  Topology topo_;
  std::map<std::string, SwitchView> views_;
  ResourcePool pool_;
};

TEST_F(PoolCycleTest, ThousandAllocateFreeCyclesLeaveNothingBehind) {
  std::mt19937 rng(7);
  struct Live {
    TreePlan plan;
    TreeAlloc alloc;
  };
  std::vector<Live> live;
  const std::vector<std::vector<std::string>> shapes = {
      {"h00_0", "h00_1"}, {"h00_2", "h01_0", "h02_5"}, {"h03_7"}, {"h01_1", "h02_1", "h03_1", "h00_3"}};
  for (int cycle = 0; cycle < 1000; ++cycle) {
    // Up to three trees alive at once, freed in random order.
    if (live.size() < 3) {
      auto plan = Plan(shapes[rng() % shapes.size()], 64 + rng() % 512);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      auto alloc = pool_.Allocate(*plan);
      ASSERT_TRUE(alloc.ok()) << alloc.status().ToString();
      // QPNs are unique per switch across live trees.
      for (const auto& l : live) {
        for (const auto& [sw, sa] : l.alloc.per_switch) {
          if (!alloc->per_switch.count(sw)) continue;
          for (uint32_t q : alloc->per_switch.at(sw).child_qpns) {
            for (uint32_t old : sa.child_qpns) ASSERT_NE(q, old);
          }
        }
      }
      live.push_back({std::move(*plan), std::move(*alloc)});
    }
    if (live.size() == 3 || rng() % 2) {
      size_t i = rng() % live.size();
      pool_.Free(live[i].plan, live[i].alloc);
      live.erase(live.begin() + i);
    }
  }
  for (auto& l : live) pool_.Free(l.plan, l.alloc);
  for (const auto& s : file_.switches()) {
    const SwitchResources* r = pool_.Get(s.name());
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->slots.free_total(), 4096u) << s.name();
    EXPECT_EQ(r->slots.fragments(), 1u) << s.name();
    EXPECT_EQ(r->qpns.in_use(), 0u) << s.name();
    EXPECT_EQ(r->qpns.high_water(), kFirstSwitchQpn) << s.name();
    EXPECT_EQ(r->trees, 0u) << s.name();
  }
}

TEST_F(PoolCycleTest, FailedAllocationGivesBackWhatItTook) {
  pool_.SetSwitchCapacity("leaf01", 4096);
  auto plan = Plan({"h00_0", "h01_0"}, 256);
  ASSERT_TRUE(plan.ok());
  // Make the last switch of the plan unable to fit the pool.
  auto hog = pool_.Allocate(*Plan({"h01_1"}, 4000));
  ASSERT_TRUE(hog.ok());
  auto alloc = pool_.Allocate(*plan);
  ASSERT_FALSE(alloc.ok());
  EXPECT_EQ(alloc.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(pool_.Get("spine0")->slots.free_total(), 4096u);
  EXPECT_EQ(pool_.Get("leaf00")->slots.free_total(), 4096u);
  EXPECT_EQ(pool_.Get("spine0")->qpns.in_use(), 0u);
}

TEST(ManagerResourcesTest, ThousandCreateDestroyCyclesReturnEveryResource) {
  auto file = testing::MakeFabric(4, 2, 4);
  AmOptions opts;
  opts.max_dismantled = 16;
  Manager m(opts, *TopologyFromProto(file));
  for (const auto& s : file.switches()) {
    auto r = m.RegisterSwitch(
        *RegistrationFromProto(testing::MakeRegistration(file, s.name(), "127.0.0.1:9", 2048)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const Manager::Usage before = m.ResourceUsage();
  for (int cycle = 0; cycle < 1000; ++cycle) {
    CreateTreeRequest c;
    c.job = "job" + std::to_string(cycle);
    c.hosts = {"h00_0", "h01_1", "h02_2", "h03_3"};
    c.ask.pool_size = 128 + cycle % 300;
    auto t = m.CreateTree(c);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->switches.size(), 5u);
    ASSERT_TRUE(m.DestroyTree(t->tree_id, "").ok());
  }
  const Manager::Usage after = m.ResourceUsage();
  EXPECT_EQ(after.live_trees, 0u);
  EXPECT_EQ(after.tree_ids, before.tree_ids);
  EXPECT_EQ(after.qpns, before.qpns);
  EXPECT_EQ(after.free_slots, before.free_slots);
  // Dismantled trees stay visible (bounded), with their state.
  auto list = m.ListTrees();
  ASSERT_EQ(list.size(), 16u);
  EXPECT_EQ(list[15].state, TreeState::kDestroyed);
  EXPECT_EQ(list[15].job, "job999");
}

}  // namespace
}  // namespace inc::am
