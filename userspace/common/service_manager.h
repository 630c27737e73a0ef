// SPDX-License-Identifier: Apache-2.0
// Tells a service manager (systemd, Type=notify units) where a daemon is in
// its life: ready to serve, reloading its configuration, stopping. Without
// a manager (NOTIFY_SOCKET unset: the lab, a shell) every call does nothing,
// so the daemons call these unconditionally. Part of inc_daemon.
#pragma once

#include <string>

namespace inc {

// READY=1 with a one-line STATUS= an operator sees in `systemctl status`.
void NotifyReady(const std::string& status);
// RELOADING=1 (SIGHUP taken); NotifyReady ends the reload.
void NotifyReloading();
// STOPPING=1 with a STATUS= saying how the daemon leaves.
void NotifyStopping(const std::string& status);

}  // namespace inc
