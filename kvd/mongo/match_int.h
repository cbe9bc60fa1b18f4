/* match_int.h - the compiled filter tree, shared by the matcher's parser
 * (match.c) and evaluator (match_eval.c). */
#ifndef KVD_MONGO_MATCH_INT_H
#define KVD_MONGO_MATCH_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "mql_match.h"
#include "mql_path.h"

/* MongoDB's MatchExpressionParser::kMaximumTreeDepth. */
#define MATCH_MAX_DEPTH 100

enum node_kind {
	N_AND,
	N_OR,
	N_NOR,
	N_NOT,
	N_TRUE,
	N_FALSE,
	N_PATH, /* pred on the candidates of path */
};

enum pred_kind {
	P_EQ,
	P_LT,
	P_LTE,
	P_GT,
	P_GTE,
	P_IN,
	P_EXISTS,
	P_TYPE,
	P_REGEX,
	P_SIZE,
	P_MOD,
	P_ELEM_OBJ, /* $elemMatch {field: ...}: sub is a filter */
	P_ELEM_VAL, /* $elemMatch {$op: ...}: sub's kids test each value */
};

struct node {
	enum node_kind kind;
	struct node **kids;
	size_t nkids, cap;
	/* N_PATH */
	struct mql_path path; /* n == 0: the value being tested itself */
	enum pred_kind pk;
	bson_value_t v;	  /* P_EQ, P_LT...: the operand; P_IN: the array */
	bson_value_t *in; /* P_IN: sorted non-regex values */
	size_t nin;
	struct node **in_re; /* P_IN: regexes, as P_REGEX nodes */
	size_t nin_re;
	bool in_null;	    /* P_IN: null among the values */
	uint32_t types;	    /* P_TYPE: bit per BSON type */
	bool number;	    /* P_TYPE: "number" */
	struct re_prog *re; /* P_REGEX */
	const char *re_src, *re_flags;
	int64_t size;	  /* P_SIZE */
	int64_t div, rem; /* P_MOD */
	struct node *sub; /* P_ELEM_OBJ, P_ELEM_VAL */
};

/* What mql_match_compile_value made of its condition. */
enum value_mode {
	VM_NONE,   /* a filter of documents (mql_match_compile) */
	VM_OPS,	   /* operators on the value, arrays expanded */
	VM_FILTER, /* a filter of the value, which must be a document */
	VM_EQ,	   /* equality with the value as a whole */
};

struct mql_match {
	uint8_t *filter; /* owned copy; every value points into it */
	uint32_t len;
	struct node *root;
	enum value_mode mode;
	bool slow; /* it runs a regular expression (mql_match_slow) */
};

/* What a node is tested on: a document (N_PATH with a path), or a single
 * value (N_PATH with an empty path: $elemMatch's values, $pull's). */
struct ectx {
	const uint8_t *doc;
	uint32_t len;
	const bson_value_t *cur;
	bool expand; /* cur: an array stands for its elements too */
	long pos;    /* positional: first array element index that matched */
};

/* A regular expression (match_regex.c): the interpreted pattern, never
 * changed once compiled, and a JIT-compiled copy made after a few dozen
 * runs (by the thread that claimed it); match, and free. */
struct re_prog {
	pcre2_code *code;
	_Atomic(pcre2_code *) jit;
	atomic_uint runs;
	atomic_flag claimed;
};
bool re_prog_match(struct re_prog *p, const char *s, size_t len);
void re_prog_free(struct re_prog *p);

bool match_node(const struct node *n, struct ectx *c);
void match_node_free(struct node *n);

#endif
