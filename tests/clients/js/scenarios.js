'use strict'
// kafkajs (a JavaScript implementation of Kafka's protocol) against a broker, one scenario per run:
//
//   node scenarios.js SCENARIO BOOTSTRAP DIR
//
// DIR/args.json holds the scenario's inputs (datasets as JSON lines written by the test with the
// shared matrix's common.dataset_to_jsonl); what the client saw goes back as files in DIR
// (records as JSON lines in common.records_from_jsonl's form) and one JSON line on stdout.
// The test (tests/clients/test_kafkajs.py) checks it all byte for byte; this script only drives
// the client. Every wait is bounded by args.budget seconds: past it the run exits 3.
// KAFKAJS_LOG_LEVEL=debug shows the client's own log on stderr.

const fs = require('fs')
const path = require('path')
const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs')

const [scenario, bootstrap, dir] = process.argv.slice(2)
const args = JSON.parse(fs.readFileSync(path.join(dir, 'args.json'), 'utf8'))
const budgetMs = (args.budget || 50) * 1000
const started = Date.now()
const left = () => budgetMs - (Date.now() - started)
setTimeout(() => {
  process.stderr.write(`scenario ${scenario}: budget of ${budgetMs} ms spent\n`)
  process.exit(3)
}, budgetMs).unref()

const kafka = new Kafka({
  clientId: 'kafkatool-tests',
  brokers: [bootstrap],
  logLevel: logLevel[(process.env.KAFKAJS_LOG_LEVEL || 'error').toUpperCase()],
  connectionTimeout: 3000,
  requestTimeout: 15000,
  retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
})

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const b64 = b => (b == null ? null : b.toString('base64'))
const unb64 = s => (s == null ? null : Buffer.from(s, 'base64'))

async function waitFor(what, cond, stepMs = 50) {
  while (left() > 0) {
    if (await cond()) return
    await sleep(stepMs)
  }
  throw new Error(`timed out waiting for ${what}`)
}

function readDataset(name) {
  return fs
    .readFileSync(path.join(dir, name), 'utf8')
    .split('\n')
    .filter(line => line.trim())
    .map(line => {
      const d = JSON.parse(line)
      const headers = {}
      for (const [k, v] of d.h) headers[k] = unb64(v)
      const m = { idx: d.i, key: unb64(d.k), value: unb64(d.v), headers }
      if (d.t != null) m.timestamp = String(d.t)
      return m
    })
}

// a record as common.records_from_jsonl reads it; a header key kafkajs saw twice is an array
function recordLine(partition, m) {
  const h = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) h.push([k, b64(one)])
  }
  return JSON.stringify({ p: partition, o: m.offset, k: b64(m.key), v: b64(m.value), h, t: Number(m.timestamp) })
}

function writeRecords(name, lines) {
  fs.writeFileSync(path.join(dir, name), lines.map(l => l + '\n').join(''))
}

async function partitionCount(admin, topic) {
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  return md.topics[0].partitions
}

// Sends msgs in order, at most `chunk` per request (one batch per partition per request, under
// message.max.bytes); each message's partition is the client's own partitioner's choice (or
// args' partitionOf), fixed before the send so that the answer's base offsets say where each
// record landed. Returns {idx: [partition, offset]}.
async function produceAll(sender, topic, msgs, { partitions, partitionOf, compression, chunk = 100 }) {
  const choose = Partitioners.DefaultPartitioner()
  const partitionMetadata = partitions
  const delivered = {}
  for (let i = 0; i < msgs.length; i += chunk) {
    const slice = msgs.slice(i, i + chunk).map(m => {
      const partition =
        partitionOf != null ? partitionOf(m) : choose({ topic, partitionMetadata, message: m })
      return { ...m, partition }
    })
    const answer = await sender.send({ topic, acks: -1, compression, messages: slice })
    const base = {}
    for (const r of answer) {
      if (r.errorCode !== 0) throw new Error(`produce to ${topic}-${r.partition}: error ${r.errorCode}`)
      base[r.partition] = BigInt(r.baseOffset)
    }
    const next = {}
    for (const m of slice) {
      const n = next[m.partition] || 0n
      delivered[m.idx] = [m.partition, Number(base[m.partition] + n)]
      next[m.partition] = n + 1n
    }
  }
  return delivered
}

// Reads a topic from the beginning as a member of a group of its own (kafkajs has no assign()):
// until `want` records came, then `settleMs` more so that an extra record would show.
async function consumeAll(topic, want, { readUncommitted = false, settleMs = 500 } = {}) {
  const consumer = kafka.consumer({
    groupId: `kjs-read-${topic}-${Date.now()}-${Math.random().toString(16).slice(2, 8)}`,
    readUncommitted,
    maxWaitTimeInMs: 100,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
  })
  const lines = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) lines.push(recordLine(batch.partition, m))
      },
    })
    await waitFor(`${want} records of ${topic}`, () => lines.length >= want)
    await sleep(settleMs)
  } finally {
    await consumer.disconnect()
  }
  return lines
}

