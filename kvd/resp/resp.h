/* resp.h - the Redis protocol (RESP2) listener, shared by its source files.
 *
 *   resp.c        framing: multibulk and inline parsing, replies, dispatch
 *   resp_cmd.c    key and string commands (GET, SET, INCR, EXPIRE, ...)
 *   resp_scan.c   SCAN and KEYS
 *   resp_glob.c   the glob patterns of SCAN, KEYS, PSUBSCRIBE, CONFIG GET
 *   resp_admin.c  connection and server commands (HELLO, INFO, COMMAND, ...)
 *   resp_str.c    GETRANGE, bit commands and LCS (and BITFIELD's parser)
 *   resp_key.c    EXPIRETIME, TOUCH, RANDOMKEY, OBJECT, WAIT, LATENCY
 *   resp_intro.c  CLIENT LIST/INFO/KILL, MONITOR, SLOWLOG, INFO commandstats
 *   resp_multi.c  MULTI, EXEC, DISCARD, WATCH, UNWATCH; RENAME, COPY
 *   resp_pubsub.c PUBLISH, SUBSCRIBE, PSUBSCRIBE, (P)UNSUBSCRIBE, PUBSUB
 *   resp_rmw.c    GETEX, MSETNX, SETRANGE, SETBIT, INCRBYFLOAT, BITOP,
 *                 BITFIELD
 *   resp_save.c   SAVE, BGSAVE, LASTSAVE, SHUTDOWN
 *   resp_hash.c   the hash commands (HSET, HGET, HGETALL, HSCAN, ...)
 *   resp_repl.c   INFO replication, ROLE, WAIT's answer (from repl.h)
 *
 * A request is parsed in place: its arguments are slices of the input
 * buffer (multibulk) or of a stack buffer (inline commands, whose quoting
 * needs unescaping), so no request costs a malloc.  The first few
 * arguments are at hand in req->a; the rest are walked with resp_it.
 *
 * Handlers return NULL once they have answered or queued their work, or an
 * error text ("ERR ...", without the leading '-') that the dispatcher sends
 * in order.  A handler of a command flagged RC_WRITE must not answer
 * anything itself: it validates everything, then either queues one write
 * (kvd_write_*) or returns an error, because earlier writes of the
 * connection may still be in flight and replies leave in request order.
 */
#ifndef KVD_RESP_H
#define KVD_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "net/auth.h"
#include "net/conn.h"
#include "store.h"

/* RESP's entry points (its kvd_proto, resp.c): one request per call, the
 * bytes consumed (0: need more input, or stalled); a write's reply. */
size_t kvd_resp_input(struct kvd_conn *c, const uint8_t *p, size_t n);
void kvd_resp_wreply(struct kvd_conn *c, struct kvd_pend *pd);
/* The introspection registry (resp_intro.c) hears of a RESP connection's
 * opening and freeing, and of every wake of an io thread (CLIENT KILL and
 * MONITOR from other threads act then); a replica's link joins it too
 * (repl.c). */
void kvd_resp_conn_open(struct kvd_conn *c);
void kvd_resp_conn_close(struct kvd_conn *c);
void kvd_resp_io_wake(struct kvd_io *io);
/* Bytes MULTI's queue of a RESP connection holds (resp_multi.c). */
size_t kvd_resp_multi_mem(const struct kvd_conn *c);

#define RESP_FIXED_ARGS 8
/* Largest multibulk count accepted (Redis allows up to INT_MAX, but never
 * needs more than this in practice; the query buffer cap bounds memory). */
#define RESP_MAX_ARGS (1u << 20)
/* Longest inline command line, as Redis's PROTO_INLINE_MAX_SIZE. */
#define RESP_INLINE_MAX (64u << 10)
/* A cursor stays valid for at least this many later SCAN calls. */
#define RESP_SCAN_SLOTS 4096

/* kvd_conn.resp_state bits: CLIENT REPLY's state, as Redis's client flags
 * (resp.c mutes a command's reply, resp_admin.c sets them). */
enum {
	RESP_REPLY_OFF = 1u << 0,	/* no reply until CLIENT REPLY ON */
	RESP_REPLY_SKIP = 1u << 1,	/* no reply to this command */
	RESP_REPLY_SKIP_NEXT = 1u << 2, /* nor to the next one */
};

struct resp_req {
	uint32_t argc;
	struct kv_slice a[RESP_FIXED_ARGS]; /* a[0] is the command name */
	const uint8_t *body;		    /* first argument, for resp_it */
	int packed;			    /* inline: [u32 len][bytes]... */
	uint16_t cmd;			    /* its id in the command table */
	char err[512];			    /* room for a formatted error */
};

/* A walk over the arguments from some index on. */
struct resp_it {
	const uint8_t *p;
	int packed;
};

void resp_it_init(const struct resp_req *r, uint32_t from, struct resp_it *it);
void resp_it_next(struct resp_it *it, struct kv_slice *arg);

/* ---- command table ---- */

