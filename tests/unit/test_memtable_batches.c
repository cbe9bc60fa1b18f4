/* test_memtable_batches.c - a memtable's batches (kvm_publish) are seen
 * whole by lock-free readers (run it under TSan too: -DKVD_SANITIZE=thread).
 *
 * One writer rewrites groups of 16 keys whole in each batch (deleting a
 * group now and then, flushing first now and then) and creates groups of
 * 16 keys new to the memtable, publishing after each batch, while three
 * readers read every group in one view (kvm_snapshot, kvm_get_at), iterate
 * (kvm_iter_*), and count (kvm_count): a group is never seen half
 * rewritten, a new group never half made, tags never go back, counts are
 * whole groups.  The committer's insert of a batch one record at a time,
 * published record by record, failed every one of these checks.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtable.h"

static atomic_uint fails;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			if (atomic_fetch_add(&fails, 1) >= 20)                 \
				exit(1);                                       \
		}                                                              \
	} while (0)

#define CREADERS 3

#define BGROUPS 8     /* groups of keys rewritten whole */
#define BKEYS 16      /* keys a group */
#define BBATCHES 6000 /* each rewrites a group, deletes it, or flushes */

struct batches {
	struct kvm *m;
	atomic_int done;
	atomic_uint rounds;
	_Atomic uint64_t made; /* new groups published: n0000 .. made-1 */
};

static int bkey(char *k, unsigned g, unsigned i)
{
	return snprintf(k, 16, "g%02uk%02u", g, i);
}

static int nkey_of(char *k, unsigned g, unsigned i)
{
	return snprintf(k, 16, "n%05uk%02u", g, i);
}

/* Batch b: rewrite group b % BGROUPS with tag b (delete it every 7th,
 * flush first every 500th), and every 10th also create new group b / 10:
 * BKEYS keys new to the memtable (their runs are made in the middle of
 * batches, some not yet visible). */
static void *batch_writer(void *arg)
{
	struct batches *s = arg;
	uint64_t lsn = 0;
	char k[16];

	for (unsigned b = 1; b <= BBATCHES; b++) {
		unsigned g = b % BGROUPS;

		if (b % 500 == 0)
			CHECK(!kvm_flush(s->m, ++lsn), "flush");
		for (unsigned i = 0; i < BKEYS; i++) {
			int n = bkey(k, g, i);
			uint64_t tag = b;

			if (b % 7 == 0)
				CHECK(!kvm_del(s->m, k, (size_t)n, ++lsn, 0),
				      "del");
			else
				CHECK(!kvm_put(s->m, k, (size_t)n, &tag, 8, 0,
					       ++lsn, 0),
				      "put");
		}
		for (unsigned i = 0; b % 10 == 0 && i < BKEYS; i++) {
			int n = nkey_of(k, b / 10, i);

			CHECK(!kvm_put(s->m, k, (size_t)n, "v", 1, 0, ++lsn, 0),
			      "put new");
		}
		kvm_publish(s->m);
		if (b % 10 == 0)
			atomic_store_explicit(&s->made, b / 10 + 1,
					      memory_order_release);
	}
	atomic_store_explicit(&s->done, 1, memory_order_release);
	return NULL;
}

/* A version's tag: the batch that wrote it, 0 for a deleted or hidden key. */
static uint64_t tag_of(int r, const struct kvm_entry *e)
{
	uint64_t t = 0;

	if (r == KVM_VALUE && e->vlen == 8)
		memcpy(&t, e->val, 8);
	return r == KVM_VALUE && e->vlen != 8 ? UINT64_MAX : t;
}

