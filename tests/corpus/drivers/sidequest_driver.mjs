// Drive Sidequest with its PostgreSQL backend through its public API: `migrate`, `enqueue`, `work`.
// The connection comes from the PG* environment variables (a unix socket), handed to Knex.
import { writeFileSync } from 'node:fs'
import { Sidequest } from 'sidequest'

const command = process.argv[2]
const workload = JSON.parse(process.env.CORPUS_WORKLOAD || '{}')
const names = Object.keys(workload.queues || {})

// A job class lives in a module of its own, which the engine's worker threads import by the
// path Sidequest records with each job (the driver itself must not be imported again).
const jobs = new URL('./sidequest_corpus_jobs.mjs', import.meta.url)
writeFileSync(jobs, `import { Job } from 'sidequest'
export class CorpusJob extends Job {
  constructor(...args) { super(...args) }
  async run(n) { return { n } }
}
`)
const { CorpusJob } = await import(jobs.href)

const config = {
  backend: {
    driver: '@sidequest/postgres-backend',
    config: {
      connection: {
        host: process.env.PGHOST,
        port: Number(process.env.PGPORT),
        user: process.env.PGUSER,
        database: process.env.PGDATABASE,
      },
      pool: { min: 0, max: 10 },
    },
  },
  queues: names.map(name => ({ name, concurrency: 8 })),
  logger: { level: 'warn' },
  // In this process, so that SIGTERM stops the dispatcher and its cron routines (the hourly
  // cleanup of finished jobs and the release of stale ones, each also run once at start).
  fork: false,
  gracefulShutdown: false,
  jobPollingInterval: 50,
  dashboard: { enabled: false },
}

if (command === 'migrate') {
  await Sidequest.configure(config) // runs the backend's Knex migrations
} else if (command === 'enqueue') {
  await Sidequest.configure(config)
  const enqueue = async (name, count, at) => {
    for (let i = 0; i < count; i += 50) {
      const batch = []
      for (let n = i; n < Math.min(i + 50, count); n++) {
        const builder = Sidequest.build(CorpusJob).queue(name)
        batch.push((at ? builder.availableAt(at) : builder).enqueue(n))
      }
      await Promise.all(batch)
    }
  }
  for (const [name, count] of Object.entries(workload.queues)) await enqueue(name, count, null)
  await enqueue(names[0], workload.scheduled, new Date(Date.now() + 3600 * 1000))
} else if (command === 'work') {
  await Sidequest.start(config)
  await new Promise(resolve => process.once('SIGTERM', resolve))
} else {
  throw new Error(`unknown command ${command}`)
}
await Sidequest.stop()
process.exit(0)
