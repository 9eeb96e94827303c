import type { IncomingHttpHeaders } from 'node:http'
import type { SimulatorCall } from './types.js'

export interface ReceivedRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
}

function pathOf (url: string): string {
  const queryStart = url.indexOf('?')
  return queryStart === -1 ? url : url.slice(0, queryStart)
}

/** Every request that reached the simulator, so tests can assert on what the gateway sent upstream. */
export class CallRecorder {
  /** One array for the recorder's life: tests may hold on to it across resets. */
  readonly calls: SimulatorCall[] = []
  readonly #byRequest = new WeakMap<object, SimulatorCall>()

  record (request: ReceivedRequest): void {
    const call: SimulatorCall = {
      method: request.method,
      path: pathOf(request.url),
      url: request.url,
      headers: { ...request.headers },
      body: undefined
    }
    this.calls.push(call)
    this.#byRequest.set(request, call)
  }

  /** Bodies arrive after the request was recorded: parsing runs after onRequest hooks. */
  attachBody (request: object, body: unknown): void {
    const call = this.#byRequest.get(request)
    if (call !== undefined) call.body = body
  }

  count (method: string, path: string | RegExp): number {
    const wantedMethod = method.toUpperCase()
    return this.calls.filter((call) =>
      call.method.toUpperCase() === wantedMethod &&
      (typeof path === 'string' ? call.path === path : path.test(call.path))
    ).length
  }

  reset (): void {
    this.calls.length = 0
  }
}
