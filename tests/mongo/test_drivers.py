"""test_drivers.py - the Node.js driver (npm mongodb) and mongosh against
the MongoDB door, through tests/mongo/mdoor_host (writes completed on the
host's next loop turn) and through a real kvd's --mongo-port (kvd's
documents, kvd's password: connect, CRUD, countDocuments, SCRAM-SHA-256,
a wrong password refused), and mongosh over kvd's --tls-mongo-port with
the test CA.  Neither is a Debian package: package.json and
package-lock.json beside this file pin both, and `scripts/deps.sh test`
(run by make test) installs them with npm ci into tests/mongo/node_modules.
Elsewhere the test takes node's mongodb module from NODE_PATH and mongosh
from MONGOSH or PATH, and skips (77) when neither is found, saying so.
"""

import os
import shutil
import subprocess
import sys
import unittest

from test_pymongo import Host
from test_kvd_door import KvdHost

HERE = os.path.dirname(os.path.abspath(__file__))


def node_has_driver():
    node = shutil.which("node")
    if not node:
        return False
    r = subprocess.run([node, "-e", "require('mongodb')"], cwd=HERE,
                       capture_output=True)
    return r.returncode == 0


def mongosh():
    local = os.path.join(HERE, "node_modules", ".bin", "mongosh")
    if os.path.exists(local):
        return local
    return os.environ.get("MONGOSH") or shutil.which("mongosh")


class DriversTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = Host("--password", "secret", "--user", "kvd")

    @classmethod
    def tearDownClass(cls):
        cls.host.stop()

    @unittest.skipUnless(node_has_driver(), "node or its mongodb module")
    def test_node(self):
        r = subprocess.run(["node", os.path.join(HERE, "node_crud.js"),
                            str(self.host.port)], cwd=HERE,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def shell(self, password, script, *opts, port=None):
        return subprocess.run(
            [mongosh(), "--quiet", "--norc"] + list(opts) +
            ["mongodb://kvd:%s@127.0.0.1:%d/test?authSource=admin"
             "&serverSelectionTimeoutMS=5000"
             % (password, port or self.host.port), "--eval", script],
            capture_output=True, text=True, timeout=120)

    @unittest.skipUnless(mongosh(), "mongosh")
    def test_mongosh(self):
        script = ("db.sh.insertOne({a: 1}); db.sh.updateOne({a: 1}, "
                  "{$set: {b: 2}}); printjson(db.sh.findOne({}, {_id: 0}));"
                  "print(db.sh.countDocuments()); print(db.version());"
                  "db.sh.drop()")
        r = self.shell("secret", script)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = r.stdout.split()
        self.assertIn("6.0.0", out)
        self.assertIn("b:", out)
        self.assertIn("1", out)  # countDocuments

    @unittest.skipUnless(mongosh(), "mongosh")
    def test_mongosh_wrong_password(self):
        r = self.shell("wrong", "db.x.insertOne({a: 1})")
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Authentication failed", r.stdout + r.stderr)


class KvdDriversTest(DriversTest):
    """The same against kvd itself: its documents, its password."""

    @classmethod
    def setUpClass(cls):
        cls.host = KvdHost(tls=True)

    @unittest.skipUnless(mongosh(), "mongosh")
    def test_mongosh_tls(self):
        """mongosh over --tls-mongo-port, the server's certificate checked
        against the test CA; the plain port refuses a TLS handshake."""
        if not self.host.certs:
            self.skipTest("no openssl command for the certificates")
        script = ("db.tls.insertOne({_id: 1, t: 'x'});"
                  "print(db.tls.countDocuments({t: 'x'}));"
                  "print(db.runCommand({connectionStatus: 1})"
                  ".authInfo.authenticatedUsers[0].user)")
        r = self.shell("secret", script, "--tls", "--tlsCAFile",
                       self.host.certs.ca, port=self.host.tport)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.split()[-2:], ["1", "kvd"])
        r = self.shell("secret", "db.tls.countDocuments()", "--tls",
                       "--tlsCAFile", self.host.certs.ca)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    if not node_has_driver() and not mongosh():
        print("skipped: neither node with the mongodb module nor mongosh "
              "was found (scripts/deps.sh test installs both; NODE_PATH, MONGOSH)")
        sys.exit(77)
    unittest.main()
