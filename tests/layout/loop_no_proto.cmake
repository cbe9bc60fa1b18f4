# tests/layout/loop_no_proto.cmake - the io loop names no protocol: it
# reaches each through its kvd_proto entry (kvd/net/proto.h), so adding a
# protocol needs no change to kvd/net/loop.c.  Fails on any identifier or
# word of loop.c or loop.h that names one: resp, repl, native, http, mongo
# as a word or an underscore-separated part (RESP, kvd_resp_io_wake,
# KVD_PROTO_NATIVE), not inside a longer word ("replies" passes).
#
# cmake -DSRC=<source tree> -P loop_no_proto.cmake: exit 0, or 1 naming
# each line.
set(bad "")
foreach(f ${SRC}/kvd/net/loop.c ${SRC}/kvd/net/loop.h)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "no ${f}")
  endif()
  file(STRINGS ${f} lines)
  set(n 0)
  foreach(l IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(TOLOWER "${l}" low)
    if(low MATCHES "(^|[^a-z0-9])(resp|repl|native|http|mongo)([^a-z0-9]|$)")
      file(RELATIVE_PATH rel ${SRC} ${f})
      list(APPEND bad "${rel}:${n}: ${l}")
    endif()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "the loop names a protocol (use kvd_protos[]):\n  ${bad}")
endif()
message(STATUS "kvd/net/loop.c and loop.h name no protocol")
