import { Writable } from 'node:stream'

/** Collects every byte a pino logger writes, so a test can read the log as written. */
export interface LogSink {
  stream: Writable
  text(): string
  lines(): Record<string, unknown>[]
}

export function createLogSink(): LogSink {
  const chunks: Buffer[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(Buffer.from(chunk))
      callback()
    }
  })
  const text = (): string => Buffer.concat(chunks).toString('utf8')
  return {
    stream,
    text,
    lines: () => text().split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
  }
}
