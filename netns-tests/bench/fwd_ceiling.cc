// fwd-ceiling: loads bpf/fwd_ceiling.bpf.c on a switch's worker-facing ports
// (run it in the switch's namespace, with no incswitchd there), fills each
// port's member QPN and ICRC deltas, stays attached until SIGTERM/SIGINT,
// then prints the packet counters as JSON and detaches.
//
//   fwd-ceiling --port IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN [--port ...]
//
// The members run inc-perf with an AM-less assignment whose switch_ip and
// switch_qpn are the values given here (scripts/bench.sh writes both).
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/icrc.h"
#include "common/net.h"
#include "common/status.h"
#include "fwd_ceiling.skel.h"
#include "fwd_ceiling_abi.h"
#include "inc_abi.h"

namespace {

struct PortSpec {
  std::string iface;
  unsigned ifindex = 0;
  inc::Ipv4 member_ip, switch_ip;
  uint32_t member_qpn = 0, switch_qpn = 0;
};

inc::Expected<PortSpec> ParsePort(const std::string& text) {
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) f.push_back(part);
  if (f.size() != 5)
    return inc::InvalidArgument("--port '" + text +
                                "': want IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN");
  PortSpec p;
  p.iface = f[0];
  p.ifindex = if_nametoindex(f[0].c_str());
  if (p.ifindex == 0) return inc::NotFound("--port '" + text + "': no interface " + f[0]);
  auto mip = inc::Ipv4::Parse(f[1]);
  if (!mip.ok()) return mip.status().WithContext("--port member ip");
  auto sip = inc::Ipv4::Parse(f[2]);
  if (!sip.ok()) return sip.status().WithContext("--port switch ip");
  p.member_ip = *mip;
  p.switch_ip = *sip;
  try {
    p.member_qpn = static_cast<uint32_t>(std::stoul(f[3], nullptr, 0));
    p.switch_qpn = static_cast<uint32_t>(std::stoul(f[4], nullptr, 0));
  } catch (const std::exception&) {
    return inc::InvalidArgument("--port '" + text + "': QPNs must be numbers");
  }
  if (p.member_qpn > INC_QPN_MASK || p.switch_qpn > INC_QPN_MASK)
    return inc::InvalidArgument("--port '" + text + "': QPNs are 24 bits");
  return p;
}

// A zero-payload frame of the given UDP length carrying what a member sends
// (result=false) or what fwd_ceiling turns it into (result=true). Only the
// bits the program changes differ, so the ICRCs of the two differ by the
// delta the program must apply for that length.
std::vector<uint8_t> SkeletonFrame(const PortSpec& p, uint32_t udp_len, bool result) {
  std::vector<uint8_t> f(INC_OFF_UDP + udp_len, 0);
  f[12] = 0x08;
  f[14] = 0x45;
  uint16_t ip_len = htons(static_cast<uint16_t>(20 + udp_len));
  std::memcpy(&f[INC_OFF_IP + 2], &ip_len, 2);
  f[INC_OFF_IP + 9] = 17;
  uint32_t src = (result ? p.switch_ip : p.member_ip).be(), dst = (result ? p.member_ip : p.switch_ip).be();
  std::memcpy(&f[INC_OFF_IP + 12], &src, 4);
  std::memcpy(&f[INC_OFF_IP + 16], &dst, 4);
  uint16_t be_len = htons(static_cast<uint16_t>(udp_len));
  std::memcpy(&f[INC_OFF_UDP + 4], &be_len, 2);
  uint32_t qpn = htonl(result ? p.member_qpn : p.switch_qpn);
  std::memcpy(&f[INC_OFF_BTH + 4], &qpn, 4);
  f[INC_OFF_INC] = static_cast<uint8_t>(INC_VERSION << 4 | (result ? INC_FLAG_RESULT : 0));
  return f;
}

