import { describe, expect, it } from 'vitest'
import { parseCommandLine } from '../../../src/cli-args.js'

describe('parseCommandLine', () => {
  it.each([
    [[], { command: 'run', args: [] }],
    [['--config', 'a.yaml'], { command: 'run', args: ['--config', 'a.yaml'] }],
    [['run', '-c', 'a.yaml'], { command: 'run', args: ['-c', 'a.yaml'] }],
    [['check-config', 'a.yaml'], { command: 'check-config', args: ['a.yaml'] }],
    [['explain', 'POST', '/v1/headless/runs'], { command: 'explain', args: ['POST', '/v1/headless/runs'] }],
    [['simulator', '--port', '0'], { command: 'simulator', args: ['--port', '0'] }],
    [['config-schema'], { command: 'config-schema', args: [] }],
    [['healthcheck', '--config', 'a.yaml'], { command: 'healthcheck', args: ['--config', 'a.yaml'] }],
    [['--version'], { command: 'version', args: [] }],
    [['-v'], { command: 'version', args: [] }],
    [['help'], { command: 'help', args: [] }],
    [['help', 'check-config'], { command: 'help', args: ['check-config'] }],
    [['help', 'nope'], { command: 'help', args: [] }],
    [['check-config', '--help'], { command: 'help', args: ['check-config'] }],
    [['run', '--config', 'a.yaml', '--help'], { command: 'help', args: ['run'] }],
    [['--config', 'a.yaml', '--help'], { command: 'help', args: [] }],
    [['explain', '-h'], { command: 'help', args: ['explain'] }],
    [['nope', 'x'], { command: { unknown: 'nope' }, args: ['x'] }]
  ])('reads %j', (argv, expected) => {
    expect(parseCommandLine(argv)).toEqual(expected)
  })

  it('reads --help after -- as an argument, not a request for the usage', () => {
    expect(parseCommandLine(['explain', '--', '--help'])).toEqual({ command: 'explain', args: ['--', '--help'] })
  })

  it('holds signals only for a gateway run: --version and other flags after it are not a run', () => {
    expect(parseCommandLine(['--version', '--config', 'a.yaml']).command).toBe('version')
  })
})
