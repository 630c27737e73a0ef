// SPDX-License-Identifier: Apache-2.0
// Manager's core: tree lifecycle, switches, operators; manager_{persist,mover,roster}.cc hold the rest.
#include "am/manager.h"

#include <algorithm>
#include <set>

#include "am/clock.h"
#include "am/parallel.h"
#include "am/tree_builder.h"
#include "common/log.h"

namespace inc::am {

Manager::Manager(AmOptions options, Topology topology, std::unique_ptr<Store> store)
    : opts_(std::move(options)),
      topo_(std::move(topology)),
      clients_(opts_.switch_rpc_timeout_ms, opts_.switch_credentials),
      store_(std::move(store)),
      events_(opts_.max_events),
      rng_(std::random_device{}()) {}

void Manager::Retune(const AmOptions& next) {
  std::lock_guard<std::mutex> lock(tune_mu_);
  for (uint32_t AmOptions::*field : kTunableFields) opts_.*field = next.*field;
}

uint32_t Manager::Tuned(uint32_t AmOptions::*field) const {
  std::lock_guard<std::mutex> lock(tune_mu_);
  return opts_.*field;
}

Manager::~Manager() {
  Stop();
}

void Manager::Start() {
  monitor_ = std::thread([this] { MonitorLoop(); });
  worker_ = std::thread([this] { WorkerLoop(); });
}

void Manager::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  events_.Close();
  {
    std::lock_guard<std::mutex> lk(work_mu_);
    work_stop_ = true;
  }
  work_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (worker_.joinable()) worker_.join();
}

Expected<Requirements> Manager::RequirementsFor(const TreeAsk& ask) const {
  Requirements r;
  r.pool_size = ask.pool_size ? ask.pool_size : Tuned(&AmOptions::default_pool_size);
  if (r.pool_size > 0xFFFF)
    return InvalidArgument("pool_size " + std::to_string(r.pool_size) +
                           (ask.pool_size ? "" : " (the AM's default_pool_size)") + " is not in 1..65535");
  r.elems_per_packet = ask.elems_per_packet;
  r.default_elems = Tuned(&AmOptions::default_elems_per_packet);
  r.dtype_mask = ask.dtype_mask;
  r.op_mask = ask.op_mask;
  r.coll_mask = ask.coll_mask;
  return r;
}

// Plans the tree over what the switches report now and takes its slots and
// QPNs, whichever of the two it lacks: the one path by which a group whose
// members all joined and an operator's reservation get their resources.
Status Manager::PlaceLocked(TreeRec& t) {
  if (!t.plan) {
    std::vector<MemberPlacement> placements;
    for (uint32_t r = 0; r < t.world; ++r) placements.push_back({r, t.members[r].spec.host});
    auto plan = BuildTreePlan(topo_, switches_.Views(pool_), placements, t.req);
    if (!plan) return plan.status().WithContext("building tree for job " + t.job);
    t.plan = std::move(*plan);
  }
  if (!t.alloc) {
    auto alloc = pool_.Allocate(*t.plan);
    if (!alloc) return alloc.status().WithContext("allocating tree for job " + t.job);
    t.alloc = std::move(*alloc);
  }
  return Status::Ok();
}

Manager::TreePtr Manager::FindTreeLocked(uint32_t tree_id, const std::string& job) const {
  if (tree_id != 0) {
    auto it = live_.find(tree_id);
    if (it != live_.end() && (job.empty() || it->second->job == job)) return it->second;
    for (auto d = dismantled_.rbegin(); d != dismantled_.rend(); ++d)
      if ((*d)->id == tree_id && (job.empty() || (*d)->job == job)) return *d;
    return nullptr;
  }
  auto j = job_live_.find(job);
  if (j != job_live_.end()) return live_.at(j->second);
  for (auto d = dismantled_.rbegin(); d != dismantled_.rend(); ++d)
    if ((*d)->job == job) return *d;
  return nullptr;
}

bool Manager::WantedOnLocked(const TreeRec& t, const std::string& switch_name) const {
  return !Dismantled(t.state) && t.configs.count(switch_name);
}

// Frees every resource of a tree and moves it to the dismantled list; `ops`
// receives RemoveTree for each switch it was (being) programmed on.
void Manager::ReleaseLocked(TreePtr t, Ops* ops) {
  for (const auto& [sw, cfg] : t->configs) {
    const std::string address = switches_.AgentAddress(sw);
    if (address.empty()) continue;
    SwitchOp op;
    op.switch_name = sw;
    op.address = address;
    op.tree_id = t->id;
    ops->push_back(std::move(op));
  }
  if (t->plan && t->alloc) pool_.Free(*t->plan, *t->alloc);
  t->alloc.reset();
  auto it = live_.find(t->id);
  if (it != live_.end() && it->second == t) {
    live_.erase(it);
    tree_ids_.Free(t->id);
    auto j = job_live_.find(t->job);
    if (j != job_live_.end() && j->second == t->id) job_live_.erase(j);
    dismantled_.push_back(t);
    while (dismantled_.size() > opts_.max_dismantled) dismantled_.pop_front();
  }
  cv_.notify_all();
}

