// Drive Agenda with its PostgreSQL backend through their public API: `migrate`, `enqueue`, `work`.
// The pool reads the PG* environment variables (a unix socket), as node-postgres does.
import { Agenda } from 'agenda'
import { PostgresBackend } from '@agendajs/postgres-backend'

const command = process.argv[2]
const workload = JSON.parse(process.env.CORPUS_WORKLOAD || '{}')
const names = Object.keys(workload.queues || {})
// An Agenda "queue" is a job name: each definition's processor claims by name.
const backend = new PostgresBackend({ poolConfig: { max: 10 }, name: `corpus-${process.pid}` })
const agenda = new Agenda({
  backend,
  processEvery: '500 milliseconds',
  defaultConcurrency: 8,
  maxConcurrency: 24,
})
agenda.on('error', err => console.error(err))
for (const name of names) agenda.define(name, async () => {})

await agenda.ready // connecting creates the table, its indexes and its trigger
if (command === 'migrate') {
  // nothing more: the backend's schema is in place
} else if (command === 'enqueue') {
  const batch = async specs => {
    for (let i = 0; i < specs.length; i += 50) {
      await Promise.all(specs.slice(i, i + 50).map(([name, when, n]) => agenda.schedule(when, name, { n })))
    }
  }
  const now = new Date()
  for (const [name, count] of Object.entries(workload.queues)) {
    await batch(Array.from({ length: count }, (_, n) => [name, now, n]))
  }
  const later = new Date(Date.now() + 3600 * 1000)
  await batch(Array.from({ length: workload.scheduled }, (_, n) => [names[0], later, n]))
} else if (command === 'work') {
  await agenda.start()
  await new Promise(resolve => process.once('SIGTERM', resolve))
} else {
  throw new Error(`unknown command ${command}`)
}
// stop() unlocks what this process holds and closes the pool; the LISTEN connection's
// reconnect timer can keep node alive after it, so leave once stop() is done.
await agenda.stop()
process.exit(0)
