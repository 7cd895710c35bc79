// Producers and consumers of the JS SDK's multi-URL client (urls, affinity
// load balancing, failover) against several brokers, while the test kills
// and restarts one of them. Prints one JSON line at the end:
// {"accepted", "delivered", "lost", "pushErrors", "consumerEnds"}.
//
//   node multibroker.mjs <sdk index.js> <url,url,...> <queue> <seconds>
const [, , sdkPath, urlList, queue, seconds] = process.argv
const { Queen } = await import(sdkPath)
const urls = urlList.split(',')
const queen = new Queen({ urls, loadBalancingStrategy: 'affinity', handleSignals: false, retryAttempts: 3,
  retryDelayMillis: 200, timeoutMillis: 10000 })
const accepted = new Set()
const delivered = new Set()
let pushErrors = 0
let consumerEnds = 0
const producing = new AbortController()
const consuming = new AbortController()

const producer = async (p) => {
  for (let i = 0; !producing.signal.aborted; i++) {
    const tx = `${p}-${i}`
    try {
      await queen.queue(queue).partition(p).push([{ transactionId: tx, data: { i } }])
      accepted.add(tx)
    } catch (e) {
      pushErrors++
      await new Promise(r => setTimeout(r, 50))
    }
  }
}

// A consumer restarted when its loop ends on an error, as docs/operations.md
// advises for the JS SDK.
const consumer = async () => {
  while (!consuming.signal.aborted) {
    try {
      await queen.queue(queue).group('g').batch(10).wait(true).consume(async (msgs) => {
        for (const m of Array.isArray(msgs) ? msgs : [msgs]) delivered.add(m.transactionId)
      }, { batch: 10, signal: consuming.signal })
    } catch (e) {
      if (consuming.signal.aborted) break
      consumerEnds++
      await new Promise(r => setTimeout(r, 200))
    }
  }
}

const work = [0, 1, 2, 3].map(k => producer(`p${k}`)).concat([consumer(), consumer()])
await new Promise(r => setTimeout(r, Number(seconds) * 1000))
producing.abort()
const deadline = Date.now() + 60000
while (Date.now() < deadline && [...accepted].some(tx => !delivered.has(tx))) {
  await new Promise(r => setTimeout(r, 250))
}
consuming.abort()
const lost = [...accepted].filter(tx => !delivered.has(tx))
console.log(JSON.stringify({ accepted: accepted.size, delivered: delivered.size, lost: lost.length,
  lostSample: lost.slice(0, 5), pushErrors, consumerEnds }))
process.exit(0)
