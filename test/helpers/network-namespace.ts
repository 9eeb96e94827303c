import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { ownedBySuite } from './teardown.js'

const run = promisify(execFile)

/**
 * A peer that is not loopback, made for the test: a network namespace joined to this one by a
 * veth pair on a private /30 (10.203.x.y). A request sent from inside it reaches this machine's
 * listeners from `peerAddress`, as a request from another host would, without using any of the
 * machine's own interface addresses (which are local, and could be a loopback-like shortcut).
 * Needs `ip` from iproute2 and root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
 */
export interface NetworkNamespace {
  name: string
  /** This side's end of the pair: where the namespace reaches the machine. */
  hostAddress: string
  /** The namespace's end: the peer address the machine sees. */
  peerAddress: string
  /** Runs `node -e script ...args` inside the namespace; resolves with what it printed on stdout. */
  node(script: string, args: string[], timeoutMs?: number): Promise<string>
}

async function ip(args: string[]): Promise<string> {
  return (await run('ip', args, { timeout: 10_000 })).stdout
}

/** A /30 of 10.203.0.0/16 that no interface of this machine has an address in yet. */
async function freeSubnet(): Promise<{ hostAddress: string; peerAddress: string }> {
  const taken = (await ip(['-o', '-4', 'addr', 'show'])).match(/\binet (10\.203\.\d+\.\d+)/g)?.map((inet) => inet.slice('inet '.length)) ?? []
  for (let attempt = 0; attempt < 50; attempt++) {
    const third = randomBytes(1)[0] as number
    const base = ((randomBytes(1)[0] as number) % 64) * 4
    const inBlock = taken.some((address) => address.startsWith(`10.203.${third}.`) && Math.floor(Number(address.split('.')[3]) / 4) * 4 === base)
    if (!inBlock) return { hostAddress: `10.203.${third}.${base + 1}`, peerAddress: `10.203.${third}.${base + 2}` }
  }
  throw new Error('no free /30 in 10.203.0.0/16')
}

async function removeQuietly(args: string[]): Promise<void> {
  await ip(args).catch(() => undefined)
}

async function createNamespace(): Promise<NetworkNamespace & { remove(): Promise<void> }> {
  try {
    await ip(['netns', 'list'])
  } catch (error) {
    throw new Error(`this test needs \`ip netns\` (Debian's iproute2) run as root, to make a peer that is not loopback; it failed: ${(error as Error).message}`)
  }
  // Unique per run, and short: an interface name has at most 15 characters.
  const id = randomBytes(4).toString('hex')
  const name = `v4gw-test-${process.pid}-${id}`
  const hostSide = `v4gh${id}`
  const peerSide = `v4gn${id}`
  const remove = async (): Promise<void> => {
    // Deleting one end of a veth pair deletes both; the namespace goes with what is left in it.
    await removeQuietly(['link', 'del', hostSide])
    await removeQuietly(['netns', 'del', name])
  }
  try {
    const { hostAddress, peerAddress } = await freeSubnet()
    await ip(['netns', 'add', name])
    await ip(['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', peerSide])
    await ip(['link', 'set', peerSide, 'netns', name])
    await ip(['addr', 'add', `${hostAddress}/30`, 'dev', hostSide])
    await ip(['link', 'set', hostSide, 'up'])
    await ip(['-n', name, 'addr', 'add', `${peerAddress}/30`, 'dev', peerSide])
    await ip(['-n', name, 'link', 'set', peerSide, 'up'])
    await ip(['-n', name, 'link', 'set', 'lo', 'up'])
    return {
      name,
      hostAddress,
      peerAddress,
      async node(script, args, timeoutMs = 10_000) {
        return (await run('ip', ['netns', 'exec', name, process.execPath, '-e', script, ...args], { timeout: timeoutMs })).stdout
      },
      remove
    }
  } catch (error) {
    await remove()
    throw new Error(`could not set up the network namespace ${name}: ${(error as Error).message}`, { cause: error })
  }
}

/** A network namespace for every test of the enclosing describe, removed with its veth pair after the last one, passed or failed. */
export function useNetworkNamespace(): NetworkNamespace {
  return ownedBySuite('useNetworkNamespace', createNamespace, (namespace) => namespace.remove())
}

/**
 * An IPv4 address no host answers: a connect to it neither completes nor fails, as when a
 * firewall drops SYNs. It is a TEST-NET-2 address (198.51.100.0/24, RFC 5737), routed from this
 * machine by a /32 host route via the peer end of a network namespace's veth pair; the namespace
 * does not forward it and routes it to a blackhole as well, so the SYN is dropped there without
 * an ICMP error or a reset whether forwarding is on or off. Needs only `ip` and root.
 */
export interface SilentAddress {
  address: string
  /** The namespace the address is routed into. */
  namespace: NetworkNamespace
}

async function createSilentAddress(): Promise<SilentAddress & { remove(): Promise<void> }> {
  const namespace = await createNamespace()
  let address: string | undefined
  const remove = async (): Promise<void> => {
    // The route would go with the veth pair; it is removed first so none outlives a failed removal.
    if (address !== undefined) await removeQuietly(['route', 'del', `${address}/32`, 'via', namespace.peerAddress])
    await namespace.remove()
  }
  try {
    // A host of the /24 that no route of this machine names yet (another run may hold one).
    for (let attempt = 0; attempt < 50 && address === undefined; attempt++) {
      const candidate = `198.51.100.${1 + ((randomBytes(1)[0] as number) % 254)}`
      if ((await ip(['route', 'show', `${candidate}/32`])).trim() !== '') continue
      try {
        await ip(['route', 'add', `${candidate}/32`, 'via', namespace.peerAddress])
        address = candidate
      } catch (error) {
        if (!/File exists/.test((error as Error).message)) throw error
      }
    }
    if (address === undefined) throw new Error('no free host of 198.51.100.0/24 to route')
    // A blackhole drops without an answer; without it a namespace that forwards would send ICMP "network unreachable".
    await ip(['-n', namespace.name, 'route', 'add', 'blackhole', `${address}/32`])
    return { address, namespace, remove }
  } catch (error) {
    await remove()
    throw new Error(`could not route a silent address into ${namespace.name}: ${(error as Error).message}`, { cause: error })
  }
}

/** A silent address for every test of the enclosing describe, its route and namespace removed after the last one, passed or failed. */
export function useSilentAddress(): SilentAddress {
  return ownedBySuite('useSilentAddress', createSilentAddress, (silent) => silent.remove())
}
