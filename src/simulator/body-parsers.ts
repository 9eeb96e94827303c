import type { FastifyInstance, FastifyRequest } from 'fastify'
import { SimulatorError } from './errors.js'

export type BodyListener = (request: FastifyRequest, body: unknown) => void

type ParserDone = (error: Error | null, body?: unknown) => void

// Structured-syntax JSON types (RFC 6839 3.1), e.g. application/merge-patch+json.
const STRUCTURED_JSON_TYPE = /^application\/[\w!#$%&'*.^`|~-]+\+json(?:;|$)/

function asText (body: string | Buffer): string {
  return typeof body === 'string' ? body : body.toString('utf8')
}

// A "__proto__" member is refused outright, as fastify's default parser does, rather than
// trusting every later merge of the body to be safe from prototype poisoning.
function refuseProtoKey (key: string, value: unknown): unknown {
  if (key === '__proto__') throw new SyntaxError('__proto__ is not allowed in a request body')
  return value
}

/**
 * Replaces fastify's parsers: JSON media types are parsed (an empty body is "no body" rather than
 * fastify's 400), anything else with content is 400 INVALID_REQUEST instead of 415. Each body is
 * handed to `onBody` as soon as it is read, so requests rejected later (or for bad JSON) still
 * show what arrived.
 */
export function installBodyParsers (app: FastifyInstance, onBody: BodyListener): void {
  function parseJsonBody (request: FastifyRequest, body: string | Buffer, done: ParserDone): void {
    const text = asText(body)
    if (text.trim() === '') {
      done(null, undefined)
      return
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text, refuseProtoKey)
    } catch {
      onBody(request, text)
      done(new SimulatorError('INVALID_REQUEST', 'request body is not valid JSON'))
      return
    }
    onBody(request, parsed)
    done(null, parsed)
  }

  function refuseNonJsonBody (request: FastifyRequest, body: string | Buffer, done: ParserDone): void {
    const text = asText(body)
    if (text.trim() === '') {
      done(null, undefined)
      return
    }
    onBody(request, text)
    done(new SimulatorError('INVALID_REQUEST', 'request body must be JSON (content-type: application/json)'))
  }

  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody)
  app.addContentTypeParser(STRUCTURED_JSON_TYPE, { parseAs: 'string' }, parseJsonBody)
  app.addContentTypeParser('*', { parseAs: 'string' }, refuseNonJsonBody)
}
