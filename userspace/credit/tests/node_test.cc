// SPDX-License-Identifier: Apache-2.0
// The credit signalling state machine on a small in-memory network of four
// nodes, two paths between the sites:
//
//        s-a ── A (transit) ── a-r
//   S  <                              >  R
//        s-b ── B (transit) ── b-r
//
// S is the sender's gateway, R the receiver's. Messages queue and are
// delivered by Pump(), so no node is re-entered from its own send callback.
#include "credit/node.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

namespace inc::credit {
namespace {

constexpr uint64_t kMs = 1000000;

SipKey Key() {
  SipKey k{};
  for (size_t i = 0; i < k.size(); i++) k[i] = static_cast<uint8_t>(0x40 + i);
  return k;
}

uint32_t Ip(uint8_t c, uint8_t d) {
  return 10u << 24 | c << 8 | d;
}

FlowId Flow() {
  FlowId f;
  f.src_ip = 0xc0a8010a;
  f.dst_ip = 0xc0a80214;
  f.src_port = 0xc011;
  f.dest_qpn = 0x11;
  return f;
}

struct Delivery {
  std::string node, interface, from;
  std::vector<uint8_t> bytes;
};

class Net {
 public:
  uint64_t now = 1000 * kMs;
  std::map<std::string, std::unique_ptr<Node>> nodes;
  std::map<std::string, std::vector<Event>> events;
  // Messages sent by (node, interface) in here are lost.
  std::set<std::pair<std::string, std::string>> cut;
  // Messages of these RSVP types are lost everywhere.
  std::set<uint8_t> lost_types;
  // Every message in flight, for tests that tamper with or replay one.
  std::vector<Delivery> log;

  // receiver_by_prefix: R knows only that the destination's /24 is behind it
  // (incswitchd's local_prefixes), not the flow.
  explicit Net(uint32_t cost_sa = 0, uint32_t cost_sb = 0, bool receiver_by_prefix = false)
      : receiver_by_prefix_(receiver_by_prefix) {
    Link("S", "s-a", Ip(1, 1), "A", "a-s", Ip(1, 2));
    Link("S", "s-b", Ip(2, 1), "B", "b-s", Ip(2, 2));
    ifaces_["S"][0].cost = cost_sa;
    ifaces_["S"][1].cost = cost_sb;
    Link("A", "a-r", Ip(3, 1), "R", "r-a", Ip(3, 2));
    Link("B", "b-r", Ip(4, 1), "R", "r-b", Ip(4, 2));
    Add("S", 1 << 20, CreditUnit::kBytes);
    Add("A", 256 * 1024, CreditUnit::kBytes);
    Add("B", 2 << 20, CreditUnit::kMegabytes);  // the draft's MB unit
    Add("R", 512 * 1024, CreditUnit::kBytes);
    EXPECT_TRUE(nodes["S"]->ConfigureFlow({Flow(), Role::kSenderGateway, {"s-a", "s-b"}}).ok());
    if (!receiver_by_prefix) {
      EXPECT_TRUE(nodes["R"]->ConfigureFlow({Flow(), Role::kReceiverGateway, {}}).ok());
    }
  }

  Node& operator[](const std::string& n) { return *nodes.at(n); }

  void Pump() {
    while (!queue_.empty()) {
      Delivery d = queue_.front();
      queue_.pop_front();
      nodes.at(d.node)->Receive(d.bytes.data(), d.bytes.size(), d.interface);
    }
  }

  void Deliver(const Delivery& d) { nodes.at(d.node)->Receive(d.bytes.data(), d.bytes.size(), d.interface); }

  void TickAll() {
    for (auto& [n, node] : nodes) node->Tick();
    Pump();
  }

  // `ticks` rounds of: the clock moves 100 ms, every node ticks.
  void TickEvery100Ms(int ticks) {
    for (int i = 0; i < ticks; i++) {
      now += 100 * kMs;
      TickAll();
    }
  }

  NextHopStatus HopOf(const std::string& node, const std::string& interface) {
    auto s = nodes.at(node)->Flow(Flow());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok())
      for (const auto& h : s->next_hops)
        if (h.interface == interface) return h;
    ADD_FAILURE() << node << " has no next hop on " << interface;
    return {};
  }

