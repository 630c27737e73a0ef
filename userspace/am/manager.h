// SPDX-License-Identifier: Apache-2.0
// The aggregation manager's tree lifecycle: groups join, trees are built,
// allocated, programmed on their switches, moved off bad links and
// dismantled; switches register and heartbeat; operators query. It works on
// domain types only (api.h): the gRPC service translates messages at the
// edge. Membership (membership.h), the switch registry (switch_registry.h)
// and the event log (events.h) are its parts. Thread-safe: one mutex guards
// the state; switch RPCs run outside it. Its members are defined in
// manager.cc (lifecycle, switches, operators), manager_persist.cc (the state
// store), manager_mover.cc (tree moves) and manager_roster.cc (members).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "am/api.h"
#include "am/events.h"
#include "am/membership.h"
#include "am/model.h"
#include "am/resources.h"
#include "am/store.h"
#include "am/switch_client.h"
#include "am/switch_registry.h"
#include "common/metrics.h"
#include "common/status.h"

namespace inc::am {

struct AmOptions {
  std::string listen = "127.0.0.1:50051";  // loopback unless configured: never every interface by accident
  uint32_t member_heartbeat_timeout_ms = 5000;
  uint32_t member_heartbeat_interval_ms = 1000;
  uint32_t switch_heartbeat_timeout_ms = 5000;
  uint32_t switch_heartbeat_interval_ms = 1000;
  uint32_t join_timeout_ms = 30000;
  uint32_t default_pool_size = 256;
  uint32_t default_elems_per_packet = 0;  // 0: the largest the tree's switches and MTUs allow
  uint32_t switch_rpc_timeout_ms = 3000;
  uint32_t dismantled_retention_ms = 600000;
  // Trees move off failed leaf-spine links always; off congested ones when
  // a switch reports them with at least this ARN severity (0 = never).
  uint32_t move_on_congestion_severity = 0;
  uint32_t tree_move_holddown_ms = 10000;  // least time between congestion moves of one tree
  size_t max_dismantled = 256;             // dismantled trees kept for operators
  size_t max_events = 1000;                // events kept for WatchEvents replay
  // How the AM dials switch agents (mTLS with its own certificate); null =
  // plaintext, for in-process tests.
  std::shared_ptr<grpc::ChannelCredentials> switch_credentials;
};

class Manager {
 public:
  using Clock = std::chrono::steady_clock;
  using Cancelled = std::function<bool()>;

  // With a store, every change to switches and to trees that hold
  // resources is written to it before the call that made it returns.
  Manager(AmOptions options, Topology topology, std::unique_ptr<Store> store = nullptr);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Loads the store's switches and trees (before Start): the trees keep
  // their resources; switches that register again keep them programmed,
  // trees whose members do not heartbeat within the member heartbeat
  // timeout are dismantled. Fails when the store cannot be read.
  Status Restore();
  void Start();  // heartbeat monitor and background worker
  // Fails waiting members with UNAVAILABLE and ends WatchEvents streams.
  void Stop();

  // Members. JoinGroup waits until the group's tree is active (or fails,
  // times out, or `cancelled` says the caller went away).
  Expected<Assignment> JoinGroup(const JoinRequest& req, const Cancelled& cancelled);
  // `as_host`: as in MemberBeat (api.h).
  Status LeaveGroup(const std::string& job, uint32_t rank,
                    const std::optional<std::string>& as_host = std::nullopt);
  Expected<MemberBeatReply> MemberHeartbeat(const MemberBeat& beat);
  Status ReportError(const ErrorReport& report);

  // Switches. The reply of each is the heartbeat interval / whether the
  // switch must register again.
  Expected<uint32_t> RegisterSwitch(const SwitchRegistration& reg);
  // Whether a switch of this name may register (it is in the topology): the
  // edge asks before it reads the rest of a registration, so an unknown
  // switch hears that first.
  Status CheckSwitchName(const std::string& name) const;
  struct SwitchBeatReply {
    bool reregister = false;  // the AM does not know the switch (restarted, or declared it lost)
  };
  Expected<SwitchBeatReply> SwitchHeartbeat(const SwitchBeat& beat);

