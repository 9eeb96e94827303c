/* global process, console, setTimeout, clearTimeout */
// Child processes of the benchmark: started pinned to a core, tracked by PID, ended by PID.
// Nothing here ever signals a process it did not start.
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

const STDERR_TAIL_BYTES = 4096

/** Every child this runner started and that has not exited yet. */
const running = new Set()

/**
 * Pinning needs taskset and the two cores: one for the measured process, one for the rest. Each
 * core is probed rather than counted with nproc, which counts only the cores this process may
 * use: run from a shell pinned to one core, the bench would otherwise run everything unpinned on
 * that core, though every process it starts is pinned explicitly.
 */
export function detectPinning(cores) {
  return cores.every((core) => spawnSync('taskset', ['-c', String(core), 'true'], { stdio: 'ignore' }).status === 0)
}

/** Clock ticks per second, to turn /proc/<pid>/stat counters into time. */
export function clockTicksPerSecond() {
  const value = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim())
  return Number.isFinite(value) && value > 0 ? value : 100
}

/** Pins this runner to `core`: it drains the gateway's log pipe, which must not steal the measured core. */
export function pinSelf(core) {
  spawnSync('taskset', ['-cp', String(core), String(process.pid)], { stdio: 'ignore' })
}

/**
 * Starts `node <args>` (pinned to `core` when `pin` is set) and resolves once a stdout line
 * matches `ready`, with the match. Stdout after that is drained and discarded so that a chatty
 * child (the gateway's JSON access log) never blocks on a full pipe.
 */
/**
 * The environment of a measured process (a gateway or a reference proxy): the runner's, without
 * what would give one of them other Node flags than the other. A gateway adds only the production
 * flags `NODE_OPTIONS` lacks, where a reference's command-line flags win over it, and
 * `V4GW_NODE_FLAGS=off` would turn the gateway's off alone (like for like, issue 27).
 */
export function measuredEnv(extra = {}) {
  const { NODE_OPTIONS: _nodeOptions, V4GW_NODE_FLAGS: _gatewayFlags, ...env } = process.env
  return { ...env, ...extra }
}

export function startNode({ name, args, core, pin, ready, readyTimeoutMs = 20_000, env = process.env, stdoutFile, executable = process.execPath }) {
  const command = pin ? 'taskset' : executable
  const commandArgs = pin ? ['-c', String(core), executable, ...args] : args
  // With stdoutFile, the child writes its stdout (the gateway's JSON log) to a file, as it would to
  // a log driver on another CPU; a pipe would make this runner, on the load generator's core, read it.
  const stdoutFd = stdoutFile === undefined ? undefined : openSync(stdoutFile, 'w')
  // taskset execs node in place, so the PID is node's own: /proc/<pid>/stat measures the right process.
  const child = spawn(command, commandArgs, { stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'], env })
  if (stdoutFd !== undefined) closeSync(stdoutFd)
  const handle = { name, pid: child.pid, child, stderrTail: '', exited: false }
  running.add(handle)
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      handle.exited = true
      running.delete(handle)
      resolve({ code, signal })
    })
  })
  handle.exitedPromise = exited
  child.stderr.on('data', (chunk) => {
    handle.stderrTail = (handle.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES)
  })

  if (stdoutFile !== undefined) return waitForReadyLineInFile({ name, handle, exited, stdoutFile, ready, readyTimeoutMs })

  return new Promise((resolve, reject) => {
    let pending = ''
    const timer = setTimeout(() => fail(new Error(`${name} did not print its ready line within ${readyTimeoutMs} ms`)), readyTimeoutMs)
    function fail(error) {
      clearTimeout(timer)
      child.stdout.off('data', scan)
      void stopProcess(handle)
      reject(new Error(`${error.message}\n--- ${name} stderr ---\n${handle.stderrTail}`))
    }
    function scan(chunk) {
      pending += chunk.toString('utf8')
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        const match = ready.exec(line)
        if (match === null) continue
        clearTimeout(timer)
        child.stdout.off('data', scan)
        child.stdout.resume()
        resolve({ handle, match })
        return
      }
      // Bound what is kept while waiting for the ready line.
      if (pending.length > 65_536) pending = pending.slice(-4096)
    }
    child.stdout.on('data', scan)
    void exited.then(({ code, signal }) => {
      if (child.stdout.listenerCount('data') > 0) fail(new Error(`${name} exited (code ${code}, signal ${signal}) before it was ready`))
    })
  })
}

