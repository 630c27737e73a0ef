// SPDX-License-Identifier: Apache-2.0
// Who belongs to a group: checking a join request, finding the member's host
// and addresses in the topology, and the ranks of one tree (joined or not,
// which host, last heartbeat). Not thread-safe: the manager calls it under
// its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "am/api.h"
#include "am/model.h"
#include "common/status.h"

namespace inc::am {

constexpr uint32_t kMaxWorld = 64 * 64;  // two levels of 64 children
constexpr uint32_t kMaxQpn = 0xFFFFFF;
constexpr uint32_t kMaxTotalRanks = kMaxWorld * 256;  // several ranks per host

// INVALID_ARGUMENT naming the field when a join cannot be for any tree:
// empty job, world or rank out of range, a QPN outside 1..0xFFFFFF.
Status CheckJoin(const JoinRequest& req);

// The member's host (by name, else by IP) and its IP and MAC (the
// topology's when the member gives none), with its own queue pair facts.
Expected<MemberSpec> ResolveMember(const Topology& topo, const MemberInfo& member);

class GroupMembers {
 public:
  using Clock = std::chrono::steady_clock;

  struct Member {
    bool joined = false;
    // Left an active tree (LeaveGroup); the tree lives on until every
    // member left, so a rank whose last result was lost can still get it.
    bool left = false;
    uint64_t join_seq = 0;  // distinguishes a join from a later one of the same rank
    MemberSpec spec;
    Clock::time_point last_heartbeat;
    std::vector<uint32_t> host_ranks;  // the job's ranks behind the member (several per host)
    uint32_t total_ranks = 0;
    // The host whose member certificate joined the rank ("" in plaintext):
    // only it speaks for the rank (LeaveGroup, MemberHeartbeat, ReportError).
    std::string owner;
  };

  GroupMembers() = default;
  explicit GroupMembers(uint32_t world) : members_(world) {}

  uint32_t world() const { return static_cast<uint32_t>(members_.size()); }
  uint32_t joined() const { return joined_; }
  bool complete() const { return joined_ == world(); }
  const Member& operator[](uint32_t rank) const { return members_[rank]; }

  // The rank that joined from `host`, if any (a tree has one member per host port).
  const uint32_t* RankOnHost(const std::string& host) const;
  void Join(uint32_t rank, const MemberSpec& spec, uint64_t seq);
  // False when the rank had not joined.
  bool Drop(uint32_t rank);
  // A member of an active tree left; true when it was the last one.
  bool Leave(uint32_t rank);
  // Reserved trees know their hosts before anyone joins.
  void SetHost(uint32_t rank, const std::string& host) { members_[rank].spec.host = host; }
  void Heartbeat(uint32_t rank, Clock::time_point when) { members_[rank].last_heartbeat = when; }
  void SetOwner(uint32_t rank, std::string owner) { members_[rank].owner = std::move(owner); }
  void SetHostRanks(uint32_t rank, std::vector<uint32_t> ranks, uint32_t total_ranks) {
    members_[rank].host_ranks = std::move(ranks);
    members_[rank].total_ranks = total_ranks;
  }
  // INVALID_ARGUMENT when a member joining with these ranks behind it does
  // not fit the joined ones: some of them without ranks behind them and some
  // with, a rank already behind another member, or, when it is the last to
  // join, a rank of the job behind no member.
  Status CheckHostRanks(uint32_t rank, const std::vector<uint32_t>& ranks, uint32_t total_ranks) const;
  void HeartbeatAll(Clock::time_point when);
  // Up to `limit` ranks that have not joined, "0,3,7".
  std::string Missing(size_t limit) const;

 private:
  std::vector<Member> members_;  // by rank
  uint32_t joined_ = 0;
  uint32_t left_ = 0;
  std::map<std::string, uint32_t> rank_of_host_;  // joined members
};

}  // namespace inc::am