void Manager::DismantleLocked(TreePtr t, TreeState state, const std::string& reason, Ops* ops) {
  if (Dismantled(t->state)) return;
  t->state = state;
  t->reason = reason;
  t->dismantled_ms = UnixMs();
  ForgetTreeLocked(*t);
  if (t->failure.ok())
    t->failure =
        Aborted("tree " + std::to_string(t->id) + " of job " + t->job + " was dismantled: " + reason);
  events_.Append(state == TreeState::kFailed ? "tree_failed" : "tree_destroyed",
                 "tree " + std::to_string(t->id) + " (job " + t->job + "): " + reason, t->id, "", t->job);
  // A tree being programmed is released by its programming thread when the
  // switch calls return, so no RemoveTree overtakes a ConfigureTree.
  if (!t->programming) ReleaseLocked(t, ops);
  cv_.notify_all();
}

Expected<std::map<std::string, TreeConfig>> Manager::ConfigsLocked(const TreeRec& t) const {
  const TreePlan& plan = *t.plan;
  const TreeAlloc& alloc = *t.alloc;
  std::map<std::string, TreeConfig> out;
  for (const PlanSwitch& ps : plan.switches) {
    const SwitchAlloc& sa = alloc.per_switch.at(ps.name);
    TreeConfig c;
    c.tree_id = t.id;
    c.key = t.key;
    c.role = ps.role;
    c.pool_size = plan.pool_size;
    c.elems_per_packet = plan.elems_per_packet;
    c.slot_base = sa.slot_base;
    c.dtype_mask = plan.dtype_mask;
    c.op_mask = plan.op_mask;
    c.coll_mask = plan.coll_mask;
    c.rank_at_parent = ps.rank_at_parent;
    c.job = t.job;
    c.generation = t.generation;
    for (size_t i = 0; i < ps.children.size(); ++i) {
      const PlanChild& ch = ps.children[i];
      EndpointConfig e;
      e.port = ch.port;
      e.switch_qpn = sa.child_qpns[i];
      e.member_lo = ch.member_lo;
      e.member_hi = ch.member_hi;
      e.peer_name = ch.peer;
      if (!ch.is_switch) {
        const MemberSpec& m = t.members[ch.rank].spec;
        e.peer_mac = m.mac;
        e.peer_ip = m.ip;
        e.peer_qpn = m.qpn;
        e.rkey = m.rkey;
        e.va_base = m.va_base;
        e.slot_stride = m.slot_stride;
      } else {
        auto p = switches_.Port(ch.peer, ch.peer_port);
        if (!p) return p.status();
        e.peer_mac = p->mac;
        e.peer_ip = p->ip;
        e.peer_qpn = alloc.per_switch.at(ch.peer).parent_qpn;
      }
      c.children.push_back(std::move(e));
    }
    if (ps.role == TreeRole::kLeaf) {
      auto p = switches_.Port(ps.parent, ps.parent_peer_port);
      if (!p) return p.status();
      EndpointConfig e;
      e.port = ps.parent_port;
      e.peer_mac = p->mac;
      e.peer_ip = p->ip;
      e.peer_qpn = alloc.per_switch.at(ps.parent).child_qpns[ps.rank_at_parent];
      e.switch_qpn = sa.parent_qpn;
      e.peer_name = ps.parent;
      c.parent = std::move(e);
    }
    out.emplace(ps.name, std::move(c));
  }
  return out;
}

Expected<Assignment> Manager::AssignmentLocked(const TreeRec& t, uint32_t rank) const {
  const TreePlan& plan = *t.plan;
  const MemberSlot& slot = plan.member_slot[rank];
  const PlanSwitch& ps = plan.switches[slot.switch_index];
  const PlanChild& ch = ps.children[slot.rank_at_switch];
  auto port = switches_.Port(ps.name, ch.port);
  if (!port) return FailedPrecondition("switch " + ps.name + " no longer reports port " + ch.port);
  Assignment a;
  a.tree_id = t.id;
  a.key = t.key;
  a.pool_size = plan.pool_size;
  a.elems_per_packet = plan.elems_per_packet;
  a.rank_at_switch = slot.rank_at_switch;
  a.member_index = plan.member_index_of_rank[rank];
  a.switch_name = ps.name;
  a.switch_ip = port->ip;
  a.switch_mac = port->mac;
  a.switch_qpn = t.alloc->per_switch.at(ps.name).child_qpns[slot.rank_at_switch];
  a.slot_stride = t.members[rank].spec.slot_stride;
  a.heartbeat_interval_ms = opts_.member_heartbeat_interval_ms;
  a.member_index_of_rank = plan.member_index_of_rank;
  a.dtype_mask = plan.dtype_mask;
  a.op_mask = plan.op_mask;
  a.coll_mask = plan.coll_mask;
  a.world = t.world;
  return a;
}

