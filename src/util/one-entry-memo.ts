/**
 * A pure string function's last input and result, kept so that the same input again costs a
 * string compare instead of the computation. Meant for one owner that sees the same input over
 * and over (a kept-alive connection presenting one credential, kernel/connection-memo.ts); any
 * other input, or another function, simply replaces the entry. Private fields: what it holds
 * (a credential, once) never shows when an object holding it is printed.
 */
export class OneEntryMemo {
  #compute: ((input: string) => string) | undefined = undefined
  #input = ''
  #result = ''

  /** `compute(input)`, or its result for the previous call when both `input` and `compute` are the same. */
  of(input: string, compute: (input: string) => string): string {
    if (compute === this.#compute && input === this.#input) return this.#result
    const result = compute(input)
    this.#compute = compute
    this.#input = input
    this.#result = result
    return result
  }
}
