"""test_kvd_door.py - pymongo against a real kvd's --mongo-port (not the
door's test host): test_pymongo.py's cases run again over kvd's documents
(the door's SCRAM with kvd's password: any user name), then what only the
server shows: no password, the lost-update test through the door, and
kill -9 under concurrent $inc and $push updates (every acknowledged
update there after restart, none half-applied).
"""

import os
import sys
import threading
import unittest

import kvdtest

try:
    import pymongo
    from pymongo import MongoClient
except ImportError:
    print("skipped: pymongo is not installed (python3-pymongo)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pymongo  # noqa: E402
from tlscerts import Certs  # noqa: E402


class KvdHost:
    """kvd with its MongoDB door on a free port; with tls, also its
    --tls-mongo-port (self.tport) with certificates of the test CA
    (self.certs; clients need none of their own)."""

    def __init__(self, password="secret", data_dir=None, tls=False,
                 args=(), **server):
        self.password = password
        self.mport = kvdtest.free_port()
        self.certs = self.tport = None
        a = ["--mongo-port", str(self.mport)] + list(args)
        if password:
            a += ["--requirepass", password]
        if tls and Certs.available():
            self.certs = Certs()
            self.tport = kvdtest.free_port()
            a += ["--tls-mongo-port", str(self.tport),
                  "--tls-cert-file", self.certs.server_cert,
                  "--tls-key-file", self.certs.server_key,
                  "--tls-ca-cert-file", self.certs.ca,
                  "--tls-auth-clients", "no"]
        self.srv = kvdtest.Server(args=a, data_dir=data_dir, **server).start()
        self.port = self.mport

    def start_again(self):
        """Start kvd again on its data (after a kill -9) on new ports: the
        old ones may be another test's by now, its server's or a client
        connection's local port, and the tests do not need them."""
        old = str(self.mport)
        self.mport = self.port = kvdtest.free_port()
        self.srv.extra = [str(self.mport) if a == old else a
                          for a in self.srv.extra]
        self.srv.start()
        # the door answers once the journal is replayed: seconds under a
        # sanitizer, past a client's server selection
        kvdtest.wait_for(self.door_up, 120, "the door after the restart")

    def door_up(self):
        try:
            c = self.client("", serverSelectionTimeoutMS=1000)
            c.admin.command("ping")
            c.close()
            return True
        except pymongo.errors.PyMongoError:
            return False

    def client(self, creds="kvd:secret@", port=None, **kw):
        kw.setdefault("serverSelectionTimeoutMS", 5000)
        return MongoClient("mongodb://%s127.0.0.1:%d/?authSource=admin" %
                           (creds, port or self.mport), **kw)

    def native(self):
        """A native client of kvd, authenticated."""
        c = self.srv.client()
        if self.password:
            assert c.call(kvdtest.AUTH, self.password.encode()) == \
                [kvdtest.OK]
        return c

    def stats(self):
        c = self.native()
        try:
            return c.call(kvdtest.STATS)[1]
        finally:
            c.close()

    def settled(self):
        """kvdtest.Server.settled, authenticated (membound.Peak calls it
        on what it measures: pass the host)."""
        c = self.native()
        try:
            kvdtest.wait_for(lambda: all(
                s[b"journal_spares"] >= 2
                for s in c.call(kvdtest.STATS)[1][b"shards"]), 30, "spares")
        finally:
            c.close()
        return self

    @property
    def proc(self):
        return self.srv.proc

    def tls_client(self, creds="kvd:secret@", **kw):
        return self.client(creds, self.tport, tls=True,
                           tlsCAFile=self.certs.ca, **kw)

    def stop(self):
        self.srv.stop()
        self.srv.cleanup()
        if self.certs:
            self.certs.cleanup()


class Poller:
    """fn() called again and again on a thread of its own while the with
    block runs, from its first answer on (the block starts once there is
    one): .seen, its answers.  A reader beside a writer, for promises of
    what is never visible."""

    def __init__(self, fn):
        self.fn, self.seen = fn, []
        self.done, self.polling = threading.Event(), threading.Event()
        self.t = threading.Thread(target=self.run)

    def run(self):
        while not self.done.is_set():
            self.seen.append(self.fn())
            self.polling.set()

    def __enter__(self):
        self.t.start()
        if not self.polling.wait(30):
            self.done.set()
            self.t.join()
            raise AssertionError("the reader never answered")
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.t.join()
        return False


class HostCase(unittest.TestCase):
    """A case class with one kvd (KvdHost(**host_args)) for its tests and
    a pymongo client of it (with creds, "" for a kvd without a password):
    cls.host, cls.cl, cls.db (database db_name)."""
    host_args = {}
    creds = "kvd:secret@"
    db_name = "t"

    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(**cls.host_args)
        cls.cl = cls.host.client(cls.creds)
        cls.db = cls.cl[cls.db_name]

    @classmethod
    def tearDownClass(cls):
        cls.cl.close()
        cls.host.stop()


class PymongoOnKvd(test_pymongo.PymongoTest):
    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost()
        cls.cl = cls.host.client()
        cls.db = cls.cl.test

    def test_wrong_password(self):
        cl = self.host.client("kvd:wrong@")
        with self.assertRaises(pymongo.errors.OperationFailure) as e:
            cl.admin.command("ping")
        self.assertEqual(e.exception.code, 18)
        cl.close()


INCS = int(os.environ.get("KVD_DOOR_INCS", "2000"))


class KvdOnly(unittest.TestCase):
    def test_no_password(self):
        h = KvdHost(password=None)
        try:
            cl = h.client("")
            cl.t.c.insert_one({"_id": 1, "a": [1]})
            self.assertEqual(cl.t.c.find_one({"_id": 1}), {"_id": 1, "a": [1]})
            cl.close()
        finally:
            h.stop()

    def test_lost_update(self):
        """8 clients $inc their own field of one document INCS times."""
        h = KvdHost()
        try:
            cls = [h.client() for _ in range(8)]
            cls[0].t.c.insert_one({"_id": "d"})

            def run(i):
                c = cls[i].t.c
                for _ in range(INCS):
                    c.update_one({"_id": "d"}, {"$inc": {"f%d" % i: 1}})
            ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            doc = cls[0].t.c.find_one({"_id": "d"})
            for i in range(8):
                self.assertEqual(doc["f%d" % i], INCS)
            for c in cls:
                c.close()
        finally:
            h.stop()

    def test_kill9_inc_push(self):
        """kill -9 while 4 clients $inc and $push: every acknowledged
        update is there after restart, and $inc and $push of one update
        never apart."""
        h = KvdHost()
        acked = [0] * 4
        stop = threading.Event()
        try:
            cl = h.client()
            cl.t.c.insert_many([{"_id": i, "n": 0, "l": []} for i in range(4)])

            def run(i):
                c = h.client().t.c
                k = 0
                while not stop.is_set():
                    try:
                        c.update_one({"_id": i}, {"$inc": {"n": 1},
                                                  "$push": {"l": k}})
                    except pymongo.errors.PyMongoError:
                        return
                    k += 1
                    acked[i] = k
            ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            kvdtest.wait_for(lambda: min(acked) >= 200, 60, "updates")
            h.srv.kill9()
            stop.set()
            for t in ts:
                t.join()
            h.start_again()
            cl = h.client()
            for i in range(4):
                d = cl.t.c.find_one({"_id": i})
                self.assertGreaterEqual(d["n"], acked[i])
                self.assertEqual(d["l"], list(range(d["n"])))
            cl.close()
        finally:
            h.stop()


if __name__ == "__main__":
    unittest.main(defaultTest=["PymongoOnKvd", "KvdOnly"])
