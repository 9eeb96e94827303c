import { readdirSync, readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { parseAllDocuments, parseDocument, stringify } from 'yaml'
import { parseConfigText } from '../../src/config/load-config.js'
import { substituteEnv, type EnvProblem } from '../../src/config/substitute-env.js'
import { refusingOrigin } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { useRedisServer } from '../helpers/redis-server.js'
import { ROOT } from '../helpers/spawn-cli.js'
import { useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { until } from '../helpers/until.js'

/*
 * deploy/kubernetes/ and deploy/grafana/ (SPEC 18) are files no code of the gateway reads, so
 * nothing else notices when they drift from it. This holds them to the gateway: the manifests'
 * ports, probe paths and addresses to the config they ship (loaded by the gateway's own loader,
 * SPEC 8, with the environment the Deployment gives it), the probes and the metrics path to a
 * gateway running that config, and every metric and label the dashboard queries to that
 * gateway's /metrics (SPEC 17).
 */

interface Metadata {
  name: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
interface EnvVar {
  name: string
  value?: string
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; fieldRef?: { fieldPath: string } }
}
interface ContainerPort {
  name?: string
  containerPort: number
}
interface Probe {
  httpGet?: { path: string; port: number | string }
  tcpSocket?: { port: number | string }
  exec?: { command: string[] }
}
interface Container {
  name: string
  image: string
  args?: string[]
  env?: EnvVar[]
  ports?: ContainerPort[]
  livenessProbe?: Probe
  readinessProbe?: Probe
  lifecycle?: { preStop?: { exec?: { command: string[] } } }
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> }
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; runAsNonRoot?: boolean; capabilities?: { drop?: string[] } }
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[]
}
interface PodSpec {
  terminationGracePeriodSeconds?: number
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }
  containers: Container[]
  volumes?: { name: string; configMap?: { name: string } }[]
}
interface Manifest {
  apiVersion: string
  kind: string
  metadata: Metadata
  data?: Record<string, string>
  spec?: {
    replicas?: number
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>
    serviceName?: string
    template?: { metadata: Metadata; spec: PodSpec }
    ports?: { name?: string; port: number; targetPort?: number | string }[]
    maxUnavailable?: number | string
    minAvailable?: number | string
  }
}

const KUBERNETES_DIR = join(ROOT, 'deploy', 'kubernetes')
const DASHBOARD_PATH = join(ROOT, 'deploy', 'grafana', 'v4gw-dashboard.json')

function readManifests(): Manifest[] {
  const files = readdirSync(KUBERNETES_DIR).filter((name) => name.endsWith('.yaml'))
  const manifests: Manifest[] = []
  for (const file of files) {
    for (const document of parseAllDocuments(readFileSync(join(KUBERNETES_DIR, file), 'utf8'), { uniqueKeys: true })) {
      expect(document.errors.map(String), file).toEqual([])
      const value = document.toJS() as Manifest | null
      if (value !== null) manifests.push(value)
    }
  }
  return manifests
}

const manifests = readManifests()

function only(kind: string, name: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind && manifest.metadata.name === name)
  expect(found, `${kind} ${name}`).toHaveLength(1)
  return found[0] as Manifest
}

function podSpec(manifest: Manifest): PodSpec {
  const spec = manifest.spec?.template?.spec
  if (spec === undefined) throw new Error(`${manifest.kind} ${manifest.metadata.name} has no pod template`)
  return spec
}

const deployment = only('Deployment', 'v4gw')
const gatewayPod = podSpec(deployment)
const gatewayContainer = gatewayPod.containers.find((container) => container.name === 'v4gw') as Container
const redisSet = only('StatefulSet', 'v4gw-redis')

/** The environment the Deployment gives the gateway; a value from a Secret is left unset, as when the optional Secret is absent. */
/** The Deployment's environment, as far as the manifests give it (Secrets left out: optional). */
function deploymentEnv(): Record<string, string> {
  // A value per pod (the downward API's fieldRef) would make each pod's config, and its hash, its own.
  expect((gatewayContainer.env ?? []).filter((entry) => entry.valueFrom?.fieldRef !== undefined)).toEqual([])
  return Object.fromEntries((gatewayContainer.env ?? []).filter((entry) => entry.value !== undefined).map((entry) => [entry.name, entry.value as string]))
}

