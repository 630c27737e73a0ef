// SPDX-License-Identifier: Apache-2.0
// Manager's member roster (rank owners, leaving, heartbeats, errors): apart as it never builds a tree.
#include "am/manager.h"

namespace inc::am {

Status Manager::CheckRankOwnerLocked(const TreeRec& t, uint32_t rank,
                                     const std::optional<std::string>& as_host, const char* method) {
  if (!as_host || rank >= t.world) return Status::Ok();
  const GroupMembers::Member& m = t.members[rank];
  const std::string which = std::string(method) + " for rank " + std::to_string(rank) + " of tree " +
                            std::to_string(t.id) + " (job " + t.job + ")";
  if (!m.joined || m.owner.empty())
    return PermissionDenied(which + " from host '" + *as_host +
                            "': no host joined as that rank, so no host speaks for it");
  if (m.owner != *as_host)
    return PermissionDenied(which + ": the rank was joined from host '" + m.owner +
                            "', the certificate is host '" + *as_host + "'s");
  return Status::Ok();
}

void Manager::FailPendingLocked(TreePtr t, const Status& why) {
  t->failure = why;
  Ops none;
  DismantleLocked(t, TreeState::kFailed, why.message(), &none);
}

void Manager::DropMemberLocked(TreePtr t, uint32_t rank) {
  if (!t->members.Drop(rank)) return;
  if (t->members.joined() == 0 && !t->reserved && t->state == TreeState::kPending) {
    // Nobody is waiting for this group any more: forget it.
    live_.erase(t->id);
    tree_ids_.Free(t->id);
    job_live_.erase(t->job);
    events_.Append("group_abandoned", "job " + t->job + ": every member left or gave up", t->id, "", t->job);
  }
  cv_.notify_all();
}

Status Manager::LeaveGroup(const std::string& job, uint32_t rank, const std::optional<std::string>& as_host) {
  if (job.empty()) return InvalidArgument("job_id is empty");
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto j = job_live_.find(job);
    if (j == job_live_.end()) {
      if (FindTreeLocked(0, job)) return Status::Ok();  // already dismantled
      return NotFound("job " + job + " has no tree");
    }
    TreePtr t = live_.at(j->second);
    if (rank >= t->world)
      return InvalidArgument("rank " + std::to_string(rank) + " is not below world_size " +
                             std::to_string(t->world));
    const std::string who = "rank " + std::to_string(rank) + " of job " + t->job;
    if (!t->members[rank].joined) {
      // Leaving a finished tree that another rank's new group replaced.
      for (auto d = dismantled_.rbegin(); d != dismantled_.rend(); ++d)
        if ((*d)->job == job && rank < (*d)->world && (*d)->members[rank].joined)
          return CheckRankOwnerLocked(**d, rank, as_host, "LeaveGroup");
      if (as_host) return CheckRankOwnerLocked(*t, rank, as_host, "LeaveGroup");
      return NotFound(who + " has not joined");
    }
    // A waiting rank too: another host's LeaveGroup would abort its JoinGroup.
    INC_RETURN_IF_ERROR(CheckRankOwnerLocked(*t, rank, as_host, "LeaveGroup"));
    if (t->state == TreeState::kPending && !t->programming) {
      DropMemberLocked(t, rank);
      events_.Append("member_left", who + " left before the tree was built", t->id, "", t->job, rank);
    } else if (!t->members[rank].left) {
      // The tree stays until every member left: a member lingering before
      // its own LeaveGroup may still retransmit for a lost last result, and
      // must not see its tree destroyed under it.
      const std::string host = t->members[rank].spec.host;
      if (t->members.Leave(rank)) {
        DismantleLocked(t, TreeState::kDestroyed,
                        "every rank left the group (the last: " + who + ", host " + host + ")", &ops);
      } else {
        events_.Append("member_left", who + " (host " + host + ") left the group", t->id, "", t->job, rank);
      }
    }
  }
  RunOps(std::move(ops));
  return Status::Ok();
}

Expected<MemberBeatReply> Manager::MemberHeartbeat(const MemberBeat& beat) {
  if (beat.tree.job.empty() && beat.tree.tree_id == 0)
    return InvalidArgument("a member heartbeat needs a tree_id or a job_id");
  std::lock_guard<std::mutex> lk(mu_);
  TreePtr t = FindTreeLocked(beat.tree.tree_id, beat.tree.job);
  if (!t)
    return NotFound("no tree " + std::to_string(beat.tree.tree_id) +
                    (beat.tree.job.empty() ? "" : " of job " + beat.tree.job));
  if (beat.rank >= t->world)
    return InvalidArgument("rank " + std::to_string(beat.rank) + " is not below world_size " +
                           std::to_string(t->world));
  INC_RETURN_IF_ERROR(CheckRankOwnerLocked(*t, beat.rank, beat.as_host, "MemberHeartbeat"));
  MemberBeatReply reply;
  reply.state = t->state;
  reply.reason = t->reason;
  reply.generation = t->generation;
  if (t->plan) reply.root_switch = t->plan->switches[0].name;
  if (t->state == TreeState::kActive) {
    if (!t->members[beat.rank].joined)
      return NotFound("rank " + std::to_string(beat.rank) + " is not a member of tree " +
                      std::to_string(t->id));
    t->members.Heartbeat(beat.rank, Clock::now());
  }
  return reply;
}

Status Manager::ReportError(const ErrorReport& report) {
  Ops ops;
  {
    std::lock_guard<std::mutex> lk(mu_);
    TreePtr t = FindTreeLocked(report.tree.tree_id, report.tree.job);
    if (!t) return NotFound("no tree " + std::to_string(report.tree.tree_id) + " of job " + report.tree.job);
    if (report.as_host && report.rank >= t->world)
      return InvalidArgument("rank " + std::to_string(report.rank) + " is not below world_size " +
                             std::to_string(t->world));
    INC_RETURN_IF_ERROR(CheckRankOwnerLocked(*t, report.rank, report.as_host, "ReportError"));
    ++t->error_reports;
    const std::string what = "rank " + std::to_string(report.rank) + " of job " + t->job + " on tree " +
                             std::to_string(t->id) + ": " + report.error + " (msg " +
                             std::to_string(report.msg_id) + ", " + std::to_string(report.timeouts) +
                             " timeouts)";
    events_.Append("member_error", what, t->id, "", t->job, report.rank);
    // A member that gave up must not leave the others running on the
    // switch: the tree fails for everyone (each member's next heartbeat
    // says FAILED and aborts its collectives).
    if (report.gave_up && !Dismantled(t->state))
      DismantleLocked(t, TreeState::kFailed,
                      "rank " + std::to_string(report.rank) + " gave up: " + report.error, &ops);
  }
  // Removed from the switches before the reporter hears back, so a late
  // rank's contribution can no longer complete the message it gave up on.
  RunOps(std::move(ops));
  return Status::Ok();
}

}  // namespace inc::am