  // Operators.
  std::vector<SwitchSummary> ListSwitches();
  Expected<SwitchSummary> GetSwitch(const std::string& name);
  TopologyView GetTopology();
  Expected<TreeInfo> CreateTree(const CreateTreeRequest& req);
  std::vector<TreeInfo> ListTrees();  // dismantled ones still shown, then live ones
  Expected<TreeInfo> GetTree(const TreeRef& ref);
  Status DestroyTree(uint32_t tree_id, const std::string& reason);
  // The agents that hold a tree's counters (every alive switch for tree 0).
  Expected<std::vector<SwitchTarget>> StatsTargets(uint32_t tree_id);
  SwitchClients& switch_clients() { return clients_; }
  // Sends events to `sink` until cancelled, Stop(), or a false return from sink.
  Status WatchEvents(const EventLog::WatchOptions& options, const Cancelled& cancelled,
                     const std::function<bool(const Event&)>& sink);

  // Job credentials an operator revoked (`incinctl job revoke`): those of
  // `job` issued up to now_ms are refused from then on; the revocation is
  // written to the store before this returns and kept until keep_until_ms
  // (when every credential it stops has expired).
  Status RevokeJobCredentials(const std::string& job, uint64_t now_ms, uint64_t keep_until_ms);
  // The job's last revocation (unix ms), 0 if none.
  uint64_t JobRevokedAt(const std::string& job);

  // One pass of the heartbeat monitor (the monitor thread calls it too).
  void CheckHeartbeats();

  // SIGHUP: takes the fields of `next` that may change while the AM runs
  // (kTunableFields); the others keep their start values. Calls in flight
  // finish with the values they read; the heartbeat monitor takes new
  // timeouts at its next pass.
  void Retune(const AmOptions& next);
  // The AmOptions fields Retune takes: the timeouts the AM enforces, the
  // defaults of trees built from now on, the congestion-move policy. The
  // heartbeat intervals are not among them: members and switches learned
  // them when they joined.
  static constexpr uint32_t AmOptions::*kTunableFields[] = {
      &AmOptions::member_heartbeat_timeout_ms,
      &AmOptions::switch_heartbeat_timeout_ms,
      &AmOptions::join_timeout_ms,
      &AmOptions::default_pool_size,
      &AmOptions::default_elems_per_packet,
      &AmOptions::dismantled_retention_ms,
      &AmOptions::move_on_congestion_severity,
      &AmOptions::tree_move_holddown_ms,
  };

  // Resource accounting, for tests: trees holding resources and the number of
  // tree ids and switch QPNs in use.
  struct Usage {
    size_t live_trees = 0;
    size_t tree_ids = 0;
    size_t qpns = 0;
    uint32_t free_slots = 0;
  };
  Usage ResourceUsage();

  // Histograms over the daemon's life, for /metrics: seconds from a tree's
  // last member to its switch configs (build) and ConfigureTree on every
  // switch (program), one observation per programming.
  void WriteTimingMetrics(PrometheusText* out);

 private:
  struct TreeRec {
    uint32_t id = 0;
    uint32_t key = 0;
    std::string job;
    uint32_t world = 0;
    TreeState state = TreeState::kPending;
    bool programming = false;
    bool reserved = false;  // made by CreateTree: hosts fixed, resources held
    std::vector<std::string> reserved_hosts;
    Requirements req;
    GroupMembers members;
    std::optional<TreePlan> plan;
    std::optional<TreeAlloc> alloc;
    std::map<std::string, TreeConfig> configs;  // per switch, once programming started
    Status failure;                             // what waiting members get when the tree fails
    std::string reason;
    uint64_t created_ms = 0, activated_ms = 0, dismantled_ms = 0;
    uint64_t build_us = 0, program_us = 0;
    uint32_t error_reports = 0;
    uint32_t generation = 0;
    uint32_t moves = 0;
    uint64_t last_move_ms = 0;
    std::string last_move_reason;
    Clock::time_point last_move_attempt{};
    bool persisted = false;  // the store holds it
    // Loaded from the store at start: members that do not heartbeat since
    // then are gone with their job.
    bool restored = false;
    Clock::time_point restored_at{};
  };
  struct SwitchOp {
    bool configure = false;  // else remove
    std::string switch_name;
    std::string address;
    uint32_t tree_id = 0;
    TreeConfig config;
  };
  using Ops = std::vector<SwitchOp>;
  using TreePtr = std::shared_ptr<TreeRec>;

  // All *Locked functions run with mu_ held.

