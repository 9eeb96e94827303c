/** Milliseconds to three decimals (microseconds), as logs and `meta.timingMs` carry them. */
export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000
}
