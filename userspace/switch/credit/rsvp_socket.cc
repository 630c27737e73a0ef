// SPDX-License-Identifier: Apache-2.0
#include "switch/credit/rsvp_socket.h"

#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace inc::sw {

Expected<RsvpSocket> RsvpSocket::Open() {
  int fd = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, kIpProtoRsvp);
  if (fd < 0) return ErrnoStatus("socket(AF_INET, SOCK_RAW, 46)", errno);
  RsvpSocket s(fd);
  const int on = 1;
  if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) != 0)
    return ErrnoStatus("setsockopt(IP_PKTINFO)", errno);
  const int tos = 48 << 2;  // DSCP CS6
  if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0)
    return ErrnoStatus("setsockopt(IP_TOS)", errno);
  return s;
}

RsvpSocket::RsvpSocket(RsvpSocket&& o) noexcept : fd_(o.fd_) {
  o.fd_ = -1;
}

RsvpSocket& RsvpSocket::operator=(RsvpSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

RsvpSocket::~RsvpSocket() {
  if (fd_ >= 0) close(fd_);
}

Status RsvpSocket::Send(const std::vector<uint8_t>& message, Ipv4 to, uint32_t ifindex, uint8_t ttl) {
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = to.be();
  iovec iov{const_cast<uint8_t*>(message.data()), message.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_name = &dst;
  msg.msg_namelen = sizeof(dst);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
  in_pktinfo info{};
  info.ipi_ifindex = static_cast<int>(ifindex);  // 0: the routing table decides
  std::memcpy(CMSG_DATA(c), &info, sizeof(info));
  c = CMSG_NXTHDR(&msg, c);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_TTL;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int ttl_value = ttl;
  std::memcpy(CMSG_DATA(c), &ttl_value, sizeof(ttl_value));
  ssize_t n = sendmsg(fd_, &msg, 0);
  if (n < 0) return ErrnoStatus("sending RSVP to " + to.ToString(), errno);
  if (static_cast<size_t>(n) != message.size())
    return Internal("RSVP to " + to.ToString() + ": sent " + std::to_string(n) + " of " +
                    std::to_string(message.size()) + " bytes");
  return Status::Ok();
}

Expected<RsvpDatagram> RsvpSocket::Receive() {
  uint8_t buf[65536];
  sockaddr_in src{};
  iovec iov{buf, sizeof(buf)};
  alignas(cmsghdr) char control[256];
  msghdr msg{};
  msg.msg_name = &src;
  msg.msg_namelen = sizeof(src);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return NotFound("no RSVP datagram waiting");
    return ErrnoStatus("receiving RSVP", errno);
  }
  // A raw IPv4 socket delivers the IP header too.
  const size_t len = static_cast<size_t>(n);
  if (len < sizeof(iphdr)) return InvalidArgument("RSVP datagram shorter than an IP header");
  iphdr ip;
  std::memcpy(&ip, buf, sizeof(ip));
  const size_t ihl = size_t{ip.ihl} * 4;
  if (ihl < sizeof(iphdr) || ihl > len) return InvalidArgument("RSVP datagram with a bad IP header length");
  RsvpDatagram d;
  d.message.assign(buf + ihl, buf + len);
  d.source = Ipv4::FromBe(ip.saddr);
  d.destination = Ipv4::FromBe(ip.daddr);
  d.ttl = ip.ttl;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info;
      std::memcpy(&info, CMSG_DATA(c), sizeof(info));
      d.ifindex = static_cast<uint32_t>(info.ipi_ifindex);
    }
  }
  return d;
}

}  // namespace inc::sw
