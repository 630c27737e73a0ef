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
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/log.h"

#ifdef INC_HAVE_LIBXDP
#include <xdp/libxdp.h>
#endif

namespace inc::client {
namespace {

// "id N (name)" of a loaded program, for messages an operator acts on.
std::string ProgramLabel(uint32_t id) {
  std::string label = "id " + std::to_string(id);
  int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return label;
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.name[0])
    label += std::string(" (") + info.name + ")";
  close(fd);
  return label;
}

// Enters the namespace saved in ns_fd for the scope (the interface's: the
// caller may have moved on since Attach); no-op if it is the current one.
class NetnsScope {
 public:
  NetnsScope(int ns_fd, const std::string& what) {
    here_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0 || here_ < 0) return;
    struct stat a {
    }, b{};
    if (fstat(ns_fd, &a) == 0 && fstat(here_, &b) == 0 && a.st_ino != b.st_ino) {
      if (setns(ns_fd, CLONE_NEWNET) == 0) {
        moved_ = true;
      } else {
        LOG_WARN << "cannot enter the namespace of " << what << " to detach XDP: " << strerror(errno);
      }
    }
  }
  ~NetnsScope() {
    if (moved_ && setns(here_, CLONE_NEWNET) != 0) {
      LOG_ERROR << "cannot return to the original namespace: " << strerror(errno);
    }
    if (here_ >= 0) close(here_);
  }
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;

 private:
  int here_ = -1;
  bool moved_ = false;
};

#ifdef INC_HAVE_LIBXDP
// libxdp's own messages go to the debug log: every case it reports that
// matters here becomes one message of ours (with the remedy) instead.
int LibxdpPrint(enum libxdp_print_level, const char* fmt, va_list args) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, args);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = 0;
  LOG_DEBUG << "libxdp: " << buf;
  return 0;
}
#endif

}  // namespace

Status XdpAttachment::Attach(int prog_fd, uint32_t ifindex, const std::string& ifname, bool generic,
                             const XdpChainSource& chain) {
  Detach();
  prog_fd_ = prog_fd;
  ifindex_ = ifindex;
  ifname_ = ifname;
  generic_ = generic;
  const uint32_t mode = generic ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
  if (bpf_xdp_query_id(static_cast<int>(ifindex), static_cast<int>(mode), &old_prog_id_)) old_prog_id_ = 0;
  netns_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (old_prog_id_) {
    Status chained = chain.elf ? AttachChained(chain, mode) : Unavailable(chain.exclusive_reason);
    if (chained.ok()) {
      attached_ = true;
      return chained;
    }
    // The program on the interface is not libxdp's dispatcher, or the
    // chain could not take ours: today's exclusive attach, said loudly.
    LOG_WARN << "XDP program " << ProgramLabel(old_prog_id_) << " on " << ifname
             << " is replaced by incin's for this transport's lifetime and put back on close: "
             << chained.message()
             << ". To run both, attach the other program through libxdp (xdp-loader load -m "
             << (generic ? "skb " : "native ") << ifname
             << " PROG.o; if xdp-loader status then shows no xdp_dispatcher, this kernel refuses the "
                "dispatcher's freplace programs and one XDP program at a time is all it runs)";
  }
  int err = bpf_xdp_attach(static_cast<int>(ifindex), prog_fd, mode, nullptr);
  if (err) {
    if (netns_fd_ >= 0) close(netns_fd_);
    netns_fd_ = -1;
    return ErrnoStatus(std::string("attach XDP (") + (generic ? "generic" : "native") + ") to " + ifname,
                       -err);
  }
  attached_ = true;
  if (old_prog_id_) {
    LOG_INFO << "replaced XDP program id " << old_prog_id_ << " on " << ifname << " (restored on close)";
  }
  return Status::Ok();
}

