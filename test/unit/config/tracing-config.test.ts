import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfigText } from '../../../src/config/load-config.js'
import { configSchema } from '../../../src/config/schema.js'

// Issue 30 points 0 and 4: SPEC 17's `tracing` section, with defaults that cost little and trust
// little, validated at load with a path for each problem.

const TENANT = 'tenants:\n  acme:\n    upstream: { staging: "http://127.0.0.1:4010" }\n'

function problemsOf(yaml: string, env: Record<string, string> = {}): string[] {
  try {
    parseConfigText(`${TENANT}${yaml}`, 'gateway.yaml', env)
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  return []
}

describe('the tracing config (SPEC 17)', () => {
  it('is off unless enabled, with sampleRatio 0.01, trustIncoming false and forwardBaggage false', () => {
    const parsed = configSchema.parse({ tenants: { acme: { upstream: { staging: 'http://127.0.0.1:4010' } } } })
    expect(parsed.tracing).toEqual({
      enabled: false,
      endpoint: 'http://127.0.0.1:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'v4gw',
      sampleRatio: 0.01,
      trustIncoming: false,
      forwardBaggage: false,
      maxQueueSpans: 2048,
      batchDelayMs: 1000
    })
  })

  it('takes every key, header names lower-cased, a ratio and booleans written as text (placeholders)', () => {
    const yaml = [
      'tracing:',
      '  enabled: ${TRACING:-false}',
      '  endpoint: https://otel.example.com:4318/v1/traces',
      '  protocol: http/json',
      '  headers: { X-Api-Key: "${OTLP_KEY}" }',
      '  serviceName: edge-gw',
      '  sampleRatio: ${RATIO:-0.25}',
      '  trustIncoming: "true"',
      '  maxQueueSpans: "64"',
      '  batchDelayMs: 200'
    ].join('\n')
    const config = parseConfigText(`${TENANT}${yaml}\n`, 'gateway.yaml', { TRACING: 'true', OTLP_KEY: 'k-1' })
    expect(config.tracing).toMatchObject({
      enabled: true,
      endpoint: 'https://otel.example.com:4318/v1/traces',
      protocol: 'http/json',
      headers: { 'x-api-key': 'k-1' },
      serviceName: 'edge-gw',
      sampleRatio: 0.25,
      trustIncoming: true,
      maxQueueSpans: 64,
      batchDelayMs: 200
    })
  })

  it.each([
    ['a bad endpoint', 'tracing: { endpoint: "not a url" }', /^tracing\.endpoint: /],
    ['an endpoint of another scheme', 'tracing: { endpoint: "grpc://127.0.0.1:4317" }', /^tracing\.endpoint: /],
    ['a password in the endpoint', 'tracing: { endpoint: "https://user:secret-pw@otel.example.com/v1/traces" }', /^tracing\.endpoint: the collector URL carries no credentials/],
    ['another protocol', 'tracing: { protocol: grpc }', /^tracing\.protocol: /],
    ['a ratio over 1', 'tracing: { sampleRatio: 1.5 }', /^tracing\.sampleRatio: /],
    ['a ratio as other text', 'tracing: { sampleRatio: "half" }', /^tracing\.sampleRatio: /],
    ['a header value with a line break', 'tracing: { headers: { x-key: "a\\nb" } }', /^tracing\.headers\.x-key: /],
    ['a header name with a space', 'tracing: { headers: { "x key": "a" } }', /^tracing\.headers\.x…: /],
    ['an empty queue', 'tracing: { maxQueueSpans: 0 }', /^tracing\.maxQueueSpans: /],
    ['a misspelt key', 'tracing: { sampleRate: 0.5 }', /^tracing: .*sampleRate/]
  ])('refuses %s with a problem naming its path', (_name, yaml, problem) => {
    const problems = problemsOf(`${yaml}\n`)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toMatch(problem)
  })

  it('never quotes the endpoint’s password in its problem', () => {
    const problems = problemsOf('tracing: { endpoint: "https://user:secret-pw@otel.example.com/v1/traces" }\n')
    expect(problems.join('\n')).not.toContain('secret-pw')
  })
})
