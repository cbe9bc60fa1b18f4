/* kv_buf.h - a growable byte buffer, the one used for every frame in and out.
 *
 * Growth doubles, so appending n bytes costs amortised O(n); kv_buf_trim()
 * hands memory back once a connection's burst is over, which is what keeps an
 * idle connection small however large its last reply was.
 */
#ifndef KV_BUF_H
#define KV_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct kv_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err; /* sticky: a grow failed; later appends are dropped */
};

/* Make room for extra more bytes; 0, or -1 when out of memory (or when the
 * size would overflow), which also sets b->err so that a whole reply can be
 * encoded without a check per field and judged once at its end.  Existing
 * contents are kept. */
int kv_buf_grow(struct kv_buf *b, size_t extra);

static inline int kv_buf_reserve(struct kv_buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return 0;
	return kv_buf_grow(b, extra);
}

static inline int kv_buf_append(struct kv_buf *b, const void *p, size_t n)
{
	if (kv_buf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Drop the first n bytes. */
void kv_buf_consume(struct kv_buf *b, size_t n);

/* Free the storage if it is empty and larger than keep bytes. */
void kv_buf_trim(struct kv_buf *b, size_t keep);

void kv_buf_free(struct kv_buf *b);

/* Free *b when the calling thread ends.  For a static __thread buffer:
 * the thread's TLS block goes with the thread, the heap memory it points
 * to would not (a leak per io or committer thread that ends, which
 * LeakSanitizer reports).  Call it before the buffer's first growth;
 * calling it again for the same buffer is harmless.  0, or -1 when the
 * thread has KV_BUF_TLS_MAX buffers registered already. */
#define KV_BUF_TLS_MAX 16
int kv_buf_free_at_exit(struct kv_buf *b);

#endif