void Manager::RunOps(Ops ops) {
  ParallelFor(ops.size(), kSwitchRpcWidth, [&](size_t i) {
    const SwitchOp& op = ops[i];
    Status s =
        op.configure ? clients_.Configure(op.address, op.config) : clients_.Remove(op.address, op.tree_id);
    // A switch that no longer holds the tree (restarted, or its ConfigureTree
    // failed) has nothing to remove.
    if (!op.configure && s.code() == Code::kNotFound) s = Status::Ok();
    if (!s.ok()) {
      LOG_WARN << (op.configure ? "re-configuring" : "removing") << " tree " << op.tree_id << " on switch "
               << op.switch_name << ": " << s.ToString();
    } else {
      LOG_DEBUG << (op.configure ? "configured" : "removed") << " tree " << op.tree_id << " on switch "
                << op.switch_name;
    }
  });
}

void Manager::RunOpsAsync(Ops ops) {
  if (ops.empty()) return;
  {
    std::lock_guard<std::mutex> lk(work_mu_);
    work_.push_back(std::move(ops));
  }
  work_cv_.notify_one();
}

void Manager::WorkerLoop() {
  for (;;) {
    Ops ops;
    {
      std::unique_lock<std::mutex> lk(work_mu_);
      work_cv_.wait(lk, [&] { return work_stop_ || !work_.empty(); });
      if (work_.empty()) return;
      ops = std::move(work_.front());
      work_.pop_front();
    }
    RunOps(std::move(ops));
  }
}

// --------------------------------------------------------------- members

Expected<Assignment> Manager::JoinGroup(const JoinRequest& req, const Cancelled& cancelled) {
  Expected<Assignment> got = JoinGroupWait(req, cancelled);
  const Code code = got.ok() ? Code::kOk : got.status().code();
  {
    std::lock_guard<std::mutex> lk(joins_mu_);
    ++joins_by_code_[CodeName(code)];
  }
  if (!got.ok()) {
    LOG_WARN_F({"job", req.job}, {"rank", req.rank})
        << "rank " << req.rank << " of job " << req.job << ": JoinGroup failed, " << got.status().ToString()
        << " (its collectives cannot run on the switches: libincmpi, coll/incin, NCCL and torch fall back)";
  } else {
    LOG_INFO_F({"tree", got->tree_id}, {"job", req.job}, {"switch", got->switch_name}, {"rank", req.rank})
        << "rank " << req.rank << " of job " << req.job << " joined tree " << got->tree_id << " at switch "
        << got->switch_name;
  }
  return got;
}

Expected<Assignment> Manager::JoinGroupWait(const JoinRequest& req, const Cancelled& cancelled) {
  INC_RETURN_IF_ERROR(CheckJoin(req));
  auto reqs = RequirementsFor(req.ask);
  if (!reqs) return reqs.status();
  auto spec = ResolveMember(topo_, req.member);
  if (!spec) return spec.status();

  const uint32_t rank = req.rank;
  const std::string rank_name = "rank " + std::to_string(rank) + " of job " + req.job;
  TreePtr t;
  uint64_t seq = 0;
  bool complete = false;
  Ops stale;  // removing a finished tree of the same job
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    auto j = job_live_.find(req.job);
    if (j != job_live_.end()) {
      TreePtr old = live_.at(j->second);
      if (old->state == TreeState::kActive && !old->programming && old->members[rank].left) {
        // A rank that left starts the job's next group while others still
        // linger in the old one: the old tree is done.
        DismantleLocked(old, TreeState::kDestroyed, rank_name + " started a new group of the job", &stale);
        j = job_live_.find(req.job);
      }
    }
    if (j != job_live_.end()) {
      t = live_.at(j->second);
      if (t->state != TreeState::kPending || t->programming)
        return AlreadyExists("job " + t->job + " already has " +
                             (t->programming ? "a tree being programmed" : "an active tree") + " (tree " +
                             std::to_string(t->id) + "); its members leave or an operator destroys it first");
      if (t->world != req.world)
        return FailedPrecondition("job " + t->job + " has world_size " + std::to_string(t->world) + ", " +
                                  rank_name + " says " + std::to_string(req.world));
      if (t->members[rank].joined)
        return AlreadyExists(rank_name + " already joined (host " + t->members[rank].spec.host + ")");
      if (t->reserved && t->reserved_hosts[rank] != spec->host)
        return FailedPrecondition(rank_name + " is reserved on host " + t->reserved_hosts[rank] +
                                  ", the member is on host " + spec->host);
      if ((req.ask.pool_size && reqs->pool_size != t->req.pool_size) ||
          (req.ask.elems_per_packet && reqs->elems_per_packet != t->req.elems_per_packet &&
           !(t->plan && t->plan->elems_per_packet == reqs->elems_per_packet)) ||
          (reqs->dtype_mask && reqs->dtype_mask != t->req.dtype_mask) ||
          (reqs->op_mask && reqs->op_mask != t->req.op_mask) ||
          (reqs->coll_mask && reqs->coll_mask != t->req.coll_mask))
        return FailedPrecondition(rank_name +
                                  " asks for a pool size, packet size or capability "
                                  "set different from the one the job's group was started with");
      INC_RETURN_IF_ERROR(t->members.CheckHostRanks(rank, req.host_ranks, req.total_ranks));
      if (const uint32_t* same = t->members.RankOnHost(spec->host))
        return FailedPrecondition(rank_name + " is on host " + spec->host + ", as rank " +
                                  std::to_string(*same) + " already is; a tree has one member per " +
                                  "host port (join the ranks of one host as one member)");
    } else {
      auto id = tree_ids_.Allocate();
      if (!id) return id.status();
      t = std::make_shared<TreeRec>();
      t->id = *id;
      do t->key = static_cast<uint32_t>(rng_());
      while (t->key == 0);
      t->job = req.job;
      t->world = req.world;
      t->req = *reqs;
      t->members = GroupMembers(t->world);
      t->created_ms = UnixMs();
      live_[t->id] = t;
      job_live_[t->job] = t->id;
      events_.Append(
          "group_started",
          "job " + t->job + " (world " + std::to_string(t->world) + ") got tree id " + std::to_string(t->id),
          t->id, "", t->job);
    }
    seq = next_join_seq_++;
    t->members.Join(rank, *spec, seq);
    t->members.SetHostRanks(rank, req.host_ranks, req.total_ranks);
    t->members.SetOwner(rank, req.owner);
    LOG_DEBUG_F({"tree", t->id}, {"job", t->job}, {"rank", rank})
        << rank_name << " joined from host " << spec->host << " (" << t->members.joined() << "/" << t->world
        << ")";
    complete = t->members.complete();
    if (complete) t->programming = true;  // claim the build for this thread
  }

  RunOps(std::move(stale));
  if (complete) BuildAndProgram(t);

  const uint32_t timeout_ms = req.timeout_ms ? req.timeout_ms : Tuned(&AmOptions::join_timeout_ms);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (t->state == TreeState::kActive && !t->programming) return AssignmentLocked(*t, rank);
    if (Dismantled(t->state) && !t->programming) return t->failure;
    if (t->members[rank].join_seq != seq)
      return Aborted(rank_name + " left the group before the tree was built");
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    if (!t->programming) {
      bool gone = cancelled && cancelled();
      if (gone || Clock::now() >= deadline) {
        const std::string missing = t->members.Missing(16);
        const uint32_t joined = t->members.joined();
        DropMemberLocked(t, rank);
        if (gone) return Status(Code::kCancelled, rank_name + ": the caller went away");
        return DeadlineExceeded("job " + req.job + ": " + std::to_string(joined) + " of " +
                                std::to_string(t->world) + " ranks joined within " +
                                std::to_string(timeout_ms) + " ms (missing ranks " + missing + ")");
      }
    }
    // State changes notify; the timed wake only notices deadlines and callers
    // that went away.
    cv_.wait_until(lk, std::min(deadline, Clock::now() + std::chrono::milliseconds(250)));
  }
}

