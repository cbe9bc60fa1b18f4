# tests/layout/repl_no_resp.cmake - the primary's side of replication
# (kvd/repl/repl*.c) builds no RESP reply: INFO replication, ROLE, CLIENT
# LIST's line for the link and WAIT's answer are kvd/resp/resp_repl.c's,
# from repl.h's calls.  Fails on a call of resp_add_* or a CRLF in a
# string of those files.  replica.c is a client of its primary (it may send
# RESP requests to the primary's RESP port) and is not checked.
#
# cmake -DSRC=<source tree> -P repl_no_resp.cmake: exit 0, or 1 naming
# each line.
file(GLOB files ${SRC}/kvd/repl/repl*.c ${SRC}/kvd/repl/repl*.h)
list(FILTER files INCLUDE REGEX "/repl(_[a-z]+)?[.][ch]$") # not replica.c
if(NOT files)
  message(FATAL_ERROR "no kvd/repl/repl*.c under ${SRC}")
endif()
set(bad "")
foreach(f ${files})
  # only the lines that break the rule (a line's ';' would split a list)
  file(STRINGS ${f} lines REGEX "resp_add_[a-z]+\\(|\\\\r\\\\n")
  foreach(l IN LISTS lines)
    file(RELATIVE_PATH rel ${SRC} ${f})
    list(APPEND bad "${rel}: ${l}")
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "replication builds RESP (kvd/resp/resp_repl.c does):\n  ${bad}")
endif()
list(LENGTH files nfiles)
message(STATUS "kvd/repl/repl*: ${nfiles} files, no RESP reply")
