# SPDX-License-Identifier: Apache-2.0
# Builds BPF objects with clang and their libbpf skeletons with bpftool, into
# the build tree. inc_bpf_object(NAME SOURCE [DEPENDS headers...]) creates an
# INTERFACE target NAME_skel whose include directory holds NAME.skel.h.
find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch
                OUTPUT_VARIABLE INC_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT INC_MULTIARCH)
  set(INC_MULTIARCH x86_64-linux-gnu)
endif()

set(INC_BPF_CFLAGS -O2 -g -target bpf -mcpu=v3 -Wall -Wextra -Werror
    -Wno-unused-parameter -I${CMAKE_SOURCE_DIR}/bpf/include
    -I${CMAKE_SOURCE_DIR}/bpf -I/usr/include/${INC_MULTIARCH})

set(INC_BPF_OUT ${CMAKE_BINARY_DIR}/bpf)
file(MAKE_DIRECTORY ${INC_BPF_OUT})

function(inc_bpf_object name source)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  file(GLOB _bpf_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bpf/*.h ${CMAKE_SOURCE_DIR}/bpf/bench/*.h
       ${CMAKE_SOURCE_DIR}/bpf/include/*.h)
  set(_obj ${INC_BPF_OUT}/${name}.bpf.o)
  set(_skel ${INC_BPF_OUT}/${name}.skel.h)
  add_custom_command(
    OUTPUT ${_obj}
    COMMAND ${BPF_CLANG} ${INC_BPF_CFLAGS} -c ${source} -o ${_obj}
    DEPENDS ${source} ${_bpf_headers} ${ARG_DEPENDS}
    COMMENT "BPF ${name}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT ${_skel}
    COMMAND ${BPFTOOL} gen skeleton ${_obj} name ${name} > ${_skel}
    DEPENDS ${_obj}
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_bpf DEPENDS ${_obj} ${_skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_bpf)
  target_include_directories(${name}_skel INTERFACE ${INC_BPF_OUT}
                             ${CMAKE_SOURCE_DIR}/bpf/include)
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
  set_property(GLOBAL APPEND PROPERTY INC_BPF_OBJECTS ${_obj})
endfunction()