/** The config file the Deployment runs: `--config PATH`, a file of a mounted ConfigMap. */
function shippedConfigText(): { path: string; text: string } {
  const args = gatewayContainer.args ?? []
  const path = args[args.indexOf('--config') + 1] as string
  expect(args.indexOf('--config')).toBeGreaterThanOrEqual(0)
  const mount = (gatewayContainer.volumeMounts ?? []).find((candidate) => path.startsWith(`${candidate.mountPath}/`))
  expect(mount, `a volume mounted above ${path}`).toBeDefined()
  const volume = (gatewayPod.volumes ?? []).find((candidate) => candidate.name === mount?.name)
  const configMap = only('ConfigMap', volume?.configMap?.name ?? '(no configMap volume)')
  const key = path.slice((mount?.mountPath.length ?? 0) + 1)
  const text = configMap.data?.[key]
  expect(text, `key ${key} of ConfigMap ${configMap.metadata.name}`).toBeTypeOf('string')
  return { path, text: text as string }
}

const shipped = shippedConfigText()
// The project's own loader: the same checks and substitutions as `v4gw --config` at start (SPEC 8).
const config = parseConfigText(shipped.text, shipped.path, deploymentEnv())

function containerPort(container: Container, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port
  return container.ports?.find((candidate) => candidate.name === port)?.containerPort
}

function matches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  return selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([key, value]) => labels?.[key] === value)
}

const WILDCARDS = ['0.0.0.0', '::']

