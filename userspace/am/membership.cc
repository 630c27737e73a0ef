#include "am/membership.h"

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
  return Status::Ok();
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
  --joined_;
  rank_of_host_.erase(m.spec.host);
  return true;
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
