import { afterEach, describe, expect, it } from 'vitest'
import { REDIS_SERVER_MISSING, startRedisServer } from '../../helpers/redis-server.js'

describe('startRedisServer without redis-server on PATH (the tests need a real redis-server)', () => {
  const path = process.env.PATH
  afterEach(() => {
    process.env.PATH = path
  })

  it('fails with a message that says how to install redis-server, so the Redis tests never pass unrun', async () => {
    process.env.PATH = '/nonexistent-v4gw-test-dir'
    await expect(startRedisServer()).rejects.toThrow(REDIS_SERVER_MISSING)
    expect(REDIS_SERVER_MISSING).toContain('apt-get install -y redis-server')
  })
})