 private:
  struct End {
    std::string node, interface;
  };
  std::map<std::pair<std::string, std::string>, End> peer_;
  std::map<std::string, std::vector<Interface>> ifaces_;
  std::deque<Delivery> queue_;
  bool receiver_by_prefix_ = false;

  void Link(const std::string& n1, const std::string& i1, uint32_t ip1, const std::string& n2,
            const std::string& i2, uint32_t ip2) {
    peer_[{n1, i1}] = {n2, i2};
    peer_[{n2, i2}] = {n1, i1};
    ifaces_[n1].push_back({i1, ip1, ip2});
    ifaces_[n2].push_back({i2, ip2, ip1});
  }

  void Add(const std::string& name, uint64_t reserve, CreditUnit unit) {
    NodeConfig c;
    c.name = name;
    c.interfaces = ifaces_[name];
    c.key_id = 7;
    c.key = Key();
    c.heartbeat_ms = 300;
    c.reserve_bytes = reserve;
    c.unit = unit;
    c.quantum_bytes = 64 * 1024;
    c.flush_ms = 10;
    if (name == "R" && receiver_by_prefix_) c.local_prefixes.push_back({Flow().dst_ip & 0xffffff00u, 24});
    auto node = Node::Create(
        c, [this] { return now; },
        [this, name](const std::vector<uint8_t>& bytes, const std::string& interface) {
          if (cut.count({name, interface}) || lost_types.count(bytes.at(1))) return;
          const End& to = peer_.at({name, interface});
          Delivery d{to.node, to.interface, name, bytes};
          log.push_back(d);
          queue_.push_back(d);
        },
        [this, name](const Event& e) { events[name].push_back(e); });
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    nodes[name] = std::move(*node);
  }
};

// S sends `packets` of `size` bytes on its primary; each transit forwards
// what it received at once and R delivers it: all free their buffer.
uint64_t SendThrough(Net& net, int packets, uint64_t size) {
  uint64_t sent = 0;
  for (int i = 0; i < packets; i++) {
    auto out = net["S"].Consume(Flow(), size);
    if (!out.ok()) break;
    std::string transit = *out == "s-a" ? "A" : "B";
    std::string in = transit == "A" ? "a-s" : "b-s";
    auto next = net[transit].Consume(Flow(), size);
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_TRUE(net[transit].Forwarded(Flow(), in, size).ok());
    EXPECT_TRUE(net["R"].Forwarded(Flow(), transit == "A" ? "r-a" : "r-b", size).ok());
    net.Pump();
    sent += size;
  }
  return sent;
}

TEST(CreditNode, PathAndResvGiveEveryHopItsNextHopsCredit) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();

  auto s = net["S"].Flow(Flow());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->role, Role::kSenderGateway);
  ASSERT_EQ(s->next_hops.size(), 2u);
  EXPECT_EQ(s->next_hops[0].interface, "s-a");  // A answered first
  EXPECT_EQ(s->next_hops[0].state, HopState::kPrimary);
  EXPECT_EQ(s->next_hops[0].address, Ip(1, 2));
  EXPECT_EQ(s->next_hops[0].available, 256u * 1024);
  EXPECT_EQ(s->next_hops[1].interface, "s-b");
  EXPECT_EQ(s->next_hops[1].state, HopState::kBackup);
  EXPECT_EQ(s->next_hops[1].available, 2u << 20);  // B speaks MB

  EXPECT_EQ(net["A"].Flow(Flow())->role, Role::kTransit);
  EXPECT_EQ(net.HopOf("A", "a-r").available, 512u * 1024);
  EXPECT_EQ(net.HopOf("B", "b-r").available, 512u * 1024);
  auto r = net["R"].Flow(Flow());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->role, Role::kReceiverGateway);
  EXPECT_TRUE(r->next_hops.empty());
  EXPECT_EQ(r->upstreams.size(), 2u);

  ASSERT_EQ(net.events["S"].size(), 3u);
  EXPECT_EQ(net.events["S"][0].kind, Event::Kind::kNextHopAdded);
  EXPECT_EQ(net.events["S"][1].kind, Event::Kind::kPrimaryChanged);
  EXPECT_EQ(net.events["S"][1].interface, "s-a");
  EXPECT_EQ(net.events["S"][2].kind, Event::Kind::kNextHopAdded);
  for (const auto& [n, node] : net.nodes) {
    for (uint64_t c : node->counters().rejects) EXPECT_EQ(c, 0u) << n;
    EXPECT_EQ(node->counters().wrong_neighbour, 0u) << n;
  }
}

