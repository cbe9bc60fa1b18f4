/* kv_buf.c - growable byte buffer (see kv_buf.h). */
#include "kv_buf.h"

#include <stdlib.h>

int kv_buf_grow(struct kv_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *p;

	if (b->err || extra > SIZE_MAX - b->len)
		goto fail;
	need = b->len + extra;
	cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p)
		goto fail;
	b->data = p;
	b->cap = cap;
	return 0;
fail:
	b->err = 1;
	return -1;
}

void kv_buf_consume(struct kv_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void kv_buf_trim(struct kv_buf *b, size_t keep)
{
	if (b->len == 0 && b->cap > keep)
		kv_buf_free(b);
}

void kv_buf_free(struct kv_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->err = 0;
}
