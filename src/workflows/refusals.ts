/**
 * The latest refusals (a rerun signal the model refused, a rerun or schedule the queue refused), newest last.
 * A signal cannot answer its sender: `status.refused` and the workflow's current details show why instead.
 * Carried across continue-as-new as `rejected`.
 */
export class Refusals {
  static readonly KEEP = 20;
  readonly list: string[];

  constructor(carried: string[] = []) {
    this.list = [...carried];
  }

  add(message: string): void {
    this.list.push(message);
    if (this.list.length > Refusals.KEEP) this.list.shift();
  }

  get last(): string | undefined {
    return this.list[this.list.length - 1];
  }
}
