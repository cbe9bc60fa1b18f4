/* lmdb_hold.c - keep LMDB environments open from a second process.
 *
 * usage: lmdb_hold DIR...   (prints "ready" once every environment is open
 * and holds a read transaction, then waits until stdin closes)
 *
 * While another process has an environment open, a kvd that starts after
 * a kill -9 cannot take LMDB's exclusive lock, so LMDB does not reset the
 * reader table: the dead kvd's reader slots stay until mdb_reader_check
 * clears them.  This is the situation of a backup tool or mdb_stat running
 * across a crash, and what the stale-reader test needs.
 */
#include <lmdb.h>
#include <stdio.h>
#include <unistd.h>

#define MAX_ENVS 256

int main(int argc, char **argv)
{
	MDB_env *envs[MAX_ENVS];
	MDB_txn *txns[MAX_ENVS];
	char buf[64];
	int n = 0;

	for (int i = 1; i < argc && n < MAX_ENVS; i++, n++) {
		MDB_env *env;
		MDB_txn *txn;
		int rc;

		if ((rc = mdb_env_create(&env)) ||
		    (rc = mdb_env_set_maxdbs(env, 2)) ||
		    (rc = mdb_env_open(env, argv[i], MDB_RDONLY | MDB_NOTLS,
				       0640)) ||
		    (rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) {
			fprintf(stderr, "lmdb_hold: %s: %s\n", argv[i],
				mdb_strerror(rc));
			return 1;
		}
		mdb_txn_reset(txn); /* keep the slot, not the snapshot */
		envs[n] = env;
		txns[n] = txn;
	}
	printf("ready\n");
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0) {
	}
	while (n--) {
		mdb_txn_abort(txns[n]);
		mdb_env_close(envs[n]);
	}
	return 0;
}
