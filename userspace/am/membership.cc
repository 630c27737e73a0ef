// SPDX-License-Identifier: Apache-2.0
#include "am/membership.h"

#include <algorithm>

namespace inc::am {

Status CheckJoin(const JoinRequest& req) {
  if (req.job.empty()) return InvalidArgument("job_id is empty");
  if (req.world == 0 || req.world > kMaxWorld)
    return InvalidArgument("world_size " + std::to_string(req.world) + " is not in 1.." +
                           std::to_string(kMaxWorld));
  if (req.rank >= req.world)
    return InvalidArgument("rank " + std::to_string(req.rank) + " is not below world_size " +
                           std::to_string(req.world));
  if (req.member.qpn == 0 || req.member.qpn > kMaxQpn)
    return InvalidArgument("member.qpn " + std::to_string(req.member.qpn) + " is not in 1..0xFFFFFF");
  if (req.host_ranks.empty()) {
    if (req.total_ranks)
      return InvalidArgument("total_ranks " + std::to_string(req.total_ranks) + " without host_ranks");
    return Status::Ok();
  }
  // Several ranks per host: world_size counts hosts, total_ranks ranks.
  if (req.total_ranks < req.world || req.total_ranks > kMaxTotalRanks)
    return InvalidArgument("total_ranks " + std::to_string(req.total_ranks) + " is not in world_size " +
                           std::to_string(req.world) + ".." + std::to_string(kMaxTotalRanks));
  if (req.host_ranks.size() > req.total_ranks - (req.world - 1))
    return InvalidArgument(std::to_string(req.host_ranks.size()) + " host_ranks leave fewer than one of " +
                           std::to_string(req.total_ranks) + " total_ranks for each of the other " +
                           std::to_string(req.world - 1) + " members");
  if (req.world == 1 && req.host_ranks.size() != req.total_ranks)
    return InvalidArgument("the only member gives " + std::to_string(req.host_ranks.size()) +
                           " host_ranks, total_ranks is " + std::to_string(req.total_ranks));
  std::vector<uint32_t> sorted = req.host_ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); i++) {
    if (sorted[i] >= req.total_ranks)
      return InvalidArgument("host_ranks has rank " + std::to_string(sorted[i]) + ", not below total_ranks " +
                             std::to_string(req.total_ranks));
    if (i && sorted[i] == sorted[i - 1])
      return InvalidArgument("host_ranks has rank " + std::to_string(sorted[i]) + " twice");
  }
  return Status::Ok();
}

Status GroupMembers::CheckHostRanks(uint32_t rank, const std::vector<uint32_t>& ranks,
                                    uint32_t total_ranks) const {
  uint64_t behind = ranks.size(), joined = 1;
  for (uint32_t r = 0; r < world(); r++) {
    const Member& m = members_[r];
    if (!m.joined || r == rank) continue;
    if (m.host_ranks.empty() != ranks.empty())
      return InvalidArgument("member " + std::to_string(rank) + (ranks.empty() ? " has no" : " has") +
                             " host_ranks, member " + std::to_string(r) +
                             (ranks.empty() ? " has" : " has none") +
                             " (every member of a job gives them, or none)");
    if (m.total_ranks != total_ranks)
      return InvalidArgument("member " + std::to_string(rank) + " says total_ranks " +
                             std::to_string(total_ranks) + ", member " + std::to_string(r) + " said " +
                             std::to_string(m.total_ranks));
    behind += m.host_ranks.size();
    joined++;
    for (uint32_t x : ranks)
      if (std::find(m.host_ranks.begin(), m.host_ranks.end(), x) != m.host_ranks.end())
        return InvalidArgument("member " + std::to_string(rank) + " gives rank " + std::to_string(x) +
                               ", already behind member " + std::to_string(r) + " (host " + m.spec.host +
                               ")");
  }
  // Each member not yet joined still has at least one rank behind it.
  if (!ranks.empty() && behind + (world() - joined) > total_ranks)
    return InvalidArgument("members give " + std::to_string(behind) + " ranks with " +
                           std::to_string(world() - joined) +
                           " members still to join, more than total_ranks " + std::to_string(total_ranks));
  // This member completes the group: every rank of the job must be behind
  // one of its members, or a collective would miss that rank's data. The
  // ranks are distinct and below total_ranks (checked above and per request),
  // so a count short of total_ranks is exactly a rank behind no member; the
  // walk below only names them.
  if (ranks.empty() || joined != world() || behind == total_ranks) return Status::Ok();
  std::vector<bool> covered(total_ranks);
  auto cover = [&](const std::vector<uint32_t>& v) {
    for (uint32_t x : v)
      if (x < total_ranks) covered[x] = true;
  };
  cover(ranks);
  for (uint32_t r = 0; r < world(); r++)
    if (members_[r].joined && r != rank) cover(members_[r].host_ranks);
  constexpr size_t kListed = 8;
  std::string uncovered;
  size_t n = 0;
  for (uint32_t x = 0; x < total_ranks; x++)
    if (!covered[x] && n++ < kListed) uncovered += (uncovered.empty() ? "" : ",") + std::to_string(x);
  return InvalidArgument("member " + std::to_string(rank) + " is the last of " + std::to_string(world()) +
                         " members to join, and rank" + (n == 1 ? " " : "s ") + uncovered +
                         (n > kListed ? " (and " + std::to_string(n - kListed) + " more)" : "") +
                         " of total_ranks " + std::to_string(total_ranks) + (n == 1 ? " is" : " are") +
                         " behind no member (the members give " + std::to_string(behind) + " ranks)");
}