enum {
	RC_WRITE = 1u << 0, /* queued to committers: see the rule above */
	RC_READ = 1u << 1,  /* reads keys */
	RC_FAST = 1u << 2,
	RC_ADMIN = 1u << 3,
	RC_CONN = 1u << 4, /* connection state only */
	/* reads and writes keys in an exclusive section (resp_multi.c): waits
	 * for the connection's writes in flight, then may answer at once */
	RC_EXCL = 1u << 5,
	RC_NOMULTI = 1u << 6, /* refused inside MULTI, as Redis's no_multi */
};

typedef const char *(*resp_fn)(struct kvd_conn *c, struct resp_req *r);

/* X(ID, name, handler, native ops, arity, flags, first key, last key, step,
 * group, summary).  Arity as Redis: n exact, -n at least n (name included).
 * Native ops: the native operations (KVO bits) the command performs, its
 * native twin where it has one (SETRANGE: KVO(SETRANGE), which performs GET
 * and PUT in auth.c's table), so that disable-commands refuses a native
 * name on both protocols (auth.c); 0 for a command that performs none.
 * Keep "X(ID, "name", resp_fn" at the start of each row:
 * tests/fuzz/CMakeLists.txt finds the handlers by it. */
#define RESP_COMMANDS(X)                                                       \
	X(APPEND, "append", resp_append, KVO(APPEND), 3, RC_WRITE, 1, 1, 1,    \
	  "string", "Appends a string to the value of a key.")                 \
	X(AUTH, "auth", resp_auth, KVO(AUTH), -2, RC_CONN | RC_FAST, 0, 0, 0,  \
	  "connection", "Authenticates the connection.")                       \
	X(BGSAVE, "bgsave", resp_bgsave, 0, -1, RC_ADMIN, 0, 0, 0, "server",   \
	  "Checkpoints every shard in the background.")                        \
	X(BITCOUNT, "bitcount", resp_bitcount, KVO(BITCOUNT), -2, RC_READ, 1,  \
	  1, 1, "bitmap",                                                      \
	  "Counts the number of set bits (population counting) in a string.")  \
	X(BITFIELD, "bitfield", resp_bitfield, KVO(GET) | KVO(PUT), -2,        \
	  RC_WRITE | RC_EXCL, 1, 1, 1, "bitmap",                               \
	  "Performs arbitrary bitfield integer operations on strings.")        \
	X(BITFIELD_RO, "bitfield_ro", resp_bitfield_ro, KVO(GET), -2,          \
	  RC_READ | RC_FAST, 1, 1, 1, "bitmap",                                \
	  "Performs arbitrary read-only bitfield integer operations on "       \
	  "strings.")                                                          \
	X(BITOP, "bitop", resp_bitop, KVO(BITOP), -4, RC_WRITE | RC_EXCL, 2,   \
	  -1, 1, "bitmap",                                                     \
	  "Performs bitwise operations on multiple strings, and stores the "   \
	  "result.")                                                           \
	X(BITPOS, "bitpos", resp_bitpos, KVO(BITPOS), -3, RC_READ, 1, 1, 1,    \
	  "bitmap", "Finds the first set (1) or clear (0) bit in a string.")   \
	X(CLIENT, "client", resp_client, 0, -2, RC_CONN, 0, 0, 0,              \
	  "connection",                                                        \
	  "Connection commands: ID, SETNAME, GETNAME, SETINFO, LIST, "         \
	  "INFO, KILL, NO-EVICT, NO-TOUCH.")                                   \
	X(COMMAND, "command", resp_command, 0, -1, RC_CONN, 0, 0, 0, "server", \
	  "Returns detailed information about commands.")                      \
	X(CONFIG, "config", resp_config, 0, -2, RC_ADMIN, 0, 0, 0, "server",   \
	  "The server's configuration: GET, SET, REWRITE, RESETSTAT.")         \
	X(COPY, "copy", resp_copy, KVO(COPY), -3, RC_WRITE | RC_EXCL, 1, 2, 1, \
	  "generic",                                                           \
	  "Copies the value of a key "                                         \
	  "to a new key.")                                                     \
	X(DBSIZE, "dbsize", resp_dbsize, KVO(COUNT), 1, RC_READ, 0, 0, 0,      \
	  "server", "Returns the number of keys.")                             \
	X(DECR, "decr", resp_incr, KVO(INCR), 2, RC_WRITE | RC_FAST, 1, 1, 1,  \
	  "string", "Decrements the integer value of a key by one.")           \
	X(DECRBY, "decrby", resp_incr, KVO(INCR), 3, RC_WRITE | RC_FAST, 1, 1, \
	  1, "string", "Decrements the integer value of a key by a number.")   \
	X(DEL, "del", resp_del, KVO(DEL) | KVO(MDEL), -2, RC_WRITE, 1, -1, 1,  \
	  "generic", "Deletes one or more keys.")                              \
	X(DISCARD, "discard", resp_discard, 0, 1, RC_CONN | RC_FAST, 0, 0, 0,  \
	  "transactions", "Discards a transaction.")                           \
	X(ECHO, "echo", resp_echo, 0, 2, RC_CONN | RC_FAST, 0, 0, 0,           \
	  "connection", "Returns the given string.")                           \
	X(EXISTS, "exists", resp_exists, KVO(EXISTS), -2, RC_READ | RC_FAST,   \
	  1, -1, 1, "generic", "Determines whether one or more keys exist.")   \
	X(EXEC, "exec", resp_exec, 0, 1, RC_READ, 0, 0, 0, "transactions",     \
	  "Executes all commands in a transaction.")                           \
	X(EXPIRE, "expire", resp_expire, KVO(EXPIRE), -3, RC_WRITE | RC_FAST,  \
	  1, 1, 1, "generic", "Sets the expiration time of a key in seconds.") \
	X(EXPIREAT, "expireat", resp_expire, KVO(EXPIRE), -3,                  \
	  RC_WRITE | RC_FAST, 1, 1, 1, "generic",                              \
	  "Sets the expiration time of a key to a Unix timestamp.")            \
	X(EXPIRETIME, "expiretime", resp_expiretime, KVO(TTL), 2,              \
	  RC_READ | RC_FAST, 1, 1, 1, "generic",                               \
	  "Returns the expiration time of a key as a Unix timestamp.")         \
	X(FLUSHALL, "flushall", resp_flushall, KVO(FLUSHALL), -1,              \
	  RC_WRITE | RC_ADMIN, 0, 0, 0, "server",                              \
	  "Removes all keys (unless resp-flushall is no).")                    \
	X(FLUSHDB, "flushdb", resp_flushall, KVO(FLUSHALL), -1,                \
	  RC_WRITE | RC_ADMIN, 0, 0, 0, "server",                              \
	  "Removes all keys (unless resp-flushall is no).")                    \
	X(GET, "get", resp_get, KVO(GET), 2, RC_READ | RC_FAST, 1, 1, 1,       \
	  "string", "Returns the string value of a key.")                      \
	X(GETBIT, "getbit", resp_getbit, KVO(GETBIT), 3, RC_READ | RC_FAST, 1, \
	  1, 1, "bitmap", "Returns a bit value by offset.")                    \
	X(GETDEL, "getdel", resp_getdel, KVO(GETDEL), 2, RC_WRITE | RC_FAST,   \
	  1, 1, 1, "string",                                                   \
	  "Returns the string value of a key after deleting it.")              \
	X(GETEX, "getex", resp_getex, KVO(GETEX), -2,                          \
	  RC_WRITE | RC_EXCL | RC_FAST, 1, 1, 1, "string",                     \
	  "Returns the string value of a key after setting its expiration "    \
	  "time.")                                                             \
	X(GETRANGE, "getrange", resp_getrange, KVO(GETRANGE), 4, RC_READ, 1,   \
	  1, 1, "string",                                                      \
	  "Returns a substring of the string stored at a key.")                \
	X(GETSET, "getset", resp_set, KVO(PUT), 3, RC_WRITE | RC_FAST, 1, 1,   \
	  1, "string",                                                         \
	  "Returns the old value of a key after setting a new one.")           \
	X(HDEL, "hdel", resp_hdel, KVO(PUT), -3, RC_WRITE | RC_FAST, 1, 1, 1,  \
	  "hash", "Deletes one or more fields and their values from a hash.")  \
	X(HEXISTS, "hexists", resp_hexists, KVO(GET), 3, RC_READ | RC_FAST, 1, \
	  1, 1, "hash", "Determines whether a field exists in a hash.")        \
	X(HGET, "hget", resp_hget, KVO(GET), 3, RC_READ | RC_FAST, 1, 1, 1,    \
	  "hash", "Returns the value of a field in a hash.")                   \
	X(HGETALL, "hgetall", resp_hgetall, KVO(GET), 2, RC_READ, 1, 1, 1,     \
	  "hash", "Returns all fields and values in a hash.")                  \
	X(HINCRBY, "hincrby", resp_hincrby, KVO(PUT), 4, RC_WRITE | RC_FAST,   \
	  1, 1, 1, "hash",                                                     \
	  "Increments the integer value of a field in a hash by a number.")    \
	X(HINCRBYFLOAT, "hincrbyfloat", resp_hincrbyfloat, KVO(PUT), 4,        \
	  RC_WRITE | RC_FAST, 1, 1, 1, "hash",                                 \
	  "Increments the floating point value of a field by a number.")       \
	X(HKEYS, "hkeys", resp_hkeys, KVO(GET), 2, RC_READ, 1, 1, 1, "hash",   \
	  "Returns all fields in a hash.")                                     \
	X(HLEN, "hlen", resp_hlen, KVO(GET), 2, RC_READ | RC_FAST, 1, 1, 1,    \
	  "hash", "Returns the number of fields in a hash.")                   \
	X(HMGET, "hmget", resp_hmget, KVO(GET), -3, RC_READ | RC_FAST, 1, 1,   \
	  1, "hash", "Returns the values of all fields in a hash.")            \
	X(HMSET, "hmset", resp_hset, KVO(PUT), -4, RC_WRITE | RC_FAST, 1, 1,   \
	  1, "hash", "Sets the values of multiple fields.")                    \
	X(HRANDFIELD, "hrandfield", resp_hrandfield, KVO(GET), -2, RC_READ, 1, \
	  1, 1, "hash", "Returns one or more random fields from a hash.")      \
	X(HSCAN, "hscan", resp_hscan, KVO(GET), -3, RC_READ, 1, 1, 1, "hash",  \
	  "Iterates over fields and values of a hash.")                        \
	X(HSET, "hset", resp_hset, KVO(PUT), -4, RC_WRITE | RC_FAST, 1, 1, 1,  \
	  "hash", "Creates or modifies the value of a field in a hash.")       \
	X(HSETNX, "hsetnx", resp_hsetnx, KVO(PUT), 4, RC_WRITE | RC_FAST, 1,   \
	  1, 1, "hash",                                                        \
	  "Sets the value of a field in a hash only when the field doesn't "   \
	  "exist.")                                                            \
	X(HSTRLEN, "hstrlen", resp_hstrlen, KVO(GET), 3, RC_READ | RC_FAST, 1, \
	  1, 1, "hash", "Returns the length of the value of a field.")         \
	X(HVALS, "hvals", resp_hvals, KVO(GET), 2, RC_READ, 1, 1, 1, "hash",   \
	  "Returns all values in a hash.")                                     \
	X(HELLO, "hello", resp_hello, KVO(HELLO), -1, RC_CONN | RC_FAST, 0, 0, \
	  0, "connection", "Handshakes with the server (protocol 2 only).")    \
	X(INCR, "incr", resp_incr, KVO(INCR), 2, RC_WRITE | RC_FAST, 1, 1, 1,  \
	  "string", "Increments the integer value of a key by one.")           \
	X(INCRBY, "incrby", resp_incr, KVO(INCR), 3, RC_WRITE | RC_FAST, 1, 1, \
	  1, "string", "Increments the integer value of a key by a number.")   \
	X(INCRBYFLOAT, "incrbyfloat", resp_incrbyfloat, KVO(INCRBYFLOAT), 3,   \
	  RC_WRITE | RC_EXCL | RC_FAST, 1, 1, 1, "string",                     \
	  "Increment the floating point value of a key by a number.")          \
	X(INFO, "info", resp_info, KVO(STATS), -1, RC_ADMIN, 0, 0, 0,          \
	  "server", "Returns information and statistics about the server.")    \
	X(KEYS, "keys", resp_keys, KVO(SCAN), 2, RC_READ, 0, 0, 0, "generic",  \
	  "Returns all key names that match a pattern (blocks: use SCAN).")    \
	X(LASTSAVE, "lastsave", resp_lastsave, 0, 1, RC_FAST, 0, 0, 0,         \
	  "server",                                                            \
	  "Returns the Unix time by which every shard finished the last "      \
	  "checkpoint SAVE or BGSAVE asked for.")                              \
	X(LATENCY, "latency", resp_latency, 0, -2, RC_ADMIN, 0, 0, 0,          \
	  "server",                                                            \
	  "Latency monitor stand-ins (kvd samples no latency events).")        \
	X(LCS, "lcs", resp_lcs, KVO(GET), -3, RC_READ, 1, 2, 1, "string",      \
	  "Finds the longest common substring.")                               \
	X(MGET, "mget", resp_mget, KVO(MGET), -2, RC_READ | RC_FAST, 1, -1, 1, \
	  "string",                                                            \
	  "Atomically returns the string values of one or more keys.")         \
	X(MONITOR, "monitor", resp_monitor, 0, 1, RC_ADMIN, 0, 0, 0, "server", \
	  "Listens for all requests received by the server in real time.")     \
	X(MSET, "mset", resp_mset, KVO(MPUT), -3, RC_WRITE, 1, -1, 2,          \
	  "string", "Sets the values of one or more keys (atomic per shard).") \
	X(MSETNX, "msetnx", resp_msetnx, KVO(EXISTS) | KVO(MPUT), -3,          \
	  RC_WRITE | RC_EXCL, 1, -1, 2, "string",                              \
	  "Atomically sets one or more keys only when none of them exist.")    \
	X(MULTI, "multi", resp_multi, 0, 1, RC_CONN | RC_FAST, 0, 0, 0,        \
	  "transactions", "Starts a transaction.")                             \
	X(OBJECT, "object", resp_object, KVO(GET), -2, RC_READ, 2, 2, 1,       \
	  "generic",                                                           \
	  "Object introspection: ENCODING, FREQ, IDLETIME, REFCOUNT.")         \
	X(PERSIST, "persist", resp_expire, KVO(EXPIRE), 2, RC_WRITE | RC_FAST, \
	  1, 1, 1, "generic", "Removes the expiration time of a key.")         \
	X(PEXPIRE, "pexpire", resp_expire, KVO(EXPIRE), -3,                    \
	  RC_WRITE | RC_FAST, 1, 1, 1, "generic",                              \
	  "Sets the expiration time of a key in milliseconds.")                \
	X(PEXPIREAT, "pexpireat", resp_expire, KVO(EXPIRE), -3,                \
	  RC_WRITE | RC_FAST, 1, 1, 1, "generic",                              \
	  "Sets the expiration time of a key to a Unix millisecond "           \
	  "timestamp.")                                                        \
	X(PEXPIRETIME, "pexpiretime", resp_expiretime, KVO(TTL), 2,            \
	  RC_READ | RC_FAST, 1, 1, 1, "generic",                               \
	  "Returns the expiration time of a key as a Unix milliseconds "       \
	  "timestamp.")                                                        \
	X(PING, "ping", resp_ping, KVO(PING), -1, RC_CONN | RC_FAST, 0, 0, 0,  \
	  "connection", "Returns the server's liveliness response.")           \
	X(PSETEX, "psetex", resp_set, KVO(PUT), 4, RC_WRITE, 1, 1, 1,          \
	  "string",                                                            \
	  "Sets the string value and expiration time in milliseconds of a "    \
	  "key.")                                                              \
	X(PSUBSCRIBE, "psubscribe", resp_psubscribe, 0, -2, RC_CONN, 0, 0, 0,  \
	  "pubsub",                                                            \
	  "Listens for messages published to channels that match one or "      \
	  "more patterns.")                                                    \
	X(PTTL, "pttl", resp_ttl, KVO(TTL), 2, RC_READ | RC_FAST, 1, 1, 1,     \
	  "generic", "Returns the expiration time in milliseconds of a key.")  \
	X(PUBLISH, "publish", resp_publish, 0, 3, RC_CONN | RC_FAST, 0, 0, 0,  \
	  "pubsub", "Posts a message to a channel.")                           \
	X(PUBSUB, "pubsub", resp_pubsub, 0, -2, RC_CONN, 0, 0, 0, "pubsub",    \
	  "Pub/sub introspection: CHANNELS, NUMSUB, NUMPAT.")                  \
	X(PUNSUBSCRIBE, "punsubscribe", resp_punsubscribe, 0, -1, RC_CONN, 0,  \
	  0, 0, "pubsub",                                                      \
	  "Stops listening to messages published to channels that match one "  \
	  "or more patterns.")                                                 \
	X(QUIT, "quit", resp_quit, 0, -1, RC_CONN | RC_FAST, 0, 0, 0,          \
	  "connection", "Closes the connection.")                              \
	X(RANDOMKEY, "randomkey", resp_randomkey, KVO(SCAN), 1, RC_READ, 0, 0, \
	  0, "generic", "Returns a random key name from the database.")        \
	X(RENAME, "rename", resp_rename, KVO(RENAME), 3, RC_WRITE | RC_EXCL,   \
	  1, 2, 1, "generic",                                                  \
	  "Renames a key and "                                                 \
	  "overwrites the destination.")                                       \
	X(RENAMENX, "renamenx", resp_rename, KVO(RENAME), 3,                   \
	  RC_WRITE | RC_EXCL | RC_FAST, 1, 2, 1, "generic",                    \
	  "Renames a key only when the target key name doesn't exist.")        \
	X(REPLICAOF, "replicaof", resp_replicaof, KVO(REPLICAOF), 3, RC_ADMIN, \
	  0, 0, 0, "server",                                                   \
	  "Makes the server a replica of another kvd, or a primary (NO "       \
	  "ONE).")                                                             \
	X(ROLE, "role", resp_role, 0, 1, RC_FAST, 0, 0, 0, "server",           \
	  "Returns the replication role.")                                     \
	X(SAVE, "save", resp_save, 0, 1, RC_ADMIN | RC_NOMULTI, 0, 0, 0,       \
	  "server",                                                            \
	  "Checkpoints every shard: LMDB then holds every acknowledged "       \
	  "write.")                                                            \
	X(SCAN, "scan", resp_scan, KVO(SCAN), -2, RC_READ, 0, 0, 0, "generic", \
	  "Iterates over the key names in key order.")                         \
	X(SELECT, "select", resp_select, 0, 2, RC_CONN | RC_FAST, 0, 0, 0,     \
	  "connection", "Changes the selected database (only 0 exists).")      \
	X(SET, "set", resp_set, KVO(PUT), -3, RC_WRITE, 1, 1, 1, "string",     \
	  "Sets the string value of a key, ignoring its type.")                \
	X(SETBIT, "setbit", resp_setbit, KVO(SETBIT), 4, RC_WRITE | RC_EXCL,   \
	  1, 1, 1, "bitmap",                                                   \
	  "Sets or clears the bit at offset of the string value.")             \
	X(SETEX, "setex", resp_set, KVO(PUT), 4, RC_WRITE, 1, 1, 1, "string",  \
	  "Sets the string value and expiration time of a key.")               \
	X(SETNX, "setnx", resp_set, KVO(PUT), 3, RC_WRITE | RC_FAST, 1, 1, 1,  \
	  "string",                                                            \
	  "Sets the string value of a key only when the key does not "         \
	  "exist.")                                                            \
	X(SETRANGE, "setrange", resp_setrange, KVO(SETRANGE), 4,               \
	  RC_WRITE | RC_EXCL, 1, 1, 1, "string",                               \
	  "Overwrites a part of a string value with another by an offset.")    \
	X(SHUTDOWN, "shutdown", resp_shutdown, 0, -1, RC_ADMIN | RC_NOMULTI,   \
	  0, 0, 0, "server", "Stops the server cleanly, as SIGTERM does.")     \
	X(SLAVEOF, "slaveof", resp_replicaof, KVO(REPLICAOF), 3, RC_ADMIN, 0,  \
	  0, 0, "server",                                                      \
	  "Makes the server a replica of another kvd, or a primary (NO "       \
	  "ONE).")                                                             \
	X(SLOWLOG, "slowlog", resp_slowlog, 0, -2, RC_ADMIN, 0, 0, 0,          \
	  "server", "The slow log: GET, LEN, RESET.")                          \
	X(STRLEN, "strlen", resp_strlen, KVO(GET), 2, RC_READ | RC_FAST, 1, 1, \
	  1, "string", "Returns the length of a string value.")                \
	X(SUBSCRIBE, "subscribe", resp_subscribe, 0, -2, RC_CONN, 0, 0, 0,     \
	  "pubsub", "Listens for messages published to channels.")             \
	X(SUBSTR, "substr", resp_getrange, KVO(GETRANGE), 4, RC_READ, 1, 1, 1, \
	  "string", "Returns a substring from a string value.")                \
	X(TIME, "time", resp_time, 0, 1, RC_FAST, 0, 0, 0, "server",           \
	  "Returns the server time.")                                          \
	X(TOUCH, "touch", resp_touch, KVO(EXISTS), -2, RC_READ | RC_FAST, 1,   \
	  -1, 1, "generic",                                                    \
	  "Returns the number of existing keys out of those specified.")       \
	X(TTL, "ttl", resp_ttl, KVO(TTL), 2, RC_READ | RC_FAST, 1, 1, 1,       \
	  "generic", "Returns the expiration time in seconds of a key.")       \
	X(TYPE, "type", resp_type, KVO(EXISTS), 2, RC_READ | RC_FAST, 1, 1, 1, \
	  "generic", "Determines the type of value stored at a key.")          \
	X(UNWATCH, "unwatch", resp_unwatch, 0, 1, RC_CONN | RC_FAST, 0, 0, 0,  \
	  "transactions", "Forgets about watched keys of a transaction.")      \
	X(UNSUBSCRIBE, "unsubscribe", resp_unsubscribe, 0, -1, RC_CONN, 0, 0,  \
	  0, "pubsub", "Stops listening to messages posted to channels.")      \
	X(UNLINK, "unlink", resp_del, KVO(DEL) | KVO(MDEL), -2,                \
	  RC_WRITE | RC_FAST, 1, -1, 1, "generic",                             \
	  "Deletes one or more keys.")                                         \
	X(WATCH, "watch", resp_watch, 0, -2, RC_READ | RC_FAST, 1, -1, 1,      \
	  "transactions",                                                      \
	  "Monitors changes to keys to determine the execution of a "          \
	  "transaction.")                                                      \
	X(WAIT, "wait", resp_wait, KVO(WAIT), 3, 0, 0, 0, 0, "generic",        \
	  "Waits for replicas to have the connection's writes on disk.")

