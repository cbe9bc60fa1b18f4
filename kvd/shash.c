/* shash.c - kvd_shash: XXH3 under a per-process random secret (shash.h). */
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "shash.h"

/* XXH3's secrets must be at least XXH3_SECRET_SIZE_MIN (136) bytes and
 * look random; bytes from getrandom are. */
static unsigned char secret[192];
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;

static void secret_init(void)
{
	size_t got = 0;

	while (got < sizeof(secret)) {
		ssize_t n = getrandom(secret + got, sizeof(secret) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(secret)) {
		/* No getrandom (a seccomp filter): the clock and the pid,
		 * spread by splitmix64, still make a secret that a client
		 * cannot see. */
		struct timespec ts;
		uint64_t x;
		size_t i;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
		    ((uint64_t)getpid() << 16);
		for (i = 0; i + 8 <= sizeof(secret); i += 8) {
			uint64_t z = (x += 0x9e3779b97f4a7c15ull);

			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			z ^= z >> 31;
			memcpy(secret + i, &z, 8);
		}
	}
}

uint64_t kvd_shash(const void *p, size_t n)
{
	pthread_once(&secret_once, secret_init);
	return XXH3_64bits_withSecret(p, n, secret, sizeof(secret));
}
