// SPDX-License-Identifier: Apache-2.0
#include "am/resources.h"

#include <algorithm>

namespace inc::am {

RangeAllocator::RangeAllocator(uint32_t capacity) : capacity_(capacity), free_total_(capacity) {
  if (capacity > 0) free_[0] = capacity;
}

Expected<uint32_t> RangeAllocator::Allocate(uint32_t count) {
  if (count == 0) return InvalidArgument("cannot allocate 0 slots");
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < count) continue;
    uint32_t base = it->first;
    uint32_t rest = it->second - count;
    free_.erase(it);
    if (rest > 0) free_[base + count] = rest;
    free_total_ -= count;
    return base;
  }
  return ResourceExhausted("no " + std::to_string(count) + " contiguous free slots (" +
                           std::to_string(free_total_) + " free of " + std::to_string(capacity_) +
                           ", largest block " + std::to_string(largest_free()) + ")");
}

Status RangeAllocator::Claim(uint32_t base, uint32_t count) {
  if (count == 0) return InvalidArgument("cannot claim 0 slots");
  auto it = free_.upper_bound(base);
  if (it != free_.begin()) {
    --it;
    const uint32_t fbase = it->first, fcount = it->second;
    if (fbase <= base && static_cast<uint64_t>(base) + count <= static_cast<uint64_t>(fbase) + fcount) {
      free_.erase(it);
      if (base > fbase) free_[fbase] = base - fbase;
      if (base + count < fbase + fcount) free_[base + count] = fbase + fcount - (base + count);
      free_total_ -= count;
      return Status::Ok();
    }
  }
  return FailedPrecondition("slots " + std::to_string(base) + ".." + std::to_string(base + count - 1) +
                            " are not all free (capacity " + std::to_string(capacity_) + ")");
}