TEST(CreditNode, APathToALocalPrefixMakesTheNodeItsReceiverGateway) {
  Net net(0, 0, /*receiver_by_prefix=*/true);
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  auto r = net["R"].Flow(Flow());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->role, Role::kReceiverGateway);
  EXPECT_TRUE(r->next_hops.empty());
  EXPECT_EQ(r->upstreams.size(), 2u);
  // R floods nothing back: A and B each learned one upstream only.
  EXPECT_EQ(net["A"].Flow(Flow())->upstreams.size(), 1u);
  EXPECT_EQ(net.HopOf("S", "s-a").available, 256u * 1024);
  EXPECT_EQ(net.HopOf("A", "a-r").available, 512u * 1024);
  // Data through R returns credit as for a configured receiver.
  EXPECT_EQ(SendThrough(net, 100, 1024), 100u * 1024);
  net.now += 20 * kMs;
  net.TickAll();
  EXPECT_EQ(net.HopOf("A", "a-r").available, 512u * 1024);
}

TEST(CreditNode, SenderStopsAtItsCreditAndReturnsRefillIt) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  // A holds 256 KiB: 255 packets of 1 KiB go before any return is due...
  for (int i = 0; i < 255; i++) ASSERT_TRUE(net["S"].Consume(Flow(), 1024).ok()) << i;
  EXPECT_EQ(net.HopOf("S", "s-a").available, 1024u);
  auto over = net["S"].Consume(Flow(), 1025);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(net.HopOf("S", "s-a").consumed, 255u * 1024);
  // ...then A forwards them; its returns go in 64 KiB batches.
  uint64_t resv_before = net["S"].Flow(Flow())->messages_in;
  for (int i = 0; i < 255; i++) {
    ASSERT_TRUE(net["A"].Consume(Flow(), 1024).ok());
    ASSERT_TRUE(net["A"].Forwarded(Flow(), "a-s", 1024).ok());
  }
  net.Pump();
  EXPECT_EQ(net["S"].Flow(Flow())->messages_in - resv_before, 3u);  // 192 KiB in 3 quanta
  EXPECT_EQ(net.HopOf("S", "s-a").available, 1024u + 192 * 1024);
  // The 63 KiB left over go back after the flush interval.
  net.now += 10 * kMs;
  net.TickAll();
  EXPECT_EQ(net.HopOf("S", "s-a").available, 256u * 1024);
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 0u);
  auto up = net["A"].Flow(Flow())->upstreams.at(0);
  EXPECT_EQ(up.freed_total, 255u * 1024);
  EXPECT_EQ(up.resv_messages, 5u);  // initial + 3 quanta + 1 flush
  EXPECT_GT(up.overhead, 0.0);
}

// SIGHUP's retune: a running upstream (A toward S) returns credit in the
// new quantum from then on; a quantum above the reserve is refused and
// changes nothing.
TEST(CreditNode, RetunedBatchingAppliesToRunningUpstreams) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  auto returns = [&] { return net["A"].Flow(Flow())->upstreams.at(0).resv_messages; };
  SendThrough(net, 64, 1024);  // one 64 KiB quantum
  const uint64_t before = returns();
  EXPECT_EQ(net["A"].Retune(256 * 1024 + 1, 10, 1000).code(), Code::kInvalidArgument);
  SendThrough(net, 32, 1024);  // half the old quantum: nothing due yet
  EXPECT_EQ(returns(), before);
  ASSERT_TRUE(net["A"].Retune(16 * 1024, 10, 1000).ok());
  SendThrough(net, 32, 1024);  // 48 KiB pending now crosses 16 KiB batches
  EXPECT_GT(returns(), before);
  const uint64_t after_retune = returns();
  SendThrough(net, 16, 1024);  // exactly one new quantum
  EXPECT_EQ(returns(), after_retune + 1);
}

