/* test_v2.c - libkvclient's version 2 calls against a real kvd: RENAME,
 * COPY, GETEX, INCRBYFLOAT, the range and bit operations, and TXN with its
 * checks, synchronous and pipelined, and their argument checks.
 */
#include <string.h>

#include "kvctest.h"

static void strings(kvc_conn *c)
{
	kvc_val v, srcs[2] = {{"a", 1}, {"b", 1}};
	uint64_t n;
	int64_t pos, end = -1;
	int bit;

	CHECK_RC(kvc_put(c, "a", 1, "hello", 5, 0, 0), 0);
	CHECK_RC(kvc_rename(c, "a", 1, "b", 1, 0), 0);
	CHECK_RC(kvc_get(c, "a", 1, &v), -KVC_NOT_FOUND);
	CHECK_RC(kvc_copy(c, "b", 1, "a", 1, 0), 0);
	CHECK_RC(kvc_copy(c, "b", 1, "a", 1, 0), -KVC_EXISTS);
	CHECK_RC(kvc_rename(c, "b", 1, "a", 1, KVC_RENAME_NX), -KVC_EXISTS);
	CHECK_RC(kvc_rename(c, "zz", 2, "a", 1, 0), -KVC_NOT_FOUND);
	CHECK_RC(kvc_getex(c, "a", 1, 60000, 0, &v), 0);
	CHECK_VAL(v, "hello");
	CHECK_RC(kvc_getex(c, "a", 1, 0, KVC_GETEX_PERSIST, &v), 0);
	CHECK_RC(kvc_getex(c, "a", 1, 5, KVC_GETEX_PERSIST, &v), -KVC_INVALID);
	CHECK_RC(kvc_getrange(c, "a", 1, 1, -2, &v), 0);
	CHECK_VAL(v, "ell");
	CHECK_RC(kvc_setrange(c, "a", 1, 5, " world", 6, &n), 0);
	CHECK(n == 11);
	CHECK_RC(kvc_incrbyfloat(c, "f", 1, "2.5", &v), 0);
	CHECK_VAL(v, "2.5");
	CHECK_RC(kvc_incrbyfloat(c, "a", 1, "1", &v), -KVC_NOT_FLOAT);
	CHECK_RC(kvc_incrbyfloat(c, "f", 1, "x", &v), -KVC_BAD_ARGS);
	CHECK_RC(kvc_setbit(c, "s", 1, 7, 1, &bit), 0);
	CHECK(bit == 0);
	CHECK_RC(kvc_getbit(c, "s", 1, 7, &bit), 0);
	CHECK(bit == 1);
	CHECK_RC(kvc_setbit(c, "s", 1, 7, 2, &bit), -KVC_INVALID);
	CHECK_RC(kvc_bitcount(c, "a", 1, 0, -1, 0, &n), 0);
	CHECK(n == 45); /* "hello world" */
	CHECK_RC(kvc_bitpos(c, "s", 1, 1, 0, NULL, 0, &pos), 0);
	CHECK(pos == 7);
	CHECK_RC(kvc_bitpos(c, "s", 1, 1, 1, &end, 0, &pos), 0);
	CHECK(pos == -1);
	CHECK_RC(kvc_bitop(c, KVC_BITOP_OR, "d", 1, srcs, 2, &n), 0);
	CHECK(n == 11);
	CHECK_RC(kvc_bitop(c, KVC_BITOP_NOT, "d", 1, srcs, 2, &n),
		 -KVC_INVALID);
}

static void txn(kvc_conn *c)
{
	kvc_arg put[] = {{KVC_ARG_BYTES, "t", 1, 0, 0},
			 {KVC_ARG_BYTES, "1", 1, 0, 0}};
	kvc_arg incr[] = {{KVC_ARG_BYTES, "t", 1, 0, 0},
			  {KVC_ARG_INT, NULL, 0, 0, 41}};
	kvc_arg get[] = {{KVC_ARG_BYTES, "t", 1, 0, 0}};
	kvc_txn_op ops[] = {{KVC_OP_PUT, put, 2},
			    {KVC_OP_INCR, incr, 2},
			    {KVC_OP_GET, get, 1},
			    {KVC_OP_GETRANGE, get, 1}};
	kvc_val checks[] = {{"t", 1}, {"42", 2}, {"none", 4}, {NULL, 0}};
	kvc_reply *r;
	kvc_val sub, v;
	int64_t num;

	CHECK_RC(kvc_txn(c, NULL, 0, ops, 3, &r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &sub), 0);
	CHECK_RC(kvc_txn_result(sub, &v, &num), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &sub), 0);
	CHECK_RC(kvc_txn_result(sub, &v, &num), 0);
	CHECK(num == 42);
	CHECK_RC(kvc_reply_next(r, NULL, &sub), 0);
	CHECK_RC(kvc_txn_result(sub, &v, &num), 0);
	CHECK_VAL(v, "42");
	CHECK_RC(kvc_reply_next(r, NULL, &sub), -KVC_END);
	/* the checks hold: the batch runs */
	CHECK_RC(kvc_txn(c, checks, 2, ops, 1, &r), 0);
	CHECK_RC(kvc_get(c, "t", 1, &v), 0);
	CHECK_VAL(v, "1");
	/* t is "1" now: nothing runs */
	CHECK_RC(kvc_txn(c, checks, 2, ops + 1, 1, &r), -KVC_CHECK_FAILED);
	CHECK_RC(kvc_get(c, "t", 1, &v), 0);
	CHECK_VAL(v, "1");
	/* GETRANGE with one argument: the batch is refused whole */
	CHECK_RC(kvc_txn(c, NULL, 0, ops + 1, 3, &r), -KVC_BAD_ARGS);
	CHECK(strstr(kvc_errmsg(c), "request 3"));
	CHECK_RC(kvc_get(c, "t", 1, &v), 0);
	CHECK_VAL(v, "1");
	/* pipelined */
	CHECK_RC(kvc_send_txn(c, NULL, 0, ops + 1, 2), 0);
	CHECK_RC(kvc_send_getbit(c, "t", 1, 7), 0);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_status(r), 0);
	CHECK_RC(kvc_reply_next(r, NULL, &sub), 0);
	CHECK_RC(kvc_txn_result(sub, NULL, &num), 0);
	CHECK(num == 42);
	CHECK_RC(kvc_read_reply(c, &r), 0);
	CHECK_RC(kvc_reply_int(r, &num), 0);
	CHECK(num == 0); /* "42": 0x34, bit 7 is 0 */
}

int main(void)
{
	struct kvd_proc k;
	kvc_conn *c;
	kvc_val info;
	uint64_t proto;

	kvd_start(&k, NULL);
	c = kvt_connect(k.port, 20000);
	CHECK_RC(kvc_hello(c, &info), 0);
	CHECK_RC(kvc_map_uint(info, "proto", &proto), 0);
	CHECK(proto == 2);
	strings(c);
	txn(c);
	kvc_close(c);
	kvd_stop(&k);
	return 0;
}