void RangeAllocator::Free(uint32_t base, uint32_t count) {
  if (count == 0) return;
  auto [it, inserted] = free_.emplace(base, count);
  if (!inserted) return;  // double free: keep the accounting consistent
  free_total_ += count;
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

uint32_t RangeAllocator::largest_free() const {
  uint32_t best = 0;
  for (const auto& [base, count] : free_) best = std::max(best, count);
  return best;
}

Expected<uint32_t> NumberAllocator::Allocate(const char* what) {
  if (!released_.empty()) {
    uint32_t n = *released_.begin();
    released_.erase(released_.begin());
    return n;
  }
  if (next_ > last_) return ResourceExhausted(std::string("no free ") + what);
  return next_++;
}

Status NumberAllocator::Claim(uint32_t n, const char* what) {
  if (n < first_ || n > last_)
    return OutOfRange(std::string(what) + " " + std::to_string(n) + " is outside " + std::to_string(first_) +
                      ".." + std::to_string(last_));
  if (n >= next_) {
    for (uint32_t k = next_; k < n; ++k) released_.insert(k);
    next_ = n + 1;
    return Status::Ok();
  }
  if (released_.erase(n)) return Status::Ok();
  return FailedPrecondition(std::string(what) + " " + std::to_string(n) + " is already in use");
}

void NumberAllocator::Free(uint32_t n) {
  if (n < first_ || n >= next_) return;
  if (n + 1 == next_) {
    --next_;
    // Shrink the high-water mark over trailing released numbers.
    while (next_ > first_ && released_.count(next_ - 1)) released_.erase(--next_);
    return;
  }
  released_.insert(n);
}

Expected<uint32_t> TreeIdAllocator::Allocate() {
  for (uint32_t i = 0; i < kLast - kFirst + 1; ++i) {
    uint32_t id = next_;
    next_ = next_ == kLast ? kFirst : next_ + 1;
    if (used_.insert(id).second) return id;
  }
  return ResourceExhausted("all " + std::to_string(kLast - kFirst + 1) + " tree ids are in use");
}

Status TreeIdAllocator::Claim(uint32_t id) {
  if (id < kFirst || id > kLast)
    return OutOfRange("tree id " + std::to_string(id) + " is outside " + std::to_string(kFirst) + ".." +
                      std::to_string(kLast));
  if (!used_.insert(id).second)
    return FailedPrecondition("tree id " + std::to_string(id) + " is already in use");
  return Status::Ok();
}

void TreeIdAllocator::Free(uint32_t id) {
  used_.erase(id);
}

bool ResourcePool::SetSwitchCapacity(const std::string& name, uint32_t slot_capacity) {
  auto it = switches_.find(name);
  if (it == switches_.end()) {
    switches_[name].slots = RangeAllocator(slot_capacity);
    return true;
  }
  SwitchResources& r = it->second;
  if (r.slots.capacity() == slot_capacity) return true;
  if (r.trees != 0) return false;
  r.slots = RangeAllocator(slot_capacity);
  return true;
}

const SwitchResources* ResourcePool::Get(const std::string& name) const {
  auto it = switches_.find(name);
  return it == switches_.end() ? nullptr : &it->second;
}

void ResourcePool::Describe(const std::string& name, SwitchView* view) const {
  const SwitchResources* r = Get(name);
  if (!r) return;
  view->free_slots = r->slots.free_total();
  view->largest_free_block = r->slots.largest_free();
  view->trees = r->trees;
}

Expected<TreeAlloc> ResourcePool::Allocate(const TreePlan& plan) {
  TreeAlloc alloc;
  Status failure;
  for (const PlanSwitch& ps : plan.switches) {
    auto it = switches_.find(ps.name);
    if (it == switches_.end()) {
      failure = FailedPrecondition("switch \"" + ps.name + "\" has no resources (not registered)");
      break;
    }
    SwitchResources& r = it->second;
    SwitchAlloc& sa = alloc.per_switch[ps.name];
    auto base = r.slots.Allocate(plan.pool_size);
    if (!base) {
      alloc.per_switch.erase(ps.name);
      failure = base.status().WithContext("switch \"" + ps.name + "\"");
      break;
    }
    sa.slot_base = *base;
    ++r.trees;
    bool ok = true;
    for (size_t i = 0; i < ps.children.size() && ok; ++i) {
      auto q = r.qpns.Allocate("switch QPNs");
      if (!q) {
        failure = q.status().WithContext("switch \"" + ps.name + "\"");
        ok = false;
      } else {
        sa.child_qpns.push_back(*q);
      }
    }
    if (ok && ps.role == TreeRole::kLeaf) {
      auto q = r.qpns.Allocate("switch QPNs");
      if (!q) {
        failure = q.status().WithContext("switch \"" + ps.name + "\"");
        ok = false;
      } else {
        sa.parent_qpn = *q;
      }
    }
    if (!ok) break;
  }
  if (!failure.ok()) {
    Free(plan, alloc);
    return failure;
  }
  return alloc;
}

Status ResourcePool::Claim(const TreePlan& plan, const TreeAlloc& alloc) {
  TreeAlloc taken;  // what to give back if a later claim fails
  Status failure;
  for (const auto& [name, sa] : alloc.per_switch) {
    auto it = switches_.find(name);
    if (it == switches_.end()) {
      failure = FailedPrecondition("switch \"" + name + "\" has no resources (unknown)");
      break;
    }
    SwitchResources& r = it->second;
    failure = r.slots.Claim(sa.slot_base, plan.pool_size);
    if (!failure.ok()) break;
    SwitchAlloc& t = taken.per_switch[name];
    t.slot_base = sa.slot_base;
    ++r.trees;
    std::vector<uint32_t> qpns = sa.child_qpns;
    if (sa.parent_qpn) qpns.push_back(sa.parent_qpn);
    for (uint32_t q : qpns) {
      failure = r.qpns.Claim(q, "switch QPN");
      if (!failure.ok()) break;
      t.child_qpns.push_back(q);
    }
    if (!failure.ok()) break;
  }
  if (!failure.ok()) {
    Free(plan, taken);
    return failure;
  }
  return Status::Ok();
}

void ResourcePool::Free(const TreePlan& plan, const TreeAlloc& alloc) {
  for (const auto& [name, sa] : alloc.per_switch) {
    auto it = switches_.find(name);
    if (it == switches_.end()) continue;
    SwitchResources& r = it->second;
    r.slots.Free(sa.slot_base, plan.pool_size);
    if (r.trees > 0) --r.trees;
    for (uint32_t q : sa.child_qpns) r.qpns.Free(q);
    if (sa.parent_qpn) r.qpns.Free(sa.parent_qpn);
  }
}

}  // namespace inc::am
