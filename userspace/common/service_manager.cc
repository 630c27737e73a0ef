// SPDX-License-Identifier: Apache-2.0
#include "common/service_manager.h"

#include <systemd/sd-daemon.h>

#include <cstring>

#include "common/log.h"

namespace inc {
namespace {

// A message that fails to reach a manager that exists is logged; the daemon
// keeps running (the manager then times the unit out and says so itself).
void Send(const std::string& message) {
  int rc = sd_notify(0, message.c_str());
  if (rc < 0) {
    LOG_WARN << "service manager notification failed: " << std::strerror(-rc);
  }
}

std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

void NotifyReady(const std::string& status) {
  Send("READY=1\nSTATUS=" + OneLine(status));
}

void NotifyReloading() {
  Send("RELOADING=1\nSTATUS=reloading the configuration");
}

void NotifyStopping(const std::string& status) {
  Send("STOPPING=1\nSTATUS=" + OneLine(status));
}

}  // namespace inc