Expected<MemberSpec> ResolveMember(const Topology& topo, const MemberInfo& mi) {
  MemberSpec spec;
  const TopoHost* host = nullptr;
  if (!mi.host.empty()) {
    auto h = topo.hosts.find(mi.host);
    if (h == topo.hosts.end()) return NotFound("member.host \"" + mi.host + "\" is not in the topology");
    host = &h->second;
  } else if (mi.ip) {
    host = topo.HostByIp(*mi.ip);
    if (!host) return NotFound("no topology host has ip " + mi.ip->ToString() + " (set member.host)");
  } else {
    return InvalidArgument("member needs a host or an ip");
  }
  if (mi.ip) {
    spec.ip = *mi.ip;
  } else {
    if (!host->has_ip)
      return InvalidArgument("member.ip is empty and topology host " + host->name + " has no ip");
    spec.ip = host->ip;
  }
  if (mi.mac) {
    spec.mac = *mi.mac;
  } else {
    if (!host->has_mac)
      return InvalidArgument("member.mac is empty and topology host " + host->name + " has no mac");
    spec.mac = host->mac;
  }
  spec.host = host->name;
  spec.qpn = mi.qpn;
  spec.rkey = mi.rkey;
  spec.va_base = mi.va_base;
  spec.slot_stride = mi.slot_stride;
  spec.transport = mi.transport;
  return spec;
}

const uint32_t* GroupMembers::RankOnHost(const std::string& host) const {
  auto it = rank_of_host_.find(host);
  return it == rank_of_host_.end() ? nullptr : &it->second;
}

void GroupMembers::Join(uint32_t rank, const MemberSpec& spec, uint64_t seq) {
  Member& m = members_[rank];
  if (!m.joined) ++joined_;
  m.joined = true;
  m.spec = spec;
  m.join_seq = seq;
  rank_of_host_[spec.host] = rank;
}

bool GroupMembers::Drop(uint32_t rank) {
  Member& m = members_[rank];
  if (!m.joined) return false;
  m.joined = false;
  m.join_seq = 0;
  m.owner.clear();
  --joined_;
  rank_of_host_.erase(m.spec.host);
  return true;
}

bool GroupMembers::Leave(uint32_t rank) {
  Member& m = members_[rank];
  if (m.joined && !m.left) {
    m.left = true;
    ++left_;
  }
  return left_ == joined_;
}

void GroupMembers::HeartbeatAll(Clock::time_point when) {
  for (Member& m : members_) m.last_heartbeat = when;
}

std::string GroupMembers::Missing(size_t limit) const {
  std::string missing;
  size_t n = 0;
  for (uint32_t r = 0; r < world() && n < limit; ++r)
    if (!members_[r].joined) {
      missing += (missing.empty() ? "" : ",") + std::to_string(r);
      ++n;
    }
  return missing;
}

}  // namespace inc::am
