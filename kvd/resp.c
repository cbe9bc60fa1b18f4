/* resp.c - the Redis protocol (RESP2) listener. */
#include "conn.h"

size_t kvd_resp_input(struct kvd_conn *c, const uint8_t *p, size_t n)
{
	static const char msg[] = "-ERR RESP is not implemented\r\n";

	(void)p;
	kvd_reply_append(c, msg, sizeof(msg) - 1);
	c->flags |= CONN_CLOSING;
	return n;
}

void kvd_resp_wreply(struct kvd_conn *c, struct kvd_pend *pd)
{
	(void)c;
	(void)pd;
}
