// SPDX-License-Identifier: Apache-2.0
// fwd-ceiling: loads bpf/bench/fwd_ceiling.bpf.c on a switch's worker-facing ports
// (run it in the switch's namespace, with no incswitchd there), fills each
// port's member QPN and ICRC deltas, stays attached until SIGTERM/SIGINT,
// then prints the packet counters as JSON and detaches.
//
//   fwd-ceiling --port IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN [--port ...]
//
// The members run inc-perf with an AM-less assignment whose switch_ip and
// switch_qpn are the values given here (scripts/bench.sh writes both).
#include "bench/fwd_ceiling.h"

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

#include "common/status.h"
#include "fwd_ceiling.skel.h"
#include "fwd_ceiling_port.h"

namespace {

using inc::bench::PortSpec;

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
    auto p = inc::bench::ParsePort(t);
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
    inc::Status st = inc::bench::FillPort(p, value.get());
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