enum resp_cmd_id {
#define RESP_CMD_ENUM(id, ...) RESP_CMD_##id,
	RESP_COMMANDS(RESP_CMD_ENUM)
#undef RESP_CMD_ENUM
	    RESP_NCMDS
};

struct resp_cmd {
	const char *name;
	resp_fn fn;
	uint64_t ops; /* KVO bits: the native operations it performs */
	int arity;
	uint32_t flags;
	int first, last, step;
	const char *group, *summary;
};

extern const struct resp_cmd resp_cmds[RESP_NCMDS];

#define RESP_CMD_DECL(id, name, fn, ...)                                       \
	const char *fn(struct kvd_conn *c, struct resp_req *r);
RESP_COMMANDS(RESP_CMD_DECL)
#undef RESP_CMD_DECL

/* ---- transactions (resp_multi.c) ---- */

/* Fill r->a from r->body (resp.c). */
void resp_req_fill(struct resp_req *r);
/* Run r (r->cmd set, already checked) and answer it in order, as EXEC
 * runs its queue (resp.c): a reply longer than room bytes is dropped for
 * an error.  Returns the length of what it answered at once (a write's
 * reply comes later, through its pend). */
size_t kvd_resp_run(struct kvd_conn *c, struct resp_req *r, size_t room);
int kvd_resp_in_multi(const struct kvd_conn *c);
/* Does r run in an exclusive section (RC_EXCL, or EXPIRE with options)? It
 * waits for the connection's writes in flight, and may answer at once. */
