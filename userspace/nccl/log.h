// SPDX-License-Identifier: Apache-2.0
// Log lines of the plugin's two halves (CollNet and the TCP net plugin):
// through NCCL's logger when NCCL gave one at init, else warnings on stderr,
// so that a failure still says why when NCCL's init order left us without
// its logger.
#pragma once

#include "collnet_abi.h"

__attribute__((format(printf, 6, 7))) void IncinNcclLog(incinNcclLogger logger, const char* prefix,
                                                        incinNcclLogLevel level, const char* file, int line,
                                                        const char* fmt, ...);