inc::Status FillPort(const PortSpec& p, fwd_port* out) {
  std::memset(out, 0, sizeof(*out));
  out->member_qpn = p.member_qpn;
  for (uint32_t len = INC_OFF_PAYLOAD - INC_OFF_UDP + INC_ICRC_LEN; len < FWD_MAX_UDP_LEN; len++) {
    auto a = SkeletonFrame(p, len, false), b = SkeletonFrame(p, len, true);
    auto ca = inc::ComputeIcrc(a.data(), a.size());
    auto cb = inc::ComputeIcrc(b.data(), b.size());
    if (!ca.ok()) return ca.status();
    if (!cb.ok()) return cb.status();
    out->icrc_delta[len] = *ca ^ *cb;
  }
  return inc::Status::Ok();
}

struct SkelDeleter {
  void operator()(fwd_ceiling* s) const { fwd_ceiling__destroy(s); }
};

// Detaches fwd_ceiling from the ports it was attached to.
class Attachment {
 public:
  ~Attachment() {
    for (unsigned ifindex : ifindexes_)
      bpf_xdp_detach(static_cast<int>(ifindex), XDP_FLAGS_DRV_MODE, nullptr);
  }
  inc::Status Attach(int prog_fd, const PortSpec& p) {
    int err = bpf_xdp_attach(static_cast<int>(p.ifindex), prog_fd, XDP_FLAGS_DRV_MODE, nullptr);
    if (err) return inc::ErrnoStatus("attach fwd_ceiling (native XDP) to " + p.iface, -err);
    ifindexes_.push_back(p.ifindex);
    return inc::Status::Ok();
  }

 private:
  std::vector<unsigned> ifindexes_;
};

std::string StatsJson(fwd_ceiling* skel) {
  static const char* kNames[FWD_STAT__MAX] = {"reflected", "pass", "unknown_port", "bad_length"};
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(ncpu > 0 ? ncpu : 1);
  std::ostringstream o;
  o << "{";
  for (uint32_t k = 0; k < FWD_STAT__MAX; k++) {
    uint64_t sum = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fwd_stats), &k, per_cpu.data()) == 0)
      for (uint64_t v : per_cpu) sum += v;
    o << (k ? "," : "") << "\"" << kNames[k] << "\":" << sum;
  }
  o << "}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fwd-ceiling: packet-forwarding ceiling for the benchmark suite. Attaches an XDP program to a "
      "switch's\n"
      "worker-facing ports that sends every INC contribution back to its member as a RESULT (no "
      "aggregation),\n"
      "waits for SIGTERM/SIGINT, prints the packet counters as JSON and detaches. Run in the switch "
      "namespace."};
  std::vector<std::string> port_texts;
  app.add_option("--port", port_texts, "IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN (repeatable)")
      ->required();
  CLI11_PARSE(app, argc, argv);

  std::vector<PortSpec> ports;
  for (const auto& t : port_texts) {
    auto p = ParsePort(t);
    if (!p.ok()) {
      std::fprintf(stderr, "fwd-ceiling: %s\n", p.status().ToString().c_str());
      return 2;
    }
    ports.push_back(*p);
  }
  // Signals are blocked before anything is attached, then awaited.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  std::unique_ptr<fwd_ceiling, SkelDeleter> skel(fwd_ceiling__open_and_load());
  if (!skel) {
    std::fprintf(stderr, "fwd-ceiling: loading fwd_ceiling.bpf.o failed: %s\n", std::strerror(errno));
    return 3;
  }
  auto value = std::make_unique<fwd_port>();
  Attachment attachment;
  for (const auto& p : ports) {
    inc::Status st = FillPort(p, value.get());
    if (st.ok()) {
      uint32_t key = p.ifindex;
      if (bpf_map_update_elem(bpf_map__fd(skel->maps.fwd_ports), &key, value.get(), BPF_ANY) != 0)
        st = inc::ErrnoStatus("fwd_ports update for " + p.iface, errno);
    }
    if (st.ok()) st = attachment.Attach(bpf_program__fd(skel->progs.fwd_ceiling), p);
    if (!st.ok()) {
      std::fprintf(stderr, "fwd-ceiling: %s\n", st.ToString().c_str());
      return 3;
    }
  }
  std::printf("fwd-ceiling: attached to %zu port(s)\n", ports.size());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  std::printf("%s\n", StatsJson(skel.get()).c_str());
  return 0;
}
