# The Debian package: `cpack --config BUILD/CPackConfig.cmake -B BUILD`
# (README). It holds what `cmake --install` installs, under the same prefix
# (configure with -DCMAKE_INSTALL_PREFIX=/usr for a system package), so the
# units' paths are those of the installed files.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sbxfs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "sbxfs developers <sbxfs@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "process supervision as a filesystem (FUSE)")
# The long description's lines: dpkg indents them itself (a line that
# begins with a space more would be shown verbatim).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "sbxfs mounts a directory whose files are the interface of a process\nsupervisor: writing cmd starts a command, procs/ID/log holds its output,\nreading procs/ID/wait blocks until it ends, writing procs/ID/stop ends its\nwhole process tree. Commands outlive the daemon.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Stripped, as Debian ships binaries; gzip packs in seconds where xz takes minutes.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# Shared-library dependencies from dpkg-shlibdeps (package dpkg-dev); fuse3
# for fusermount3 and mount.fuse3, which sbxfs and mount(8) run.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
# Removal stops and disables the units; purge removes /var/lib/sbxfs
# (packaging/debian/: both honour $DPKG_ROOT).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CMAKE_CURRENT_LIST_DIR}/debian/prerm;${CMAKE_CURRENT_LIST_DIR}/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