int resp_excl_req(const struct resp_cmd *d, const struct resp_req *r);
/* An expiry argument (resp_cmd.c): unit ms per step, absolute or relative;
 * *at the absolute expiry in ms, up to INT64_MAX, possibly in the past (0:
 * not after 1970); positive (SET, GETEX): a time of 0 or less is refused. */
const char *resp_parse_expire(struct kvd_conn *c, struct resp_req *r,
			      struct kv_slice arg, uint64_t unit, int absolute,
			      int positive, uint64_t *at);
/* Run fn inside this thread's exclusive section (EXEC's) or one of its
 * own; writes fn queues are applied and committed before the section
 * ends (EXEC's writes before it first).  fn's error, or NULL.  A write
 * queued with op RESP_CMD_EXEC is silent (fn answers for it); if it fails,
 * fn's answer is taken back and the failure is the error. */
typedef const char *(*resp_excl_fn)(struct kvd_conn *c, struct resp_req *r,
				    void *arg);
const char *resp_in_section(struct kvd_conn *c, struct resp_req *r,
			    resp_excl_fn fn, void *arg);
/* In a section: a key's value (appended to v when v) and its absolute
 * expiry (0: none).  KV_OK, KV_NOT_FOUND, KV_WRONG_TYPE (a hash: v
 * untouched, *exp set) or another KV_*. */
