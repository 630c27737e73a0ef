// SPDX-License-Identifier: Apache-2.0
#include "switch/routing/routing_agent.h"

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "common/log.h"

namespace inc::sw {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t RealtimeNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Expected<LinkSnapshot> ReadLink(uint32_t ifindex) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return ErrnoStatus("netlink socket", errno);
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = sizeof(req);
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = static_cast<int>(ifindex);
  if (send(fd, &req, sizeof(req), 0) < 0) {
    int e = errno;
    close(fd);
    return ErrnoStatus("netlink RTM_GETLINK", e);
  }
  alignas(nlmsghdr) char buf[16384];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  int e = errno;
  close(fd);
  if (n < 0) return ErrnoStatus("netlink receive", e);
  for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nh, static_cast<unsigned>(n));
       nh = NLMSG_NEXT(nh, n)) {
    if (nh->nlmsg_type == NLMSG_ERROR) {
      auto* err = static_cast<nlmsgerr*>(NLMSG_DATA(nh));
      return ErrnoStatus("link " + std::to_string(ifindex), -err->error);
    }
    if (nh->nlmsg_type != RTM_NEWLINK) continue;
    auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(nh));
    LinkSnapshot s;
    s.up = (ifi->ifi_flags & IFF_UP) && (ifi->ifi_flags & IFF_RUNNING);
    int len = static_cast<int>(IFLA_PAYLOAD(nh));
    for (auto* rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
      if (rta->rta_type == IFLA_STATS64 && RTA_PAYLOAD(rta) >= sizeof(rtnl_link_stats64)) {
        rtnl_link_stats64 st;
        std::memcpy(&st, RTA_DATA(rta), sizeof(st));
        s.tx_bytes = st.tx_bytes;
        s.tx_dropped = st.tx_dropped;
      }
    }
    return s;
  }
  return NotFound("no RTM_NEWLINK answer for ifindex " + std::to_string(ifindex));
}

RoutingAgent::RoutingAgent(RoutingSettings settings, dp::ForwardingTable table, std::string switch_name)
    : settings_(std::move(settings)),
      table_(std::move(table)),
      switch_name_(std::move(switch_name)),
      receiver_(
          settings_.switch_id,
          [&] {
            std::set<uint32_t> g;
            for (const auto& [id, ip] : settings_.peers) g.insert(id);
            return g;
          }(),
          settings_.key, settings_.accept_key) {
  // Sequence numbers continue from wall-clock milliseconds, so a restarted
  // agent's notices are newer than its previous ones (serial arithmetic holds
  // for restarts within ~24 days of each other).
  next_seq_ = static_cast<uint32_t>(RealtimeNs() / 1000000);
}

Expected<std::unique_ptr<RoutingAgent>> RoutingAgent::Start(RoutingSettings settings,
                                                            const dp::Datapath& datapath,
                                                            const std::string& switch_name) {
  auto table = dp::ForwardingTable::Open(datapath);
  if (!table.ok()) return table.status();
  std::unique_ptr<RoutingAgent> a(new RoutingAgent(std::move(settings), std::move(*table), switch_name));
  {
    std::lock_guard<std::mutex> lock(a->mu_);
    for (const auto& p : a->settings_.ports) {
      auto info = GetInterfaceInfo(p.name);
      if (!info.ok()) return info.status().WithContext("arn port");
      Watched w;
      w.cfg = p;
      w.ifindex = info->ifindex;
      w.detector = arn::PortDetector(a->settings_.detector);
      a->watched_.push_back(std::move(w));
      INC_RETURN_IF_ERROR(a->table_.TrackPort(p.name));
      INC_RETURN_IF_ERROR(a->table_.SetPortHealth(p.name, 0));
    }
    a->ReprogramLocked();
  }
  LOG_INFO << "best-path table: " << a->settings_.plan.size() << " routes programmed";
  if (!a->settings_.arn_enabled) return a;
  INC_RETURN_IF_ERROR(a->OpenSocket());
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  LOG_INFO << "ARN: switch id " << a->settings_.switch_id << ", " << a->settings_.peers.size() << " peers, "
           << a->watched_.size() << " watched ports, listening on " << a->settings_.listen_address.ToString()
           << ":" << a->settings_.listen_port;
  return a;
}

