/* mql_error.h - the error every call of kvd's MongoDB language library
 * (kvd/mongo: values, paths, matcher, projection, sort, update,
 * aggregation) reports: MongoDB's numeric code, its codeName and a message,
 * so that the MongoDB door can answer {ok: 0, errmsg, code, codeName}
 * without translating anything.
 *
 * Every call that can fail takes a `struct mql_error *err` (which may be
 * NULL when the caller does not want the details) and returns a negative
 * number on failure: -1 for an error MongoDB would report (err->code says
 * which), never an errno.  The error lives in the caller's memory: nothing
 * to free.
 *
 * Codes with a name in MongoDB's error_codes.yml carry that name
 * (BadValue, TypeMismatch, ...); the numbered "location" codes MongoDB
 * raises from one place of its source (31254 and the like) are named
 * "Location<code>", as MongoDB itself names them on the wire.
 */
#ifndef KVD_MONGO_MQL_ERROR_H
#define KVD_MONGO_MQL_ERROR_H

#include <stdarg.h>

/* MongoDB's named codes that this library and the door's store raise
 * (error_codes.yml): every named code kvd answers with must be here, or
 * it would go out as "Location<code>", a name MongoDB never gives it. */
#define MQL_ERROR_CODES(X)                                                     \
	X(1, InternalError)                                                    \
	X(2, BadValue)                                                         \
	X(9, FailedToParse)                                                    \
	X(14, TypeMismatch)                                                    \
	X(15, Overflow)                                                        \
	X(16, InvalidLength)                                                   \
	X(22, InvalidBSON)                                                     \
	X(26, NamespaceNotFound)                                               \
	X(27, IndexNotFound)                                                   \
	X(28, PathNotViable)                                                   \
	X(40, ConflictingUpdateOperators)                                      \
	X(48, NamespaceExists)                                                 \
	X(50, MaxTimeMSExpired)                                                \
	X(52, DollarPrefixedFieldName)                                         \
	X(54, NotSingleValueField)                                             \
	X(56, EmptyFieldName)                                                  \
	X(66, ImmutableField)                                                  \
	X(67, CannotCreateIndex)                                               \
	X(73, InvalidNamespace)                                                \
	X(85, IndexOptionsConflict)                                            \
	X(86, IndexKeySpecsConflict)                                           \
	X(100, UnsatisfiableWriteConcern)                                      \
	X(168, InvalidPipelineOperator)                                        \
	X(171, CannotIndexParallelArrays)                                      \
	X(197, InvalidIndexSpecificationOption)                                \
	X(238, NotImplemented)                                                 \
	X(276, IndexBuildAborted)                                              \
	X(292, QueryExceededMemoryLimitNoDiskUseAllowed)                       \
	X(10107, NotWritablePrimary)                                           \
	X(10334, BSONObjectTooLarge)                                           \
	X(11000, DuplicateKey)                                                 \
	X(17280, KeyTooLong)

enum mql_code {
#define MQL_X(num, name) MQL_##name = num,
	MQL_ERROR_CODES(MQL_X)
#undef MQL_X
};

/* Sizes: a message is cut (never overflowed) at MQL_ERRMSG_MAX - 1 bytes. */
#define MQL_ERRMSG_MAX 512
#define MQL_CODENAME_MAX 48

struct mql_error {
	int code;			 /* 0: no error */
	char codename[MQL_CODENAME_MAX]; /* "BadValue", "Location31254" */
	char msg[MQL_ERRMSG_MAX];	 /* MongoDB's errmsg */
};

/* mql_error_set - fill *err (when err is not NULL) with code, its name and
 * a printf-formatted message.  Returns -1, so that callers can write
 * `return mql_error_set(err, MQL_BadValue, "...")`. */
int mql_error_set(struct mql_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mql_error_vset(struct mql_error *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* mql_error_clear - code 0, empty name and message. */
void mql_error_clear(struct mql_error *err);

/* mql_codename - MongoDB's codeName of code: the name in
 * MQL_ERROR_CODES, else "Location<code>" written into buf (of size
 * MQL_CODENAME_MAX).  Returns a pointer to a static string or to buf. */
const char *mql_codename(int code, char *buf);

#endif
