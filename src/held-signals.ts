/**
 * SIGTERM, SIGINT and SIGHUP held from the moment this is called until `release`, to be acted on
 * once the gateway is up. Without a listener, Node's default would end the process on any of them
 * while it loads and starts (a few hundred ms, longer with a slow first Redis attempt), by signal
 * rather than with a drain and exit 0.
 */
export interface HeldSignals {
  /** The first stop signal (SIGTERM, SIGINT) that came, if any. */
  readonly stop: NodeJS.Signals | undefined
  /** Whether a SIGHUP came. */
  readonly reload: boolean
  /** Stops holding: put the real listeners on first, or Node's defaults are back in between. */
  release(): void
}

export function holdSignals(): HeldSignals {
  let stop: NodeJS.Signals | undefined
  let reload = false
  const holdStop = (signal: NodeJS.Signals): void => {
    stop ??= signal
  }
  const holdReload = (): void => {
    reload = true
  }
  process.on('SIGTERM', holdStop)
  process.on('SIGINT', holdStop)
  process.on('SIGHUP', holdReload)
  return {
    get stop() {
      return stop
    },
    get reload() {
      return reload
    },
    release() {
      process.off('SIGTERM', holdStop)
      process.off('SIGINT', holdStop)
      process.off('SIGHUP', holdReload)
    }
  }
}
