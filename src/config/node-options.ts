/** NODE_OPTIONS as the process got it: flags Node applied without them being on its command line. */
export function nodeOptions(env: Record<string, string | undefined> = process.env): string | undefined {
  return env.NODE_OPTIONS
}

/** `V4GW_NODE_FLAGS=off`: run on Node's defaults, without the production flags (node-flags.ts). */
export function productionFlagsOff(env: Record<string, string | undefined> = process.env): boolean {
  return env.V4GW_NODE_FLAGS === 'off'
}