describe('deploy/kubernetes against the config it ships', () => {
  it('names its ports as the config listens: http the traffic listener, admin the admin listener, both on every address of the pod', () => {
    expect(containerPort(gatewayContainer, 'http')).toBe(config.listen.port)
    expect(containerPort(gatewayContainer, 'admin')).toBe(config.admin.port)
    // The kubelet's probes and Prometheus come from outside the pod: a loopback admin listener fails every probe (SPEC 18).
    expect(WILDCARDS).toContain(config.admin.host)
    expect(WILDCARDS).toContain(config.listen.host)
    expect(deploymentEnv().V4GW_ADMIN_HOST).toBe('0.0.0.0')
  })

  it('probes liveness on /healthz and readiness on /readyz of the admin port (SPEC 9)', () => {
    expect(gatewayContainer.livenessProbe?.httpGet?.path).toBe('/healthz')
    expect(gatewayContainer.readinessProbe?.httpGet?.path).toBe('/readyz')
    expect(containerPort(gatewayContainer, gatewayContainer.livenessProbe?.httpGet?.port)).toBe(config.admin.port)
    expect(containerPort(gatewayContainer, gatewayContainer.readinessProbe?.httpGet?.port)).toBe(config.admin.port)
  })

  it('points Prometheus at /metrics on the admin port', () => {
    const annotations = deployment.spec?.template?.metadata.annotations ?? {}
    expect(annotations['prometheus.io/scrape']).toBe('true')
    expect(Number(annotations['prometheus.io/port'])).toBe(config.admin.port)
    expect(annotations['prometheus.io/path']).toBe('/metrics')
  })

  it('runs as a non-root user with a read-only root filesystem, no capabilities and no privilege escalation', () => {
    expect(gatewayPod.securityContext?.runAsNonRoot).toBe(true)
    // The image names its user (`node`); the kubelet refuses runAsNonRoot unless the uid is numeric.
    expect(gatewayPod.securityContext?.runAsUser).toBeGreaterThan(0)
    expect(gatewayContainer.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
    for (const container of podSpec(redisSet).containers) {
      expect(container.securityContext, container.name).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
    }
    expect(podSpec(redisSet).securityContext?.runAsNonRoot).toBe(true)
  })

  it('asks for CPU and memory and caps memory', () => {
    expect(gatewayContainer.resources?.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) })
    expect(gatewayContainer.resources?.limits?.memory).toEqual(expect.any(String))
  })

  it('gives a stopping pod longer than its preStop pause and the drain (SPEC 9: in-flight requests finish within shutdown.graceMs)', () => {
    const preStop = gatewayContainer.lifecycle?.preStop?.exec?.command ?? []
    const pauseSeconds = preStop[0] === 'sleep' ? Number(preStop[1]) : 0
    const neededMs = pauseSeconds * 1000 + config.shutdown.graceMs + config.shutdown.idleCloseMs
    expect((gatewayPod.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(neededMs)
  })

  it('sends the Service to the traffic port, and the Service and the PodDisruptionBudget select the gateway pods', () => {
    const service = only('Service', 'v4gw')
    const podLabels = deployment.spec?.template?.metadata.labels
    expect(matches(service.spec?.selector as Record<string, string>, podLabels)).toBe(true)
    expect(matches(deployment.spec?.selector?.matchLabels, podLabels)).toBe(true)
    expect(service.spec?.ports?.map((port) => containerPort(gatewayContainer, port.targetPort))).toEqual([config.listen.port])
    const budget = only('PodDisruptionBudget', 'v4gw')
    expect(matches(budget.spec?.selector?.matchLabels, podLabels)).toBe(true)
    expect(budget.spec?.maxUnavailable ?? budget.spec?.minAvailable).toBeDefined()
    // With one replica a budget of one unavailable pod lets a drain take the only one.
    expect(deployment.spec?.replicas).toBeGreaterThan(1)
  })

  it('shares the session map in the Redis it ships, with AOF persistence (SPEC 12, SPEC 18)', () => {
    expect(config.sessions.store).toBe('redis')
    const url = new URL(config.sessions.redis.url as string)
    const service = only('Service', url.hostname)
    expect(service.spec?.ports?.map((port) => port.port)).toContain(Number(url.port || 6379))
    expect(matches(service.spec?.selector as Record<string, string>, redisSet.spec?.template?.metadata.labels)).toBe(true)
    expect(redisSet.spec?.serviceName).toBe(service.metadata.name)
    const redis = podSpec(redisSet).containers[0] as Container
    const args = redis.args ?? []
    expect(args[args.indexOf('--appendonly') + 1]).toBe('yes')
    for (const port of service.spec?.ports ?? []) expect(containerPort(redis, port.targetPort)).toBe(port.port)
  })
})

/** One metric's exposition: its declared type and the label names seen on its samples. */
interface Exposed {
  type: string
  labels: Set<string>
  /** The series, each as its labels and values, to hold a query's `label="value"` to one that occurs. */
  series: Record<string, string>[]
}

/** Prometheus text (exposition format 0.0.4) as metric name → type and labels; a histogram's samples count under its own name. */
function readExposition(text: string): Map<string, Exposed> {
  const metrics = new Map<string, Exposed>()
  for (const line of text.split('\n')) {
    const declared = /^# TYPE (\S+) (\S+)$/.exec(line)
    if (declared !== null) {
      metrics.set(declared[1] as string, { type: declared[2] as string, labels: new Set(), series: [] })
      continue
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+/.exec(line)
    if (sample === null) continue
    const name = sample[1] as string
    const base = metrics.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '')
    const series: Record<string, string> = {}
    for (const label of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      metrics.get(base)?.labels.add(label[1] as string)
      series[label[1] as string] = label[2] as string
    }
    metrics.get(base)?.series.push(series)
  }
  return metrics
}

/** The exposed metric a query's name stands for: itself, or a histogram's `_bucket`, `_sum` or `_count`. */
function exposedFor(metrics: Map<string, Exposed>, name: string): Exposed | undefined {
  const exact = metrics.get(name)
  if (exact !== undefined) return exact
  const histogram = /^(.*)_(bucket|sum|count)$/.exec(name)
  const base = histogram === null ? undefined : metrics.get(histogram[1] as string)
  return base?.type === 'histogram' ? base : undefined
}

interface DashboardPanel {
  title?: string
  type: string
  targets?: { expr?: string }[]
  panels?: DashboardPanel[]
}
interface Dashboard {
  panels: DashboardPanel[]
  templating?: { list: { name: string; type: string; query?: string | { query?: string } }[] }
}

const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as Dashboard

/** Every PromQL query of the dashboard, with where it is. */
function dashboardQueries(): { where: string; query: string }[] {
  const queries: { where: string; query: string }[] = []
  const visit = (panels: DashboardPanel[]): void => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) if (target.expr !== undefined) queries.push({ where: `panel "${panel.title ?? ''}"`, query: target.expr })
      visit(panel.panels ?? [])
    }
  }
  visit(dashboard.panels)
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query
    if (query !== undefined) queries.push({ where: `variable $${variable.name}`, query })
  }
  return queries
}

/** A label a query uses, with the metric it must be on: the one a selector or label_values names, else (a grouping or a join) any metric of the query. */
interface UsedLabel {
  label: string
  metric: string | undefined
}