int resp_section_read(struct kvd_conn *c, struct kv_slice k, struct kv_buf *v,
		      uint64_t *exp);
/* The same for a value of any type, given in *type (KVD_VT_*). */
int resp_section_readv(struct kvd_conn *c, struct kv_slice k, struct kv_buf *v,
		       uint64_t *exp, unsigned *type);
/* After MULTI: queue r (already checked: arity, access); NULL, or the
 * error that refuses it (multi-max-commands, multi-max-bytes). */
const char *kvd_resp_multi_queue(struct kvd_conn *c, struct resp_req *r);
/* A command was refused while queueing: EXEC will answer EXECABORT, and
 * the queue is released now. */
void kvd_resp_multi_refuse(struct kvd_conn *c);
void kvd_resp_multi_free(struct kvd_conn *c);
/* WATCH: a batch stores key; watchers of it see a change.  The store's
 * stored hook (kvd_store_opts), called by the writer of the key's shard
 * (its committer, an io thread committing its own writes, an exclusive
 * section) while it builds the batch.  Nearly free when nothing is
 * watched.  arg is unused. */
void kvd_watch_touch(void *arg, const void *key, size_t klen);

/* A hash write came back (resp_hash.c): 1 when pd was one and is
 * answered (kvd_resp_wreply asks first). */
