/* update_int.h - a compiled update: the tree of the paths it changes,
 * shared by the parser (update.c) and the applier (update_apply.c). */
#ifndef KVD_MONGO_UPDATE_INT_H
#define KVD_MONGO_UPDATE_INT_H

#include "mql_match.h"
#include "mql_path.h"
#include "mql_sort.h"
#include "mql_update.h"

enum uop_kind {
	U_SET,
	U_UNSET,
	U_INC,
	U_MUL,
	U_MIN,
	U_MAX,
	U_SET_ON_INSERT,
	U_CURRENT_DATE,
	U_RENAME_FROM,
	U_RENAME_TO,
	U_PUSH,
	U_ADD_TO_SET,
	U_POP,
	U_PULL,
	U_PULL_ALL,
};

struct uop {
	enum uop_kind kind;
	const char *opname; /* "$set" */
	struct mql_path path;
	bson_value_t arg; /* into the compiled update's copy */
	/* $push / $addToSet: the values ($each or the one value) */
	bson_value_t each; /* an array */
	bool has_each;
	bool has_slice, has_position;
	int64_t slice, position;
	struct mql_sort *sort;
	/* $currentDate: a timestamp instead of a date */
	bool timestamp;
	/* $pull */
	struct mql_match *pull;
	/* $rename: the other end's path */
	struct mql_path *from;
};

/* One field of the tree: children in MongoDB's update order (by name,
 * numeric names numerically). */
struct unode {
	const char *name; /* in the op's path */
	size_t len;
	long index;	 /* numeric name, or -1 */
	bool positional; /* "$" */
	struct unode **kids;
	size_t nkids, cap;
	struct uop *op; /* a leaf */
	bool creates;	/* some op below may create fields */
	bool inserts;	/* ... only when inserting ($setOnInsert) */
};

struct mql_update {
	uint8_t *data; /* owned copy of the update document */
	uint32_t len;
	bool replacement;
	struct unode root;
	struct uop **ops;
	size_t nops, cap;
};

int update_apply_tree(const struct mql_update *u, const uint8_t *doc,
		      uint32_t len, bool inserting,
		      const struct mql_update_ctx *ctx, bson_t *out,
		      struct mql_error *err);

#endif
