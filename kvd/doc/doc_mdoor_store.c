/* doc_mdoor_store.c - the MongoDB door's document store (mdoor.h, struct
 * mdoor_store, declared in doc_mdoor.h): its reads (doc_mdoor.c), writes
 * (doc_mdoor_write.c), listings (doc_mdoor_list.c) and index commands
 * (doc_mdoor_ix.c) in one table, so that none of them names the others'. */
#include "doc_mdoor.h"

#include "doc_ix.h"
#include "doc_mdoor_int.h"

const struct mdoor_store doc_mdoor_store = {
    .list_databases = doc_mdoor_list_dbs,
    .list_collections = doc_mdoor_list_colls,
    .coll_stats = doc_mdoor_coll_stats,
    .scan = doc_mdoor_scan_open,
    .scan_next = doc_mdoor_scan_next,
    .scan_close = doc_mdoor_scan_close,
    .scan_deadline = doc_mdoor_scan_deadline,
    .scan_slice = doc_mdoor_scan_slice,
    .scan_slice_as = doc_mdoor_scan_slice_as,
    .scan_slice_over = doc_mdoor_scan_slice_over,
    .scan_explain = doc_mdoor_scan_explain,
    .write = doc_mdoor_write,
    .list_indexes = doc_ix_list,
    .explain = doc_mdoor_explain,
};