/**
 * The label names a query uses: in selectors, in by/without, in the vector matching of a join
 * (on/ignoring, group_left/group_right), and label_values' second argument.
 */
function labelsOf(query: string): UsedLabel[] {
  const labels: UsedLabel[] = []
  for (const selector of query.matchAll(/(\bv4gw_[a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g)) {
    for (const matcher of (selector[2] as string).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) labels.push({ label: matcher[1] as string, metric: selector[1] })
  }
  for (const grouping of query.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g)) {
    for (const label of (grouping[1] as string).split(',').map((name) => name.trim())) if (label !== '') labels.push({ label, metric: undefined })
  }
  for (const values of query.matchAll(/label_values\(\s*(v4gw_[a-zA-Z0-9_:]*)?[^,]*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)/g)) labels.push({ label: values[2] as string, metric: values[1] })
  return labels
}

/** A legacy request whose body has not all come: it holds an in-flight slot until the socket goes. */
function holdRequest(baseUrl: string): Socket {
  const { hostname, port } = new URL(baseUrl)
  const socket = connect({ host: hostname, port: Number(port) })
  socket.on('error', () => undefined)
  socket.write('POST /v1/headless/runs HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer demo-token-alice\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"input"')
  return socket
}

// Labels Prometheus adds when it scrapes (and Kubernetes service discovery relabels to), which a gateway's own /metrics never shows.
const SCRAPE_LABELS = new Set(['instance', 'job', 'pod', 'namespace'])

describe('the config of deploy/kubernetes, running, and deploy/grafana against its /metrics', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const dir = mkdtempSync(join(tmpdir(), 'v4gw-deploy-'))
  const configPath = join(dir, 'gateway.yaml')
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  // The shipped file with the Deployment's environment; only the two addresses this machine has
  // instead of the cluster's (the V4 API, the Redis Service) are the test's own, and `limits`
  // the test may tighten. The helper binds both listeners to 127.0.0.1 on free ports. Written
  // out too, for POST /admin/reload.
  function deployedConfig(upstreamUrl: string, limits: Record<string, unknown> = {}, deprecation?: Record<string, unknown>): Record<string, unknown> {
    const problems: EnvProblem[] = []
    const env = { ...deploymentEnv(), V4GW_UPSTREAM_URL: upstreamUrl, V4GW_REDIS_URL: redis.url }
    const raw = substituteEnv(parseDocument(shipped.text).toJS(), env, problems) as Record<string, unknown>
    expect(problems).toEqual([])
    if (Object.keys(limits).length > 0) raw.limits = { ...(raw.limits as Record<string, unknown> | undefined), ...limits }
    if (deprecation !== undefined) {
      // SPEC 13's series need a deprecated route: every tenant's legacy routes get one.
      for (const tenant of Object.values(raw.tenants as Record<string, { legacy?: Record<string, unknown>; migration?: Record<string, unknown> }>)) {
        tenant.legacy = { ...tenant.legacy, deprecation }
        // SPEC 14's v4gw_legacy_requests_total{served_by} counts tenants that use stages: a stage written, its default.
        tenant.migration = { ...tenant.migration, stage: 'translate' }
      }
    }
    writeFileSync(configPath, stringify(raw))
    return raw
  }
  const gw = useGateway(() => deployedConfig(sim.url), { configPath })

  it('answers the Deployment probes with 200 and the annotated metrics path with Prometheus text', async () => {
    for (const probe of [gatewayContainer.livenessProbe, gatewayContainer.readinessProbe]) {
      expect((await send(gw.adminUrl, probe?.httpGet?.path ?? '(none)')).status).toBe(200)
    }
    const metrics = await send(gw.adminUrl, deployment.spec?.template?.metadata.annotations?.['prometheus.io/path'] ?? '(none)')
    expect(metrics.status).toBe(200)
    expect(metrics.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/)
  })

  it('answers /admin/* called with Host v4gw-admin, as another pod calls a pod\'s IP with the token (SPEC 18: a Host it names)', async () => {
    // The test's peer is loopback, so no token is asked; the Host is what another pod would send.
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: { host: 'v4gw-admin:9901' } })).status).toBe(200)
    // A pod IP as Host names nothing the listener knows (it binds 0.0.0.0): refused.
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: { host: '10.42.7.19:9901' } })).status).toBe(403)
  })

  it('exposes every metric the dashboard queries, with every label it selects or groups by (SPEC 17)', async () => {
    // Series exist once something happened: a legacy call, a legacy session call (a session-map
    // event), a native call, a refused credential, a reload, an upstream failure and shed load.
    const alice = { authorization: 'Bearer demo-token-alice' }
    expect((await send(gw.url, '/v1/headless/runs', { headers: alice, json: { input: 1 } })).status).toBe(200)
    expect((await send(gw.url, '/v1/runs/invoke', { headers: alice, json: { input: 1, stateId: 'dashboard' } })).status).toBe(200)
    expect((await send(gw.url, '/v4/execute', { headers: alice, json: { input: 1 } })).status).toBe(200)
    expect((await send(gw.url, '/v1/headless/runs', { json: { input: 1 } })).json.error.code).toBe('AUTH_INVALID')
    // The reload: the same file, with a V4 address where nothing listens and room for one request
    // in flight (both reload without a restart, SPEC 8).
    deployedConfig(await refusingOrigin(), { maxInFlight: 1 }, { date: '2026-01-01T00:00:00Z' })
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    // v4gw_legacy_deprecation_total{tenant,route,action}: a legacy call to the route the reload deprecated.
    expect((await send(gw.url, '/v1/headless/runs', { json: { input: 1 } })).headers.deprecation).toMatch(/^@\d+$/)
    // v4gw_upstream_failures_total{tenant,upstream,cause}: a refused V4 call.
    expect((await send(gw.url, '/v4/execute', { headers: alice, json: { input: 1 } })).json.error.code).toBe('UPSTREAM_UNAVAILABLE')
    // v4gw_load_shed_total{reason}: a request shed while another, its body unfinished, holds the one slot.
    const held = holdRequest(gw.url)
    try {
      await until(async () => /^v4gw_requests_in_flight 1$/m.test((await send(gw.adminUrl, '/metrics')).text))
      expect((await send(gw.url, '/v1/headless/runs', { headers: alice, json: { input: 1 } })).json.error.code).toBe('OVERLOADED')
    } finally {
      held.destroy()
    }

    const metrics = readExposition((await send(gw.adminUrl, '/metrics')).text)
    const queries = dashboardQueries()
    const panels = dashboard.panels.filter((panel) => panel.type !== 'row')
    expect(panels.length).toBeGreaterThan(0)
    // Every panel shows a gateway metric; a query on something else would go unchecked.
    for (const panel of panels) expect(panel.targets?.some((target) => /\bv4gw_/.test(target.expr ?? '')), panel.title).toBe(true)

    const missing: string[] = []
    for (const { where, query } of queries) {
      const names = [...query.matchAll(/\bv4gw_[a-zA-Z0-9_:]*/g)].map((match) => match[0])
      const exposed = names.map((name) => exposedFor(metrics, name))
      names.forEach((name, index) => {
        if (exposed[index] === undefined) missing.push(`${where}: no metric ${name}`)
      })
      const available = new Set(exposed.flatMap((metric) => (metric === undefined ? [] : [...metric.labels])))
      for (const { label, metric } of labelsOf(query)) {
        if (SCRAPE_LABELS.has(label)) continue
        // A selector's label must be on its own metric; a grouping's or a join's, on one of the query's.
        const on = metric === undefined ? available : exposedFor(metrics, metric)?.labels
        if (on?.has(label) !== true) missing.push(`${where}: no label ${label} on ${metric ?? names.join(', ')}`)
      }
    }
    expect(missing).toEqual([])

    // A selector's fixed values (`label="value"`) must be ones the gateway gives its series: a
    // query on a value that never occurs reads 0 and says nothing (a shed request carries its
    // tenant, so `tenant=""` never selected one).
    const neverOccurs: string[] = []
    for (const { where, query } of queries) {
      for (const selector of query.matchAll(/\b(v4gw_[a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)) {
        const fixed = [...(selector[2] as string).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"$]*)"/g)].map((matcher) => [matcher[1] as string, matcher[2] as string] as const)
        if (fixed.length === 0) continue
        const exposed = exposedFor(metrics, selector[1] as string)
        const matches = exposed?.series.some((series) => fixed.every(([label, value]) => (series[label] ?? '') === value))
        if (matches !== true) neverOccurs.push(`${where}: no series ${selector[0]}`)
      }
    }
    expect(neverOccurs).toEqual([])
  })
})
