// Whether inline completions are asked for: on, off (until turned on again), or snoozed until a time.

export type PauseState = { kind: "on" } | { kind: "off" } | { kind: "snoozed"; until: number };

export const SNOOZE_MINUTES = 15;

/** The user's switch for inline completions; `now` is injected (ms since the epoch) so the rules are testable. */
export class Pause {
  private state: PauseState = { kind: "on" };

  constructor(private readonly now: () => number = Date.now) {}

  /** Whether completions are asked for now (a snooze that has run out is over). */
  active(): boolean {
    if (this.state.kind === "snoozed" && this.now() >= this.state.until) {
      this.state = { kind: "on" };
    }
    return this.state.kind === "on";
  }

  /** On -> off; off or snoozed -> on. Returns whether completions are on afterwards. */
  toggle(): boolean {
    this.state = this.active() ? { kind: "off" } : { kind: "on" };
    return this.state.kind === "on";
  }

  /** No completions for `minutes`, then on by themselves. */
  snooze(minutes: number = SNOOZE_MINUTES): void {
    this.state = { kind: "snoozed", until: this.now() + minutes * 60_000 };
  }

  /** What the status item says while completions are not asked for ("" when they are). */
  describe(): string {
    if (this.active()) {
      return "";
    }
    if (this.state.kind === "snoozed") {
      const left = Math.max(1, Math.ceil((this.state.until - this.now()) / 60_000));
      return `inline completions snoozed (${left} min left)`;
    }
    return "inline completions off";
  }
}
