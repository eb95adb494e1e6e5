// Drive graphile-worker through its public API: `migrate`, `enqueue`, `work`.
// The pool reads the PG* environment variables (a unix socket), as node-postgres does.
import pg from 'pg'
import { makeWorkerUtils, run, runMigrations } from 'graphile-worker'

const command = process.argv[2]
const workload = JSON.parse(process.env.CORPUS_WORKLOAD || '{}')
const tasks = Object.keys(workload.queues || {})
const pgPool = new pg.Pool({ max: 8 })
// The last task's jobs go through one named (serial) queue, so the claim locks its row.
const serial = tasks[tasks.length - 1]

if (command === 'migrate') {
  await runMigrations({ pgPool })
} else if (command === 'enqueue') {
  const utils = await makeWorkerUtils({ pgPool })
  for (const [identifier, count] of Object.entries(workload.queues)) {
    const specs = Array.from({ length: count }, (_, n) => ({
      identifier,
      payload: { n },
      ...(identifier === serial ? { queueName: identifier } : {}),
    }))
    for (let i = 0; i < specs.length; i += 500) await utils.addJobs(specs.slice(i, i + 500))
  }
  const later = new Date(Date.now() + 3600 * 1000)
  await utils.addJobs(
    Array.from({ length: workload.scheduled }, (_, n) => ({ identifier: tasks[0], payload: { n }, runAt: later })),
  )
  await utils.release()
} else if (command === 'work') {
  const taskList = Object.fromEntries(tasks.map(name => [name, async () => {}]))
  const runner = await run({ pgPool, taskList, concurrency: 4, pollInterval: 500, noHandleSignals: true })
  await new Promise(resolve => process.once('SIGTERM', resolve))
  await runner.stop()
} else {
  throw new Error(`unknown command ${command}`)
}
await pgPool.end()
