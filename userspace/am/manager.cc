#include "am/manager.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "am/convert.h"
#include "am/tree_builder.h"
#include "common/log.h"

namespace inc::am {
namespace {

constexpr uint32_t kMaxWorld = 64 * 64;  // two levels of 64 children
constexpr uint32_t kMaxQpn = 0xFFFFFF;
// Switch calls of one tree go out in parallel (a two-level tree has at most
// 65 switches).
constexpr size_t kSwitchRpcWidth = 65;

uint64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t MsSince(std::chrono::steady_clock::time_point t) {
  auto d = std::chrono::steady_clock::now() - t;
  return d.count() < 0 ? 0 : std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Runs fn(0..n-1) on up to `width` threads.
void ParallelFor(size_t n, size_t width, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  width = std::min(n, width);
  if (width <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < width; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : threads) t.join();
}

const char* StateName(v1::TreeState s) {
  return v1::TreeState_Name(s).c_str();
}

bool Dismantled(v1::TreeState s) {
  return s == v1::TREE_FAILED || s == v1::TREE_DESTROYED;
}

}  // namespace

void ApplyConfig(const v1::AmConfig& c, AmOptions* o) {
  if (!c.listen().empty()) o->listen = c.listen();
  if (c.member_heartbeat_timeout_ms()) o->member_heartbeat_timeout_ms = c.member_heartbeat_timeout_ms();
  if (c.member_heartbeat_interval_ms()) o->member_heartbeat_interval_ms = c.member_heartbeat_interval_ms();
  if (c.switch_heartbeat_timeout_ms()) o->switch_heartbeat_timeout_ms = c.switch_heartbeat_timeout_ms();
  if (c.switch_heartbeat_interval_ms()) o->switch_heartbeat_interval_ms = c.switch_heartbeat_interval_ms();
  if (c.join_timeout_ms()) o->join_timeout_ms = c.join_timeout_ms();
  if (c.default_pool_size()) o->default_pool_size = c.default_pool_size();
  if (c.default_elems_per_packet()) o->default_elems_per_packet = c.default_elems_per_packet();
  if (c.switch_rpc_timeout_ms()) o->switch_rpc_timeout_ms = c.switch_rpc_timeout_ms();
  if (c.dismantled_retention_ms()) o->dismantled_retention_ms = c.dismantled_retention_ms();
  if (c.move_on_congestion_severity()) o->move_on_congestion_severity = c.move_on_congestion_severity();
  if (c.tree_move_holddown_ms()) o->tree_move_holddown_ms = c.tree_move_holddown_ms();
}

Manager::Manager(AmOptions options, Topology topology, std::unique_ptr<Store> store)
    : opts_(std::move(options)),
      topo_(std::move(topology)),
      clients_(opts_.switch_rpc_timeout_ms, opts_.switch_credentials),
      store_(std::move(store)),
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
  {
    std::lock_guard<std::mutex> lk(work_mu_);
    work_stop_ = true;
  }
  work_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (worker_.joinable()) worker_.join();
}

// ------------------------------------------------------------------ helpers

void Manager::EventLocked(const std::string& kind, const std::string& message, uint32_t tree_id,
                          const std::string& switch_name, const std::string& job) {
  v1::Event e;
  e.set_unix_ms(UnixMs());
  e.set_kind(kind);
  e.set_message(message);
  e.set_tree_id(tree_id);
  e.set_switch_name(switch_name);
  e.set_job_id(job);
  LOG_INFO << kind << ": " << message;
  events_.emplace_back(next_event_seq_++, std::move(e));
  while (events_.size() > opts_.max_events) events_.pop_front();
  cv_.notify_all();
}

// ------------------------------------------------------------ the store

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
  for (const MemberRec& m : t.members) st.members.push_back({m.joined, m.spec});
  st.plan = *t.plan;
  st.alloc = *t.alloc;
  for (const auto& [sw, cfg] : t.configs) st.configs[sw] = cfg.SerializeAsString();
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
  t->state = v1::TREE_ACTIVE;
  t->activated_ms = UnixMs();
  Status s = PersistTreeLocked(*t);
  if (!s.ok()) {
    t->state = v1::TREE_PENDING;
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
  if (st.state != v1::TREE_ACTIVE && !(st.reserved && st.state == v1::TREE_PENDING))
    return FailedPrecondition(what + " is stored in state " + std::to_string(st.state));
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
  t->state = static_cast<v1::TreeState>(st.state);
  t->generation = st.generation;
  t->reserved = st.reserved;
  t->reserved_hosts = st.reserved_hosts;
  t->req = st.req;
  t->members.resize(st.world);
  for (uint32_t r = 0; r < st.world; ++r) {
    MemberRec& m = t->members[r];
    m.spec = st.members[r].spec;
    m.joined = st.members[r].joined;
    m.last_heartbeat = now;
    if (m.joined) {
      m.join_seq = next_join_seq_++;
      ++t->joined;
      t->rank_of_host[m.spec.host] = r;
    }
  }
  t->plan = st.plan;
  t->alloc = st.alloc;
  for (const auto& [sw, bytes] : st.configs) {
    v1::TreeConfig cfg;
    if (!cfg.ParseFromString(bytes)) {
      pool_.Free(st.plan, st.alloc);
      tree_ids_.Free(st.id);
      return FailedPrecondition(what + ": the config stored for switch " + sw + " does not parse");
    }
    t->configs[sw] = std::move(cfg);
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

Status Manager::Restore() {
  if (!store_) return Status::Ok();
  auto state = store_->Load();
  if (!state) return state.status().WithContext("state store " + store_->path());
  std::lock_guard<std::mutex> lk(mu_);
  const auto now = Clock::now();
  for (const StoredSwitch& sw : state->switches) {
    if (!topo_.switches.count(sw.name)) {
      LOG_WARN << "state store: switch " << sw.name << " is not in the topology any more; ignored";
      continue;
    }
    SwitchRec& rec = switches_[sw.name];
    rec.name = sw.name;
    rec.agent_address = sw.agent_address;
    rec.caps.slot_capacity = sw.slot_capacity;
    rec.alive = true;
    rec.restored = true;
    rec.last_heartbeat = now;
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
  EventLocked("am_restored",
              "state store " + (store_->path().empty() ? std::string("(in memory)") : store_->path()) + ": " +
                  std::to_string(state->switches.size()) + " switches, " +
                  std::to_string(state->trees.size() - dropped) + " trees restored" +
                  (kept.empty() ? "" : ": " + kept) +
                  (dropped ? "; " + std::to_string(dropped) + " dropped" : "") + "; members have " +
                  std::to_string(Tuned(&AmOptions::member_heartbeat_timeout_ms)) +
                  " ms to heartbeat, switches " +
                  std::to_string(Tuned(&AmOptions::switch_heartbeat_timeout_ms)) + " ms to register again");
  return Status::Ok();
}

std::map<std::string, SwitchView> Manager::ViewsLocked() const {
  std::map<std::string, SwitchView> views;
  for (const auto& [name, rec] : switches_) {
    SwitchView v;
    v.name = name;
    v.registered = rec.registered;
    v.alive = rec.alive;
    v.caps = rec.caps;
    v.ports = rec.ports;
    pool_.Describe(name, &v);
    views.emplace(name, std::move(v));
  }
  return views;
}

Expected<Requirements> Manager::RequirementsFrom(uint32_t pool_size, uint32_t elems,
                                                 const google::protobuf::RepeatedField<int>& dtypes,
                                                 const google::protobuf::RepeatedField<int>& ops,
                                                 const google::protobuf::RepeatedField<int>& colls) const {
  Requirements r;
  r.pool_size = pool_size ? pool_size : Tuned(&AmOptions::default_pool_size);
  if (r.pool_size > 0xFFFF)
    return InvalidArgument("pool_size " + std::to_string(r.pool_size) +
                           (pool_size ? "" : " (the AM's default_pool_size)") + " is not in 1..65535");
  r.elems_per_packet = elems;
  r.default_elems = Tuned(&AmOptions::default_elems_per_packet);
  auto dt = DtypeMask(dtypes, "dtypes");
  if (!dt) return dt.status();
  auto op = OpMask(ops, "ops");
  if (!op) return op.status();
  auto co = CollMask(colls, "collectives");
  if (!co) return co.status();
  r.dtype_mask = *dt;
  r.op_mask = *op;
  r.coll_mask = *co;
  return r;
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
    auto it = switches_.find(sw);
    if (it == switches_.end() || it->second.agent_address.empty()) continue;
    SwitchOp op;
    op.switch_name = sw;
    op.address = it->second.agent_address;
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

void Manager::DismantleLocked(TreePtr t, v1::TreeState state, const std::string& reason, Ops* ops) {
  if (Dismantled(t->state)) return;
  t->state = state;
  t->reason = reason;
  t->dismantled_ms = UnixMs();
  ForgetTreeLocked(*t);
  if (t->failure.ok())
    t->failure =
        Aborted("tree " + std::to_string(t->id) + " of job " + t->job + " was dismantled: " + reason);
  EventLocked(state == v1::TREE_FAILED ? "tree_failed" : "tree_destroyed",
              "tree " + std::to_string(t->id) + " (job " + t->job + "): " + reason, t->id, "", t->job);
  // A tree being programmed is released by its programming thread when the
  // switch calls return, so no RemoveTree overtakes a ConfigureTree.
  if (!t->programming) ReleaseLocked(t, ops);
  cv_.notify_all();
}

void Manager::FailPendingLocked(TreePtr t, const Status& why) {
  t->failure = why;
  Ops none;
  DismantleLocked(t, v1::TREE_FAILED, why.message(), &none);
}

void Manager::DropMemberLocked(TreePtr t, uint32_t rank) {
  MemberRec& m = t->members[rank];
  if (!m.joined) return;
  m.joined = false;
  m.join_seq = 0;
  --t->joined;
  t->rank_of_host.erase(m.spec.host);
  if (t->joined == 0 && !t->reserved && t->state == v1::TREE_PENDING) {
    // Nobody is waiting for this group any more: forget it.
    live_.erase(t->id);
    tree_ids_.Free(t->id);
    job_live_.erase(t->job);
    EventLocked("group_abandoned", "job " + t->job + ": every member left or gave up", t->id, "", t->job);
  }
  cv_.notify_all();
}

bool Manager::PortCongestedLocked(const std::string& switch_name, const std::string& port) const {
  if (Tuned(&AmOptions::move_on_congestion_severity) == 0) return false;
  auto s = switches_.find(switch_name);
  if (s == switches_.end()) return false;
  auto c = s->second.congested_ports.find(port);
  return c != s->second.congested_ports.end() && c->second >= Tuned(&AmOptions::move_on_congestion_severity);
}

// Trees that use a port of this switch that is down move to another spine
// when the port is on a leaf-spine link (and are dismantled when no spine
// can take them, or when the port faces a member); by policy, trees also
// move off congested leaf-spine links, at most once per hold-down.
void Manager::CheckPortsLocked(const std::string& switch_name, Ops* ops) {
  const SwitchRec& rec = switches_.at(switch_name);
  struct Problem {
    TreePtr tree;
    std::string why;
    bool failed = false;
    bool switch_link = false;
  };
  std::vector<Problem> problems;
  for (const auto& [id, t] : live_) {
    if (!t->plan) continue;
    const PlanSwitch* ps = t->plan->Find(switch_name);
    if (!ps) continue;
    std::vector<std::pair<std::string, bool>> used;  // (port, leads to a switch)
    for (const auto& c : ps->children) used.emplace_back(c.port, c.is_switch);
    if (!ps->parent_port.empty()) used.emplace_back(ps->parent_port, true);
    std::optional<Problem> congested;
    for (const auto& [port, to_switch] : used) {
      auto p = rec.ports.find(port);
      if (p == rec.ports.end() || !p->second.up) {
        congested.reset();
        problems.push_back({t,
                            "switch " + switch_name + " port " + port +
                                (p == rec.ports.end() ? " disappeared" : " went down"),
                            true, to_switch});
        break;
      }
      if (to_switch && !congested && PortCongestedLocked(switch_name, port))
        congested = Problem{t,
                            "switch " + switch_name + " port " + port + " is congested (ARN severity " +
                                std::to_string(rec.congested_ports.at(port)) + ")",
                            false, true};
    }
    if (congested) problems.push_back(*congested);
  }
  for (auto& pr : problems) {
    TreePtr& t = pr.tree;
    if (Dismantled(t->state)) continue;
    if (!pr.failed) {
      // Congestion: damped, and a tree that cannot move keeps running.
      if (t->state != v1::TREE_ACTIVE || t->programming ||
          MsSince(t->last_move_attempt) < Tuned(&AmOptions::tree_move_holddown_ms))
        continue;
      t->last_move_attempt = Clock::now();
      std::string why_not;
      if (!MoveTreeLocked(t, pr.why, ops, &why_not))
        EventLocked(
            "tree_move_skipped",
            "tree " + std::to_string(t->id) + " (job " + t->job + ") stays: " + pr.why + "; " + why_not,
            t->id, switch_name, t->job);
      continue;
    }
    std::string why_not = "the port faces a member";
    if (pr.switch_link && MoveTreeLocked(t, pr.why, ops, &why_not)) continue;
    DismantleLocked(t, v1::TREE_FAILED, pr.why + (pr.switch_link ? "; cannot move: " + why_not : ""), ops);
  }
}

namespace {

// Members keep their switch, slot and index, and every leaf keeps its
// children: only the root and the leaf-root links may differ.
bool SameLeaves(const TreePlan& a, const TreePlan& b) {
  if (a.switches.size() != b.switches.size() || a.member_index_of_rank != b.member_index_of_rank ||
      a.pool_size != b.pool_size || a.elems_per_packet != b.elems_per_packet)
    return false;
  for (size_t r = 0; r < a.member_slot.size(); ++r)
    if (a.member_slot[r].switch_index != b.member_slot[r].switch_index ||
        a.member_slot[r].rank_at_switch != b.member_slot[r].rank_at_switch)
      return false;
  for (size_t i = 1; i < a.switches.size(); ++i) {
    const PlanSwitch &x = a.switches[i], &y = b.switches[i];
    if (x.name != y.name || x.role != y.role || x.rank_at_parent != y.rank_at_parent ||
        x.children.size() != y.children.size())
      return false;
    for (size_t c = 0; c < x.children.size(); ++c)
      if (x.children[c].port != y.children[c].port || x.children[c].rank != y.children[c].rank ||
          x.children[c].is_switch != y.children[c].is_switch)
        return false;
  }
  return true;
}

}  // namespace

bool Manager::MoveTreeLocked(const TreePtr& t, const std::string& why, Ops* ops, std::string* why_not) {
  if (t->state != v1::TREE_ACTIVE || t->programming || !t->plan || !t->alloc) {
    *why_not = "the tree is not active";
    return false;
  }
  if (t->plan->switches.size() < 2) {
    *why_not = "a single-level tree has no other switch to use";
    return false;
  }
  const auto t0 = Clock::now();
  // The builder skips down ports; congested ones are hidden from it the same way.
  auto views = ViewsLocked();
  for (auto& [name, view] : views)
    for (auto& [port, state] : view.ports)
      if (PortCongestedLocked(name, port)) state.up = false;
  Requirements req = t->req;
  req.pool_size = t->plan->pool_size;
  req.elems_per_packet = t->plan->elems_per_packet;
  req.dtype_mask = t->plan->dtype_mask;
  req.op_mask = t->plan->op_mask;
  req.coll_mask = t->plan->coll_mask;
  std::vector<MemberPlacement> placements;
  for (uint32_t r = 0; r < t->world; ++r) placements.push_back({r, t->members[r].spec.host});
  auto plan = BuildTreePlan(topo_, views, placements, req);
  if (!plan) {
    *why_not = plan.status().message();
    return false;
  }
  if (!SameLeaves(*t->plan, *plan)) {
    *why_not = "every usable tree would move members to other switches";
    return false;
  }
  const PlanSwitch old_root = t->plan->switches[0];
  const PlanSwitch& new_root = plan->switches[0];
  TreeAlloc alloc = *t->alloc;
  if (new_root.name != old_root.name) {
    TreePlan only_new;
    only_new.pool_size = plan->pool_size;
    only_new.switches = {new_root};
    auto fresh = pool_.Allocate(only_new);
    if (!fresh) {
      *why_not = fresh.status().message();
      return false;
    }
    TreePlan only_old;
    only_old.pool_size = t->plan->pool_size;
    only_old.switches = {old_root};
    TreeAlloc old_alloc;
    old_alloc.per_switch[old_root.name] = alloc.per_switch.at(old_root.name);
    pool_.Free(only_old, old_alloc);
    alloc.per_switch.erase(old_root.name);
    alloc.per_switch[new_root.name] = fresh->per_switch.at(new_root.name);
  }
  const std::string old_root_name = old_root.name, new_root_name = new_root.name;
  t->plan = std::move(*plan);
  t->alloc = std::move(alloc);
  ++t->generation;
  auto cfgs = ConfigsLocked(*t);
  if (!cfgs) {
    // The tree now holds the new resources; dismantling releases them and
    // removes it from the switches of its old configs.
    *why_not = cfgs.status().message();
    return false;
  }
  for (const auto& [sw, cfg] : *cfgs) {
    SwitchOp op;
    op.configure = true;
    op.switch_name = sw;
    op.address = switches_.at(sw).agent_address;
    op.tree_id = t->id;
    op.config = cfg;
    ops->push_back(std::move(op));
  }
  if (old_root_name != new_root_name) {
    auto s = switches_.find(old_root_name);
    if (s != switches_.end() && !s->second.agent_address.empty()) {
      SwitchOp op;
      op.switch_name = old_root_name;
      op.address = s->second.agent_address;
      op.tree_id = t->id;
      ops->push_back(std::move(op));
    }
  }
  t->configs = std::move(*cfgs);
  ++t->moves;
  t->last_move_ms = UnixMs();
  t->last_move_reason = why;
  t->last_move_attempt = Clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  t->build_us += us;
  if (Status saved = PersistTreeLocked(*t); !saved.ok()) {
    // The switches run the new generation already; a restart would re-send
    // the stored old one, which they take as a move back.
    LOG_ERROR << "state store: " << saved.ToString();
  }
  EventLocked("tree_moved",
              "tree " + std::to_string(t->id) + " (job " + t->job + ") moved from root " + old_root_name +
                  " to root " + new_root_name + " (generation " + std::to_string(t->generation) +
                  ", planned in " + std::to_string(us) + " us): " + why,
              t->id, new_root_name, t->job);
  return true;
}

Expected<std::map<std::string, v1::TreeConfig>> Manager::ConfigsLocked(const TreeRec& t) const {
  const TreePlan& plan = *t.plan;
  const TreeAlloc& alloc = *t.alloc;
  auto port_of = [&](const std::string& sw, const std::string& port) -> Expected<PortState> {
    auto s = switches_.find(sw);
    if (s == switches_.end()) return FailedPrecondition("switch " + sw + " is not registered");
    auto p = s->second.ports.find(port);
    if (p == s->second.ports.end())
      return FailedPrecondition("switch " + sw + " did not report port " + port);
    return p->second;
  };
  std::map<std::string, v1::TreeConfig> out;
  for (const PlanSwitch& ps : plan.switches) {
    const SwitchAlloc& sa = alloc.per_switch.at(ps.name);
    v1::TreeConfig c;
    c.set_tree_id(t.id);
    c.set_key(t.key);
    c.set_role(RoleToProto(ps.role));
    c.set_pool_size(plan.pool_size);
    c.set_elems_per_packet(plan.elems_per_packet);
    c.set_slot_base(sa.slot_base);
    DtypesFromMask(plan.dtype_mask, c.mutable_dtypes());
    OpsFromMask(plan.op_mask, c.mutable_ops());
    CollsFromMask(plan.coll_mask, c.mutable_collectives());
    c.set_rank_at_parent(ps.rank_at_parent);
    c.set_job_id(t.job);
    c.set_generation(t.generation);
    for (size_t i = 0; i < ps.children.size(); ++i) {
      const PlanChild& ch = ps.children[i];
      v1::Endpoint* e = c.add_children();
      e->set_port(ch.port);
      e->set_switch_qpn(sa.child_qpns[i]);
      e->set_member_lo(ch.member_lo);
      e->set_member_hi(ch.member_hi);
      e->set_peer_name(ch.peer);
      if (!ch.is_switch) {
        const MemberSpec& m = t.members[ch.rank].spec;
        e->set_peer_mac(m.mac.ToString());
        e->set_peer_ip(m.ip.ToString());
        e->set_peer_qpn(m.qpn);
        e->set_rkey(m.rkey);
        e->set_va_base(m.va_base);
        e->set_slot_stride(m.slot_stride);
      } else {
        auto p = port_of(ch.peer, ch.peer_port);
        if (!p) return p.status();
        e->set_peer_mac(p->mac.ToString());
        e->set_peer_ip(p->ip.ToString());
        e->set_peer_qpn(alloc.per_switch.at(ch.peer).parent_qpn);
      }
    }
    if (ps.role == TreeRole::kLeaf) {
      auto p = port_of(ps.parent, ps.parent_peer_port);
      if (!p) return p.status();
      v1::Endpoint* e = c.mutable_parent();
      e->set_port(ps.parent_port);
      e->set_peer_mac(p->mac.ToString());
      e->set_peer_ip(p->ip.ToString());
      e->set_peer_qpn(alloc.per_switch.at(ps.parent).child_qpns[ps.rank_at_parent]);
      e->set_switch_qpn(sa.parent_qpn);
      e->set_peer_name(ps.parent);
    }
    out.emplace(ps.name, std::move(c));
  }
  return out;
}

Expected<v1::MemberAssignment> Manager::AssignmentLocked(const TreeRec& t, uint32_t rank) const {
  const TreePlan& plan = *t.plan;
  const MemberSlot& slot = plan.member_slot[rank];
  const PlanSwitch& ps = plan.switches[slot.switch_index];
  const PlanChild& ch = ps.children[slot.rank_at_switch];
  const SwitchRec& sw = switches_.at(ps.name);
  auto port = sw.ports.find(ch.port);
  if (port == sw.ports.end())
    return FailedPrecondition("switch " + ps.name + " no longer reports port " + ch.port);
  v1::MemberAssignment a;
  a.set_tree_id(t.id);
  a.set_key(t.key);
  a.set_pool_size(plan.pool_size);
  a.set_elems_per_packet(plan.elems_per_packet);
  a.set_rank_at_switch(slot.rank_at_switch);
  a.set_member_index(plan.member_index_of_rank[rank]);
  a.set_switch_name(ps.name);
  a.set_switch_ip(port->second.ip.ToString());
  a.set_switch_mac(port->second.mac.ToString());
  a.set_switch_qpn(t.alloc->per_switch.at(ps.name).child_qpns[slot.rank_at_switch]);
  a.set_slot_stride(t.members[rank].spec.slot_stride);
  a.set_heartbeat_interval_ms(opts_.member_heartbeat_interval_ms);
  for (uint32_t idx : plan.member_index_of_rank) a.add_member_index_of_rank(idx);
  DtypesFromMask(plan.dtype_mask, a.mutable_dtypes());
  OpsFromMask(plan.op_mask, a.mutable_ops());
  CollsFromMask(plan.coll_mask, a.mutable_collectives());
  a.set_world_size(t.world);
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

Expected<v1::MemberAssignment> Manager::JoinGroup(const v1::JoinGroupRequest& req,
                                                  const Cancelled& cancelled) {
  if (req.job_id().empty()) return InvalidArgument("job_id is empty");
  if (req.world_size() == 0 || req.world_size() > kMaxWorld)
    return InvalidArgument("world_size " + std::to_string(req.world_size()) + " is not in 1.." +
                           std::to_string(kMaxWorld));
  if (req.rank() >= req.world_size())
    return InvalidArgument("rank " + std::to_string(req.rank()) + " is not below world_size " +
                           std::to_string(req.world_size()));
  const v1::MemberInfo& mi = req.member();
  if (mi.qpn() == 0 || mi.qpn() > kMaxQpn)
    return InvalidArgument("member.qpn " + std::to_string(mi.qpn()) + " is not in 1..0xFFFFFF");
  if (!v1::Transport_IsValid(mi.transport()))
    return InvalidArgument("member.transport " + std::to_string(mi.transport()) + " is unknown");
  auto reqs =
      RequirementsFrom(req.pool_size(), req.elems_per_packet(), req.dtypes(), req.ops(), req.collectives());
  if (!reqs) return reqs.status();

  // Find the member's host and addresses.
  MemberSpec spec;
  const TopoHost* host = nullptr;
  if (!mi.ip().empty()) {
    auto ip = Ipv4::Parse(mi.ip());
    if (!ip) return ip.status().WithContext("member.ip");
    spec.ip = *ip;
  }
  if (!mi.mac().empty()) {
    auto mac = Mac::Parse(mi.mac());
    if (!mac) return mac.status().WithContext("member.mac");
    spec.mac = *mac;
  }
  if (!mi.host().empty()) {
    auto h = topo_.hosts.find(mi.host());
    if (h == topo_.hosts.end()) return NotFound("member.host \"" + mi.host() + "\" is not in the topology");
    host = &h->second;
  } else if (!mi.ip().empty()) {
    host = topo_.HostByIp(spec.ip);
    if (!host) return NotFound("no topology host has ip " + mi.ip() + " (set member.host)");
  } else {
    return InvalidArgument("member needs a host or an ip");
  }
  if (mi.ip().empty()) {
    if (!host->has_ip)
      return InvalidArgument("member.ip is empty and topology host " + host->name + " has no ip");
    spec.ip = host->ip;
  }
  if (mi.mac().empty()) {
    if (!host->has_mac)
      return InvalidArgument("member.mac is empty and topology host " + host->name + " has no mac");
    spec.mac = host->mac;
  }
  spec.host = host->name;
  spec.qpn = mi.qpn();
  spec.rkey = mi.rkey();
  spec.va_base = mi.va_base();
  spec.slot_stride = mi.slot_stride();
  spec.transport = mi.transport();

  const uint32_t rank = req.rank();
  const std::string rank_name = "rank " + std::to_string(rank) + " of job " + req.job_id();
  TreePtr t;
  uint64_t seq = 0;
  bool complete = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    auto j = job_live_.find(req.job_id());
    if (j != job_live_.end()) {
      t = live_.at(j->second);
      if (t->state != v1::TREE_PENDING || t->programming)
        return AlreadyExists("job " + t->job + " already has " +
                             (t->programming ? "a tree being programmed" : "an active tree") + " (tree " +
                             std::to_string(t->id) + "); its members leave or an operator destroys it first");
      if (t->world != req.world_size())
        return FailedPrecondition("job " + t->job + " has world_size " + std::to_string(t->world) + ", " +
                                  rank_name + " says " + std::to_string(req.world_size()));
      if (t->members[rank].joined)
        return AlreadyExists(rank_name + " already joined (host " + t->members[rank].spec.host + ")");
      if (t->reserved && t->reserved_hosts[rank] != spec.host)
        return FailedPrecondition(rank_name + " is reserved on host " + t->reserved_hosts[rank] +
                                  ", the member is on host " + spec.host);
      if ((req.pool_size() && reqs->pool_size != t->req.pool_size) ||
          (req.elems_per_packet() && reqs->elems_per_packet != t->req.elems_per_packet &&
           !(t->plan && t->plan->elems_per_packet == reqs->elems_per_packet)) ||
          (reqs->dtype_mask && reqs->dtype_mask != t->req.dtype_mask) ||
          (reqs->op_mask && reqs->op_mask != t->req.op_mask) ||
          (reqs->coll_mask && reqs->coll_mask != t->req.coll_mask))
        return FailedPrecondition(rank_name +
                                  " asks for a pool size, packet size or capability "
                                  "set different from the one the job's group was started with");
      auto same = t->rank_of_host.find(spec.host);
      if (same != t->rank_of_host.end())
        return FailedPrecondition(rank_name + " is on host " + spec.host + ", as rank " +
                                  std::to_string(same->second) + " already is; a tree has one member per " +
                                  "host port (join the ranks of one host as one member)");
    } else {
      auto id = tree_ids_.Allocate();
      if (!id) return id.status();
      t = std::make_shared<TreeRec>();
      t->id = *id;
      do t->key = static_cast<uint32_t>(rng_());
      while (t->key == 0);
      t->job = req.job_id();
      t->world = req.world_size();
      t->req = *reqs;
      t->members.resize(t->world);
      t->created_ms = UnixMs();
      live_[t->id] = t;
      job_live_[t->job] = t->id;
      EventLocked(
          "group_started",
          "job " + t->job + " (world " + std::to_string(t->world) + ") got tree id " + std::to_string(t->id),
          t->id, "", t->job);
    }
    MemberRec& m = t->members[rank];
    m.joined = true;
    m.spec = spec;
    m.join_seq = seq = next_join_seq_++;
    ++t->joined;
    t->rank_of_host[spec.host] = rank;
    LOG_DEBUG << rank_name << " joined from host " << spec.host << " (" << t->joined << "/" << t->world
              << ")";
    complete = t->joined == t->world;
    if (complete) t->programming = true;  // claim the build for this thread
  }

  if (complete) BuildAndProgram(t);

  const uint32_t timeout_ms = req.timeout_ms() ? req.timeout_ms() : Tuned(&AmOptions::join_timeout_ms);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (t->state == v1::TREE_ACTIVE && !t->programming) return AssignmentLocked(*t, rank);
    if (Dismantled(t->state) && !t->programming) return t->failure;
    if (t->members[rank].join_seq != seq)
      return Aborted(rank_name + " left the group before the tree was built");
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    if (!t->programming) {
      bool gone = cancelled && cancelled();
      if (gone || Clock::now() >= deadline) {
        std::string missing;
        for (uint32_t r = 0, n = 0; r < t->world && n < 16; ++r)
          if (!t->members[r].joined) {
            missing += (missing.empty() ? "" : ",") + std::to_string(r);
            ++n;
          }
        const uint32_t joined = t->joined;
        DropMemberLocked(t, rank);
        if (gone) return Status(Code::kCancelled, rank_name + ": the caller went away");
        return DeadlineExceeded("job " + req.job_id() + ": " + std::to_string(joined) + " of " +
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
  std::map<std::string, v1::TreeConfig> configs;
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
    if (!t->plan) {
      std::vector<MemberPlacement> placements;
      for (uint32_t r = 0; r < t->world; ++r) placements.push_back({r, t->members[r].spec.host});
      auto plan = BuildTreePlan(topo_, ViewsLocked(), placements, t->req);
      if (!plan) {
        t->programming = false;
        FailPendingLocked(t, plan.status().WithContext("building tree for job " + t->job));
        return;
      }
      t->plan = std::move(*plan);
    }
    if (!t->alloc) {
      auto alloc = pool_.Allocate(*t->plan);
      if (!alloc) {
        t->programming = false;
        FailPendingLocked(t, alloc.status().WithContext("allocating tree for job " + t->job));
        return;
      }
      t->alloc = std::move(*alloc);
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
    for (const auto& [sw, cfg] : configs) addresses[sw] = switches_.at(sw).agent_address;
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
        DismantleLocked(t, v1::TREE_FAILED, failure.message(), &ops);
      } else {
        ReleaseLocked(t, &ops);
      }
    } else if (Dismantled(t->state)) {
      ReleaseLocked(t, &ops);  // dismantled while the calls were in flight
    } else if (Status saved = PersistActivationLocked(t); !saved.ok()) {
      // Members must not run on a tree that a restarted AM would not know.
      t->failure = saved;
      DismantleLocked(t, v1::TREE_FAILED, saved.message(), &ops);
    } else {
      for (auto& m : t->members) m.last_heartbeat = Clock::now();
      std::string shape;
      for (const auto& ps : t->plan->switches)
        shape += (shape.empty() ? "" : ", ") + ps.name + "(" + v1::Role_Name(RoleToProto(ps.role)) + ", " +
                 std::to_string(ps.children.size()) + " children)";
      EventLocked("tree_active",
                  "tree " + std::to_string(t->id) + " (job " + t->job + ", " + std::to_string(t->world) +
                      " members) active on " + shape,
                  t->id, t->plan->switches[0].name, t->job);
    }
    cv_.notify_all();
  }
  RunOps(std::move(ops));
}

Status Manager::LeaveGroup(const v1::LeaveGroupRequest& req) {
  if (req.job_id().empty()) return InvalidArgument("job_id is empty");
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto j = job_live_.find(req.job_id());
    if (j == job_live_.end()) {
      if (FindTreeLocked(0, req.job_id())) return Status::Ok();  // already dismantled
      return NotFound("job " + req.job_id() + " has no tree");
    }
    TreePtr t = live_.at(j->second);
    if (req.rank() >= t->world)
      return InvalidArgument("rank " + std::to_string(req.rank()) + " is not below world_size " +
                             std::to_string(t->world));
    const std::string who = "rank " + std::to_string(req.rank()) + " of job " + t->job;
    if (!t->members[req.rank()].joined) return NotFound(who + " has not joined");
    if (t->state == v1::TREE_PENDING && !t->programming) {
      DropMemberLocked(t, req.rank());
      EventLocked("member_left", who + " left before the tree was built", t->id, "", t->job);
    } else {
      DismantleLocked(t, v1::TREE_DESTROYED,
                      who + " (host " + t->members[req.rank()].spec.host + ") left the group", &ops);
    }
  }
  RunOps(std::move(ops));
  return Status::Ok();
}

Expected<v1::MemberHeartbeatResponse> Manager::MemberHeartbeat(const v1::MemberHeartbeatRequest& req) {
  if (req.job_id().empty() && req.tree_id() == 0)
    return InvalidArgument("a member heartbeat needs a tree_id or a job_id");
  std::lock_guard<std::mutex> lk(mu_);
  TreePtr t = FindTreeLocked(req.tree_id(), req.job_id());
  if (!t)
    return NotFound("no tree " + std::to_string(req.tree_id()) +
                    (req.job_id().empty() ? "" : " of job " + req.job_id()));
  if (req.rank() >= t->world)
    return InvalidArgument("rank " + std::to_string(req.rank()) + " is not below world_size " +
                           std::to_string(t->world));
  v1::MemberHeartbeatResponse resp;
  resp.set_tree_state(t->state);
  resp.set_reason(t->reason);
  resp.set_generation(t->generation);
  if (t->plan) resp.set_root_switch(t->plan->switches[0].name);
  if (t->state == v1::TREE_ACTIVE) {
    MemberRec& m = t->members[req.rank()];
    if (!m.joined)
      return NotFound("rank " + std::to_string(req.rank()) + " is not a member of tree " +
                      std::to_string(t->id));
    m.last_heartbeat = Clock::now();
  }
  return resp;
}

Status Manager::ReportError(const v1::ReportErrorRequest& req) {
  std::lock_guard<std::mutex> lk(mu_);
  TreePtr t = FindTreeLocked(req.tree_id(), req.job_id());
  if (!t) return NotFound("no tree " + std::to_string(req.tree_id()) + " of job " + req.job_id());
  ++t->error_reports;
  EventLocked("member_error",
              "rank " + std::to_string(req.rank()) + " of job " + t->job + " on tree " +
                  std::to_string(t->id) + ": " + req.error() + " (msg " + std::to_string(req.msg_id()) +
                  ", " + std::to_string(req.timeouts()) + " timeouts)",
              t->id, "", t->job);
  return Status::Ok();
}

// -------------------------------------------------------------- switches

Expected<v1::RegisterSwitchResponse> Manager::RegisterSwitch(const v1::RegisterSwitchRequest& req) {
  const std::string& name = req.switch_name();
  if (name.empty()) return InvalidArgument("switch_name is empty");
  if (!topo_.switches.count(name))
    return FailedPrecondition("switch " + name + " is not in the topology file");
  INC_RETURN_IF_ERROR(ValidateAgentAddress(req.agent_address()).WithContext("switch " + name));
  auto caps = CapsFromProto(req.capabilities());
  if (!caps) return caps.status().WithContext("switch " + name);
  std::map<std::string, PortState> ports;
  for (const auto& p : req.ports()) {
    auto ps = PortFromProto(p);
    if (!ps) return ps.status().WithContext("switch " + name);
    if (!ports.emplace(ps->name, *ps).second)
      return InvalidArgument("switch " + name + " reports port " + ps->name + " twice");
  }
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Unavailable("the aggregation manager is shutting down");
    auto known = switches_.find(name);
    if (store_ && (known == switches_.end() || known->second.agent_address != req.agent_address() ||
                   known->second.caps.slot_capacity != caps->slot_capacity)) {
      // Where the agent is must survive a restart: trees dismantled before
      // the switch registers again are removed from it there.
      INC_RETURN_IF_ERROR(store_->PutSwitch({name, req.agent_address(), caps->slot_capacity})
                              .WithContext("state store: saving switch " + name));
    }
    SwitchRec& rec = switches_[name];
    const bool again = rec.registered;
    const bool after_restart = rec.restored;
    rec.name = name;
    rec.agent_address = req.agent_address();
    rec.caps = *caps;
    rec.ports = std::move(ports);
    rec.registered = true;
    rec.alive = true;
    rec.restored = false;
    rec.last_heartbeat = Clock::now();
    if (!pool_.SetSwitchCapacity(name, caps->slot_capacity)) {
      LOG_WARN << "switch " << name << " reports slot_capacity " << caps->slot_capacity
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
    const std::set<uint32_t> reported(req.live_tree_ids().begin(), req.live_tree_ids().end());
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
               << (old ? std::string("it is ") + StateName(old->state) + " (" + old->reason + ")"
                       : std::string("the AM does not know it") +
                             (store_ ? " (not in the state store)" : " (the AM keeps no state)"));
    }
    EventLocked(
        again ? "switch_reregistered" : "switch_registered",
        "switch " + name + " at " + rec.agent_address + (after_restart ? " (after an AM restart)" : "") +
            " (" + std::to_string(rec.ports.size()) + " ports, " + std::to_string(caps->slot_capacity) +
            " slots; " + std::to_string(reported.size()) + " live trees: " +
            std::to_string(reported.size() - n_removed) + " kept" + (kept.empty() ? "" : " [" + kept + "]") +
            ", " + std::to_string(n_removed) + " removed" + (removed.empty() ? "" : " [" + removed + "]") +
            (resent.empty() ? "" : "; re-sent trees the switch did not hold [" + resent + "]") + ")",
        0, name);
  }
  // A fresh channel: the old one may sit in gRPC's reconnect back-off after
  // the agent restarted, failing calls with UNAVAILABLE for seconds although
  // the agent is back.
  clients_.Reconnect(req.agent_address());
  RunOpsAsync(std::move(ops));
  v1::RegisterSwitchResponse resp;
  resp.set_heartbeat_interval_ms(opts_.switch_heartbeat_interval_ms);
  return resp;
}

Expected<v1::SwitchHeartbeatResponse> Manager::SwitchHeartbeat(const v1::SwitchHeartbeatRequest& req) {
  if (req.switch_name().empty()) return InvalidArgument("switch_name is empty");
  std::map<std::string, PortState> reported;
  for (const auto& p : req.ports()) {
    auto ps = PortFromProto(p);
    if (!ps) return ps.status().WithContext("switch " + req.switch_name());
    reported[ps->name] = *ps;
  }
  v1::SwitchHeartbeatResponse resp;
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = switches_.find(req.switch_name());
    if (it == switches_.end() || !it->second.registered || !it->second.alive) {
      // Unknown (AM restarted) or declared dead: the switch registers again
      // and the AM reconciles its trees then.
      resp.set_reregister(true);
      return resp;
    }
    SwitchRec& rec = it->second;
    rec.last_heartbeat = Clock::now();
    bool changed = false;
    for (auto& [pname, ps] : reported) {
      auto cur = rec.ports.find(pname);
      if (cur == rec.ports.end() || cur->second.up != ps.up) {
        changed = true;
        EventLocked(ps.up ? "port_up" : "port_down",
                    "switch " + rec.name + " port " + pname + (ps.up ? " is up" : " is down"), 0, rec.name);
      }
      rec.ports[pname] = ps;
    }
    std::map<std::string, uint32_t> congested;
    for (const auto& l : req.arn_links())
      if (l.condition() == "congested" && !l.port().empty()) congested[l.port()] = l.severity();
    if (congested != rec.congested_ports) {
      for (const auto& [port, sev] : congested)
        if (!rec.congested_ports.count(port) || rec.congested_ports.at(port) != sev)
          EventLocked("link_congested",
                      "switch " + rec.name + " port " + port + " congested, severity " + std::to_string(sev),
                      0, rec.name);
      for (const auto& [port, sev] : rec.congested_ports)
        if (!congested.count(port))
          EventLocked("link_uncongested", "switch " + rec.name + " port " + port + " is no longer congested",
                      0, rec.name);
      rec.congested_ports = std::move(congested);
      changed = true;
    }
    // Congestion that outlasts a hold-down is checked again.
    if (changed || (Tuned(&AmOptions::move_on_congestion_severity) && !rec.congested_ports.empty()))
      CheckPortsLocked(rec.name, &ops);
    for (uint32_t id : req.live_tree_ids()) {
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
  return resp;
}

void Manager::CheckHeartbeats() {
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [name, rec] : switches_) {
      if (!rec.alive) continue;
      uint64_t silent = MsSince(rec.last_heartbeat);
      if (silent <= Tuned(&AmOptions::switch_heartbeat_timeout_ms)) continue;
      rec.alive = false;
      const std::string why =
          rec.restored ? "switch " + name + " did not register within " + std::to_string(silent) +
                             " ms of the AM's restart"
                       : "switch " + name + " missed heartbeats for " + std::to_string(silent) + " ms";
      rec.restored = false;
      EventLocked("switch_lost", why, 0, name);
      std::vector<TreePtr> hit;
      for (const auto& [id, t] : live_)
        if (t->plan && t->plan->Find(name)) hit.push_back(t);
      for (const auto& t : hit) {
        // A lost root of a two-level tree is replaced like a failed link.
        std::string why_not = "the switch is a leaf or single-level switch of the tree";
        if (t->plan->switches.size() > 1 && t->plan->switches[0].name == name &&
            MoveTreeLocked(t, why, &ops, &why_not))
          continue;
        DismantleLocked(t, v1::TREE_FAILED, why + "; cannot move: " + why_not, &ops);
      }
    }
    std::vector<std::pair<TreePtr, std::string>> doomed;
    for (const auto& [id, t] : live_) {
      if (t->state != v1::TREE_ACTIVE || t->programming) continue;
      for (uint32_t r = 0; r < t->world; ++r) {
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
    for (auto& [t, why] : doomed) DismantleLocked(t, v1::TREE_FAILED, why, &ops);
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

v1::SwitchSummary Manager::SummaryLocked(const std::string& name) const {
  v1::SwitchSummary s;
  s.set_name(name);
  auto it = switches_.find(name);
  if (it == switches_.end()) return s;
  const SwitchRec& rec = it->second;
  s.set_agent_address(rec.agent_address);
  // A switch known from the state store is not alive until it registers.
  s.set_alive(rec.alive && !rec.restored);
  const SwitchResources* res = pool_.Get(name);
  *s.mutable_capabilities() = CapsToProto(rec.caps, res ? res->slots.free_total() : 0);
  for (const auto& [pname, p] : rec.ports) *s.add_ports() = PortToProto(p);
  s.set_last_heartbeat_ms_ago(MsSince(rec.last_heartbeat));
  for (const auto& [id, t] : live_)
    if (t->plan && t->plan->Find(name)) s.add_tree_ids(id);
  return s;
}

v1::ListSwitchesResponse Manager::ListSwitches() {
  std::lock_guard<std::mutex> lk(mu_);
  v1::ListSwitchesResponse resp;
  for (const auto& [name, ts] : topo_.switches) *resp.add_switches() = SummaryLocked(name);
  return resp;
}

Expected<v1::GetSwitchResponse> Manager::GetSwitch(const v1::GetSwitchRequest& req) {
  if (req.name().empty()) return InvalidArgument("name is empty");
  if (!topo_.switches.count(req.name())) return NotFound("no switch " + req.name() + " in the topology");
  std::lock_guard<std::mutex> lk(mu_);
  v1::GetSwitchResponse resp;
  *resp.mutable_switch_summary() = SummaryLocked(req.name());
  return resp;
}

v1::GetTopologyResponse Manager::GetTopology() {
  std::lock_guard<std::mutex> lk(mu_);
  v1::GetTopologyResponse resp;
  auto port_up = [&](const std::string& sw, const std::string& port) {
    auto s = switches_.find(sw);
    if (s == switches_.end() || !s->second.alive) return false;
    auto p = s->second.ports.find(port);
    return p != s->second.ports.end() && p->second.up;
  };
  for (const auto& [name, ts] : topo_.switches) {
    v1::TopologyNode* n = resp.add_nodes();
    n->set_name(name);
    n->set_kind(SwitchKindName(ts.kind));
    auto s = switches_.find(name);
    if (s != switches_.end())
      for (const auto& [pname, p] : s->second.ports) *n->add_ports() = PortToProto(p);
  }
  for (const auto& [name, h] : topo_.hosts) {
    v1::TopologyNode* n = resp.add_nodes();
    n->set_name(name);
    n->set_kind("host");
    v1::Port* p = n->add_ports();
    if (h.has_ip) p->set_ip(h.ip.ToString());
    if (h.has_mac) p->set_mac(h.mac.ToString());
    v1::Link* l = resp.add_links();
    l->set_a_node(name);
    l->set_b_node(h.switch_name);
    l->set_b_port(h.switch_port);
    l->set_up(port_up(h.switch_name, h.switch_port));
  }
  for (const auto& tl : topo_.links) {
    v1::Link* l = resp.add_links();
    l->set_a_node(tl.a);
    l->set_a_port(tl.a_port);
    l->set_b_node(tl.b);
    l->set_b_port(tl.b_port);
    l->set_up(port_up(tl.a, tl.a_port) && port_up(tl.b, tl.b_port));
  }
  return resp;
}

Expected<v1::CreateTreeResponse> Manager::CreateTree(const v1::CreateTreeRequest& req) {
  if (req.job_id().empty()) return InvalidArgument("job_id is empty");
  if (req.hosts().empty()) return InvalidArgument("hosts is empty (rank i runs on hosts[i])");
  const uint32_t world = req.world_size() ? req.world_size() : req.hosts_size();
  if (world != static_cast<uint32_t>(req.hosts_size()))
    return InvalidArgument("world_size " + std::to_string(world) + " but " +
                           std::to_string(req.hosts_size()) + " hosts");
  if (world > kMaxWorld)
    return InvalidArgument("world_size " + std::to_string(world) + " is over " + std::to_string(kMaxWorld));
  std::vector<MemberPlacement> placements;
  for (uint32_t r = 0; r < world; ++r) {
    if (!topo_.hosts.count(req.hosts(r)))
      return NotFound("hosts[" + std::to_string(r) + "] \"" + req.hosts(r) + "\" is not in the topology");
    placements.push_back({r, req.hosts(r)});
  }
  auto reqs =
      RequirementsFrom(req.pool_size(), req.elems_per_packet(), req.dtypes(), req.ops(), req.collectives());
  if (!reqs) return reqs.status();

  std::lock_guard<std::mutex> lk(mu_);
  auto j = job_live_.find(req.job_id());
  if (j != job_live_.end())
    return AlreadyExists("job " + req.job_id() + " already has tree " + std::to_string(j->second));
  const auto t0 = Clock::now();
  auto plan = BuildTreePlan(topo_, ViewsLocked(), placements, *reqs);
  if (!plan) return plan.status();
  auto id = tree_ids_.Allocate();
  if (!id) return id.status();
  auto alloc = pool_.Allocate(*plan);
  if (!alloc) {
    tree_ids_.Free(*id);
    return alloc.status();
  }
  auto t = std::make_shared<TreeRec>();
  t->id = *id;
  do t->key = static_cast<uint32_t>(rng_());
  while (t->key == 0);
  t->job = req.job_id();
  t->world = world;
  t->reserved = true;
  t->reserved_hosts.assign(req.hosts().begin(), req.hosts().end());
  t->req = *reqs;
  t->members.resize(world);
  for (uint32_t r = 0; r < world; ++r) t->members[r].spec.host = req.hosts(r);
  t->plan = std::move(*plan);
  t->alloc = std::move(*alloc);
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
  EventLocked("tree_reserved",
              "tree " + std::to_string(t->id) + " reserved for job " + t->job + " on " +
                  std::to_string(world) + " hosts, root " + t->plan->switches[0].name,
              t->id, t->plan->switches[0].name, t->job);
  v1::CreateTreeResponse resp;
  *resp.mutable_tree() = TreeToProtoLocked(*t);
  return resp;
}

v1::Tree Manager::TreeToProtoLocked(const TreeRec& t) const {
  v1::Tree p;
  p.set_tree_id(t.id);
  p.set_job_id(t.job);
  p.set_state(t.state);
  p.set_world_size(t.world);
  p.set_reason(t.reason);
  p.set_created_unix_ms(t.created_ms);
  p.set_activated_unix_ms(t.activated_ms);
  p.set_dismantled_unix_ms(t.dismantled_ms);
  p.set_build_us(t.build_us);
  p.set_program_us(t.program_us);
  p.set_error_reports(t.error_reports);
  p.set_joined(t.joined);
  p.set_generation(t.generation);
  p.set_moves(t.moves);
  p.set_last_move_unix_ms(t.last_move_ms);
  p.set_last_move_reason(t.last_move_reason);
  p.set_pool_size(t.plan ? t.plan->pool_size : t.req.pool_size);
  p.set_elems_per_packet(t.plan ? t.plan->elems_per_packet : t.req.elems_per_packet);
  if (t.plan) {
    DtypesFromMask(t.plan->dtype_mask, p.mutable_dtypes());
    OpsFromMask(t.plan->op_mask, p.mutable_ops());
    CollsFromMask(t.plan->coll_mask, p.mutable_collectives());
    p.set_root_switch(t.plan->switches[0].name);
    for (const PlanSwitch& ps : t.plan->switches) {
      v1::TreeSwitch* s = p.add_switches();
      s->set_switch_name(ps.name);
      s->set_role(RoleToProto(ps.role));
      s->set_parent(ps.parent);
      if (t.alloc) s->set_slot_base(t.alloc->per_switch.at(ps.name).slot_base);
      s->set_num_children(static_cast<uint32_t>(ps.children.size()));
    }
  }
  for (uint32_t r = 0; r < t.world; ++r) {
    const MemberRec& m = t.members[r];
    if (!m.joined && m.spec.host.empty()) continue;
    v1::TreeMember* tm = p.add_members();
    tm->set_rank(r);
    tm->set_joined(m.joined);
    v1::MemberInfo* mi = tm->mutable_info();
    mi->set_host(m.spec.host);
    if (m.joined) {
      mi->set_ip(m.spec.ip.ToString());
      mi->set_mac(m.spec.mac.ToString());
      mi->set_qpn(m.spec.qpn);
      mi->set_rkey(m.spec.rkey);
      mi->set_va_base(m.spec.va_base);
      mi->set_slot_stride(m.spec.slot_stride);
      mi->set_transport(static_cast<v1::Transport>(m.spec.transport));
    }
    if (t.plan) {
      const MemberSlot& slot = t.plan->member_slot[r];
      const PlanSwitch& ps = t.plan->switches[slot.switch_index];
      tm->set_member_index(t.plan->member_index_of_rank[r]);
      tm->set_switch_name(ps.name);
      tm->set_rank_at_switch(slot.rank_at_switch);
      tm->set_switch_port(ps.children[slot.rank_at_switch].port);
    }
    if (t.state == v1::TREE_ACTIVE) tm->set_last_heartbeat_ms_ago(MsSince(m.last_heartbeat));
  }
  return p;
}

v1::ListTreesResponse Manager::ListTrees() {
  std::lock_guard<std::mutex> lk(mu_);
  v1::ListTreesResponse resp;
  for (const auto& t : dismantled_) *resp.add_trees() = TreeToProtoLocked(*t);
  for (const auto& [id, t] : live_) *resp.add_trees() = TreeToProtoLocked(*t);
  return resp;
}

Expected<v1::GetTreeResponse> Manager::GetTree(const v1::GetTreeRequest& req) {
  if (req.tree_id() == 0 && req.job_id().empty()) return InvalidArgument("give a tree_id or a job_id");
  std::lock_guard<std::mutex> lk(mu_);
  TreePtr t = FindTreeLocked(req.tree_id(), req.job_id());
  if (!t)
    return NotFound(req.tree_id() ? "no tree " + std::to_string(req.tree_id()) +
                                        (req.job_id().empty() ? "" : " of job " + req.job_id())
                                  : "no tree for job " + req.job_id());
  v1::GetTreeResponse resp;
  *resp.mutable_tree() = TreeToProtoLocked(*t);
  return resp;
}

Status Manager::DestroyTree(const v1::DestroyTreeRequest& req) {
  if (req.tree_id() == 0) return InvalidArgument("tree_id is 0");
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(req.tree_id());
    if (it == live_.end()) {
      TreePtr old = FindTreeLocked(req.tree_id(), "");
      if (old)
        return FailedPrecondition("tree " + std::to_string(req.tree_id()) + " is already " +
                                  StateName(old->state) + ": " + old->reason);
      return NotFound("no tree " + std::to_string(req.tree_id()));
    }
    DismantleLocked(it->second, v1::TREE_DESTROYED,
                    "destroyed by operator" + (req.reason().empty() ? "" : ": " + req.reason()), &ops);
  }
  RunOps(std::move(ops));
  return Status::Ok();
}

Expected<v1::AmGetStatsResponse> Manager::GetStats(const v1::AmGetStatsRequest& req) {
  std::vector<std::pair<std::string, std::string>> targets;  // (switch, address)
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (req.tree_id() == 0) {
      for (const auto& [name, rec] : switches_)
        if (rec.alive) targets.emplace_back(name, rec.agent_address);
    } else {
      auto it = live_.find(req.tree_id());
      if (it == live_.end()) {
        if (FindTreeLocked(req.tree_id(), ""))
          return FailedPrecondition("tree " + std::to_string(req.tree_id()) +
                                    " is dismantled; its switches hold no counters for it");
        return NotFound("no tree " + std::to_string(req.tree_id()));
      }
      if (!it->second->plan)
        return FailedPrecondition("tree " + std::to_string(req.tree_id()) + " has no switches yet");
      for (const auto& ps : it->second->plan->switches)
        targets.emplace_back(ps.name, switches_.at(ps.name).agent_address);
    }
  }
  std::vector<Expected<v1::SwitchStats>> results(targets.size(), Status(Code::kUnknown, ""));
  ParallelFor(targets.size(), kSwitchRpcWidth,
              [&](size_t i) { results[i] = clients_.Stats(targets[i].second, req.tree_id()); });
  v1::AmGetStatsResponse resp;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (results[i]) {
      v1::SwitchStats* s = resp.add_switches();
      *s = *results[i];
      if (s->switch_name().empty()) s->set_switch_name(targets[i].first);
    } else {
      resp.add_errors("switch " + targets[i].first + ": " + results[i].status().ToString());
    }
  }
  return resp;
}

Status Manager::WatchEvents(const v1::WatchEventsRequest& req, const Cancelled& cancelled,
                            const std::function<bool(const v1::Event&)>& sink) {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t next =
      req.replay() ? (events_.empty() ? next_event_seq_ : events_.front().first) : next_event_seq_;
  for (;;) {
    std::vector<v1::Event> batch;
    for (const auto& [seq, e] : events_)
      if (seq >= next) batch.push_back(e);
    next = next_event_seq_;
    lk.unlock();
    for (const auto& e : batch)
      if (!sink(e)) return Status::Ok();
    if (req.stop_after_replay()) return Status::Ok();
    lk.lock();
    if (stopping_) return Status::Ok();
    if (cancelled && cancelled()) return Status(Code::kCancelled, "watcher went away");
    if (next_event_seq_ == next) cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
}

void Manager::WriteTimingMetrics(PrometheusText* out) {
  std::lock_guard<std::mutex> lk(mu_);
  out->Family("incin_am_tree_build_seconds", "histogram",
              "AM time per tree programming: tree build, resource allocation and switch configs.");
  build_seconds_.Write("incin_am_tree_build_seconds", {}, out);
  out->Family("incin_am_tree_program_seconds", "histogram",
              "ConfigureTree on every switch of a tree, per programming (in parallel).");
  program_seconds_.Write("incin_am_tree_program_seconds", {}, out);
}

Manager::Usage Manager::ResourceUsage() {
  std::lock_guard<std::mutex> lk(mu_);
  Usage u;
  u.live_trees = live_.size();
  u.tree_ids = tree_ids_.in_use();
  for (const auto& [name, rec] : switches_) {
    const SwitchResources* r = pool_.Get(name);
    if (!r) continue;
    u.qpns += r->qpns.in_use();
    u.free_slots += r->slots.free_total();
  }
  return u;
}

}  // namespace inc::am
