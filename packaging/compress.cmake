# compress.cmake - CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): compress
# manual pages and documents in the staging tree as Debian does (gzip -9n:
# no name, no time stamp, so the same input gives the same bytes).
find_program(KVD_GZIP gzip REQUIRED)
file(GLOB_RECURSE kvd_files LIST_DIRECTORIES false "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*")
list(FILTER kvd_files INCLUDE REGEX "/share/(man/man[1-9]/[^/]+\\.[1-9]|doc/[^/]+/([^/]+\\.md|changelog\\.Debian))$")
foreach(f IN LISTS kvd_files)
  execute_process(COMMAND ${KVD_GZIP} -9nf "${f}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "compress.cmake: gzip ${f} failed")
  endif()
endforeach()
