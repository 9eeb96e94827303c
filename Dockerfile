# v4-migration-gateway: multi-stage build, production dependencies only, non-root, HEALTHCHECK.
# Node 24 LTS (SPEC 18). No `# syntax=` line: BuildKit would fetch a frontend image to read it,
# and the builder's own Dockerfile frontend reads everything here.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force

FROM node:24-bookworm-slim
# The admin listener on every interface, so that kubelet probes and Prometheus reach it; off
# loopback, /admin/* needs admin.token (SPEC 18). The baked-in config reads both hosts from here;
# a mounted config sets its own (`${V4GW_ADMIN_HOST:-127.0.0.1}` keeps this variable in charge).
ENV NODE_ENV=production \
    V4GW_CONFIG=/app/config/gateway.yaml \
    V4GW_HOST=0.0.0.0 \
    V4GW_ADMIN_HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The default config is baked in; mount your own over /app/config (see docs/deploy.md).
COPY config ./config
USER node
EXPOSE 8080 9901
# Probes /healthz where the gateway's own config ($V4GW_CONFIG, env substituted) puts the admin
# listener, so a mounted config with another admin port stays healthy (name a config elsewhere
# with V4GW_CONFIG, not --config, which the HEALTHCHECK cannot see); it reads only admin.host
# and admin.port, so a broken edit elsewhere in the file does not make the container unhealthy.
# 0 healthy, 1 not; the probe gives up after 2 s, inside the 3 s timeout.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "dist/cli.js", "healthcheck"]
# Node runs as PID 1 here and handles SIGTERM itself: readiness false, drain, exit 0.
# A 32 MiB young generation: per-request objects die there instead of being promoted; a
# 128 MiB first old-space limit: the first full GC waits until the old space nears it (see
# docs/deploy.md); no allocation-site pretenuring: V8's guess sends streamed requests' objects to the
# old space, and each scavenge then promotes megabytes (docs/performance.md). The same flags
# as `npm start`.
ENTRYPOINT ["node", "--max-semi-space-size=32", "--initial-old-space-size=128", "--no-allocation-site-pretenuring", "dist/cli.js"]
