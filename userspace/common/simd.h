// SPDX-License-Identifier: Apache-2.0
// Run-time dispatch helpers for the x86-64 vector paths (CRC folding, the
// client's FP32/FP64 codec): target attributes for functions compiled for a
// wider instruction set than the build's baseline, and CPU feature checks.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#define INC_TARGET_AVX2 __attribute__((target("avx2")))
#define INC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// GCC 12's AVX-512 intrinsics fill unused results with _mm512_undefined_*,
// a self-initialised variable that -Wuninitialized reports at every use:
// AVX-512 code goes between these two. Clang (the fuzz build) has no
// -Wmaybe-uninitialized and would reject its name under -Werror.
#if defined(__clang__)
#define INC_AVX512_WARNINGS_OFF \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#else
#define INC_AVX512_WARNINGS_OFF                                                        \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#endif
#define INC_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")

namespace inc {

// AVX-512 F, BW, DQ and VL, with the OS saving the registers (libgcc's
// check includes XCR0).
inline bool CpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

}  // namespace inc
#endif