Status XdpAttachment::AttachChained(const XdpChainSource& chain, uint32_t mode) {
#ifndef INC_HAVE_LIBXDP
  (void)chain;
  (void)mode;
  return Unavailable("incin was built without libxdp, so it cannot join a libxdp dispatcher");
#else
  libxdp_set_print(LibxdpPrint);
  const enum xdp_attach_mode xmode = (mode & XDP_FLAGS_SKB_MODE) ? XDP_MODE_SKB : XDP_MODE_NATIVE;
  {
    xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(static_cast<int>(ifindex_));
    if (libxdp_get_error(mp)) return Unavailable("libxdp cannot read the XDP programs of " + ifname_);
    const bool legacy = xdp_multiprog__is_legacy(mp);
    const enum xdp_attach_mode have = xdp_multiprog__attach_mode(mp);
    xdp_multiprog__close(mp);
    if (legacy) return Unavailable("it was not attached through libxdp's multi-program dispatcher");
    if (have != xmode)
      return Unavailable(std::string("libxdp's dispatcher runs in ") +
                         (have == XDP_MODE_SKB ? "skb" : "native") + " mode, incin's needs the other one");
  }
  // A second copy of the program, loaded by libxdp as an extension of the
  // dispatcher (BPF_PROG_TYPE_EXT): a program already loaded as XDP cannot
  // become one. It shares every map of the loaded copy, so the transport
  // sees no difference (frames, sockets, counters, load-time settings).
  LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = chain.prog_name.c_str());
  bpf_object* obj = bpf_object__open_mem(chain.elf, chain.elf_size, &oo);
  if (!obj) return ErrnoStatus("open a second copy of " + chain.prog_name, errno);
  bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    bpf_map* orig = bpf_object__find_map_by_name(chain.loaded, bpf_map__name(map));
    int err = orig ? bpf_map__reuse_fd(map, bpf_map__fd(orig)) : -ENOENT;
    if (err) {
      bpf_object__close(obj);
      return ErrnoStatus(std::string("share map ") + bpf_map__name(map) + " with the extension copy", -err);
    }
  }
  bpf_program* p;
  bpf_object__for_each_program(p, obj) bpf_program__set_autoload(p, chain.prog_name == bpf_program__name(p));
  DECLARE_LIBXDP_OPTS(xdp_program_opts, xo, .obj = obj, .prog_name = chain.prog_name.c_str());
  xdp_program* xp = xdp_program__create(&xo);
  if (libxdp_get_error(xp)) {
    const int e = errno;
    bpf_object__close(obj);
    return ErrnoStatus("libxdp: take " + chain.prog_name, e);
  }
  int err = xdp_program__attach(xp, static_cast<int>(ifindex_), xmode, 0);
  if (err) {
    xdp_program__close(xp);
    bpf_object__close(obj);
    char buf[128];
    libxdp_strerror(err, buf, sizeof(buf));
    return Unavailable(std::string("libxdp could not add it to the dispatcher's chain (") + buf +
                       "; e.g. a kernel without freplace of XDP programs)");
  }
  chained_ = xp;
  chained_obj_ = obj;
  LOG_INFO << "XDP program " << chain.prog_name << " chained into libxdp's dispatcher on " << ifname_
           << " next to " << ProgramLabel(old_prog_id_) << " (priority " << xdp_program__run_prio(xp)
           << "; removed on close)";
  return Status::Ok();
#endif
}

void XdpAttachment::Detach() {
  if (!attached_) return;
  const uint32_t mode = generic_ ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
  {
    NetnsScope in_ns(netns_fd_, ifname_);
#ifdef INC_HAVE_LIBXDP
    if (chained_) {
      // Only incin's extension leaves the chain; libxdp rebuilds the
      // dispatcher around the others (or removes it if none is left).
      int err = xdp_program__detach(chained_, static_cast<int>(ifindex_),
                                    generic_ ? XDP_MODE_SKB : XDP_MODE_NATIVE, 0);
      if (err && err != -ENOENT) {
        char buf[128];
        libxdp_strerror(err, buf, sizeof(buf));
        LOG_WARN << "remove incin's program from libxdp's dispatcher on " << ifname_ << ": " << buf
                 << " (xdp-loader status " << ifname_ << "; xdp-loader unload " << ifname_
                 << " -i ID removes it)";
      }
      xdp_program__close(chained_);
      bpf_object__close(chained_obj_);
      chained_ = nullptr;
      chained_obj_ = nullptr;
    } else
#endif
    {
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
    }
  }
  if (netns_fd_ >= 0) close(netns_fd_);
  netns_fd_ = -1;
  attached_ = false;
}

}  // namespace inc::client