/* One view, every group: each holds one batch's tag on all its keys. */
static void batch_gets(struct batches *s, uint64_t *last)
{
	struct kvm_snap sn;
	uint64_t made = atomic_load_explicit(&s->made, memory_order_acquire);
	char k[16];

	kvm_snapshot(s->m, &sn);
	for (unsigned g = 0; g < BGROUPS; g++) {
		uint64_t t0 = 0;

		for (unsigned i = 0; i < BKEYS; i++) {
			struct kvm_entry e;
			int n = bkey(k, g, i);
			uint64_t t =
			    tag_of(kvm_get_at(s->m, &sn, k, (size_t)n, &e), &e);

			if (i == 0)
				t0 = t;
			CHECK(t == t0, "group %u torn: tags %llu and %llu", g,
			      (unsigned long long)t0, (unsigned long long)t);
		}
		/* tags grow, but a flush or a delete shows as 0 */
		CHECK(t0 == 0 || t0 >= last[g], "group %u went back", g);
		if (t0)
			last[g] = t0;
	}
	/* a new group published before the view is there whole (unless a
	 * flush since hid it), one being written is there whole or not */
	for (unsigned g = made > 3 ? (unsigned)made - 3 : 1; g < made + 2;
	     g++) {
		unsigned seen = 0;

		for (unsigned i = 0; i < BKEYS; i++) {
			struct kvm_entry e;
			int n = nkey_of(k, g, i);

			seen += kvm_get_at(s->m, &sn, k, (size_t)n, &e) ==
				KVM_VALUE;
		}
		CHECK(seen == 0 || seen == BKEYS, "new group %u: %u of %u keys",
		      g, seen, BKEYS);
	}
}

/* One pass: the same, by iteration; new groups whole or absent. */
static void batch_iterate(struct batches *s)
{
	struct kvm_iter it;
	uint64_t tag[BGROUPS];
	unsigned cnt[BGROUPS] = {0}, ngroup = 0, nseen = 0;
	char cur[8] = "";

	kvm_iter_init(&it, s->m);
	for (int ok = kvm_iter_seek(&it, NULL, 0); ok;
	     ok = kvm_iter_next(&it)) {
		struct kvm_entry e;
		uint64_t t;

		kvm_iter_entry(&it, &e);
		if (e.key[0] == 'n') {
			if (memcmp(cur, e.key, 6)) {
				CHECK(nseen == 0 || nseen == BKEYS,
				      "iter: new group %.6s has %u keys", cur,
				      nseen);
				memcpy(cur, e.key, 6);
				nseen = 0;
				ngroup++;
			}
			nseen += e.kind == KVM_VALUE;
			continue;
		}
		unsigned g = (e.key[1] - '0') * 10u + (e.key[2] - '0');

		if (g >= BGROUPS)
			continue;
		t = tag_of(e.kind, &e);
		if (cnt[g]++ == 0)
			tag[g] = t;
		CHECK(t == tag[g], "iter: group %u torn", g);
	}
	kvm_iter_fini(&it);
	CHECK(nseen == 0 || nseen == BKEYS, "iter: last new group has %u keys",
	      nseen);
	for (unsigned g = 0; g < BGROUPS; g++)
		CHECK(cnt[g] == 0 || cnt[g] == BKEYS,
		      "iter: group %u has %u keys", g, cnt[g]);
}

static void *batch_reader(void *arg)
{
	struct batches *s = arg;
	uint64_t last[BGROUPS] = {0};
	unsigned rounds = 0;

	while (!atomic_load_explicit(&s->done, memory_order_acquire) ||
	       rounds < 2) {
		struct kvm_count c;

		batch_gets(s, last);
		if (rounds % 8 == 0)
			batch_iterate(s);
		kvm_count(s->m, &c);
		CHECK(c.keys % BKEYS == 0 && c.tombstones % BKEYS == 0,
		      "count of a batch half made: %llu keys, %llu deleted",
		      (unsigned long long)c.keys,
		      (unsigned long long)c.tombstones);
		rounds++;
	}
	atomic_fetch_add(&s->rounds, rounds);
	return NULL;
}

static void test_batches(void)
{
	static struct batches s;
	pthread_t w, r[CREADERS];

	CHECK(!kvm_create(NULL, &s.m), "create");
	atomic_init(&s.done, 0);
	atomic_init(&s.rounds, 0);
	atomic_init(&s.made, 1);
	for (int i = 0; i < CREADERS; i++)
		pthread_create(&r[i], NULL, batch_reader, &s);
	pthread_create(&w, NULL, batch_writer, &s);
	pthread_join(w, NULL);
	for (int i = 0; i < CREADERS; i++)
		pthread_join(r[i], NULL);
	printf("batches: %u batches of %u and more writes, %u reader passes\n",
	       BBATCHES, BKEYS, atomic_load(&s.rounds));
	kvm_destroy(s.m);
}

int main(void)
{
	test_batches();
	if (atomic_load(&fails)) {
		fprintf(stderr, "%u failure(s)\n", atomic_load(&fails));
		return 1;
	}
	printf("ok\n");
	return 0;
}
