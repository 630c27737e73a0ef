// SPDX-License-Identifier: Apache-2.0
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void IncinNcclLog(incinNcclLogger logger, const char* prefix, incinNcclLogLevel level, const char* file,
                  int line, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (logger) {
    logger(level, INCIN_NCCL_LOG_NET, file, line, "%s: %s", prefix, msg);
  } else if (level == INCIN_NCCL_LOG_WARN) {
    fprintf(stderr, "%s: %s\n", prefix, msg);
  }
}
