/* mqltest.h - what the kvd/mongo unit tests share: BSON written as JSON
 * with single quotes (libbson's extended JSON parser builds it), and checks
 * that count failures instead of stopping at the first. */
#ifndef KVD_TESTS_MQLTEST_H
#define KVD_TESTS_MQLTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

static unsigned mt_fails, mt_checks;

/* libbson's JSON parser reads {"$type": 2} as a legacy binary and
 * {"$regex": ..., "$options": ...} as a legacy regex: tests write '$type_',
 * '$regex_', '$options_' (any '$' key ending in '_'), renamed here. */
static inline void rename_type_keys(const bson_t *in, bson_t *out)
{
	bson_iter_t it;

	bson_iter_init(&it, in);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		char name[64];
		size_t kl = strlen(k);

		if (k[0] == '$' && kl > 1 && kl < sizeof(name) &&
		    k[kl - 1] == '_') {
			memcpy(name, k, kl - 1);
			name[kl - 1] = '\0';
			k = name;
		}
		if (BSON_ITER_HOLDS_DOCUMENT(&it) ||
		    BSON_ITER_HOLDS_ARRAY(&it)) {
			const uint8_t *d;
			uint32_t n;
			bson_t sub, child;

			if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_iter_document(&it, &n, &d);
				bson_append_document_begin(out, k, -1, &child);
			} else {
				bson_iter_array(&it, &n, &d);
				bson_append_array_begin(out, k, -1, &child);
			}
			bson_init_static(&sub, d, n);
			rename_type_keys(&sub, &child);
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_append_document_end(out, &child);
			else
				bson_append_array_end(out, &child);
		} else {
			bson_append_iter(out, k, -1, &it);
		}
	}
}

/* J("{'a': 1}") - a new document from JSON written with single quotes
 * (a literal ' is written \\'); aborts on a syntax error in the test. */
static inline bson_t *J(const char *json)
{
	size_t n = strlen(json);
	char *s = malloc(n + 1);
	bson_error_t e;
	bson_t *b;

	for (size_t i = 0, j = 0; i <= n; i++) {
		if (json[i] == '\\' && json[i + 1] == '\'') {
			s[j++] = '\'';
			i++;
		} else {
			s[j++] = json[i] == '\'' ? '"' : json[i];
		}
	}
	b = bson_new_from_json((const uint8_t *)s, -1, &e);
	if (!b) {
		fprintf(stderr, "bad test JSON: %s: %s\n", json, e.message);
		abort();
	}
	free(s);
	if (strstr(json, "_'")) {
		bson_t *r = bson_new();

		rename_type_keys(b, r);
		bson_destroy(b);
		b = r;
	}
	return b;
}

/* The first value of a document ({'v': X} -> X): the document must live
 * as long as the value. */
static inline bson_value_t V(const bson_t *b)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, b) || !bson_iter_next(&it)) {
		fprintf(stderr, "empty test document\n");
		abort();
	}
	return *bson_iter_value(&it);
}

/* Relaxed extended JSON of a document, with " turned into ' so that
 * expectations can be written like J()'s input; freed by the caller. */
static inline char *S(const bson_t *b)
{
	char *s = bson_as_relaxed_extended_json(b, NULL);

	for (char *p = s; p && *p; p++) {
		if (*p == '"')
			*p = '\'';
	}
	return s;
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		mt_checks++;                                                   \
		if (!(cond)) {                                                 \
			mt_fails++;                                            \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
		}                                                              \
	} while (0)

static inline int mt_done(const char *name)
{
	printf("%s: %u checks, %u failed\n", name, mt_checks, mt_fails);
	return mt_fails ? 1 : 0;
}

#endif