void Manager::BuildAndProgram(const TreePtr& t) {
  std::map<std::string, TreeConfig> configs;
  std::map<std::string, std::string> addresses;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (Dismantled(t->state)) {
      t->programming = false;
      Ops none;
      ReleaseLocked(t, &none);
      return;
    }
    const auto t0 = Clock::now();
    if (Status placed = PlaceLocked(*t); !placed.ok()) {
      t->programming = false;
      FailPendingLocked(t, placed);
      return;
    }
    ++t->generation;
    auto cfgs = ConfigsLocked(*t);
    if (!cfgs) {
      t->programming = false;
      FailPendingLocked(t, cfgs.status().WithContext("tree for job " + t->job));
      return;
    }
    t->build_us += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    configs = std::move(*cfgs);
    t->configs = configs;
    for (const auto& [sw, cfg] : configs) addresses[sw] = switches_.AgentAddress(sw);
  }

  const auto p0 = Clock::now();
  std::vector<std::string> names;
  for (const auto& [sw, cfg] : configs) names.push_back(sw);
  std::vector<Status> results(names.size());
  ParallelFor(names.size(), kSwitchRpcWidth,
              [&](size_t i) { results[i] = clients_.Configure(addresses[names[i]], configs[names[i]]); });
  Status failure;
  for (size_t i = 0; i < names.size() && failure.ok(); ++i)
    if (!results[i].ok())
      failure = Status(results[i].code() == Code::kOk ? Code::kInternal : results[i].code(),
                       "configuring tree " + std::to_string(t->id) + " on switch " + names[i] +
                           " failed: " + results[i].message());

  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    t->program_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p0).count();
    t->programming = false;
    build_seconds_.Observe(static_cast<double>(t->build_us) / 1e6);
    program_seconds_.Observe(static_cast<double>(t->program_us) / 1e6);
    if (!failure.ok()) {
      // Roll back: the switches that took the tree drop it again.
      if (!Dismantled(t->state)) {
        t->failure = failure;
        DismantleLocked(t, TreeState::kFailed, failure.message(), &ops);
      } else {
        ReleaseLocked(t, &ops);
      }
    } else if (Dismantled(t->state)) {
      ReleaseLocked(t, &ops);  // dismantled while the calls were in flight
    } else if (Status saved = PersistActivationLocked(t); !saved.ok()) {
      // Members must not run on a tree that a restarted AM would not know.
      t->failure = saved;
      DismantleLocked(t, TreeState::kFailed, saved.message(), &ops);
    } else {
      t->members.HeartbeatAll(Clock::now());
      std::string shape;
      for (const auto& ps : t->plan->switches)
        shape += (shape.empty() ? "" : ", ") + ps.name + "(" + RoleName(ps.role) + ", " +
                 std::to_string(ps.children.size()) + " children)";
      events_.Append("tree_active",
                     "tree " + std::to_string(t->id) + " (job " + t->job + ", " + std::to_string(t->world) +
                         " members) active on " + shape,
                     t->id, t->plan->switches[0].name, t->job);
    }
    cv_.notify_all();
  }
  RunOps(std::move(ops));
}

