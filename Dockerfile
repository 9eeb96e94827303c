# syntax=docker/dockerfile:1
# v4-migration-gateway: multi-stage build, production dependencies only, non-root, HEALTHCHECK.
# Node 24 LTS (SPEC 18).

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
ENV NODE_ENV=production \
    V4GW_CONFIG=/app/config/gateway.yaml \
    V4GW_HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The default config is baked in; mount your own over /app/config (see docs/deploy.md).
COPY config ./config
USER node
EXPOSE 8080 9901
# The admin listener binds 127.0.0.1 by default, which is where the probe runs from.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.V4GW_ADMIN_PORT || 9901) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node runs as PID 1 here and handles SIGTERM itself: readiness false, drain, exit 0.
# A 32 MiB young generation: per-request objects die there instead of being promoted; a
# 128 MiB first old-space limit: full GCs come about every 15 s under load instead of every
# 2-6 s; no allocation-site pretenuring: V8's guess sends streamed requests' objects to the
# old space, and each scavenge then promotes megabytes (docs/performance.md). The same flags
# as `npm start`.
ENTRYPOINT ["node", "--max-semi-space-size=32", "--initial-old-space-size=128", "--no-allocation-site-pretenuring", "dist/cli.js"]
