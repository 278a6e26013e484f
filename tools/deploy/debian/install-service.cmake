# install(SCRIPT) of the systemd unit: tools/deploy/cuprobe-exporter.service
# with its ExecStart pointed at the cuprobe this tree installs (the prefix is
# known at install time only: /usr for the Debian package, /usr/local or
# --prefix for cmake --install). Set before: CUPROBE_SERVICE_SOURCE,
# CUPROBE_SERVICE_STAGED (a path in the build tree), CUPROBE_BINDIR.
file(READ "${CUPROBE_SERVICE_SOURCE}" unit)
string(FIND "${unit}" "ExecStart=/usr/local/bin/cuprobe " at)
if(at LESS 0)
	message(FATAL_ERROR "${CUPROBE_SERVICE_SOURCE}: no ExecStart=/usr/local/bin/cuprobe to point at the installed one")
endif()
string(REPLACE "ExecStart=/usr/local/bin/cuprobe " "ExecStart=${CMAKE_INSTALL_PREFIX}/${CUPROBE_BINDIR}/cuprobe " unit "${unit}")
file(WRITE "${CUPROBE_SERVICE_STAGED}" "${unit}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
	PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${CUPROBE_SERVICE_STAGED}")