int resp_hash_wreply(struct kvd_conn *c, struct kvd_pend *pd);

/* ---- BITFIELD (resp_str.c) ---- */

enum { RESP_BF_GET, RESP_BF_SET, RESP_BF_INCRBY };
enum { RESP_BF_WRAP, RESP_BF_SAT, RESP_BF_FAIL };

struct resp_bf_op {
	uint64_t off; /* in bits */
	int64_t val;  /* SET's value, INCRBY's increment */
	uint8_t op, ow, sign, bits;
};

/* BITFIELD's operations from argument 2 on, checked as Redis 7.0 does and
 * in its order, into *ops (malloc'd; the caller frees it) and *n; *maxbit
 * is the end of the furthest field a SET or INCRBY writes, 0 for none. */
const char *resp_bf_parse(struct resp_req *r, struct resp_bf_op **ops,
			  uint32_t *n, uint64_t *maxbit);
/* A GET of o on v (zero past its end). */
int64_t resp_bf_get(struct kv_slice v, const struct resp_bf_op *o);
/* A SET or INCRBY of o on p, which holds the field: 0 with its reply, or
 * -1 when it overflows under OVERFLOW FAIL (nothing written, nil). */
int resp_bf_write(uint8_t *p, const struct resp_bf_op *o, int64_t *reply);

