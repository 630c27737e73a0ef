// SPDX-License-Identifier: Apache-2.0
// Resource accounting: tree ids, switch-side QPNs, slot ranges. The AM is the
// authority for every switch's allocation; a tree's resources are taken
// together and given back together.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "am/model.h"
#include "common/status.h"

namespace inc::am {

// First-fit allocator of contiguous ranges in [0, capacity), free ranges
// coalesced on release.
class RangeAllocator {
 public:
  explicit RangeAllocator(uint32_t capacity = 0);
  Expected<uint32_t> Allocate(uint32_t count);
  // Takes exactly [base, base + count), e.g. a range a restored tree holds.
  Status Claim(uint32_t base, uint32_t count);
  void Free(uint32_t base, uint32_t count);
  uint32_t capacity() const { return capacity_; }
  uint32_t free_total() const { return free_total_; }
  uint32_t largest_free() const;
  size_t fragments() const { return free_.size(); }

 private:
  uint32_t capacity_;
  uint32_t free_total_;
  std::map<uint32_t, uint32_t> free_;  // base -> count
};

// Unique numbers from [first, last]: the lowest released number first, then
// fresh ones.
class NumberAllocator {
 public:
  NumberAllocator(uint32_t first, uint32_t last) : first_(first), last_(last), next_(first) {}
  Expected<uint32_t> Allocate(const char* what);
  // Takes exactly n (a number a restored tree holds).
  Status Claim(uint32_t n, const char* what);
  void Free(uint32_t n);
  size_t in_use() const { return (next_ - first_) - released_.size(); }
  uint32_t high_water() const { return next_; }

 private:
  uint32_t first_, last_, next_;
  std::set<uint32_t> released_;
};

// Tree ids 1..1023, handed out round-robin so a freed id is not reused at
// once (stale packets of a dismantled tree then hit no tree).
class TreeIdAllocator {
 public:
  static constexpr uint32_t kFirst = 1, kLast = 1023;
  Expected<uint32_t> Allocate();
  // Takes exactly id (a restored tree's).
  Status Claim(uint32_t id);
  void Free(uint32_t id);
  size_t in_use() const { return used_.size(); }
  // Where the round-robin continues; persisted so that a restarted AM does
  // not hand out the ids of trees it just dismantled again at once.
  uint32_t next() const { return next_; }
  void set_next(uint32_t id) {
    if (id >= kFirst && id <= kLast) next_ = id;
  }

 private:
  std::set<uint32_t> used_;
  uint32_t next_ = kFirst;
};

// Switch-side QPNs start here (below are reserved for special QPs in RoCE).
constexpr uint32_t kFirstSwitchQpn = 0x100;

struct SwitchResources {
  RangeAllocator slots;
  NumberAllocator qpns{kFirstSwitchQpn, 0xFFFFFF};
  uint32_t trees = 0;
};

class ResourcePool {
 public:
  // Adds a switch or updates its slot capacity (only while nothing is
  // allocated on it; otherwise the old capacity stays and false is returned).
  bool SetSwitchCapacity(const std::string& name, uint32_t slot_capacity);
  bool HasSwitch(const std::string& name) const { return switches_.count(name) != 0; }
  const SwitchResources* Get(const std::string& name) const;

  // Fills the accounting fields of a view.
  void Describe(const std::string& name, SwitchView* view) const;

  // Slots and QPNs for every switch of the plan; all or nothing.
  Expected<TreeAlloc> Allocate(const TreePlan& plan);
  // Takes exactly the resources `alloc` names (a tree restored from the
  // store); all or nothing.
  Status Claim(const TreePlan& plan, const TreeAlloc& alloc);
  void Free(const TreePlan& plan, const TreeAlloc& alloc);

 private:
  std::map<std::string, SwitchResources> switches_;
};

}  // namespace inc::am
