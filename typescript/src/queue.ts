/** A bounded async queue between a producer and one consumer: `put` waits while it is full,
 * `close` ends the consumer's iteration after what is queued, `fail` ends every wait at once. */
export class BoundedQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private readonly takers: Array<() => void> = [];
  private readonly putters: Array<() => void> = [];
  private closed = false;
  private failure: unknown = undefined;
  private failed = false;

  constructor(private readonly capacity: number) {}

  /** Queues `item`, waiting while the queue is full; throws the failure once failed, and
   * refuses after close. */
  async put(item: T): Promise<void> {
    for (;;) {
      if (this.failed) throw this.failure;
      if (this.closed) throw new Error("the queue is closed");
      if (this.items.length < this.capacity) break;
      await new Promise<void>((resolve) => this.putters.push(resolve));
    }
    this.items.push(item);
    this.wake(this.takers);
  }

  /** Queues `item` unless the queue is full, closed or failed; says whether it did. */
  offer(item: T): boolean {
    if (this.failed || this.closed || this.items.length >= this.capacity) return false;
    this.items.push(item);
    this.wake(this.takers);
    return true;
  }

  /** The next item; undefined once closed and drained. Throws the failure once failed. */
  async take(): Promise<T | undefined> {
    for (;;) {
      if (this.failed) throw this.failure;
      const item = this.items.shift();
      if (item !== undefined) {
        this.wake(this.putters);
        return item;
      }
      if (this.closed) return undefined;
      await new Promise<void>((resolve) => this.takers.push(resolve));
    }
  }

  /** No more items: the consumer ends after the queued ones. */
  close(): void {
    this.closed = true;
    this.wakeAll();
  }

  /** Ends every wait with `why` (the first failure sticks). */
  fail(why: unknown): void {
    if (!this.failed) {
      this.failed = true;
      this.failure = why;
    }
    this.wakeAll();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = await this.take();
      if (item === undefined) return;
      yield item;
    }
  }

  private wake(waiters: Array<() => void>): void {
    waiters.shift()?.();
  }

  private wakeAll(): void {
    for (const waiters of [this.takers, this.putters]) {
      while (waiters.length > 0) waiters.shift()?.();
    }
  }
}
