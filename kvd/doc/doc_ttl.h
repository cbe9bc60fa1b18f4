/* doc_ttl.h - the documents' background thread (doc_ttl.c, doc_bg.h): at
 * start it builds again the indexes a stop left building (doc_build.c),
 * then it is the TTL monitor: every mongo-ttl-interval seconds it deletes
 * the documents whose date under a TTL index (expireAfterSeconds) is that
 * many seconds past, as mongod's TTL monitor does; and it deletes the keys
 * of dropped collections and indexes (doc_purge.c), every 50 ms while
 * some are left. */
#ifndef KVD_DOC_DOC_TTL_H
#define KVD_DOC_DOC_TTL_H

#include <stdint.h>

struct kvd_server;

/* Start it (after the committers): 0, or -1. */
int doc_ttl_start(struct kvd_server *srv);
/* Stop it and wait (before the committers stop). */
void doc_ttl_stop(void);
/* Documents it deleted since the start. */
uint64_t doc_ttl_reaped(void);

#endif
