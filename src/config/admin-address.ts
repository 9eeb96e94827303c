import { readFile } from 'node:fs/promises'
import { isIPv6 } from 'node:net'
import { isMap, parseDocument } from 'yaml'
import { isPlainObject } from '../util/is-plain-object.js'
import { substituteEnv } from './substitute-env.js'
import { blankUnquotedPlaceholders } from './unquoted-placeholders.js'

/** The schema's defaults for `admin.host` and `admin.port` (schema.ts). */
export const DEFAULT_ADMIN_HOST = '127.0.0.1'
export const DEFAULT_ADMIN_PORT = 9901

export interface AdminAddress {
  /** Where the admin listener is: a wildcard host is given as the loopback address to dial. */
  host: string
  port: number
  /** What was read otherwise than as written (a default taken, a file not read), for a person. */
  notes: string[]
}

/**
 * The admin listener's address as `v4gw healthcheck` reads it (SPEC 18): `admin.host` and
 * `admin.port` only, after the gateway's env substitution. Nothing else of the file counts, so
 * that an edit that breaks another key (which the running gateway ignores until a reload that
 * rejects it) cannot make a healthy container unhealthy: a key missing, empty (a placeholder
 * without a value) or not valid takes its default, and a file that cannot be read or parsed
 * gives both defaults. No schema is loaded: the check runs every few seconds.
 */
export async function readAdminAddress(path: string, env: Record<string, string | undefined> = process.env): Promise<AdminAddress> {
  const notes: string[] = []
  let admin: Record<string, unknown> = {}
  try {
    admin = adminSection(await readFile(path, 'utf8'))
  } catch (error) {
    notes.push(`cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'unknown error'}): using the default admin address`)
  }
  // The substitution's problems (an unset variable without a default) leave "": the default, below.
  const substituted = substituteEnv({ host: admin.host, port: admin.port }, env, []) as Record<string, unknown>
  const host = typeof substituted.host === 'string' && substituted.host !== '' ? substituted.host : undefined
  const port = asPort(substituted.port)
  if (admin.host !== undefined && host === undefined) notes.push(`admin.host is empty or not a string: using ${DEFAULT_ADMIN_HOST}`)
  if (admin.port !== undefined && port === undefined) notes.push(`admin.port is empty or not a port number: using ${DEFAULT_ADMIN_PORT}`)
  return { host: dialledHost(host ?? DEFAULT_ADMIN_HOST), port: port ?? DEFAULT_ADMIN_PORT, notes }
}

/** Not strict: a duplicated key elsewhere, or a parse error after the admin section, must not matter. */
const LENIENT = { uniqueKeys: false, logLevel: 'silent', merge: true } as const

/**
 * The `admin` mapping of a YAML or JSON file (JSON is YAML), however broken the rest is. An
 * unquoted `${…}` in a flow collection (SPEC 8's own style) would break the parse from there on,
 * admin section included: such placeholders are blanked first, as the loader does
 * (unquoted-placeholders.ts), and an admin value that was one is taken as not set.
 */
function adminSection(text: string): Record<string, unknown> {
  const { text: readable, placeholders } = blankUnquotedPlaceholders(text, (blanked) => parseDocument(blanked, LENIENT).errors)
  const document = parseDocument(readable, LENIENT)
  let parsed: unknown
  try {
    parsed = document.toJS()
  } catch {
    return {}
  }
  const admin = isPlainObject(parsed) ? parsed.admin : undefined
  if (!isPlainObject(admin)) return {}
  const node = document.get('admin', true)
  if (placeholders.length === 0 || !isMap(node)) return admin
  const section = { ...admin }
  for (const key of ['host', 'port']) {
    const range = (node.get(key, true) as { range?: [number, number, number] } | undefined)?.range
    if (range !== undefined && placeholders.some((offset) => offset >= range[0] && offset < range[1])) delete section[key]
  }
  return section
}

/** The schema's port: an integer from 0 to 65535, or a whole-number string (a substituted placeholder). */
function asPort(value: unknown): number | undefined {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value
  return typeof number === 'number' && Number.isInteger(number) && number >= 0 && number <= 65535 ? number : undefined
}

/** A wildcard is listened on, not dialled: its loopback address is (SPEC 18). */
function dialledHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1'
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  if (isIPv6(bare)) return new URL(`http://[${bare}]`).hostname === '[::]' ? '::1' : bare
  return host
}
