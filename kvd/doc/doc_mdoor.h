/* doc_mdoor.h - the MongoDB door in the server: its document store over
 * kvd/doc (doc_mdoor.c) and its protocol entry, host and start
 * (doc_proto.c). */
#ifndef KVD_DOC_DOC_MDOOR_H
#define KVD_DOC_DOC_MDOOR_H

#include <stdbool.h>

#include "mongo/mdoor.h"

struct kvd_conn;
struct kvd_io;
struct kvd_pend;
struct kvd_server;

/* The store (its ctx unused). */
extern const struct mdoor_store doc_mdoor_store;

/* Name the io thread that calls next (its reader and catalog copy). */
void doc_mdoor_enter(struct kvd_io *io);
/* A merge of c's write in flight came back, in its turn (proto wreply). */
void doc_mdoor_result(struct kvd_conn *c, const struct kvd_pend *pd);
/* c is being freed with its write unanswered: complete it. */
void doc_mdoor_abandon(struct kvd_conn *c);
/* c's write looks for its documents and its scan's slice ran out (the
 * loop's next turn goes on: kvd_io_again); go on, a slice more. */
bool doc_mdoor_write_paused(const struct kvd_conn *c);
void doc_mdoor_write_again(struct kvd_conn *c);

/* Make the door when mongo-port or tls-mongo-port is set (before the io
 * threads start): 0, or -1 with err. */
int doc_mdoor_start(struct kvd_server *srv, int argc, char **argv, char *err,
		    size_t errlen);
void doc_mdoor_stop(void);

#endif
