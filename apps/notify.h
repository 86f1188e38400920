// notify.h — systemd's readiness protocol (sd_notify(3)), spoken without libsystemd: one
// datagram of "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an
// abstract name starting with '@'). The protocol is a stable interface of systemd's, documented
// for reimplementation; a service unit of Type=notify waits for "READY=1".
#pragma once

#include <string_view>

namespace delayq::apps {

// Sends `state` (e.g. "READY=1", "STATUS=recovering 40%") if $NOTIFY_SOCKET is set. Returns
// false if it is not set or the datagram could not be sent; a server started outside systemd
// ignores the answer.
bool notify_systemd(std::string_view state);

}  // namespace delayq::apps
