// node_crud.js - the Node.js driver (npm mongodb) against the MongoDB door:
// handshake, SCRAM-SHA-256, CRUD with getMores, sessions, write errors,
// listings and a wrong password.  Run by test_drivers.py with the port of
// mdoor_host as its argument; exits 0 when every assertion holds.
'use strict';
const assert = require('assert');
const { MongoClient } = require('mongodb');

async function main(port) {
  const url = (cred) =>
    `mongodb://${cred}@127.0.0.1:${port}/?authSource=admin`;
  const c = new MongoClient(url('kvd:secret'), { serverSelectionTimeoutMS: 5000 });
  await c.connect();
  const db = c.db('test');
  const col = db.collection('node');
  const docs = Array.from({ length: 300 }, (_, i) => ({ _id: i, v: i % 5 }));
  assert.strictEqual((await col.insertMany(docs)).insertedCount, 300);
  const top = await col.find({ v: 2 }).sort({ _id: -1 }).limit(3).toArray();
  assert.deepStrictEqual(top.map((d) => d._id), [297, 292, 287]);
  assert.strictEqual((await col.find({}).batchSize(7).toArray()).length, 300);
  assert.strictEqual(await col.countDocuments({ v: { $gte: 3 } }), 120);
  assert.strictEqual(await col.estimatedDocumentCount(), 300);
  assert.deepStrictEqual((await col.distinct('v')).sort(), [0, 1, 2, 3, 4]);
  assert.strictEqual((await col.updateMany({ v: 1 }, { $set: { w: true } })).modifiedCount, 60);
  const up = await col.updateOne({ _id: 'x' }, { $set: { v: 9 } }, { upsert: true });
  assert.strictEqual(up.upsertedId, 'x');
  const fam = await col.findOneAndUpdate({ _id: 'x' }, { $inc: { v: 1 } },
    { returnDocument: 'after', includeResultMetadata: false });
  assert.deepStrictEqual(fam, { _id: 'x', v: 10 });
  const groups = await col.aggregate([{ $group: { _id: '$v', n: { $sum: 1 } } },
    { $sort: { _id: 1 } }]).toArray();
  assert.deepStrictEqual(groups[0], { _id: 0, n: 60 });
  assert.strictEqual((await col.deleteMany({ v: { $lt: 2 } })).deletedCount, 120);
  await assert.rejects(col.insertMany([{ _id: 2 }, { _id: 3 }]),
    (e) => e.code === 11000);
  const s = c.startSession();
  assert.strictEqual((await col.findOne({ _id: 4 }, { session: s })).v, 4);
  await s.endSession();
  const names = (await db.listCollections().toArray()).map((x) => x.name);
  assert.ok(names.includes('node'));
  await col.drop();
  await c.close();
  const bad = new MongoClient(url('kvd:nope'), { serverSelectionTimeoutMS: 3000 });
  await assert.rejects(bad.connect().then(() => bad.db('x').command({ ping: 1 })),
    (e) => e.code === 18);
  await bad.close();
}

main(process.argv[2]).then(() => console.log('node_crud: ok'), (e) => {
  console.error('node_crud: FAIL', e);
  process.exit(1);
});
