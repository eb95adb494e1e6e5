// Drive pg-boss through its public API: `migrate`, `enqueue`, `work`.
// The connection comes from the PG* environment variables (a unix socket), as node-postgres reads them.
import { PgBoss } from 'pg-boss'

const command = process.argv[2]
const workload = JSON.parse(process.env.CORPUS_WORKLOAD || '{}')
const queues = Object.keys(workload.queues || {})
const boss = new PgBoss({
  host: process.env.PGHOST,
  port: Number(process.env.PGPORT),
  user: process.env.PGUSER,
  database: process.env.PGDATABASE,
})
boss.on('error', err => console.error(err))

await boss.start() // installs or migrates the pgboss schema
if (command === 'migrate') {
  for (const name of queues) await boss.createQueue(name)
} else if (command === 'enqueue') {
  for (const [name, count] of Object.entries(workload.queues)) {
    const jobs = Array.from({ length: count }, (_, n) => ({ data: { n } }))
    for (let i = 0; i < jobs.length; i += 500) await boss.insert(name, jobs.slice(i, i + 500))
  }
  const later = new Date(Date.now() + 3600 * 1000)
  const jobs = Array.from({ length: workload.scheduled }, (_, n) => ({ data: { n }, startAfter: later }))
  await boss.insert('default', jobs)
} else if (command === 'work') {
  for (const name of queues) {
    await boss.work(name, { batchSize: 50, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true }, async () => {})
  }
  await new Promise(resolve => process.once('SIGTERM', resolve))
} else {
  throw new Error(`unknown command ${command}`)
}
await boss.stop({ graceful: true, timeout: 10000 })
