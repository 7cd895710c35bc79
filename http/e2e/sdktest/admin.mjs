// Calls every method of the JS SDK's Admin once against a broker, with
// data in place so that each has something to answer, and prints one JSON
// line per call: {"method", "ok", "error"?, "shape"?}. A call fails when the
// SDK throws (an HTTP error, or an answer it cannot read) or when the answer
// lacks what the SDK's own dashboard and tests read of it (checks below).
//
//   node admin.mjs <sdk index.js> <broker URL>
const [, , sdkPath, url] = process.argv
const { Queen } = await import(sdkPath)
const queen = new Queen({ url, handleSignals: false })
const admin = queen.admin
const run = Date.now().toString(36)
const q = `sdkadmin-${run}`

const post = async (path, body) => {
  const r = await fetch(url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
  return { status: r.status, body: r.status === 204 ? null : await r.json() }
}

// Data: a queue with two partitions, messages, one consumed by group g,
// one dead-lettered for group g (no retries), a trace.
await post('/api/v1/configure', { queue: q, options: { leaseTime: 30, retryLimit: 0 } })
const pushed = await post('/api/v1/push', { items: [
  { queue: q, partition: 'p1', payload: { n: 1 }, transactionId: `${run}-1` },
  { queue: q, partition: 'p1', payload: { n: 2 }, transactionId: `${run}-2` },
  { queue: q, partition: 'p2', payload: { n: 3 }, transactionId: `${run}-3` },
  { queue: q, partition: 'p2', payload: { n: 4 }, transactionId: `${run}-4` },
] })
const pid1 = pushed.body[0].partition_id
const pid2 = pushed.body[2].partition_id
const popped = await fetch(`${url}/api/v1/pop/queue/${q}/partition/p1?consumerGroup=g&batch=1&wait=false`).then(r => r.json())
const m = popped.messages[0]
await post('/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, consumerGroup: 'g', status: 'completed' })
await post('/api/v1/traces', { transactionId: m.transactionId, partitionId: m.partitionId, consumerGroup: 'g', traceName: `t-${run}`, eventType: 'info', data: { step: 1 } })
const failed = await fetch(`${url}/api/v1/pop/queue/${q}/partition/p1?consumerGroup=g&batch=1&wait=false`).then(r => r.json())
const f = failed.messages[0]
await post('/api/v1/ack', { transactionId: f.transactionId, partitionId: f.partitionId, leaseId: f.leaseId, consumerGroup: 'g', status: 'failed', error: 'sdk admin test' })

const has = (obj, ...keys) => {
  for (const k of keys) {
    if (obj === null || typeof obj !== 'object' || !(k in obj)) return `missing ${k}`
  }
  return null
}
const isArray = (v, what) => (Array.isArray(v) ? null : `${what} is not an array`)
const from = new Date(Date.now() - 3600e3).toISOString()
const to = new Date(Date.now() + 60e3).toISOString()

// Each call: the method, how to call it, and what its answer must hold.
const calls = [
  ['getOverview', () => admin.getOverview(), a => has(a, 'queues', 'partitions', 'messages', 'throughput')],
  ['getNamespaces', () => admin.getNamespaces(), a => has(a, 'namespaces') || isArray(a.namespaces, 'namespaces')],
  ['getTasks', () => admin.getTasks(), a => has(a, 'tasks') || isArray(a.tasks, 'tasks')],
  ['listQueues', () => admin.listQueues({ limit: 10 }), a => has(a, 'queues') || isArray(a.queues, 'queues')],
  ['getQueue', () => admin.getQueue(q), a => has(a, 'name', 'partitions')],
  ['getPartitions', () => admin.getPartitions({ queue: q }), a => has(a, 'partitions') || isArray(a.partitions, 'partitions')],
  ['listMessages', () => admin.listMessages({ queue: q, limit: 10 }), a => has(a, 'messages') || isArray(a.messages, 'messages')],
  ['getMessage', () => admin.getMessage(pid2, `${run}-3`), a => has(a, 'transactionId', 'payload', 'status', 'consumerGroups')],
  ['getTracesForMessage', () => admin.getTracesForMessage(m.partitionId, m.transactionId), a => has(a, 'traces') || isArray(a.traces, 'traces')],
  ['getTracesByName', () => admin.getTracesByName(`t-${run}`), a => has(a, 'traces')],
  ['getTraceNames', () => admin.getTraceNames({ limit: 10 }), a => has(a, 'trace_names')],
  ['getStatus', () => admin.getStatus(), a => has(a, 'messages', 'queues')],
  ['getQueueStats', () => admin.getQueueStats({}), a => has(a, 'queues') || isArray(a.queues, 'queues')],
  ['getQueueDetail', () => admin.getQueueDetail(q), a => has(a, 'partitions') || isArray(a.partitions, 'partitions')],
  ['getAnalytics', () => admin.getAnalytics({}), a => has(a, 'dataPoints') || isArray(a.dataPoints, 'dataPoints')],
  ['listConsumerGroups', () => admin.listConsumerGroups(), a => isArray(a, 'the group list')],
  ['refreshConsumerStats', () => admin.refreshConsumerStats(), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['getConsumerGroup', () => admin.getConsumerGroup('g'), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['getLaggingConsumers', () => admin.getLaggingConsumers(0), a => isArray(a, 'the lagging list')],
  ['seekConsumerGroup', () => admin.seekConsumerGroup('g', q, { toEnd: true }), a => has(a, 'success')],
  ['health', () => admin.health(), a => has(a, 'status', 'database')],
  ['metrics', () => admin.metrics(), a => has(a, 'uptime', 'requests', 'messages', 'database', 'memory', 'cpu')],
  ['getMaintenanceMode', () => admin.getMaintenanceMode(), a => has(a, 'maintenanceMode')],
  ['setMaintenanceMode', () => admin.setMaintenanceMode(false), a => has(a, 'maintenanceMode')],
  ['getPopMaintenanceMode', () => admin.getPopMaintenanceMode(), a => has(a, 'popMaintenanceMode')],
  ['setPopMaintenanceMode', () => admin.setPopMaintenanceMode(false), a => has(a, 'popMaintenanceMode')],
  ['getSystemMetrics', () => admin.getSystemMetrics({ from, to }), a => has(a, 'timeRange', 'replicas')],
  ['getWorkerMetrics', () => admin.getWorkerMetrics({ from, to }), a => has(a, 'timeRange', 'timeSeries')],
  ['getPostgresStats', () => admin.getPostgresStats(), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['retryMessage', () => admin.retryMessage(pid1, `${run}-2`), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['moveMessageToDLQ', () => admin.moveMessageToDLQ(pid2, `${run}-4`), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['deleteMessage', () => admin.deleteMessage(pid2, `${run}-3`), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['deleteConsumerGroupForQueue', () => admin.deleteConsumerGroupForQueue('g', q, true), a => (a && typeof a === 'object' ? null : 'not an object')],
  ['clearQueue', () => admin.clearQueue(q), a => (a && typeof a === 'object' ? null : 'not an object')],
]

for (const [method, call, check] of calls) {
  try {
    const answer = await call()
    const problem = check(answer)
    console.log(JSON.stringify(problem ? { method, ok: false, error: problem, answer } : { method, ok: true }))
  } catch (e) {
    console.log(JSON.stringify({ method, ok: false, error: String(e && e.message || e) }))
  }
}
process.exit(0)