/* ---- pub/sub (resp_pubsub.c) ---- */

/* Publish msg on channel ch, from any thread (PUBLISH, and keyspace.c's
 * events): the number of subscriptions that got it, or -1 when out of
 * memory. */
int64_t kvd_resp_publish(struct kv_slice ch, struct kv_slice msg);
/* Does c have a subscription (RESP2's subscribed context)? */
int kvd_resp_subscribed(const struct kvd_conn *c);
/* Before each command of a connection that has subscribed at some time:
 * move the messages waiting for it into its output, then refuse what the
 * subscribed context does not allow (Redis's error), or NULL. */
const char *kvd_resp_pubsub_gate(struct kvd_conn *c, struct resp_req *r);
/* Move the messages waiting for subscriber c into its output now (before
 * a command whose own reply CLIENT REPLY mutes). */
void kvd_resp_pubsub_drain(struct kvd_conn *c);
/* The io thread io was woken: move its subscribers' messages. */
void kvd_resp_pubsub_wake(struct kvd_io *io);
/* c closes: drop its subscriptions. */
void kvd_resp_pubsub_close(struct kvd_conn *c);
/* Live channels and patterns, and subscribers closed over
 * pubsub-max-output since start. */
struct kvd_server;
void kvd_resp_pubsub_stats(struct kvd_server *srv, uint64_t *channels,
			   uint64_t *patterns, uint64_t *closed);

/* ---- replies (resp.c) ---- */

