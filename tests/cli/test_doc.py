"""test_doc.py - kvcli doc insert|find|update|delete against a real kvd:
documents given and printed as JSON (extended JSON types kept), finds
with filters, projections, sorts, skip and limit over many pages, updates
and upserts, deletes, MongoDB's errors and exit statuses, batch mode;
and the cross-door test: what kvcli inserts, pymongo finds on kvd's
--mongo-port, and what pymongo inserts, kvcli finds; doc databases,
collections, create, drop, indexes, create-index and drop-index."""

import json
import subprocess

from cliutil import KVCLI, CliCase
from kvdtest import free_port, main, mongo_client


def lines(out):
    return [json.loads(l) for l in out.decode().splitlines()]


class Doc(CliCase):
    mport = free_port()
    SERVER = {"threads": 2, "args": ("--mongo-port", str(mport))}
    serial = 0

    def ns(self):
        Doc.serial += 1
        return "db.c%d" % Doc.serial

    def test_insert_find(self):
        ns = self.ns()
        out = self.ok("doc", "insert", ns, '{"_id": 1, "n": {"$numberLong": "7"}}',
                      '{"name": "x"}')
        ids = lines(out)
        self.assertEqual(ids[0], {"_id": 1})
        self.assertEqual(list(ids[1]["_id"]), ["$oid"])  # generated
        got = lines(self.ok("doc", "find", ns))
        self.assertEqual(got, [{"_id": 1, "n": 7}, {"_id": ids[1]["_id"], "name": "x"}])
        self.assertEqual(lines(self.ok("doc", "find", ns, "--id", "1")),
                         [{"_id": 1, "n": 7}])
        self.assertEqual(lines(self.ok("doc", "find", ns, '{"name": "x"}', "-p",
                                       '{"_id": 0}')), [{"name": "x"}])
        # every output style prints documents as JSON lines
        for flag in ("--raw", "--readable", "--json", "--csv"):
            self.assertEqual(lines(self.ok(flag, "doc", "find", ns, "--id", "1")),
                             [{"_id": 1, "n": 7}], flag)
        rc, out, _ = self.run_cli("doc", "find", ns, "--id", "2")
        self.assertEqual((rc, out), (1, b""))
        self.assertEqual(self.ok("doc", "find", "db.none"), b"")

    def test_many_pages_sorted(self):
        ns = self.ns()
        docs = ['{"_id": %d, "v": %d}' % (i, (i * 7) % 50) for i in range(50)]
        self.ok("doc", "insert", ns, *docs)
        got = lines(self.ok("doc", "find", ns, "-s", '{"v": -1}', "--batch", "3"))
        self.assertEqual([d["v"] for d in got], list(range(49, -1, -1)))
        got = lines(self.ok("doc", "find", ns, '{"v": {"$lt": 20}}', "-s", '{"v": 1}',
                            "--skip", "5", "-n", "4", "--batch", "3"))
        self.assertEqual([d["v"] for d in got], [5, 6, 7, 8])
        got = lines(self.ok("doc", "find", ns, "--batch", "7"))
        self.assertEqual([d["_id"] for d in got], list(range(50)))

    def test_update_delete(self):
        ns = self.ns()
        self.ok("doc", "insert", ns, '{"_id": 1, "n": 1, "t": "a"}',
                '{"_id": 2, "n": 2, "t": "a"}')
        self.assertEqual(self.ok("doc", "update", ns, '{"_id": 1}', '{"$inc": {"n": 5}}'),
                         b"matched 1 modified 1\n")
        self.assertEqual(self.ok("--json", "doc", "update", ns, '{"t": "a"}',
                                 '{"$set": {"u": true}}', "--multi"),
                         b'{"matched":2,"modified":2}\n')
        self.assertEqual(self.ok("--csv", "doc", "update", ns, '{"_id": 1}',
                                 '{"$set": {"u": true}}'),
                         b"matched,modified\r\n1,0\r\n")
        out = self.ok("doc", "update", ns, '{"_id": 9}', '{"$set": {"k": 1}}', "--upsert")
        self.assertEqual(out, b'matched 0 modified 0\n{ "_id" : 9 }\n')
        self.assertEqual(lines(self.ok("doc", "find", ns, "--id", "1")),
                         [{"_id": 1, "n": 6, "t": "a", "u": True}])
        self.assertEqual(self.ok("doc", "delete", ns, '{"t": "a"}'), b"1\n")
        self.assertEqual(self.ok("doc", "delete", ns, "{}", "--multi"), b"2\n")
        self.assertEqual(self.ok("doc", "find", ns), b"")

    def test_errors(self):
        ns = self.ns()
        self.ok("doc", "insert", ns, '{"_id": 1, "s": "text"}')
        rc, _, err = self.run_cli("doc", "insert", ns, '{"_id": 1}')
        self.assertEqual(rc, 2)
        self.assertIn(b"E11000 duplicate key", err)
        self.assertIn(b"MongoDB code 11000", err)
        rc, _, err = self.run_cli("doc", "update", ns, '{"_id": 1}', '{"$inc": {"s": 1}}')
        self.assertEqual(rc, 2)
        self.assertIn(b"MongoDB code 14", err)
        rc, _, err = self.run_cli("doc", "update", ns, "{}", '{"$nope": {"a": 1}}')
        self.assertEqual(rc, 2)
        self.assertIn(b"$nope", err)
        rc, _, err = self.run_cli("doc", "insert", ns, '{"a": ')
        self.assertEqual(rc, 2)
        self.assertIn(b"document 1 is not a JSON object", err)
        rc, _, err = self.run_cli("doc", "find", "nodot")
        self.assertEqual(rc, 2)
        self.assertIn(b"is not DB.COLL", err)
        rc, _, err = self.run_cli("doc", "frob", ns)
        self.assertEqual(rc, 2)
        self.assertIn(b"give insert, find, update, delete, databases, "
                      b"collections, create, drop, indexes, create-index or "
                      b"drop-index", err)
        rc, _, err = self.run_cli("doc", "update", ns, "{}")
        self.assertEqual(rc, 2)
        self.assertIn(b"wrong number of arguments", err)
        # nothing changed
        self.assertEqual(lines(self.ok("doc", "find", ns)), [{"_id": 1, "s": "text"}])

    def test_batch_mode(self):
        ns = self.ns()
        p = subprocess.run([KVCLI, "-p", str(self.srv.port)],
                           input=("doc insert %s '{\"_id\": 1}' '{\"_id\": 2}'\n"
                                  "doc insert %s '{\"_id\": 1}'\n"
                                  "doc find %s --id 2\n"
                                  "doc find %s --id 3\n"
                                  "doc delete %s '{}' --multi\n" % ((ns,) * 5)).encode(),
                           capture_output=True, timeout=60)
        self.assertEqual(p.stdout, b'{ "_id" : 1 }\n{ "_id" : 2 }\n(error) DOC_ERROR\n'
                                   b'{ "_id" : 2 }\n(nil)\n2\n')
        self.assertEqual(p.returncode, 2)

    def test_cross_door(self):
        m = mongo_client(self, self.mport)
        coll = m["cross"]["things"]
        self.ok("doc", "insert", "cross.things",
                '{"_id": "cli", "n": {"$numberLong": "5"}, "at": {"$date": "2026-01-02T03:04:05Z"}}')
        got = coll.find_one({"_id": "cli"})
        self.assertEqual(got["n"], 5)
        self.assertEqual(got["at"].year, 2026)
        coll.insert_one({"_id": "py", "tags": ["a", "b"], "sub": {"x": 1.5}})
        self.assertEqual(lines(self.ok("doc", "find", "cross.things", '{"_id": "py"}')),
                         [{"_id": "py", "tags": ["a", "b"], "sub": {"x": 1.5}}])
        self.ok("doc", "update", "cross.things", '{"_id": "py"}', '{"$push": {"tags": "c"}}')
        self.assertEqual(coll.find_one({"_id": "py"})["tags"], ["a", "b", "c"])
        self.assertEqual(coll.count_documents({}), 2)

    def test_doc_admin_commands(self):
        self.assertEqual(self.ok("doc", "create", "adm.a"), b"OK\n")
        rc, _, err = self.run_cli("doc", "create", "adm.a")
        self.assertEqual(rc, 1, err)
        self.ok("doc", "create", "adm.b", '{"storageEngine": {}}')
        rc, _, err = self.run_cli("doc", "create", "adm.c", '{"capped": true}')
        self.assertEqual(rc, 2)
        self.assertIn(b"(MongoDB code 238)", err)
        self.ok("doc", "insert", "x.y", '{"_id": 1, "a": 2}')
        def ours(out):  # the other tests' databases are there too
            return [n for n in out.split()
                    if n.split(b".")[0] in (b"adm", b"x")]

        self.assertEqual(ours(self.ok("doc", "databases")), [b"adm", b"x"])
        self.assertEqual(ours(self.ok("doc", "collections")),
                         [b"adm.a", b"adm.b", b"x.y"])
        self.assertEqual(self.ok("doc", "collections", "adm").split(),
                         [b"adm.a", b"adm.b"])
        self.assertEqual(self.ok("--json", "doc", "collections", "x"),
                         b'"x.y"\n')
        self.assertEqual(self.ok("doc", "create-index", "x.y", '{"a": 1, "b": -1}',
                                 "--sparse"),
                         b"before 1 after 2\n")
        self.assertEqual(self.ok("--json", "doc", "create-index", "x.y",
                                 '{"key": {"c": 1}, "name": "cc"}'),
                         b'{"before":2,"after":3}\n')
        specs = [json.loads(l) for l in
                 self.ok("doc", "indexes", "x.y").splitlines()]
        self.assertEqual(specs, [
            {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1",
             "sparse": True},
            {"v": 2, "key": {"c": 1}, "name": "cc"}])
        # the door lists what kvcli made
        m = mongo_client(self, self.mport)
        self.assertEqual([ix["name"] for ix in
                          m["x"]["y"].list_indexes()],
                         ["_id_", "a_1_b_-1", "cc"])
        rc, _, err = self.run_cli("doc", "create-index", "x.y", '{"c": 1}',
                                  "--name", "other")
        self.assertEqual(rc, 2)
        self.assertIn(b"Index already exists with a different name: cc", err)
        self.assertEqual(self.ok("doc", "drop-index", "x.y", '{"c": 1}'),
                         b"3\n")
        self.assertEqual(self.ok("doc", "drop-index", "x.y", "a_1_b_-1"),
                         b"2\n")
        rc, _, err = self.run_cli("doc", "drop-index", "x.y", "nope")
        self.assertEqual(rc, 2)
        self.assertIn(b"index not found with name [nope] (MongoDB code 27)",
                      err)
        self.assertEqual(self.ok("doc", "drop", "adm.a"), b"OK\n")
        rc, _, _ = self.run_cli("doc", "drop", "adm.a")
        self.assertEqual(rc, 1)
        self.assertEqual(ours(self.ok("doc", "collections")),
                         [b"adm.b", b"x.y"])


if __name__ == "__main__":
    main()
