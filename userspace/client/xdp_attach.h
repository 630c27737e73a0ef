// SPDX-License-Identifier: Apache-2.0
// Attaching a worker-side XDP program to an interface for the lifetime of a
// transport, and putting back what was attached before, from the
// interface's own network namespace (the caller may have moved on: netlink
// works in the calling thread's namespace). Used by both member transports.
//
// Two ways (docs/operations.md "Other XDP programs on the same interface"):
// - chained: the interface already runs libxdp's multi-program dispatcher
//   (e.g. `xdp-loader load`): a second copy of the program, loaded as a
//   dispatcher extension (freplace) that shares the loaded copy's maps, is
//   added to the chain with libxdp and removed again on Detach; the other
//   programs keep running.
// - exclusive (today's way, and the fallback): the program replaces what is
//   attached and the old program is put back on Detach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

struct bpf_object;
struct xdp_program;

namespace inc::client {

// What the chained attach needs to load the program once more, as a
// dispatcher extension: the object's ELF image (its skeleton's elf_bytes),
// the loaded object whose maps the copy shares, and the program's name.
// Empty (elf == nullptr): exclusive only, and exclusive_reason says why
// when another program has to give way.
struct XdpChainSource {
  const void* elf = nullptr;
  size_t elf_size = 0;
  bpf_object* loaded = nullptr;
  std::string prog_name;
  std::string exclusive_reason;
};

class XdpAttachment {
 public:
  XdpAttachment() = default;
  ~XdpAttachment() { Detach(); }
  XdpAttachment(const XdpAttachment&) = delete;
  XdpAttachment& operator=(const XdpAttachment&) = delete;

  // Attaches prog_fd to ifindex, natively or in generic (SKB) mode: into
  // libxdp's dispatcher when one is there and chain names the program,
  // otherwise replacing (and remembering) the program there.
  Status Attach(int prog_fd, uint32_t ifindex, const std::string& ifname, bool generic,
                const XdpChainSource& chain = {});
  // Restores the previous program (or none) / leaves the dispatcher's chain;
  // a program someone else put there meanwhile is left alone. Idempotent.
  void Detach();
  bool attached() const { return attached_; }
  // True when the program runs in libxdp's dispatcher chain.
  bool chained() const { return chained_ != nullptr; }

 private:
  // The chained attach; an error means "attach exclusively instead".
  Status AttachChained(const XdpChainSource& chain, uint32_t mode);

  int prog_fd_ = -1;
  uint32_t ifindex_ = 0;
  std::string ifname_;
  bool generic_ = false;
  uint32_t old_prog_id_ = 0;
  bool attached_ = false;
  int netns_fd_ = -1;                  // namespace of ifindex_
  xdp_program* chained_ = nullptr;     // libxdp's handle of the extension copy
  bpf_object* chained_obj_ = nullptr;  // the extension copy's object
};

}  // namespace inc::client
