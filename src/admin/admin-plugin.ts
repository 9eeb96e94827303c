import type { FastifyInstance } from 'fastify'

export interface AdminDeps {
  /** True once the config is loaded and the traffic listener is up, false while draining (SPEC 9). */
  isReady: () => boolean
}

/** The admin listener's probes; they stay open without the admin token (SPEC 9). */
export async function adminPlugin(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  app.get('/healthz', async function healthz() {
    return { status: 'ok' }
  })
  app.get('/readyz', async function readyz(_request, reply) {
    const ready = deps.isReady()
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready' })
  })
}