// -------------------------------------------------------------- switches

Status Manager::CheckSwitchName(const std::string& name) const {
  if (name.empty()) return InvalidArgument("switch_name is empty");
  if (!topo_.switches.count(name))
    return FailedPrecondition("switch " + name + " is not in the topology file");
  return Status::Ok();
}

Expected<uint32_t> Manager::RegisterSwitch(const SwitchRegistration& reg) {
  const std::string& name = reg.name;
  INC_RETURN_IF_ERROR(CheckSwitchName(name));
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    const SwitchRegistry::Record* known = switches_.Find(name);
    if (store_ && (!known || known->agent_address != reg.agent_address ||
                   known->caps.slot_capacity != reg.caps.slot_capacity)) {
      // Where the agent is must survive a restart: trees dismantled before
      // the switch registers again are removed from it there.
      INC_RETURN_IF_ERROR(store_->PutSwitch({name, reg.agent_address, reg.caps.slot_capacity})
                              .WithContext("state store: saving switch " + name));
    }
    const SwitchRegistry::Registered how = switches_.Register(reg);
    const SwitchRegistry::Record& rec = *switches_.Find(name);
    if (!pool_.SetSwitchCapacity(name, reg.caps.slot_capacity)) {
      LOG_WARN << "switch " << name << " reports slot_capacity " << reg.caps.slot_capacity
               << " while trees hold slots on it; keeping the old capacity until they are gone";
    }
    for (const auto& p : topo_.hosts) {
      if (p.second.switch_name == name && !rec.ports.count(p.second.switch_port)) {
        LOG_WARN << "switch " << name << " did not report port " << p.second.switch_port << " (host "
                 << p.first << " attaches there)";
      }
    }
    CheckPortsLocked(name, &ops);
    // Reconcile: trees the AM wants here are configured again (the agent
    // takes an identical config as a no-op, so a running tree is untouched),
    // trees it does not want are removed.
    const std::set<uint32_t> reported(reg.live_tree_ids.begin(), reg.live_tree_ids.end());
    std::set<uint32_t> wanted;
    std::string kept, resent, removed;
    auto add = [](std::string* list, uint32_t id) {
      *list += (list->empty() ? "" : ",") + std::to_string(id);
    };
    for (const auto& [id, t] : live_) {
      if (!WantedOnLocked(*t, name)) continue;
      wanted.insert(id);
      add(reported.count(id) ? &kept : &resent, id);
      if (t->programming) continue;  // the programming thread is sending it now
      SwitchOp op;
      op.configure = true;
      op.switch_name = name;
      op.address = rec.agent_address;
      op.tree_id = id;
      op.config = t->configs.at(name);
      ops.push_back(std::move(op));
      if (reported.count(id)) {
        LOG_INFO << "switch " << name << ": keeping tree " << id << " (job " << t->job << ", generation "
                 << t->generation << ")"
                 << (t->restored ? ", known from the state store; its members keep their assignments" : "");
      }
    }
    size_t n_removed = 0;
    for (uint32_t id : reported) {
      if (wanted.count(id)) continue;
      SwitchOp op;
      op.switch_name = name;
      op.address = rec.agent_address;
      op.tree_id = id;
      ops.push_back(std::move(op));
      add(&removed, id);
      ++n_removed;
      TreePtr old = FindTreeLocked(id, "");
      LOG_INFO << "switch " << name << ": removing tree " << id << ": "
               << (old ? std::string("it is ") + TreeStateName(old->state) + " (" + old->reason + ")"
                       : std::string("the AM does not know it") +
                             (store_ ? " (not in the state store)" : " (the AM keeps no state)"));
    }
    events_.Append(
        how.again ? "switch_reregistered" : "switch_registered",
        "switch " + name + " at " + rec.agent_address + (how.after_restart ? " (after an AM restart)" : "") +
            " (" + std::to_string(rec.ports.size()) + " ports, " + std::to_string(reg.caps.slot_capacity) +
            " slots; " + std::to_string(reported.size()) + " live trees: " +
            std::to_string(reported.size() - n_removed) + " kept" + (kept.empty() ? "" : " [" + kept + "]") +
            ", " + std::to_string(n_removed) + " removed" + (removed.empty() ? "" : " [" + removed + "]") +
            (resent.empty() ? "" : "; re-sent trees the switch did not hold [" + resent + "]") + ")",
        0, name);
  }
  // A fresh channel: the old one may sit in gRPC's reconnect back-off after
  // the agent restarted, failing calls with UNAVAILABLE for seconds although
  // the agent is back.
  clients_.Reconnect(reg.agent_address, reg.certificate_pem);
  RunOpsAsync(std::move(ops));
  return opts_.switch_heartbeat_interval_ms;
}

