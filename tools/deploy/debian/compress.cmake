# CPack's pre-build script (CPACK_PRE_BUILD_SCRIPTS): what dh_compress does for
# a Debian package, in the staged trees before they are packed: man pages, and
# documents of share/doc over 4 KiB but the copyright (Debian policy 12.3),
# gzipped (-9n: no name, no time; the same bytes every build). The plain
# `cmake --install` keeps them as they are.
file(GLOB_RECURSE staged "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(page IN LISTS staged)
	set(large_doc FALSE)
	if(page MATCHES "/share/doc/[^/]+/[^/]+$" AND NOT page MATCHES "/copyright$")
		file(SIZE "${page}" size)
		if(size GREATER 4096)
			set(large_doc TRUE)
		endif()
	endif()
	if((page MATCHES "/share/man/man[^/]+/[^/]+$" OR large_doc) AND NOT page MATCHES "\\.gz$"
	   AND NOT IS_SYMLINK "${page}")
		execute_process(COMMAND gzip -9n "${page}" RESULT_VARIABLE status)
		if(NOT status EQUAL 0)
			message(FATAL_ERROR "gzip ${page}: ${status}")
		endif()
	endif()
endforeach()