/** Polls a child's stdout file for its ready line (start-up only; the file is not read after). */
async function waitForReadyLineInFile({ name, handle, exited, stdoutFile, ready, readyTimeoutMs }) {
  const deadline = Date.now() + readyTimeoutMs
  let exitedEarly = false
  void exited.then(() => {
    exitedEarly = true
  })
  while (Date.now() < deadline) {
    for (const line of readFileSync(stdoutFile, 'utf8').split('\n')) {
      const match = ready.exec(line)
      if (match !== null) return { handle, match }
    }
    if (exitedEarly) throw new Error(`${name} exited before it was ready\n--- ${name} stderr ---\n${handle.stderrTail}`)
    await sleep(25)
  }
  void stopProcess(handle)
  throw new Error(`${name} did not print its ready line within ${readyTimeoutMs} ms\n--- ${name} stderr ---\n${handle.stderrTail}`)
}

/**
 * Runs `node <args>` (pinned as above) to completion and resolves with its stdout; rejects on a
 * non-zero exit or after `timeoutMs`.
 */
export function runNode({ name, args, core, pin, timeoutMs }) {
  const command = pin ? 'taskset' : process.execPath
  const commandArgs = pin ? ['-c', String(core), process.execPath, ...args] : args
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] })
  const handle = { name, pid: child.pid, child, stderrTail: '', exited: false }
  running.add(handle)
  let stdout = ''
  child.stdout.on('data', (chunk) => {
    stdout += chunk.toString('utf8')
  })
  child.stderr.on('data', (chunk) => {
    handle.stderrTail = (handle.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES)
  })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stopProcess(handle)
      reject(new Error(`${name} did not finish within ${timeoutMs} ms\n--- ${name} stderr ---\n${handle.stderrTail}`))
    }, timeoutMs)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      handle.exited = true
      running.delete(handle)
      if (code === 0) resolve(stdout)
      else reject(new Error(`${name} exited (code ${code}, signal ${signal})\n--- ${name} stderr ---\n${handle.stderrTail}`))
    })
  })
}

/** SIGTERM by PID, then SIGKILL if it is still there after `graceMs`. */
export async function stopProcess(handle, graceMs = 3000) {
  if (handle.exited) return
  const exited = new Promise((resolve) => {
    if (handle.exited) resolve()
    else handle.child.once('exit', () => resolve())
  })
  try {
    process.kill(handle.pid, 'SIGTERM')
  } catch {
    return
  }
  const outcome = await Promise.race([exited.then(() => 'exited'), sleep(graceMs).then(() => 'timeout')])
  if (outcome === 'timeout' && !handle.exited) {
    try {
      process.kill(handle.pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
    await exited
  }
}

/** Stops every child still running, each by its own PID. */
export async function stopAll() {
  await Promise.all([...running].map((handle) => stopProcess(handle, 1000)))
}

/** Last resort on exit: synchronous SIGKILL by PID for anything still running. */
export function killAllNow() {
  for (const handle of running) {
    try {
      process.kill(handle.pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
  running.clear()
}

/**
 * Ctrl-C or a kill of a runner (a timeout, CI's cancel): its children are ended (by PID) and its
 * temporary directory (`workDir()`, when it has one) removed before it goes; `exit` alone never
 * fires on a signal. `what` names the run in the line it prints.
 */
export function stopOnSignals(what, workDir) {
  process.once('exit', killAllNow)
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping the ${what}'s processes`)
      void stopAll().finally(() => {
        killAllNow()
        const directory = workDir()
        if (directory !== undefined) rmSync(directory, { recursive: true, force: true })
        process.exit(signal === 'SIGINT' ? 130 : 143)
      })
    })
  }
}
