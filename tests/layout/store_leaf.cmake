# tests/layout/store_leaf.cmake - the storage engine is a leaf: every file
# under kvd/store/ includes only system headers, headers of kvd/store/
# itself and common/'s, never a header of the server (kvd/ or another of
# its folders), so that a test or a benchmark links kvstore alone.
#
# cmake -DSRC=<source tree> -P store_leaf.cmake: exit 0, or 1 naming each
# include that breaks the rule.
file(GLOB files ${SRC}/kvd/store/*.c ${SRC}/kvd/store/*.h)
set(bad "")
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(l ${lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" h "${l}")
    # A quoted name is looked for next to the file first: it must be a
    # plain name found in kvd/store/ or common/, never a path.
    if(h MATCHES "/" OR NOT (EXISTS ${SRC}/kvd/store/${h} OR EXISTS ${SRC}/common/${h}))
      file(RELATIVE_PATH rel ${SRC} ${f})
      list(APPEND bad "${rel}: #include \"${h}\"")
    endif()
  endforeach()
endforeach()
list(LENGTH files n)
if(n EQUAL 0)
  message(FATAL_ERROR "no file under ${SRC}/kvd/store")
endif()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "kvd/store/ includes headers from outside itself and common/:\n  ${bad}")
endif()
message(STATUS "kvd/store: ${n} files, every include its own or common/'s")