RoutingAgent::~RoutingAgent() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (sock_ >= 0) close(sock_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status RoutingAgent::OpenSocket() {
  sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock_ < 0) return ErrnoStatus("ARN socket", errno);
  int one = 1, tos = 0xc0;  // DSCP CS6: network control, ahead of the data it steers
  setsockopt(sock_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (setsockopt(sock_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0)
    return ErrnoStatus("ARN socket IP_TOS", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(settings_.listen_port);
  addr.sin_addr.s_addr = settings_.listen_address.be();
  if (bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return ErrnoStatus("bind ARN socket to " + settings_.listen_address.ToString() + ":" +
                           std::to_string(settings_.listen_port),
                       errno);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return ErrnoStatus("eventfd", errno);
  return Status::Ok();
}

void RoutingAgent::Retune(const RoutingSettings& next) {
  std::lock_guard<std::mutex> lock(mu_);
  settings_.sample_interval_ms = next.sample_interval_ms;
  settings_.repeat_interval_ms = next.repeat_interval_ms;
  settings_.hold_ms = next.hold_ms;
  settings_.detector = next.detector;
  // Notices sent from now on are signed with the new key; the receiver
  // keeps each origin's sequence history, which no key change resets.
  settings_.key = next.key;
  settings_.accept_key = next.accept_key;
  receiver_.SetKeys(next.key, next.accept_key);
  // The detectors keep their port's condition and runs of samples: only
  // the thresholds and run lengths they compare against change.
  for (auto& w : watched_) w.detector.Reconfigure(next.detector);
}

void RoutingAgent::Loop() {
  uint64_t next = NowNs();
  while (!stop_) {
    uint64_t now = NowNs();
    if (now >= next) {
      uint64_t tick = 0;
      Sample(now);
      RepeatActive(now);
      {
        std::lock_guard<std::mutex> lock(mu_);
        tick = uint64_t{settings_.sample_interval_ms} * 1000000;
        auto gone = remote_.Expire(now, uint64_t{settings_.hold_ms} * 1000000);
        for (const auto& l : gone)
          EventLocked("notice about " + settings_.NameOf(l.from) + "->" + settings_.NameOf(l.to) +
                      " expired (not repeated)");
        if (!gone.empty()) ReprogramLocked();
      }
      next += tick;
      if (next < now) next = now + tick;  // fell behind: skip, don't burst
      continue;
    }
    pollfd fds[2] = {{sock_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int timeout_ms = static_cast<int>((next - now + 999999) / 1000000);
    int r = poll(fds, 2, timeout_ms);
    if (r > 0 && (fds[0].revents & POLLIN)) Receive(NowNs());
  }
}

void RoutingAgent::Sample(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : watched_) {
    auto snap = ReadLink(w.ifindex);
    arn::PortSample s;
    if (!snap.ok()) {
      s.link_up = false;  // the interface vanished: as good as down
    } else {
      s.link_up = snap->up;
      if (w.last) {
        double dt = static_cast<double>(now_ns - w.last_ns) / 1e9;
        uint64_t bytes = snap->tx_bytes - w.last->tx_bytes;
        w.utilisation =
            dt > 0 ? static_cast<double>(bytes) * 8 / dt / static_cast<double>(w.cfg.capacity_bps) : 0;
        s.utilisation = w.utilisation;
        s.tx_errors = snap->tx_dropped - w.last->tx_dropped;
      }
      w.last = *snap;
      w.last_ns = now_ns;
    }
    auto ch = w.detector.Observe(s);
    if (ch) OnChange(w, *ch, now_ns);
  }
}

void RoutingAgent::OnChange(Watched& w, const arn::Change& ch, uint64_t now_ns) {
  uint32_t health = ch.to == arn::Condition::kFailed      ? INC_PORT_FAILED
                    : ch.to == arn::Condition::kCongested ? INC_PORT_CONGESTED
                                                          : 0;
  // Local reroute first: one map write moves every prefix off the port.
  Status st = table_.SetPortHealth(w.cfg.name, health);
  if (!st.ok()) {
    LOG_ERROR << "ARN: cannot mark port " << w.cfg.name << ": " << st.ToString();
  }
  w.changed_ns = now_ns;
  arn::Message m;
  m.origin = settings_.switch_id;
  m.peer = w.cfg.peer_id;
  m.local_port = w.cfg.index;
  m.utilisation_ppm = static_cast<uint32_t>(std::min(w.utilisation, 4.0) * 1e6);
  m.severity = ch.severity;
  if (ch.to == arn::Condition::kFailed) {
    m.type = arn::Type::kLinkFailed;
  } else if (ch.to == arn::Condition::kCongested) {
    m.type = arn::Type::kCongestionDetected;
  } else {
    m.type = ch.from == arn::Condition::kFailed ? arn::Type::kLinkRestored : arn::Type::kCongestionEliminated;
    m.severity = arn::kSeverityClear;
  }
  bool lasting = ch.to != arn::Condition::kHealthy;
  w.active = lasting ? std::optional<arn::Message>(m) : std::nullopt;
  char util[32];
  std::snprintf(util, sizeof(util), "%.0f%%", w.utilisation * 100);
  EventLocked("port " + w.cfg.name + " (to " + (w.cfg.peer_id ? settings_.NameOf(w.cfg.peer_id) : "host") +
              ") " + arn::ConditionName(ch.from) + " -> " + arn::ConditionName(ch.to) +
              (ch.to == arn::Condition::kCongested ? " severity " + std::to_string(ch.severity) : "") +
              ", utilisation " + util);
  Send(m);
}

void RoutingAgent::RepeatActive(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now_ns - last_repeat_ns_ < uint64_t{settings_.repeat_interval_ms} * 1000000) return;
  last_repeat_ns_ = now_ns;
  for (auto& w : watched_)
    if (w.active) Send(*w.active);
}

void RoutingAgent::Send(arn::Message m) {
  m.seq = next_seq_++;
  m.timestamp_ns = RealtimeNs();
  auto bytes = arn::Encode(m, settings_.key);
  for (const auto& [id, ip] : settings_.peers) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(settings_.listen_port);
    to.sin_addr.s_addr = ip.be();
    if (sendto(sock_, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0) {
      if (send_errors_++ % 100 == 0) {
        LOG_WARN << "ARN: send to " << settings_.NameOf(id) << " (" << ip.ToString()
                 << "): " << std::strerror(errno);
      }
    } else {
      sent_++;
    }
  }
}

void RoutingAgent::Receive(uint64_t now_ns) {
  uint8_t buf[512];
  for (;;) {
    ssize_t n = recv(sock_, buf, sizeof(buf), 0);
    if (n < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto m = receiver_.Accept(buf, static_cast<size_t>(n));
    if (!m.ok()) {
      LOG_DEBUG << "ARN: dropped: " << m.status().message();
      continue;
    }
    if (remote_.Apply(*m, now_ns)) {
      EventLocked(
          std::string("from ") + settings_.NameOf(m->origin) + ": " + arn::TypeName(m->type) + " on " +
          settings_.NameOf(m->origin) + "->" + (m->peer ? settings_.NameOf(m->peer) : "host") +
          (m->type == arn::Type::kCongestionDetected ? " severity " + std::to_string(m->severity) : ""));
      ReprogramLocked();
    }
  }
}

void RoutingAgent::ReprogramLocked() {
  Status st = table_.Reconcile(arn::MarkRoutes(settings_.plan, remote_));
  if (!st.ok()) {
    LOG_ERROR << "best-path table: " << st.ToString();
  }
}

void RoutingAgent::EventLocked(const std::string& what) {
  LOG_INFO << "ARN: " << what;
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32];
  std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&t));
  events_.push_back(std::string(when) + " " + what);
  while (events_.size() > 64) events_.pop_front();
}

std::vector<v1::ArnLinkState> RoutingAgent::UnhealthyLocalLinks() const {
  std::vector<v1::ArnLinkState> out;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t now = NowNs();
  for (const auto& w : watched_) {
    if (w.detector.condition() == arn::Condition::kHealthy) continue;
    v1::ArnLinkState l;
    l.set_origin(switch_name_);
    l.set_peer(settings_.NameOf(w.cfg.peer_id));
    l.set_port(w.cfg.name);
    l.set_condition(arn::ConditionName(w.detector.condition()));
    l.set_severity(w.detector.severity());
    l.set_utilisation(w.utilisation);
    l.set_age_ms((now - w.changed_ns) / 1000000);
    l.set_since_unix_ms(RealtimeNs() / 1000000 - (now - w.changed_ns) / 1000000);
    out.push_back(std::move(l));
  }
  return out;
}

v1::ArnStatus RoutingAgent::Report() const {
  v1::ArnStatus out;
  out.set_switch_name(switch_name_);
  out.set_enabled(settings_.arn_enabled);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t now = NowNs();
  uint64_t now_unix_ms = RealtimeNs() / 1000000;
  for (const auto& w : watched_) {
    auto* l = out.add_local_links();
    l->set_origin(switch_name_);
    l->set_peer(settings_.NameOf(w.cfg.peer_id));
    l->set_port(w.cfg.name);
    l->set_condition(arn::ConditionName(w.detector.condition()));
    l->set_severity(w.detector.severity());
    l->set_utilisation(w.utilisation);
    l->set_age_ms(w.changed_ns ? (now - w.changed_ns) / 1000000 : 0);
    if (w.changed_ns) l->set_since_unix_ms(now_unix_ms - (now - w.changed_ns) / 1000000);
  }
  for (const auto& [id, st] : remote_.links()) {
    auto* l = out.add_remote_links();
    l->set_origin(settings_.NameOf(id.from));
    l->set_peer(settings_.NameOf(id.to));
    l->set_condition(st.failed ? "failed" : st.congestion ? "congested" : "healthy");
    l->set_severity(st.failed ? arn::kSeverityFailure : st.congestion);
    l->set_age_ms((now - st.heard_ns) / 1000000);
    l->set_since_unix_ms(now_unix_ms - (now - st.changed_ns) / 1000000);
  }
  auto routes = arn::MarkRoutes(settings_.plan, remote_);
  for (size_t i = 0; i < routes.size(); i++) {
    auto* r = out.add_routes();
    r->set_prefix(routes[i].prefix.ToString());
    r->set_dest_switch(settings_.NameOf(settings_.plan[i].dest_switch));
    for (size_t j = 0; j < routes[i].hops.size(); j++) {
      const auto& h = routes[i].hops[j];
      auto* hs = r->add_hops();
      hs->set_port(h.port);
      hs->set_mac(h.mac.ToString());
      hs->set_cost(h.cost);
      hs->set_via_switch(settings_.NameOf(settings_.plan[i].hops[j].via));
      if (h.flags & INC_HOP_CONGESTED) hs->add_marks("congested");
      if (h.flags & INC_HOP_FAILED) hs->add_marks("failed");
    }
  }
  auto fs = table_.ReadStats();
  if (fs.ok())
    for (const auto& [k, v] : fs->global) (*out.mutable_forwarder())[k] = v;
  out.set_notices_sent(sent_);
  out.set_notices_received(receiver_.accepted());
  for (const auto& [k, v] : receiver_.RejectCounts()) (*out.mutable_rejects())[k] = v;
  for (const auto& e : events_) out.add_events(e);
  return out;
}

}  // namespace inc::sw