Expected<Manager::SwitchBeatReply> Manager::SwitchHeartbeat(const SwitchBeat& beat) {
  if (beat.name.empty()) return InvalidArgument("switch_name is empty");
  SwitchBeatReply reply;
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto changed = switches_.Heartbeat(beat, &events_);
    if (!changed) {
      // Unknown (AM restarted) or declared dead: the switch registers again
      // and the AM reconciles its trees then.
      reply.reregister = true;
      return reply;
    }
    const SwitchRegistry::Record& rec = *switches_.Find(beat.name);
    // Congestion that outlasts a hold-down is checked again.
    if (*changed || (Tuned(&AmOptions::move_on_congestion_severity) && !rec.congested_ports.empty()))
      CheckPortsLocked(rec.name, &ops);
    for (uint32_t id : beat.live_tree_ids) {
      auto t = live_.find(id);
      if (t != live_.end() && WantedOnLocked(*t->second, rec.name)) continue;
      SwitchOp op;
      op.switch_name = rec.name;
      op.address = rec.agent_address;
      op.tree_id = id;
      ops.push_back(std::move(op));
      LOG_INFO << "switch " << rec.name << " holds tree " << id
               << " that the AM does not want there; removing it";
    }
  }
  RunOpsAsync(std::move(ops));
  return reply;
}

void Manager::CheckHeartbeats() {
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [name, why] : switches_.ExpireSilent(Tuned(&AmOptions::switch_heartbeat_timeout_ms))) {
      events_.Append("switch_lost", why, 0, name);
      std::vector<TreePtr> hit;
      for (const auto& [id, t] : live_)
        if (t->plan && t->plan->Find(name)) hit.push_back(t);
      for (const auto& t : hit) {
        // A lost root of a two-level tree is replaced like a failed link.
        std::string why_not = "the switch is a leaf or single-level switch of the tree";
        if (t->plan->switches.size() > 1 && t->plan->switches[0].name == name &&
            MoveTreeLocked(t, why, &ops, &why_not))
          continue;
        DismantleLocked(t, TreeState::kFailed, why + "; cannot move: " + why_not, &ops);
      }
    }
    std::vector<std::pair<TreePtr, std::string>> doomed;
    for (const auto& [id, t] : live_) {
      if (t->state != TreeState::kActive || t->programming) continue;
      for (uint32_t r = 0; r < t->world; ++r) {
        if (t->members[r].left) continue;  // no heartbeats after LeaveGroup
        uint64_t silent = MsSince(t->members[r].last_heartbeat);
        if (silent > Tuned(&AmOptions::member_heartbeat_timeout_ms)) {
          const bool silent_since_restart = t->restored && t->members[r].last_heartbeat == t->restored_at;
          doomed.emplace_back(
              t, "rank " + std::to_string(r) + " (host " + t->members[r].spec.host + ") " +
                     (silent_since_restart ? "sent no heartbeat within " + std::to_string(silent) +
                                                 " ms of the AM's restart (its job is gone)"
                                           : "missed heartbeats for " + std::to_string(silent) + " ms"));
          break;
        }
      }
    }
    for (auto& [t, why] : doomed) DismantleLocked(t, TreeState::kFailed, why, &ops);
    const uint64_t now_ms = UnixMs();
    while (!dismantled_.empty() &&
           now_ms - dismantled_.front()->dismantled_ms > Tuned(&AmOptions::dismantled_retention_ms))
      dismantled_.pop_front();
  }
  RunOps(std::move(ops));
}

void Manager::MonitorLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    // A quarter of the shorter timeout, read each pass: SIGHUP may change it.
    uint32_t tick = std::min(Tuned(&AmOptions::member_heartbeat_timeout_ms),
                             Tuned(&AmOptions::switch_heartbeat_timeout_ms)) /
                    4;
    tick = std::clamp<uint32_t>(tick, 5, 500);
    cv_.wait_for(lk, std::chrono::milliseconds(tick));
    if (stopping_) break;
    lk.unlock();
    CheckHeartbeats();
    lk.lock();
  }
}

// ------------------------------------------------------------- operators

SwitchSummary Manager::SummaryLocked(const std::string& name) const {
  SwitchSummary s = switches_.Summary(name, pool_);
  if (!s.known) return s;
  for (const auto& [id, t] : live_)
    if (t->plan && t->plan->Find(name)) s.tree_ids.push_back(id);
  return s;
}

std::vector<SwitchSummary> Manager::ListSwitches() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SwitchSummary> out;
  for (const auto& [name, ts] : topo_.switches) out.push_back(SummaryLocked(name));
  return out;
}

Expected<SwitchSummary> Manager::GetSwitch(const std::string& name) {
  if (name.empty()) return InvalidArgument("name is empty");
  if (!topo_.switches.count(name)) return NotFound("no switch " + name + " in the topology");
  std::lock_guard<std::mutex> lk(mu_);
  return SummaryLocked(name);
}