  // Lifecycle (manager.cc).
  // Plans and allocates what the tree lacks (JoinGroup and CreateTree alike).
  Status PlaceLocked(TreeRec& t);
  Expected<Assignment> AssignmentLocked(const TreeRec& t, uint32_t rank) const;
  Expected<std::map<std::string, TreeConfig>> ConfigsLocked(const TreeRec& t) const;
  void DismantleLocked(TreePtr t, TreeState state, const std::string& reason, Ops* ops);
  void ReleaseLocked(TreePtr t, Ops* ops);
  bool WantedOnLocked(const TreeRec& t, const std::string& switch_name) const;
  TreePtr FindTreeLocked(uint32_t tree_id, const std::string& job) const;
  TreeInfo InfoLocked(const TreeRec& t) const;
  SwitchSummary SummaryLocked(const std::string& name) const;
  // The ask with the AM's defaults filled in; INVALID_ARGUMENT for a pool
  // no switch can hold.
  Expected<Requirements> RequirementsFor(const TreeAsk& ask) const;

  // JoinGroup without the outcome's count and log line.
  Expected<Assignment> JoinGroupWait(const JoinRequest& req, const Cancelled& cancelled);

  // Builds, allocates and programs a complete group; wakes its waiters.
  void BuildAndProgram(const TreePtr& t);
  void RunOps(Ops ops);       // synchronously, outside mu_
  void RunOpsAsync(Ops ops);  // on the background worker
  void MonitorLoop();
  void WorkerLoop();

  // The state store (manager_persist.cc).
  // Write a tree holding resources to the store / remove it from there (a
  // no-op without a store).
  Status PersistTreeLocked(TreeRec& t);
  Status PersistActivationLocked(const TreePtr& t);
  void ForgetTreeLocked(TreeRec& t);
  Status RestoreTreeLocked(const StoredTree& st, const Clock::time_point& now);

  // The tree mover (manager_mover.cc).
  void CheckPortsLocked(const std::string& switch_name, Ops* ops);
  // Moves a two-level tree to another root (or another link to its root)
  // that avoids down and congested ports; members keep their leaf, slot and
  // rank, so they need not act. False (with why_not) when no such tree
  // exists or the tree cannot move now.
  bool MoveTreeLocked(const TreePtr& t, const std::string& why, Ops* ops, std::string* why_not);
  bool PortCongestedLocked(const std::string& switch_name, const std::string& port) const;

  // The member roster (manager_roster.cc).
  void FailPendingLocked(TreePtr t, const Status& why);
  void DropMemberLocked(TreePtr t, uint32_t rank);
  // PERMISSION_DENIED unless `as_host` (when set) is the host that joined
  // rank `rank` of tree t.
  static Status CheckRankOwnerLocked(const TreeRec& t, uint32_t rank,
                                     const std::optional<std::string>& as_host, const char* method);

  // A field Retune may change: read it through here, never as opts_.field.
  uint32_t Tuned(uint32_t AmOptions::*field) const;

  std::mutex revoke_mu_;                       // a leaf lock
  std::map<std::string, RevokedJob> revoked_;  // guarded by revoke_mu_
  mutable std::mutex tune_mu_;                 // opts_'s kTunableFields (a leaf lock)
  AmOptions opts_;
  const Topology topo_;
  SwitchClients clients_;
  std::unique_ptr<Store> store_;

  std::mutex mu_;
  Histogram build_seconds_{kTimingBuckets};    // guarded by mu_
  Histogram program_seconds_{kTimingBuckets};  // guarded by mu_
  static inline const std::vector<double> kTimingBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                            0.05,   0.1,   0.25,   0.5,   1,    2.5};
  // JoinGroup answers by status code ("OK", "DEADLINE_EXCEEDED", ...): a
  // member whose join failed runs its collectives without the switches.
  std::mutex joins_mu_;  // a leaf lock
  std::map<std::string, uint64_t> joins_by_code_ = {{"OK", 0}};
  std::condition_variable cv_;  // tree state changes, stop
  bool stopping_ = false;
  SwitchRegistry switches_;
  EventLog events_;
  ResourcePool pool_;
  TreeIdAllocator tree_ids_;
  std::map<uint32_t, TreePtr> live_;
  std::map<std::string, uint32_t> job_live_;
  std::deque<TreePtr> dismantled_;
  uint64_t next_join_seq_ = 1;
  std::mt19937 rng_;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<Ops> work_;
  bool work_stop_ = false;
  std::thread monitor_, worker_;
};

}  // namespace inc::am
