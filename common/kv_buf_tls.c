/* kv_buf_tls.c - kv_buf_free_at_exit (kv_buf.h): a thread's static
 * __thread buffers freed when the thread ends.  A file of its own so that
 * only the programs that call it link it (the client library does not). */
#include "kv_buf.h"

#include <pthread.h>

/* kv_buf_free_at_exit: a pthread key whose destructor frees the thread's
 * registered buffers (destructors run while the thread's TLS is still
 * there). */
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
/* initial-exec: common/ is compiled as position-independent code (for the
 * client library), whose default model calls __tls_get_addr, which the
 * linker left in kvd and with it a dependency on the dynamic loader
 * itself (tests/packaging/test_deb.py).  The programs that link this file
 * have it from their start, which is what initial-exec asks. */
#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread TLS_IE struct kv_buf *tls_bufs[KV_BUF_TLS_MAX];
static __thread TLS_IE unsigned tls_n;

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