TopologyView Manager::GetTopology() {
  std::lock_guard<std::mutex> lk(mu_);
  TopologyView view;
  for (const auto& [name, ts] : topo_.switches) {
    TopologyView::Node n;
    n.name = name;
    n.kind = SwitchKindName(ts.kind);
    if (const SwitchRegistry::Record* rec = switches_.Find(name))
      for (const auto& [pname, p] : rec->ports) n.ports.push_back(p);
    view.nodes.push_back(std::move(n));
  }
  for (const auto& [name, h] : topo_.hosts) {
    TopologyView::Node n;
    n.name = name;
    n.kind = "host";
    if (h.has_ip) n.host_ip = h.ip;
    if (h.has_mac) n.host_mac = h.mac;
    view.nodes.push_back(std::move(n));
    view.links.push_back(
        {name, "", h.switch_name, h.switch_port, switches_.PortUp(h.switch_name, h.switch_port)});
  }
  for (const auto& tl : topo_.links)
    view.links.push_back({tl.a, tl.a_port, tl.b, tl.b_port,
                          switches_.PortUp(tl.a, tl.a_port) && switches_.PortUp(tl.b, tl.b_port)});
  return view;
}

Expected<TreeInfo> Manager::CreateTree(const CreateTreeRequest& req) {
  if (req.job.empty()) return InvalidArgument("job_id is empty");
  if (req.hosts.empty()) return InvalidArgument("hosts is empty (rank i runs on hosts[i])");
  const uint32_t hosts = static_cast<uint32_t>(req.hosts.size());
  const uint32_t world = req.world ? req.world : hosts;
  if (world != hosts)
    return InvalidArgument("world_size " + std::to_string(world) + " but " + std::to_string(hosts) +
                           " hosts");
  if (world > kMaxWorld)
    return InvalidArgument("world_size " + std::to_string(world) + " is over " + std::to_string(kMaxWorld));
  for (uint32_t r = 0; r < world; ++r)
    if (!topo_.hosts.count(req.hosts[r]))
      return NotFound("hosts[" + std::to_string(r) + "] \"" + req.hosts[r] + "\" is not in the topology");
  auto reqs = RequirementsFor(req.ask);
  if (!reqs) return reqs.status();

  std::lock_guard<std::mutex> lk(mu_);
  auto j = job_live_.find(req.job);
  if (j != job_live_.end())
    return AlreadyExists("job " + req.job + " already has tree " + std::to_string(j->second));
  const auto t0 = Clock::now();
  auto id = tree_ids_.Allocate();
  if (!id) return id.status();
  auto t = std::make_shared<TreeRec>();
  t->id = *id;
  do t->key = static_cast<uint32_t>(rng_());
  while (t->key == 0);
  t->job = req.job;
  t->world = world;
  t->reserved = true;
  t->reserved_hosts = req.hosts;
  t->req = *reqs;
  t->members = GroupMembers(world);
  for (uint32_t r = 0; r < world; ++r) t->members.SetHost(r, req.hosts[r]);
  if (Status placed = PlaceLocked(*t); !placed.ok()) {
    tree_ids_.Free(*id);
    return placed;
  }
  t->created_ms = UnixMs();
  t->build_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  live_[t->id] = t;
  job_live_[t->job] = t->id;
  if (Status saved = PersistTreeLocked(*t); !saved.ok()) {
    live_.erase(t->id);
    job_live_.erase(t->job);
    tree_ids_.Free(t->id);
    pool_.Free(*t->plan, *t->alloc);
    return saved;
  }
  events_.Append("tree_reserved",
                 "tree " + std::to_string(t->id) + " reserved for job " + t->job + " on " +
                     std::to_string(world) + " hosts, root " + t->plan->switches[0].name,
                 t->id, t->plan->switches[0].name, t->job);
  return InfoLocked(*t);
}

TreeInfo Manager::InfoLocked(const TreeRec& t) const {
  TreeInfo p;
  p.tree_id = t.id;
  p.job = t.job;
  p.state = t.state;
  p.world = t.world;
  p.reason = t.reason;
  p.created_unix_ms = t.created_ms;
  p.activated_unix_ms = t.activated_ms;
  p.dismantled_unix_ms = t.dismantled_ms;
  p.build_us = t.build_us;
  p.program_us = t.program_us;
  p.error_reports = t.error_reports;
  p.joined = t.members.joined();
  p.generation = t.generation;
  p.moves = t.moves;
  p.last_move_unix_ms = t.last_move_ms;
  p.last_move_reason = t.last_move_reason;
  p.pool_size = t.plan ? t.plan->pool_size : t.req.pool_size;
  p.elems_per_packet = t.plan ? t.plan->elems_per_packet : t.req.elems_per_packet;
  if (t.plan) {
    p.planned = true;
    p.dtype_mask = t.plan->dtype_mask;
    p.op_mask = t.plan->op_mask;
    p.coll_mask = t.plan->coll_mask;
    p.root_switch = t.plan->switches[0].name;
    for (const PlanSwitch& ps : t.plan->switches) {
      TreeInfo::Switch s;
      s.name = ps.name;
      s.role = ps.role;
      s.parent = ps.parent;
      if (t.alloc) s.slot_base = t.alloc->per_switch.at(ps.name).slot_base;
      s.num_children = static_cast<uint32_t>(ps.children.size());
      p.switches.push_back(std::move(s));
    }
  }
  for (uint32_t r = 0; r < t.world; ++r) {
    const GroupMembers::Member& m = t.members[r];
    if (!m.joined && m.spec.host.empty()) continue;
    TreeInfo::Member tm;
    tm.rank = r;
    tm.joined = m.joined;
    tm.spec = m.joined ? m.spec : MemberSpec{};
    tm.spec.host = m.spec.host;
    if (m.joined) tm.host_ranks = m.host_ranks;
    if (t.plan) {
      const MemberSlot& slot = t.plan->member_slot[r];
      const PlanSwitch& ps = t.plan->switches[slot.switch_index];
      tm.member_index = t.plan->member_index_of_rank[r];
      tm.switch_name = ps.name;
      tm.rank_at_switch = slot.rank_at_switch;
      tm.switch_port = ps.children[slot.rank_at_switch].port;
    }
    if (t.state == TreeState::kActive) tm.last_heartbeat_ms_ago = MsSince(m.last_heartbeat);
    p.members.push_back(std::move(tm));
  }
  return p;
}

