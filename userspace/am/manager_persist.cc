// SPDX-License-Identifier: Apache-2.0
// Manager's state store side: trees and revocations saved, forgotten, restored; apart from lifecycle logic.
#include "am/clock.h"
#include "am/manager.h"
#include "am/tree_config_codec.h"
#include "common/log.h"

namespace inc::am {

Status Manager::PersistTreeLocked(TreeRec& t) {
  if (!store_ || !t.plan || !t.alloc) return Status::Ok();
  StoredTree st;
  st.id = t.id;
  st.key = t.key;
  st.job = t.job;
  st.world = t.world;
  st.state = t.state;
  st.generation = t.generation;
  st.reserved = t.reserved;
  st.reserved_hosts = t.reserved_hosts;
  st.req = t.req;
  for (uint32_t r = 0; r < t.members.world(); ++r) {
    const GroupMembers::Member& m = t.members[r];
    // A member that left keeps its old ranks in memory; they are not its any more.
    if (m.joined)
      st.members.push_back({true, m.spec, m.host_ranks, m.total_ranks, m.owner});
    else
      st.members.push_back({false, m.spec, {}, 0, ""});
  }
  st.plan = *t.plan;
  st.alloc = *t.alloc;
  for (const auto& [sw, cfg] : t.configs) st.configs[sw] = EncodeTreeConfig(cfg);
  st.created_ms = t.created_ms;
  st.activated_ms = t.activated_ms;
  st.moves = t.moves;
  st.last_move_ms = t.last_move_ms;
  st.last_move_reason = t.last_move_reason;
  Status s = store_->PutTree(st, tree_ids_.next());
  if (!s.ok()) return s.WithContext("saving tree " + std::to_string(t.id) + " of job " + t.job);
  t.persisted = true;
  return Status::Ok();
}

// The tree is saved as ACTIVE before anyone is told it is; when that fails it
// stays PENDING (to be dismantled by the caller).
Status Manager::PersistActivationLocked(const TreePtr& t) {
  t->state = TreeState::kActive;
  t->activated_ms = UnixMs();
  Status s = PersistTreeLocked(*t);
  if (!s.ok()) {
    t->state = TreeState::kPending;
    t->activated_ms = 0;
  }
  return s;
}

void Manager::ForgetTreeLocked(TreeRec& t) {
  if (!store_ || !t.persisted) return;
  Status s = store_->DeleteTree(t.id, tree_ids_.next());
  if (!s.ok()) {
    // The tree comes back at the next start and is dismantled then, as its
    // members will not heartbeat.
    LOG_ERROR << "state store: cannot remove dismantled tree " << t.id << " (job " << t.job
              << "): " << s.ToString();
    return;
  }
  t.persisted = false;
}

Status Manager::RestoreTreeLocked(const StoredTree& st, const Clock::time_point& now) {
  const std::string what = "tree " + std::to_string(st.id) + " (job " + st.job + ")";
  if (st.state != TreeState::kActive && !(st.reserved && st.state == TreeState::kPending))
    return FailedPrecondition(what + " is stored in state " + std::to_string(static_cast<int>(st.state)));
  if (st.plan.switches.empty() || st.members.size() != st.world)
    return FailedPrecondition(what + " is stored without switches or members");
  for (const PlanSwitch& ps : st.plan.switches)
    if (!topo_.switches.count(ps.name) || !pool_.HasSwitch(ps.name))
      return FailedPrecondition(what + " uses switch " + ps.name + " that the topology or the store lacks");
  if (job_live_.count(st.job)) return AlreadyExists(what + ": the job has another tree");
  INC_RETURN_IF_ERROR(tree_ids_.Claim(st.id).WithContext(what));
  if (Status s = pool_.Claim(st.plan, st.alloc); !s.ok()) {
    tree_ids_.Free(st.id);
    return s.WithContext(what);
  }
  auto t = std::make_shared<TreeRec>();
  t->id = st.id;
  t->key = st.key;
  t->job = st.job;
  t->world = st.world;
  t->state = st.state;
  t->generation = st.generation;
  t->reserved = st.reserved;
  t->reserved_hosts = st.reserved_hosts;
  t->req = st.req;
  t->members = GroupMembers(st.world);
  for (uint32_t r = 0; r < st.world; ++r) {
    if (st.members[r].joined) {
      t->members.Join(r, st.members[r].spec, next_join_seq_++);
      t->members.SetHostRanks(r, st.members[r].host_ranks, st.members[r].total_ranks);
      t->members.SetOwner(r, st.members[r].owner);
    } else {
      t->members.SetHost(r, st.members[r].spec.host);
    }
  }
  t->members.HeartbeatAll(now);
  t->plan = st.plan;
  t->alloc = st.alloc;
  for (const auto& [sw, bytes] : st.configs) {
    auto cfg = DecodeTreeConfig(bytes);
    if (!cfg) {
      pool_.Free(st.plan, st.alloc);
      tree_ids_.Free(st.id);
      return FailedPrecondition(what + ": the config stored for switch " + sw +
                                " does not parse: " + cfg.status().message());
    }
    t->configs[sw] = std::move(*cfg);
  }
  t->created_ms = st.created_ms;
  t->activated_ms = st.activated_ms;
  t->moves = st.moves;
  t->last_move_ms = st.last_move_ms;
  t->last_move_reason = st.last_move_reason;
  t->persisted = true;
  t->restored = true;
  t->restored_at = now;
  live_[t->id] = t;
  job_live_[t->job] = t->id;
  return Status::Ok();
}

Status Manager::RevokeJobCredentials(const std::string& job, uint64_t now_ms, uint64_t keep_until_ms) {
  std::lock_guard<std::mutex> lk(revoke_mu_);
  const RevokedJob rec{job, now_ms, keep_until_ms};
  if (store_) INC_RETURN_IF_ERROR(store_->PutRevocation(rec).WithContext("state store " + store_->path()));
  revoked_[job] = rec;
  // Revocations whose credentials have all expired stop nothing any more.
  for (auto it = revoked_.begin(); it != revoked_.end();)
    it = it->second.keep_until_ms <= now_ms ? revoked_.erase(it) : std::next(it);
  events_.Append("job_revoked", "job " + job + ": credentials issued until now are refused", 0, "", job);
  return Status::Ok();
}

uint64_t Manager::JobRevokedAt(const std::string& job) {
  std::lock_guard<std::mutex> lk(revoke_mu_);
  auto it = revoked_.find(job);
  return it == revoked_.end() ? 0 : it->second.revoked_ms;
}

Status Manager::Restore() {
  if (!store_) return Status::Ok();
  {
    auto revoked = store_->LoadRevocations(UnixMs());
    if (!revoked) return revoked.status().WithContext("state store " + store_->path());
    std::lock_guard<std::mutex> lk(revoke_mu_);
    for (RevokedJob& r : *revoked) revoked_[r.job] = std::move(r);
  }
  auto state = store_->Load();
  if (!state) return state.status().WithContext("state store " + store_->path());
  std::lock_guard<std::mutex> lk(mu_);
  const auto now = Clock::now();
  for (const StoredSwitch& sw : state->switches) {
    if (!topo_.switches.count(sw.name)) {
      LOG_WARN << "state store: switch " << sw.name << " is not in the topology any more; ignored";
      continue;
    }
    switches_.Restore(sw, now);
    pool_.SetSwitchCapacity(sw.name, sw.slot_capacity);
  }
  tree_ids_.set_next(state->next_tree_id);
  std::string kept;
  size_t dropped = 0;
  for (const StoredTree& st : state->trees) {
    Status s = RestoreTreeLocked(st, now);
    if (s.ok()) {
      kept += (kept.empty() ? "" : ", ") + std::to_string(st.id) + " (job " + st.job + ", generation " +
              std::to_string(st.generation) + ")";
      continue;
    }
    // Its switches remove it when they register and report it.
    LOG_ERROR << "state store: dropping " << s.message();
    TreeRec gone;
    gone.id = st.id;
    gone.job = st.job;
    gone.persisted = true;
    ForgetTreeLocked(gone);
    ++dropped;
  }
  events_.Append(
      "am_restored",
      "state store " + (store_->path().empty() ? std::string("(in memory)") : store_->path()) + ": " +
          std::to_string(state->switches.size()) + " switches, " +
          std::to_string(state->trees.size() - dropped) + " trees restored" +
          (kept.empty() ? "" : ": " + kept) + (dropped ? "; " + std::to_string(dropped) + " dropped" : "") +
          "; members have " + std::to_string(Tuned(&AmOptions::member_heartbeat_timeout_ms)) +
          " ms to heartbeat, switches " + std::to_string(Tuned(&AmOptions::switch_heartbeat_timeout_ms)) +
          " ms to register again");
  return Status::Ok();
}

}  // namespace inc::am