TEST(CreditNode, ALostReturnIsRepairedByTheNext) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  SendThrough(net, 64, 1024);  // A's first quantum return...
  net.cut.insert({"A", "a-s"});
  net.log.clear();
  SendThrough(net, 64, 1024);  // ...the second is lost
  net.cut.clear();
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 64u * 1024);
  SendThrough(net, 64, 1024);
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 0u);
  EXPECT_EQ(net.HopOf("S", "s-a").available, 256u * 1024);
}

TEST(CreditNode, ASilentPrimaryFailsOverToTheBackupAfterTheHeartbeat) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  SendThrough(net, 100, 1024);
  net.now += 10 * kMs;
  net.TickAll();  // A's partial batch goes back: nothing outstanding
  ASSERT_EQ(net.HopOf("S", "s-a").outstanding, 0u);
  // A stops returning credit (its link toward S is cut) with data in flight.
  net.cut.insert({"A", "a-s"});
  ASSERT_TRUE(net["S"].Consume(Flow(), 4096).ok());
  uint64_t started = net.now;
  net.now = started + 299 * kMs;
  net["S"].Tick();
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
  net.now = started + 300 * kMs;
  net["S"].Tick();
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kFailed);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  const auto& ev = net.events["S"];
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].kind, Event::Kind::kNextHopFailed);
  EXPECT_EQ(ev[ev.size() - 2].interface, "s-a");
  EXPECT_EQ(ev.back().kind, Event::Kind::kPrimaryChanged);
  EXPECT_EQ(ev.back().interface, "s-b");
  // Traffic now goes through B with B's credit, none of it refused.
  auto out = net["S"].Consume(Flow(), 1024);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "s-b");
  EXPECT_EQ(SendThrough(net, 3000, 1024), 3000u * 1024);  // more than B's 2 MiB: returns keep it going
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  // The failed hop's account keeps what was in flight (the transport's
  // business) until it recovers.
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 4096u);
}

TEST(CreditNode, TheCheapestNextHopIsPrimaryWhateverAnsweredFirst) {
  Net net(/*cost_sa=*/20, /*cost_sb=*/10);
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kBackup);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  auto out = net["S"].Consume(Flow(), 1024);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "s-b");
  const auto& ev = net.events["S"];
  ASSERT_EQ(ev.size(), 4u);  // added s-a, primary s-a, added s-b, primary s-b
  EXPECT_EQ(ev[3].kind, Event::Kind::kPrimaryChanged);
  EXPECT_EQ(ev[3].interface, "s-b");
}

TEST(CreditNode, AFailedHopThatSpeaksAgainRecoversAsABackup) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  net.cut.insert({"A", "a-s"});
  ASSERT_TRUE(net["S"].Consume(Flow(), 4096).ok());
  net.now += 300 * kMs;
  net.TickAll();
  ASSERT_EQ(net.HopOf("S", "s-a").state, HopState::kFailed);
  net.cut.clear();  // the link heals: A answers S's next refreshed PATH
  net.now += 1000 * kMs;
  net.TickAll();
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kBackup);
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 0u);  // the lost bytes are not owed any more
  EXPECT_EQ(net.HopOf("S", "s-a").available, 256u * 1024);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  EXPECT_EQ(net.events["S"].back().kind, Event::Kind::kNextHopRecovered);
}

TEST(CreditNode, TheSenderRefreshesPathAndTransitsPassItOn) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  uint64_t a_in = net["A"].Flow(Flow())->messages_in, r_in = net["R"].Flow(Flow())->messages_in;
  net.now += 999 * kMs;
  net["S"].Tick();
  net.Pump();
  EXPECT_EQ(net["A"].Flow(Flow())->messages_in, a_in);
  net.now += 1 * kMs;
  net["S"].Tick();
  net.Pump();
  EXPECT_EQ(net["A"].Flow(Flow())->messages_in, a_in + 2);  // the PATH and R's answer to it
  EXPECT_EQ(net["R"].Flow(Flow())->messages_in, r_in + 2);  // via A and via B
  EXPECT_EQ(net["S"].Flow(Flow())->next_hops.size(), 2u);
}

