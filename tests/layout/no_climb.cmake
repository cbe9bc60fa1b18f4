# tests/layout/no_climb.cmake - the server's folders (kvd/net, native,
# resp, repl, ops, store, ...) include each other's headers only by the
# folder's name ("net/conn.h", through the kvd/ include directory), so
# every tie between folders is visible in the #include line; no include
# climbs out with "..", and a plain name is the file's own folder's,
# kvd/'s shared headers (config.h, log.h, kvd.h, keyspace.h, strops.h,
# shash.h), the store's public ones (store.h, clock.h), common/'s or
# libkvclient's.
#
# cmake -DSRC=<source tree> -P no_climb.cmake: exit 0, or 1 naming each
# include that breaks the rule.
cmake_minimum_required(VERSION 3.25) # IN_LIST
set(shared config.h log.h kvd.h keyspace.h strops.h shash.h store.h clock.h store_log.h)
file(GLOB dirs LIST_DIRECTORIES true ${SRC}/kvd/*)
set(bad "")
set(count 0)
foreach(d ${dirs})
  if(NOT IS_DIRECTORY ${d})
    continue()
  endif()
  get_filename_component(folder ${d} NAME)
  file(GLOB files ${d}/*.c ${d}/*.h)
  foreach(f ${files})
    math(EXPR count "${count} + 1")
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(l ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" h "${l}")
      set(ok 0)
      if(h MATCHES "\\.\\.")
        set(ok 0)
      elseif(h MATCHES "^([a-z]+)/([^/]+)$")
        # another folder's header, by its folder's name
        if(NOT CMAKE_MATCH_1 STREQUAL folder AND EXISTS ${SRC}/kvd/${h})
          set(ok 1)
        endif()
      # (libkvclient's: a replica talks to its primary with its code)
      elseif(EXISTS ${d}/${h} OR EXISTS ${SRC}/common/${h} OR EXISTS ${SRC}/libkvclient/${h})
        set(ok 1)
      elseif(h IN_LIST shared AND (EXISTS ${SRC}/kvd/${h} OR EXISTS ${SRC}/kvd/store/${h}))
        set(ok 1)
      endif()
      if(NOT ok)
        file(RELATIVE_PATH rel ${SRC} ${f})
        list(APPEND bad "${rel}: #include \"${h}\"")
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "includes that climb out of their folder, or reach another's header by a bare name:\n  ${bad}")
endif()
message(STATUS "kvd/*/: ${count} files, every include its own folder's, a named folder's, kvd/'s shared or common/'s")
