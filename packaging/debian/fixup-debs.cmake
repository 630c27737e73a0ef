# SPDX-License-Identifier: Apache-2.0
# CPack post-build script: corrects what CPack 3.25 writes into the packages
# and rebuilds those it changed with dpkg-deb.
# - CPack gives every package with a shared object in /usr/lib a postinst and
#   postrm that run ldconfig, which dpkg's ldconfig trigger replaced
#   (lintian: maintscript-calls-ldconfig). libinc0 activates that trigger
#   (debian/libinc0/triggers); CPack's scripts are removed. Scripts of our
#   own (incin-switch's, incin-manager's) are never CPack's and stay.
# - Its -dbgsym packages list their files in md5sums by CPack's absolute
#   staging paths, and carry no copyright or changelog. Here md5sums is
#   written anew, the debug files lose their execute bits, and
#   /usr/share/doc/<package>-dbgsym becomes a symlink to the package's own
#   documentation, as debhelper's dbgsym packages do (they depend on that
#   exact package version).
find_program(_dpkg_deb dpkg-deb REQUIRED)
find_program(_md5sum md5sum REQUIRED)
foreach(_deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT _deb MATCHES "\\.d?deb$")
    continue()
  endif()
  set(_dir "${_deb}.unpacked")
  file(REMOVE_RECURSE "${_dir}")
  execute_process(COMMAND ${_dpkg_deb} --raw-extract "${_deb}" "${_dir}" COMMAND_ERROR_IS_FATAL ANY)
  set(_changed FALSE)
  foreach(_script postinst postrm)
    set(_f "${_dir}/DEBIAN/${_script}")
    if(EXISTS "${_f}")
      file(READ "${_f}" _text)
      # Exactly what CPack writes (blank lines aside): a shebang, set -e and
      # one ldconfig call.
      string(REGEX REPLACE "\n\n+" "\n" _text "${_text}")
      if(_text MATCHES "^#!/bin/sh\nset -e\nif \\[ \"\\$1\" = \"(configure|remove)\" \\]; then\n\tldconfig\nfi\n$")
        file(REMOVE "${_f}")
        set(_changed TRUE)
      endif()
    endif()
  endforeach()
  file(STRINGS "${_dir}/DEBIAN/control" _auto REGEX "^Auto-Built-Package: debug-symbols$")
  if(_auto)
    file(STRINGS "${_dir}/DEBIAN/control" _name REGEX "^Package: ")
    string(REGEX REPLACE "^Package: (.*)-dbgsym$" "\\1" _main "${_name}")
    file(GLOB_RECURSE _debug RELATIVE "${_dir}" "${_dir}/usr/lib/debug/*")
    list(SORT _debug)
    set(_sums "")
    foreach(_f IN LISTS _debug)
      file(CHMOD "${_dir}/${_f}" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
      file(MD5 "${_dir}/${_f}" _md5)
      string(APPEND _sums "${_md5}  ${_f}\n")
    endforeach()
    file(WRITE "${_dir}/DEBIAN/md5sums" "${_sums}")
    file(MAKE_DIRECTORY "${_dir}/usr/share/doc")
    file(CREATE_LINK "${_main}" "${_dir}/usr/share/doc/${_main}-dbgsym" SYMBOLIC)
    set(_changed TRUE)
  endif()
  if(_changed)
    message(STATUS "packaging: ${_deb}: corrected (CPack's ldconfig scripts, dbgsym md5sums and docs)")
    execute_process(COMMAND ${_dpkg_deb} --root-owner-group -Zxz --build "${_dir}" "${_deb}"
                    OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  endif()
  file(REMOVE_RECURSE "${_dir}")
endforeach()
