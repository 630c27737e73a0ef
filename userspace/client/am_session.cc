// SPDX-License-Identifier: Apache-2.0
// AmSession (client/am_session.h): the gRPC calls a Communicator makes to
// the aggregation manager, and the heartbeat thread.
#include "client/am_session.h"

#include <chrono>
#include <utility>

#include "client/engine.h"
#include "common/log.h"
#include "common/rpc_status.h"

namespace inc::client {

namespace {

const char* TreeStateName(inc::v1::TreeState s) {
  switch (s) {
    case inc::v1::TREE_PENDING: return "PENDING";
    case inc::v1::TREE_ACTIVE: return "ACTIVE";
    case inc::v1::TREE_FAILED: return "FAILED";
    case inc::v1::TREE_DESTROYED: return "DESTROYED";
    default: return "UNSPECIFIED";
  }
}

std::chrono::system_clock::time_point DeadlineIn(uint32_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

Assignment AssignmentFromProto(const inc::v1::MemberAssignment& a) {
  Assignment o;
  o.tree_id = a.tree_id();
  o.key = a.key();
  o.pool_size = a.pool_size();
  o.elems_per_packet = a.elems_per_packet();
  o.rank_at_switch = a.rank_at_switch();
  o.member_index = a.member_index();
  o.switch_name = a.switch_name();
  o.switch_ip = a.switch_ip();
  o.switch_mac = a.switch_mac();
  o.switch_qpn = a.switch_qpn();
  o.heartbeat_interval_ms = a.heartbeat_interval_ms();
  o.member_index_of_rank.assign(a.member_index_of_rank().begin(), a.member_index_of_rank().end());
  o.world_size = a.world_size();
  for (int v : a.dtypes()) o.dtypes.push_back(static_cast<uint32_t>(v));
  for (int v : a.ops()) o.ops.push_back(static_cast<uint32_t>(v));
  for (int v : a.collectives()) o.collectives.push_back(static_cast<uint32_t>(v));
  return o;
}

AmSession::AmSession(const CommunicatorOptions& options,
                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : opt_(options), credentials_(std::move(credentials)) {
  // A restarted AM keeps the member's tree only if the member heartbeats
  // within the AM's member heartbeat timeout (5 s by default): reconnect
  // within a second instead of gRPC's growing back-off (1 s, 1.6 s, 2.6 s,
  // ... up to two minutes).
  grpc::ChannelArguments args;
  // (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC uses it as the least time
  // a connection attempt may take, and a loaded host needs more than a
  // few hundred milliseconds.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  am_ = inc::v1::AggregationManager::NewStub(grpc::CreateCustomChannel(opt_.am_address, credentials_, args));
}

AmSession::~AmSession() {
  Close();
}

Expected<Assignment> AmSession::Join(const std::string& credential, const inc::v1::MemberInfo& member,
                                     const std::vector<uint32_t>& host_ranks, uint32_t total_ranks) {
  inc::v1::JoinGroupRequest req;
  req.set_job_id(opt_.job_id);
  req.set_job_credential(credential);
  req.set_rank(opt_.rank);
  req.set_world_size(opt_.world_size);
  req.set_timeout_ms(opt_.join_timeout_ms);
  req.set_pool_size(opt_.pool_size);
  req.set_elems_per_packet(opt_.elems_per_packet);
  for (uint32_t r : host_ranks) req.add_host_ranks(r);
  req.set_total_ranks(total_ranks);
  *req.mutable_member() = member;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(opt_.join_timeout_ms + 5000));
  ctx.set_wait_for_ready(true);  // ranks may start before the AM listens
  inc::v1::JoinGroupResponse resp;
  LOG_INFO << "rank " << opt_.rank << " joining job " << opt_.job_id << " (world " << opt_.world_size
           << ") at " << opt_.am_address;
  grpc::Status gs = am_->JoinGroup(&ctx, req, &resp);
  if (!gs.ok()) return FromGrpcStatus(gs, "JoinGroup at " + opt_.am_address);
  joined_ = true;
  Assignment asg = AssignmentFromProto(resp.assignment());
  if (asg.world_size && asg.world_size != opt_.world_size)
    return FailedPrecondition("AM assigned world size " + std::to_string(asg.world_size) + ", expected " +
                              std::to_string(opt_.world_size));
  return asg;
}

void AmSession::StartHeartbeats(uint32_t tree_id, uint32_t interval_ms, Engine* engine) {
  hb_thread_ =
      std::thread([this, tree_id, interval_ms, engine] { Heartbeats(tree_id, interval_ms, engine); });
}

// Heartbeats go over their own channel, replaced after every failure: a
// restarted AM keeps this member's tree only if a heartbeat reaches it
// within its member heartbeat timeout, and a channel that saw the AM go
// away keeps failing calls with its last error ("Connection refused")
// while it waits out gRPC's reconnect back-off, for longer than that.
std::unique_ptr<inc::v1::AggregationManager::Stub> AmSession::FreshStub() const {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // not the back-off of another channel's connection
  return inc::v1::AggregationManager::NewStub(grpc::CreateCustomChannel(
      opt_.am_address, credentials_ ? credentials_ : grpc::InsecureChannelCredentials(), args));
}

void AmSession::Heartbeats(uint32_t tree_id, uint32_t interval_ms, Engine* engine) {
  uint32_t interval = interval_ms ? interval_ms : 1000;
  std::unique_ptr<inc::v1::AggregationManager::Stub> hb_am;
  std::unique_lock<std::mutex> lock(hb_mu_);
  while (!hb_cv_.wait_for(lock, std::chrono::milliseconds(interval), [this] { return hb_stop_; })) {
    lock.unlock();
    if (!hb_am) hb_am = FreshStub();
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(opt_.rpc_timeout_ms));
    inc::v1::MemberHeartbeatRequest req;
    req.set_job_id(opt_.job_id);
    req.set_rank(opt_.rank);
    req.set_tree_id(tree_id);
    inc::v1::MemberHeartbeatResponse resp;
    grpc::Status s = hb_am->MemberHeartbeat(&ctx, req, &resp);
    if (!s.ok()) {
      if (hb_failed_++ == 0) {
        LOG_WARN << "member heartbeat: " << FromGrpcStatus(s).ToString();
      }
      hb_am.reset();
    } else {
      OnHeartbeatReply(resp, tree_id, engine);
    }
    lock.lock();
  }
}

void AmSession::OnHeartbeatReply(const inc::v1::MemberHeartbeatResponse& resp, uint32_t tree_id,
                                 Engine* engine) {
  {
    std::lock_guard<std::mutex> l(state_mu_);
    tree_state_ = TreeStateName(resp.tree_state());
  }
  // A moved tree keeps this member's switch, QPN and slots: only say so.
  if (resp.generation() && resp.generation() != tree_generation_) {
    if (tree_generation_) {
      LOG_INFO << "tree " << tree_id << " moved: root switch now " << resp.root_switch() << " (generation "
               << resp.generation() << ")";
    }
    tree_generation_ = resp.generation();
  }
  if ((resp.tree_state() == inc::v1::TREE_FAILED || resp.tree_state() == inc::v1::TREE_DESTROYED) &&
      !engine->aborted()) {
    const std::string why = std::string("the AM reports tree ") + std::to_string(tree_id) + " " +
                            TreeStateName(resp.tree_state()) +
                            (resp.reason().empty() ? "" : ": " + resp.reason());
    // A tree destroyed while this rank only lingers before leaving is
    // the normal end of a job (another rank started the next group).
    if (resp.tree_state() == inc::v1::TREE_FAILED)
      LOG_ERROR << why;
    else if (lingering_.load())
      LOG_INFO << why;
    else
      LOG_WARN << why;
    engine->Abort(why);
  }
}

void AmSession::ReportError(uint32_t tree_id, uint32_t msg_id, uint32_t timeouts, const std::string& error) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(opt_.rpc_timeout_ms));
  inc::v1::ReportErrorRequest req;
  req.set_job_id(opt_.job_id);
  req.set_rank(opt_.rank);
  req.set_tree_id(tree_id);
  req.set_error(error);
  req.set_msg_id(msg_id);
  req.set_timeouts(timeouts);
  req.set_gave_up(true);
  inc::v1::ReportErrorResponse resp;
  grpc::Status s = am_->ReportError(&ctx, req, &resp);
  if (!s.ok()) {
    LOG_WARN << "ReportError: " << FromGrpcStatus(s).ToString();
  }
}

void AmSession::Close() {
  {
    std::lock_guard<std::mutex> l(hb_mu_);
    hb_stop_ = true;
  }
  hb_cv_.notify_all();
  if (hb_thread_.joinable()) hb_thread_.join();
  if (joined_) {
    joined_ = false;
    Leave();
  }
}

void AmSession::Leave() {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(opt_.rpc_timeout_ms));
  inc::v1::LeaveGroupRequest req;
  req.set_job_id(opt_.job_id);
  req.set_rank(opt_.rank);
  inc::v1::LeaveGroupResponse resp;
  grpc::Status s = am_->LeaveGroup(&ctx, req, &resp);
  if (!s.ok()) {
    LOG_WARN << "LeaveGroup: " << FromGrpcStatus(s).ToString();
  } else {
    LOG_INFO << "rank " << opt_.rank << " left job " << opt_.job_id;
  }
}

std::string AmSession::tree_state() const {
  std::lock_guard<std::mutex> l(state_mu_);
  return tree_state_;
}

}  // namespace inc::client
