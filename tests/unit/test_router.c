/* test_router.c - key-to-shard routing is stable and balanced.
 *
 * A key's shard is XXH3_64bits(key) % S with S from the data directory's
 * manifest.  Data written by one build must be found by the next, so the
 * hash values of known keys are pinned here: if a library upgrade ever
 * changed them, this test fails before any data directory is misread.
 */
#include <stdio.h>
#include <string.h>

#include "net/router.h"

static const struct {
	const char *key;
	unsigned long long hash;
} pinned[] = {
    {"a", 0xe6c632b61e964e1full},
    {"user:0001", 0x041b86d6263a4cefull},
    {"hello world", 0xd447b1ea40e6988bull},
    {"k", 0xa921e3704fda881dull},
    {"0123456789abcdef", 0x64439946d8fa212dull},
};

int main(void)
{
	unsigned fails = 0;

	for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
		size_t n = strlen(pinned[i].key);

		for (unsigned s = 1; s <= 16; s++) {
			if (kvd_shard_of(pinned[i].key, n, s) !=
			    pinned[i].hash % s) {
				fprintf(stderr, "FAIL: %s moved shard (S=%u)\n",
					pinned[i].key, s);
				fails++;
			}
		}
	}
	/* 200,000 keys over S shards: every shard within 3% of its share. */
	for (unsigned s = 2; s <= 8; s++) {
		unsigned count[8] = {0};
		char key[32];

		for (unsigned i = 0; i < 200000; i++) {
			int n = snprintf(key, sizeof(key), "user:%u", i);

			count[kvd_shard_of(key, (size_t)n, s)]++;
		}
		for (unsigned j = 0; j < s; j++) {
			double share = count[j] * (double)s / 200000.0;

			if (share < 0.97 || share > 1.03) {
				fprintf(stderr,
					"FAIL: S=%u shard %u holds %.3f of its "
					"share\n",
					s, j, share);
				fails++;
			}
		}
	}
	if (fails)
		return 1;
	printf("routing pinned and balanced\n");
	return 0;
}
