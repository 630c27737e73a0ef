// SPDX-License-Identifier: Apache-2.0
#include "client/xdp_attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace inc::client {

Status XdpAttachment::Attach(int prog_fd, uint32_t ifindex, const std::string& ifname, bool generic) {
  Detach();
  prog_fd_ = prog_fd;
  ifindex_ = ifindex;
  ifname_ = ifname;
  generic_ = generic;
  const uint32_t mode = generic ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
  if (bpf_xdp_query_id(static_cast<int>(ifindex), static_cast<int>(mode), &old_prog_id_)) old_prog_id_ = 0;
  int err = bpf_xdp_attach(static_cast<int>(ifindex), prog_fd, mode, nullptr);
  if (err)
    return ErrnoStatus(std::string("attach XDP (") + (generic ? "generic" : "native") + ") to " + ifname,
                       -err);
  attached_ = true;
  netns_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (old_prog_id_) {
    LOG_INFO << "replaced XDP program id " << old_prog_id_ << " on " << ifname << " (restored on close)";
  }
  return Status::Ok();
}

void XdpAttachment::Detach() {
  if (!attached_) return;
  const uint32_t mode = generic_ ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
  int here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  bool moved = false;
  if (netns_fd_ >= 0 && here >= 0) {
    struct stat a {
    }, b{};
    if (fstat(netns_fd_, &a) == 0 && fstat(here, &b) == 0 && a.st_ino != b.st_ino) {
      if (setns(netns_fd_, CLONE_NEWNET) == 0) {
        moved = true;
      } else {
        LOG_WARN << "cannot enter the namespace of " << ifname_ << " to detach XDP: " << strerror(errno);
      }
    }
  }
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd_);
  int err;
  int old_fd = old_prog_id_ ? bpf_prog_get_fd_by_id(old_prog_id_) : -1;
  if (old_fd >= 0) {
    err = bpf_xdp_attach(static_cast<int>(ifindex_), old_fd, mode | XDP_FLAGS_REPLACE, &opts);
    close(old_fd);
  } else {
    err = bpf_xdp_detach(static_cast<int>(ifindex_), mode | XDP_FLAGS_REPLACE, &opts);
  }
  // EEXIST/ENOENT: someone else replaced our program meanwhile; leave theirs.
  if (err && err != -EEXIST && err != -ENOENT && err != -ENODEV) {
    LOG_WARN << "detach XDP from " << ifname_ << ": " << strerror(-err);
  }
  if (moved && setns(here, CLONE_NEWNET) != 0) {
    LOG_ERROR << "cannot return to the original namespace: " << strerror(errno);
  }
  if (here >= 0) close(here);
  if (netns_fd_ >= 0) close(netns_fd_);
  netns_fd_ = -1;
  attached_ = false;
}

}  // namespace inc::client