TEST(CreditNode, LosingEveryNextHopReportsNoPath) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  net.cut = {{"A", "a-s"}, {"B", "b-s"}};
  ASSERT_TRUE(net["S"].Consume(Flow(), 1024).ok());
  net.now += 300 * kMs;
  net["S"].Tick();
  ASSERT_TRUE(net["S"].Consume(Flow(), 1024).ok());  // now on B
  net.now += 300 * kMs;
  net["S"].Tick();
  EXPECT_EQ(net.events["S"].back().kind, Event::Kind::kNoPath);
  EXPECT_EQ(net["S"].Consume(Flow(), 1).status().code(), Code::kUnavailable);
}

TEST(CreditNode, KeepalivesHoldAnIdleButBackPressuredHopAlive) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  // A receives data but cannot forward it (it holds it, no Forwarded): no
  // credit returns, only keepalive RESVs every heartbeat/3.
  ASSERT_TRUE(net["S"].Consume(Flow(), 4096).ok());
  ASSERT_TRUE(net["A"].SetQueuedBytes(Flow(), 4096).ok());
  for (int i = 0; i < 10; i++) {
    net.now += 100 * kMs;
    net.TickAll();
  }
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
  EXPECT_EQ(net.HopOf("S", "s-a").outstanding, 4096u);
}

// R no longer answers A (the A-R link died beyond A) while A holds what S
// sent it: A must not keep S on the dead path.
void CutBeyondTransitA(Net& net) {
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  net.cut.insert({"R", "r-a"});
  ASSERT_TRUE(net["S"].Consume(Flow(), 4096).ok());
  ASSERT_TRUE(net["A"].Consume(Flow(), 4096).ok());
  ASSERT_TRUE(net["A"].SetQueuedBytes(Flow(), 8192).ok());
}

TEST(CreditNode, ATransitThatLostItsLastNextHopSendsResvTearAndItsUpstreamFailsOverAtOnce) {
  Net net;
  CutBeyondTransitA(net);
  net.TickEvery100Ms(2);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);  // A's keepalives: back-pressured, alive
  net.now += 100 * kMs;
  net.TickAll();  // A's heartbeat on R expires: no_path at A, ResvTear to S
  ASSERT_FALSE(net.events["A"].empty());
  EXPECT_EQ(net.events["A"].back().kind, Event::Kind::kNoPath);
  EXPECT_EQ(net["S"].counters().resv_tears, 1u);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kFailed);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  auto out = net["S"].Consume(Flow(), 1024);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "s-b");
  // A does not answer S's refreshed PATHs while it has no way on, so S does
  // not take it back as a next hop and send into it again...
  net.TickEvery100Ms(12);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kFailed);
  // ...until R answers A again: then A answers S, and S keeps it as a backup.
  net.cut.clear();
  net.TickEvery100Ms(25);
  EXPECT_EQ(net.HopOf("A", "a-r").state, HopState::kPrimary);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kBackup);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
}

TEST(CreditNode, WithTheResvTearLostTheTransitsSilenceStillFailsItsUpstreamOver) {
  Net net;
  net.lost_types.insert(static_cast<uint8_t>(MsgType::kResvTear));
  CutBeyondTransitA(net);
  net.TickEvery100Ms(3);
  EXPECT_EQ(net.events["A"].back().kind, Event::Kind::kNoPath);
  EXPECT_EQ(net["S"].counters().resv_tears, 0u);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);  // A's keepalives reached S until now
  // No keepalives from A any more: S's heartbeat on A expires.
  net.TickEvery100Ms(4);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kFailed);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
}

TEST(CreditNode, AResvTearFromABackupFailsOnlyThatBackup) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  ASSERT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
  // B (S's backup) loses R while holding data: it gives the flow up.
  net.cut.insert({"R", "r-b"});
  ASSERT_TRUE(net["B"].Consume(Flow(), 4096).ok());
  net.TickEvery100Ms(3);
  EXPECT_EQ(net["S"].counters().resv_tears, 1u);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kFailed);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
}