const compressionOf = name => ({ none: CompressionTypes.None, gzip: CompressionTypes.GZIP })[name]

const scenarios = {
  async metadata() {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const cluster = await admin.describeCluster()
      const topics = await admin.listTopics()
      return { cluster, topics }
    } finally {
      await admin.disconnect()
    }
  },

  async create_delete_topic() {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const { topic, partitions } = args
      const created = await admin.createTopics({
        topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: 10000,
      })
      const again = await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], timeout: 10000 })
      const described = (await partitionCount(admin, topic)).map(p => ({
        partitionId: p.partitionId,
        leader: p.leader,
        replicas: p.replicas,
        isr: p.isr,
        partitionErrorCode: p.partitionErrorCode,
      }))
      const listed = (await admin.listTopics()).includes(topic)
      await admin.deleteTopics({ topics: [topic], timeout: 10000 })
      let gone = false
      await waitFor(`${topic} gone`, async () => (gone = !(await admin.listTopics()).includes(topic)), 100)
      let deleteAgain = null
      try {
        await admin.deleteTopics({ topics: [topic], timeout: 10000 })
      } catch (e) {
        // kafkajs retries UNKNOWN_TOPIC_OR_PARTITION (retriable) before it gives up
        deleteAgain = [e.name, e.cause && e.cause.type]
      }
      return { created, again, described, listed, gone, deleteAgain }
    } finally {
      await admin.disconnect()
    }
  },

  // produce (with the codec args.codec, acks=all) and read back from the beginning
  async produce_consume() {
    const { topic, partitions, codec, idempotent } = args
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true })
    const parts = await partitionCount(admin, topic)
    await admin.disconnect()
    const msgs = readDataset('dataset.jsonl')
    const producer = kafka.producer(
      idempotent ? { idempotent: true, maxInFlightRequests: 1 } : { createPartitioner: Partitioners.DefaultPartitioner }
    )
    await producer.connect()
    const delivered = await produceAll(producer, topic, msgs, {
      partitions: parts,
      compression: compressionOf(codec),
      chunk: args.chunk || 100,
    })
    await producer.disconnect()
    writeRecords('records.jsonl', await consumeAll(topic, msgs.length))
    return { delivered }
  },

  async group() {
    const { topic, group, partitions } = args
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true })
    const parts = await partitionCount(admin, topic)
    const producer = kafka.producer()
    await producer.connect()

    const got = { 1: [], 2: [], 3: [] }
    const assigned = { 1: null, 2: null, 3: null }
    const last = { 1: {}, 2: {}, 3: {} } // the next offset to commit per partition
    const member = async i => {
      const c = kafka.consumer({
        groupId: group,
        // short group timers (the broker's group.min.session.timeout.ms is 6 s): a member
        // learns of a rebalance from its next heartbeat, and fetches wait at most 100 ms
        sessionTimeout: 6000,
        rebalanceTimeout: 10000,
        heartbeatInterval: 300,
        maxWaitTimeInMs: 100,
        retry: { retries: 3 },
      })
      c.on(c.events.GROUP_JOIN, e => {
        assigned[i] = [...(e.payload.memberAssignment[topic] || [])].sort((a, b) => a - b)
      })
      c.on(c.events.REBALANCING, () => {
        assigned[i] = null
      })
      await c.connect()
      await c.subscribe({ topic, fromBeginning: true })
      await c.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) {
            got[i].push(recordLine(batch.partition, m))
            last[i][batch.partition] = (BigInt(m.offset) + 1n).toString()
          }
        },
      })
      return c
    }
    const commit = (c, i) =>
      c.commitOffsets(Object.entries(last[i]).map(([partition, offset]) => ({ topic, partition: Number(partition), offset })))

    const joinStart = Date.now()
    const c1 = await member(1)
    const c2 = await member(2)
    // both members hold a disjoint, complete assignment that lasted 1 s
    let snap = null
    let since = 0
    await waitFor('a stable assignment of both members', () => {
      const a1 = assigned[1]
      const a2 = assigned[2]
      const ok =
        a1 && a2 && a1.length && a2.length && a1.length + a2.length === partitions &&
        new Set([...a1, ...a2]).size === partitions
      const now = JSON.stringify([a1, a2])
      if (!ok) snap = null
      else if (now !== snap) [snap, since] = [now, Date.now()]
      return ok && Date.now() - since >= 1000
    })
    const stableAfterMs = since - joinStart
    const first = readDataset('first.jsonl')
    const delivered1 = await produceAll(producer, topic, first, { partitions: parts, partitionOf: m => m.idx % partitions })
    await waitFor('the first records by the two members', () => got[1].length + got[2].length >= first.length)
    await sleep(500)
    const assignment = { 1: assigned[1], 2: assigned[2] }
    // commit both before either leaves (a leave rebalances the other)
    await commit(c1, 1)
    await commit(c2, 2)
    await c1.disconnect()
    await c2.disconnect()
    const second = readDataset('second.jsonl')
    const delivered2 = await produceAll(producer, topic, second, { partitions: parts, partitionOf: m => m.idx % partitions })
    const c3 = await member(3)
    await waitFor('the second records by a fresh member', () => got[3].length >= second.length)
    await sleep(1000)
    await c3.disconnect()
    const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    await producer.disconnect()
    await admin.disconnect()
    writeRecords('got1.jsonl', got[1])
    writeRecords('got2.jsonl', got[2])
    writeRecords('got3.jsonl', got[3])
    return { assignment, stableAfterMs, delivered1, delivered2, committed }
  },

  // a topic (created when args.partitions is given) and args' dataset.jsonl sent to it, each
  // record to partition idx % partitions
  async produce() {
    const { topic, partitions } = args
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true })
    const parts = await partitionCount(admin, topic)
    await admin.disconnect()
    if (!fs.existsSync(path.join(dir, 'dataset.jsonl'))) return { delivered: {} }
    const producer = kafka.producer()
    await producer.connect()
    const delivered = await produceAll(producer, topic, readDataset('dataset.jsonl'), {
      partitions: parts,
      partitionOf: m => m.idx % parts.length,
    })
    await producer.disconnect()
    return { delivered }
  },

  // one member of args.group until its stdin ends: JSON lines on stdout as it goes, its
  // assignment at each join and each record once its offset is committed
  async member() {
    const { topic, group } = args
    const say = o => process.stdout.write(JSON.stringify(o) + '\n')
    const c = kafka.consumer({
      groupId: group,
      sessionTimeout: 6000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 100,
    })
    c.on(c.events.GROUP_JOIN, e => say({ assigned: [...(e.payload.memberAssignment[topic] || [])].sort((a, b) => a - b) }))
    c.on(c.events.REBALANCING, () => say({ rebalancing: true }))
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (!batch.messages.length) return
        const next = (BigInt(batch.messages[batch.messages.length - 1].offset) + 1n).toString()
        await c.commitOffsets([{ topic, partition: batch.partition, offset: next }])
        for (const m of batch.messages) say({ rec: JSON.parse(recordLine(batch.partition, m)) })
      },
    })
    await new Promise(resolve => {
      process.stdin.on('end', resolve)
      process.stdin.resume()
    })
    await c.disconnect()
    return {}
  },

  async transactions() {
    const { topic, partitions, transactionalId } = args
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true })
    const parts = await partitionCount(admin, topic)
    const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    const total = { committed: 0, all: 0 }
    // each transaction also commits an offset of args.group (AddOffsetsToTxn + TxnOffsetCommit):
    // the number of records sent so far, which only a committed transaction makes the group's
    for (const [name, commit] of [['c1.jsonl', true], ['ab.jsonl', false], ['c2.jsonl', true]]) {
      const msgs = readDataset(name)
      const txn = await producer.transaction()
      await produceAll(txn, topic, msgs, { partitions: parts })
      total.all += msgs.length
      await txn.sendOffsets({
        consumerGroupId: args.group,
        topics: [{ topic, partitions: [{ partition: 0, offset: String(total.all) }] }],
      })
      if (commit) await txn.commit()
      else await txn.abort()
      if (commit) total.committed += msgs.length
      const [offsets] = await admin.fetchOffsets({ groupId: args.group, topics: [topic] })
      total[name] = Number(offsets.partitions.find(p => p.partition === 0).offset)
    }
    await producer.disconnect()
    await admin.disconnect()
    writeRecords('read_committed.jsonl', await consumeAll(topic, total.committed, { settleMs: 1000 }))
    writeRecords('read_uncommitted.jsonl', await consumeAll(topic, total.all, { readUncommitted: true }))
    return total
  },

  async offsets_for_times() {
    const { topic, times } = args
    const admin = kafka.admin()
    await admin.connect()
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
      const parts = await partitionCount(admin, topic)
      const producer = kafka.producer()
      await producer.connect()
      await produceAll(producer, topic, readDataset('dataset.jsonl'), { partitions: parts, partitionOf: () => 0, chunk: 1 })
      await producer.disconnect()
      const [ends] = await admin.fetchTopicOffsets(topic)
      const byTime = {}
      for (const [name, ts] of Object.entries(times)) {
        const [r] = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
        byTime[name] = Number(r.offset)
      }
      return { low: Number(ends.low), high: Number(ends.high), byTime }
    } finally {
      await admin.disconnect()
    }
  },
}

scenarios[scenario]()
  .then(result => {
    process.stdout.write(JSON.stringify({ ok: true, result }) + '\n')
    process.exit(0)
  })
  .catch(e => {
    process.stdout.write(JSON.stringify({ ok: false, error: `${e.name}: ${e.message}`, type: e.type || null }) + '\n')
    process.stderr.write(`${e.stack}\n`)
    process.exit(1)
  })
