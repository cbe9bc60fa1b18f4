/* kv_buf.c - growable byte buffer (see kv_buf.h). */
#include "kv_buf.h"

#include <pthread.h>
#include <stdlib.h>

/* kv_buf_free_at_exit: a pthread key whose destructor frees the thread's
 * registered buffers (destructors run while the thread's TLS is still
 * there). */
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
static __thread struct kv_buf *tls_bufs[KV_BUF_TLS_MAX];
static __thread unsigned tls_n;

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

static void tls_free(void *arg)
{
	struct kv_buf **bufs = arg;

	for (unsigned i = 0; i < tls_n; i++)
		kv_buf_free(bufs[i]);
	tls_n = 0;
}

static void tls_init(void)
{
	tls_ok = pthread_key_create(&tls_key, tls_free) == 0;
}

int kv_buf_free_at_exit(struct kv_buf *b)
{
	unsigned i;

	for (i = 0; i < tls_n; i++)
		if (tls_bufs[i] == b)
			return 0;
	(void)pthread_once(&tls_once, tls_init);
	if (!tls_ok || tls_n == KV_BUF_TLS_MAX)
		return -1;
	if (tls_n == 0 && pthread_setspecific(tls_key, tls_bufs))
		return -1;
	tls_bufs[tls_n++] = b;
	return 0;
}