std::vector<TreeInfo> Manager::ListTrees() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<TreeInfo> out;
  for (const auto& t : dismantled_) out.push_back(InfoLocked(*t));
  for (const auto& [id, t] : live_) out.push_back(InfoLocked(*t));
  return out;
}

Expected<TreeInfo> Manager::GetTree(const TreeRef& ref) {
  if (ref.tree_id == 0 && ref.job.empty()) return InvalidArgument("give a tree_id or a job_id");
  std::lock_guard<std::mutex> lk(mu_);
  TreePtr t = FindTreeLocked(ref.tree_id, ref.job);
  if (!t)
    return NotFound(ref.tree_id ? "no tree " + std::to_string(ref.tree_id) +
                                      (ref.job.empty() ? "" : " of job " + ref.job)
                                : "no tree for job " + ref.job);
  return InfoLocked(*t);
}

Status Manager::DestroyTree(uint32_t tree_id, const std::string& reason) {
  if (tree_id == 0) return InvalidArgument("tree_id is 0");
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(tree_id);
    if (it == live_.end()) {
      TreePtr old = FindTreeLocked(tree_id, "");
      if (old)
        return FailedPrecondition("tree " + std::to_string(tree_id) + " is already " +
                                  TreeStateName(old->state) + ": " + old->reason);
      return NotFound("no tree " + std::to_string(tree_id));
    }
    DismantleLocked(it->second, TreeState::kDestroyed,
                    "destroyed by operator" + (reason.empty() ? "" : ": " + reason), &ops);
  }
  RunOps(std::move(ops));
  return Status::Ok();
}

Expected<std::vector<SwitchTarget>> Manager::StatsTargets(uint32_t tree_id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (tree_id == 0) return switches_.AliveAgents();
  auto it = live_.find(tree_id);
  if (it == live_.end()) {
    if (FindTreeLocked(tree_id, ""))
      return FailedPrecondition("tree " + std::to_string(tree_id) +
                                " is dismantled; its switches hold no counters for it");
    return NotFound("no tree " + std::to_string(tree_id));
  }
  if (!it->second->plan)
    return FailedPrecondition("tree " + std::to_string(tree_id) + " has no switches yet");
  std::vector<SwitchTarget> targets;
  for (const auto& ps : it->second->plan->switches)
    targets.push_back({ps.name, switches_.AgentAddress(ps.name)});
  return targets;
}

Status Manager::WatchEvents(const EventLog::WatchOptions& options, const Cancelled& cancelled,
                            const std::function<bool(const Event&)>& sink) {
  return events_.Watch(options, cancelled, sink);
}

void Manager::WriteTimingMetrics(PrometheusText* out) {
  std::lock_guard<std::mutex> lk(mu_);
  out->Family("incin_am_tree_build_seconds", "histogram",
              "AM time per tree programming: tree build, resource allocation and switch configs.");
  build_seconds_.Write("incin_am_tree_build_seconds", {}, out);
  out->Family("incin_am_tree_program_seconds", "histogram",
              "ConfigureTree on every switch of a tree, per programming (in parallel).");
  program_seconds_.Write("incin_am_tree_program_seconds", {}, out);
  std::lock_guard<std::mutex> jl(joins_mu_);
  out->Family("incin_am_joins_total", "counter",
              "JoinGroup answers by status code; a member whose join failed (code other than OK) runs "
              "its collectives without the switches.");
  for (const auto& [code, n] : joins_by_code_)
    out->Sample("incin_am_joins_total", {{"code", code}}, static_cast<double>(n));
}

Manager::Usage Manager::ResourceUsage() {
  std::lock_guard<std::mutex> lk(mu_);
  Usage u;
  u.live_trees = live_.size();
  u.tree_ids = tree_ids_.in_use();
  for (const std::string& name : switches_.Names()) {
    const SwitchResources* r = pool_.Get(name);
    if (!r) continue;
    u.qpns += r->qpns.in_use();
    u.free_slots += r->slots.free_total();
  }
  return u;
}

}  // namespace inc::am
