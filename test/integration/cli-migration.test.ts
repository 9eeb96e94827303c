import { beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { runCli, useCli } from '../helpers/spawn-cli.js'

/** SPEC 14 and 14.1 from the command line: `v4gw legacy-simulator`, and `v4gw explain --client`. */

describe('v4gw legacy-simulator', () => {
  const running = useCli(() => ['legacy-simulator', '--port', '0'])
  let url: string
  beforeAll(async () => {
    url = (await running.waitFor(/legacy simulator listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string
  })

  it('answers a legacy run as the gateway translates it: output, effective and meta', async () => {
    const answer = await send(url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 'hello', policy: 'p' } })
    expect(answer.status).toBe(200)
    expect(answer.json.output).toEqual({ echo: 'hello' })
    expect(answer.json.effective).toEqual({ policy: 'p', route: 'standard', risk: 'low' })
    expect(typeof answer.json.meta.requestId).toBe('string')
  })

  it('keeps its own stateId sessions', async () => {
    const call = () => send(url, '/v1/runs/invoke', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1, stateId: 'cli' } })
    const first = await call()
    expect((await call()).headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
  })

  it('refuses --port abc as a usage error (64)', async () => {
    const { code, stderr } = await runCli(['legacy-simulator', '--port', 'abc'])
    expect(code).toBe(64)
    expect(stderr).toContain('--port must be a port number')
  })
})

describe('v4gw explain --client', () => {
  const explain = (client: string) =>
    runCli(['explain', '--config', 'config/gateway.yaml', '--tenant', 'staged', '--client', client, '--header', 'authorization:Bearer demo-token-bob', '--body', '{"input":1,"stateId":"s"}', 'POST', '/v1/runs/invoke'])

  it('says which stage and side would serve that client, and why', async () => {
    const allowed = await explain('fp:1159bf80f41ccf3d')
    expect(allowed.code).toBe(0)
    const shown = JSON.parse(allowed.stdout) as { clientId: string; migration: Record<string, unknown>; servedBy: string; calls: { url: string }[] }
    expect(shown.clientId).toBe('fp:1159bf80f41ccf3d')
    expect(shown.migration).toMatchObject({ stage: 'canary', stageSource: 'config', stageFrom: 'route', side: 'v4', canary: { percent: 25, listed: 'allow' } })
    expect(shown.servedBy).toBe('v4')
    expect(shown.calls.map((call) => call.url)).toEqual(['http://embedded-simulator/v4/sessions.start', 'http://embedded-simulator/v4/sessions/{sessionId}/executions.execute'])

    const anonymous = JSON.parse((await explain('anonymous')).stdout) as { migration: Record<string, unknown>; calls: { url: string; headers: Record<string, string> }[] }
    expect(anonymous.migration).toMatchObject({ side: 'legacy', canary: { percent: 25 } })
    expect(anonymous.calls).toHaveLength(1)
    expect(anonymous.calls[0]?.url).toBe('http://embedded-legacy-backend/v1/runs/invoke')
    expect(anonymous.calls[0]?.headers.authorization).toBe('Bearer [redacted]')
  })

  it('refuses a client that is not a client id (64)', async () => {
    const { code, stderr } = await runCli(['explain', '--config', 'config/gateway.yaml', '--client', 'alice', 'POST', '/v1/headless/runs'])
    expect(code).toBe(64)
    expect(stderr).toContain('--client takes a client id')
  })
})
