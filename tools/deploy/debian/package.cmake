# The Debian packages of cuprobe, made by CPack from the install components of
# the top-level CMakeLists.txt (included there, after the install rules):
#
#   cuprobe          the command, its man page and bash completion, the BPF
#                    SDK `cuprobe run` compiles against (include/cuprobe), the
#                    examples, the exporter's systemd unit, Grafana dashboard
#                    and alert rules
#   libcuprobe0      libcuprobe.so.0 (shlibs and an ldconfig trigger)
#   libcuprobe-dev   cuprobe.h, the libcuprobe.so link and cuprobe.pc
#
#   cd build && cpack -G DEB       # build/cuprobe_VERSION_ARCH.deb and the two others
#
# Dependencies come from the ELF files (dpkg-shlibdeps). Every package has
# its copyright, its changelog and the lintian overrides that explain the
# tags lintian still reports (lintian-overrides/). Built, linted, installed,
# used and purged by tests/root_package.c.

set(CUPROBE_PACKAGE_MAINTAINER "cuprobe maintainers <cuprobe@example.org>" CACHE STRING
	"The Maintainer field of the Debian packages: who distributes them")
set(CUPROBE_DEB_RELEASE 1)
set(CUPROBE_DEB_VERSION "${PROJECT_VERSION}-${CUPROBE_DEB_RELEASE}")
set(CUPROBE_DEB_DIR ${CMAKE_CURRENT_LIST_DIR})
set(CUPROBE_DEB_BUILD ${CMAKE_BINARY_DIR}/debian)

# GNUInstallDirs gives lib/ARCH-TRIPLET (multiarch) under the prefix /usr only: a tree
# configured with the default /usr/local packages its library and cuprobe.pc in
# /usr/lib, which lintian reports for the .pc file (the override says so).
if(CMAKE_INSTALL_LIBDIR MATCHES "^lib/[^/]+-linux-gnu")
	set(CUPROBE_LINTIAN_NOT_MULTIARCH "")
else()
	set(CUPROBE_LINTIAN_NOT_MULTIARCH "# Configured without -DCMAKE_INSTALL_PREFIX=/usr, the library's directory is
# /usr/lib, not the multiarch /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}: configure with it for a
# package that cross-builds can use.
libcuprobe-dev: pkg-config-unavailable-for-cross-compilation [usr/lib/pkgconfig/cuprobe.pc]")
endif()

# /usr/share/doc/PACKAGE/{copyright,changelog.Debian.gz} and the lintian overrides, per package.
configure_file(${CUPROBE_DEB_DIR}/changelog.in ${CUPROBE_DEB_BUILD}/changelog.Debian @ONLY)
add_custom_command(OUTPUT ${CUPROBE_DEB_BUILD}/changelog.Debian.gz
	COMMAND gzip -9n -c ${CUPROBE_DEB_BUILD}/changelog.Debian > ${CUPROBE_DEB_BUILD}/changelog.Debian.gz
	DEPENDS ${CUPROBE_DEB_BUILD}/changelog.Debian
	COMMENT "Compressing the Debian changelog")
add_custom_target(cuprobe_deb_changelog ALL DEPENDS ${CUPROBE_DEB_BUILD}/changelog.Debian.gz)
foreach(component_package IN ITEMS tool:cuprobe library:libcuprobe0 dev:libcuprobe-dev)
	string(REPLACE ":" ";" pair ${component_package})
	list(GET pair 0 component)
	list(GET pair 1 package)
	install(FILES ${CUPROBE_DEB_DIR}/copyright ${CUPROBE_DEB_BUILD}/changelog.Debian.gz
		DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
	configure_file(${CUPROBE_DEB_DIR}/lintian-overrides/${package}.in
		${CUPROBE_DEB_BUILD}/lintian-overrides/${package} @ONLY)
	install(FILES ${CUPROBE_DEB_BUILD}/lintian-overrides/${package}
		DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides COMPONENT ${component})
	string(TOUPPER ${component} COMPONENT)
	set(CPACK_DEBIAN_${COMPONENT}_PACKAGE_NAME ${package})
	set(CPACK_DEBIAN_${COMPONENT}_FILE_NAME DEB-DEFAULT)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cuprobe)
set(CPACK_PACKAGE_VENDOR "The cuprobe authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL tool library dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PRE_BUILD_SCRIPTS ${CUPROBE_DEB_DIR}/compress.cmake)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CUPROBE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_RELEASE ${CUPROBE_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")

set(CPACK_DEBIAN_TOOL_PACKAGE_SECTION utils)
# cuprobe run compiles BPF C against include/cuprobe with clang and libbpf's headers.
set(CPACK_DEBIAN_TOOL_PACKAGE_RECOMMENDS "clang, libbpf-dev")
set(CPACK_COMPONENT_TOOL_DESCRIPTION "eBPF tracer and Prometheus exporter for CUDA programs
cuprobe traces any process's calls into the CUDA driver API (libcuda.so.1)
with kernel uprobes, without restarting or preloading anything into it:
trace, stats, top, a GPU timeline, users' own BPF programs on CUDA events
(cuprobe run) and a Prometheus exporter with a systemd unit, a Grafana
dashboard and alert rules.")

set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libs)
# The ldconfig trigger lintian wants (CPack also writes postinst and postrm calling ldconfig).
set(CPACK_DEBIAN_LIBRARY_PACKAGE_CONTROL_EXTRA ${CUPROBE_DEB_DIR}/triggers)
set(CPACK_COMPONENT_LIBRARY_DESCRIPTION "eBPF tracing of the CUDA driver API (shared library)
libcuprobe attaches kernel uprobes to the CUDA driver API and delivers its
records through a BPF ring buffer to a GPU agent thread: what cuprobe uses,
for programs that trace themselves or others.")

set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# cuprobe.h includes the record format, which the cuprobe package installs with the SDK;
# cuprobe.pc requires libbpf, libelf, zlib and libprotobuf-c.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
	"libcuprobe0 (= ${CUPROBE_DEB_VERSION}), cuprobe (= ${CUPROBE_DEB_VERSION}), libbpf-dev, libelf-dev, zlib1g-dev, libprotobuf-c-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION "eBPF tracing of the CUDA driver API (development files)
The header cuprobe.h, the libcuprobe.so link and the pkg-config file
cuprobe.pc, to build programs against libcuprobe.")

include(CPack)