void resp_add_raw(struct kvd_conn *c, const void *p, size_t n);
void resp_add_ok(struct kvd_conn *c);
void resp_add_status(struct kvd_conn *c, const char *s);
void resp_add_int(struct kvd_conn *c, int64_t v);
void resp_add_bulk(struct kvd_conn *c, const void *p, size_t n);
void resp_add_cstr(struct kvd_conn *c, const char *s);
void resp_add_nil(struct kvd_conn *c);
void resp_add_array(struct kvd_conn *c, uint64_t n);
/* "-msg\r\n", with CR and LF at msg's end trimmed and others turned into
 * spaces (as Redis does). */
void resp_add_error(struct kvd_conn *c, const char *msg);
/* Insert hdr at offset off of the output (headers known only at the end of
 * a reply, such as a SCAN page's cursor and count). */
void resp_insert(struct kvd_conn *c, size_t off, const void *hdr, size_t n);
/* Decimal digits of v into buf (at least 21 bytes); returns the length. */
size_t resp_u64(char *buf, uint64_t v);

/* ---- arguments ---- */

/* Redis's string2ll: an optional '-', digits, no leading zero, no sign
 * otherwise, no overflow.  0 or -1. */
int resp_ll(struct kv_slice s, long long *v);
int resp_eq(struct kv_slice s, const char *lower); /* case-insensitive */
/* A key kvd can store: 1 .. max-key-size bytes. */
int resp_key_ok(const struct kvd_conn *c, struct kv_slice k);
/* Format "ERR wrong number of arguments for '<name>' command" into r. */
const char *resp_arity_error(struct resp_req *r, const char *name);
const char *resp_subcmd_error(struct resp_req *r, const char *cmd);

extern const char resp_err_syntax[];
extern const char resp_err_int[];
extern const char resp_err_internal[];
extern const char resp_err_key[];
extern const char resp_err_nomem[];
extern const char resp_err_wrongtype[];
/* The error of a failed read: WRONGTYPE for KV_WRONG_TYPE (a string
 * command on a hash, a hash command on a string), else internal. */
const char *resp_read_err(int rc);

/* Redis's glob patterns (stringmatchlen: * ? [a-z] [^x] and \\ escapes),
 * compiled once and matched in bounded time (resp_glob.c).  A compiled
 * pattern points into the pattern's bytes, which must outlive its use;
 * resp_glob_set may be called again to reuse the allocation. */
struct resp_glob;
struct resp_glob *resp_glob_new(void); /* NULL: out of memory */
int resp_glob_set(struct resp_glob *g, struct kv_slice pat); /* 0, -1 */
int resp_glob_match(const struct resp_glob *g, struct kv_slice s);
void resp_glob_free(struct resp_glob *g);

/* Largest reply to a many-key read (MGET, KEYS): max-output. */
size_t resp_reply_cap(const struct kvd_conn *c);

/* ---- introspection (resp_intro.c) ---- */

/* The dispatcher calls kvd_resp_pre before a command's handler runs (last
 * command for CLIENT LIST, MONITOR's feed; returns the start time), and
 * kvd_resp_post after it (commandstats, the slow log); or kvd_resp_post
 * alone, with KVD_RESP_REJECTED, for a command refused before running. */
enum { KVD_RESP_RAN, KVD_RESP_FAILED, KVD_RESP_REJECTED };
uint64_t kvd_resp_pre(struct kvd_conn *c, struct resp_req *r);
void kvd_resp_post(struct kvd_conn *c, struct resp_req *r, uint64_t t0,
		   int outcome);
/* CLIENT LIST, INFO, KILL, NO-EVICT, NO-TOUCH: 1 when r is one of them
 * (answered, or *err set), 0 otherwise. */
int kvd_resp_client_intro(struct kvd_conn *c, struct resp_req *r,
			  const char **err);
/* CLIENT SETNAME: other threads read names (CLIENT LIST). */
void kvd_resp_set_name(struct kvd_conn *c, const void *p, size_t n);
/* INFO sections kept here (stats.h has the others' bits below 1 << 8). */
enum {
	KVD_RESP_INFO_MEMORY = 1u << 8,
	KVD_RESP_INFO_CPU = 1u << 9,
	KVD_RESP_INFO_CMDSTATS = 1u << 10,
	KVD_RESP_INFO_REPLICATION = 1u << 11,
};
struct kv_buf;
/* CONFIG RESETSTAT: commandstats count from now on. */
void kvd_resp_cmdstats_reset(struct kvd_io *io);
void kvd_resp_info_section(struct kvd_io *io, unsigned which, struct kv_buf *b);

/* resp_repl.c: replication in Redis's words.  INFO's Replication section
 * (Redis 7.0's fields) into b; ROLE's reply on c; CLIENT LIST's line for
 * the link to the primary (flags=M) into b, when this server is a replica
 * with its link up (1 if written, else 0); WAIT's answer (an integer) for
 * kvd_repl_wait. */
void kvd_resp_repl_info(struct kvd_server *srv, struct kv_buf *b);
void kvd_resp_repl_role(struct kvd_conn *c);
int kvd_resp_repl_link_line(struct kv_buf *b);
void kvd_resp_repl_wait_answer(struct kv_buf *b, unsigned n);

#endif
