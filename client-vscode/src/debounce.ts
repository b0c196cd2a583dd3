// Wait for a pause in typing before asking for a completion; a newer request or a cancellation ends the wait.

export interface Cancellable {
  isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

export class Debouncer {
  private latest = 0;

  constructor(private readonly delayMs: () => number) {}

  /** Resolves true when this request should go ahead: no newer one came and it was not cancelled. */
  wait(token: Cancellable): Promise<boolean> {
    const ticket = ++this.latest;
    return new Promise((resolve) => {
      if (token.isCancellationRequested) {
        resolve(false);
        return;
      }
      const timer = setTimeout(() => {
        subscription.dispose();
        resolve(ticket === this.latest && !token.isCancellationRequested);
      }, this.delayMs());
      const subscription = token.onCancellationRequested(() => {
        clearTimeout(timer);
        subscription.dispose();
        resolve(false);
      });
    });
  }
}
