/**
 * A pure string function's last input and result, kept so that the same input again costs a
 * string compare instead of the computation. Meant for one owner that sees the same input over
 * and over (a kept-alive connection presenting one credential, kernel/connection-memo.ts); any
 * other input simply replaces the entry.
 */
export class OneEntryMemo {
  private input: string | undefined = undefined
  private result = ''

  /** `compute(input)`, or its result for the previous call when `input` is the same string. */
  of(input: string, compute: (input: string) => string): string {
    if (input === this.input) return this.result
    const result = compute(input)
    this.input = input
    this.result = result
    return result
  }
}