TEST(CreditNode, ARecoveredCheaperHopDoesNotTakeTheFlowBackFromALivePrimary) {
  Net net(/*cost_sa=*/10, /*cost_sb=*/20);
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  ASSERT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
  net.cut.insert({"A", "a-s"});
  ASSERT_TRUE(net["S"].Consume(Flow(), 4096).ok());
  net.now += 300 * kMs;
  net.TickAll();
  ASSERT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  net.cut.clear();  // A answers the next refresh: alive, cheaper, but B carries the flow
  net.now += 1000 * kMs;
  net.TickAll();
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kBackup);
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kPrimary);
  auto out = net["S"].Consume(Flow(), 1024);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "s-b");
  // When B fails, A takes over.
  net.cut.insert({"B", "b-s"});
  net.now += 300 * kMs;
  net.TickAll();
  EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kFailed);
  EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
}

TEST(CreditNode, TerminationFreesEveryNodesState) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  SendThrough(net, 10, 1024);
  ASSERT_TRUE(net["S"].Terminate(Flow()).ok());
  net.Pump();
  for (const auto& [n, node] : net.nodes) {
    EXPECT_EQ(node->flow_count(), 0u) << n;
    EXPECT_TRUE(node->Flows().empty()) << n;
    EXPECT_EQ(node->Flow(Flow()).status().code(), Code::kNotFound) << n;
    ASSERT_FALSE(net.events[n].empty()) << n;
    EXPECT_EQ(net.events[n].back().kind, Event::Kind::kFlowEnded) << n;
  }
  EXPECT_EQ(net["R"].counters().unknown_flow, 1u);  // the tear's second copy
  // Timers find nothing left to do.
  uint64_t sent = 0;
  for (const auto& [n, node] : net.nodes) sent += node->counters().sent;
  net.now += 1000 * kMs;
  net.TickAll();
  uint64_t after = 0;
  for (const auto& [n, node] : net.nodes) after += node->counters().sent;
  EXPECT_EQ(after, sent);
}

TEST(CreditNode, OnlyTheSenderGatewayStartsOrEndsAFlow) {
  Net net;
  EXPECT_EQ(net["R"].StartFlow(Flow()).code(), Code::kFailedPrecondition);
  EXPECT_EQ(net["A"].StartFlow(Flow()).code(), Code::kNotFound);
  EXPECT_EQ(net["R"].Terminate(Flow()).code(), Code::kFailedPrecondition);
  EXPECT_EQ(net["S"].ConfigureFlow({Flow(), Role::kSenderGateway, {"s-a"}}).code(), Code::kAlreadyExists);
  FlowId other = Flow();
  other.dest_qpn = 0x12;
  EXPECT_EQ(net["S"].ConfigureFlow({other, Role::kSenderGateway, {"nope"}}).code(), Code::kNotFound);
  EXPECT_EQ(net["S"].ConfigureFlow({other, Role::kSenderGateway, {}}).code(), Code::kInvalidArgument);
}

TEST(CreditNode, TamperedReplayedAndForeignMessagesAreRejectedAndCounted) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  net.log.clear();
  SendThrough(net, 64, 1024);
  Delivery resv;
  for (const auto& d : net.log)
    if (d.node == "S" && d.from == "A") resv = d;
  ASSERT_FALSE(resv.bytes.empty());
  uint64_t available = net.HopOf("S", "s-a").available;

  net.Deliver(resv);  // replayed
  Delivery tampered = resv;
  tampered.bytes[85] ^= 0x10;  // more credit
  net.Deliver(tampered);
  // Same edit with the checksum fixed: only the MAC catches it.
  tampered.bytes[2] = tampered.bytes[3] = 0;
  uint16_t c = InetChecksum(tampered.bytes.data(), tampered.bytes.size());
  tampered.bytes[2] = static_cast<uint8_t>(c >> 8);
  tampered.bytes[3] = static_cast<uint8_t>(c);
  net.Deliver(tampered);
  // A stranger with another key id.
  Message forged;
  forged.type = MsgType::kCreditResv;
  forged.flow = Flow();
  forged.hop = Hop{Ip(1, 2), 1};
  forged.period_ms = 100;
  forged.credit = Credit{CreditUnit::kBytes, 1ull << 40, 0};
  auto foreign = Encode(forged, 8, Key(), 1ull << 62);
  net["S"].Receive(foreign.data(), foreign.size(), "s-a");
  // Right key, but the RSVP_HOP is not the neighbour on that interface.
  Signer signer(7, Key(), 1ull << 62);
  forged.hop.address = Ip(9, 9);
  auto spoofed = signer.Sign(forged);
  net["S"].Receive(spoofed.data(), spoofed.size(), "s-a");

  const auto& k = net["S"].counters();
  EXPECT_EQ(k.rejects[static_cast<size_t>(Reject::kReplayed)], 1u);
  EXPECT_EQ(k.rejects[static_cast<size_t>(Reject::kBadChecksum)], 1u);
  EXPECT_EQ(k.rejects[static_cast<size_t>(Reject::kBadIntegrity)], 1u);
  EXPECT_EQ(k.rejects[static_cast<size_t>(Reject::kUnknownKey)], 1u);
  EXPECT_EQ(k.wrong_neighbour, 1u);
  EXPECT_EQ(net.HopOf("S", "s-a").available, available);
}

SipKey NextKey() {
  SipKey k{};
  for (size_t i = 0; i < k.size(); i++) k[i] = static_cast<uint8_t>(0x90 + i);
  return k;
}

uint64_t Rejected(Net& net) {
  uint64_t n = 0;
  for (const auto& [name, node] : net.nodes)
    for (uint64_t r : node->counters().rejects) n += r;
  return n;
}

// The three steps of a rotation from key id 7 to 8, one node at a time
// with credit flowing between any two of them (as SIGHUPs reach switches
// one by one): accept the next key, sign with it, drop the old one.
TEST(CreditNode, KeyRotationInThreeStepsKeepsCreditFlowingWithoutRejects) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  net.log.clear();
  ASSERT_EQ(SendThrough(net, 64, 1024), 64u * 1024);
  Delivery old_resv;  // a return signed under id 7, for a replay at the end
  for (const auto& d : net.log)
    if (d.node == "S" && d.from == "A") old_resv = d;
  ASSERT_FALSE(old_resv.bytes.empty());

  struct Step {
    const char* what;
    uint64_t key_id;
    SipKey key;
    KeyRing accepted;
  };
  const Step steps[] = {
      {"1: accept the next key", 7, Key(), {{8, NextKey()}}},
      {"2: sign with the next key", 8, NextKey(), {{7, Key()}}},
      {"3: drop the old key", 8, NextKey(), {}},
  };
  for (const Step& step : steps) {
    for (const char* node : {"R", "A", "S", "B"}) {
      SCOPED_TRACE(std::string("step ") + step.what + " at " + node);
      ASSERT_TRUE(net[node].Rekey(step.key_id, step.key, step.accepted).ok());
      EXPECT_EQ(SendThrough(net, 64, 1024), 64u * 1024) << "credit stalled";
      net.TickEvery100Ms(2);  // keepalives, returns and PATH refreshes in between
      EXPECT_EQ(Rejected(net), 0u);
      EXPECT_EQ(net.HopOf("S", "s-a").state, HopState::kPrimary);
      EXPECT_EQ(net.HopOf("S", "s-b").state, HopState::kBackup);
    }
  }
  // Signed with the retired key: no longer believed.
  net.Deliver(old_resv);
  EXPECT_EQ(net["S"].counters().rejects[static_cast<size_t>(Reject::kUnknownKey)], 1u);
}

TEST(CreditNode, SigningWithAKeyPeersDoNotAcceptIsRejected) {
  Net net;
  ASSERT_TRUE(net["S"].StartFlow(Flow()).ok());
  net.Pump();
  // Step 2 at A without step 1 at S: S cannot believe A's returns.
  ASSERT_TRUE(net["A"].Rekey(8, NextKey(), {{7, Key()}}).ok());
  SendThrough(net, 64, 1024);
  EXPECT_GT(net["S"].counters().rejects[static_cast<size_t>(Reject::kUnknownKey)], 0u);
  EXPECT_EQ(net["A"].Rekey(8, NextKey(), {{8, Key()}}).code(), Code::kInvalidArgument)
      << "one key id, two keys";
}

}  // namespace
}  // namespace inc::credit
