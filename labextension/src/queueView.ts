/**
 * The queued items under the transcript (docs/pairing.md, "Steer and queue"):
 * one line per message waiting for the agent, with Remove, and Send now
 * while the queue is held after a Stop.
 */
import { button, element } from './dom';
import type { QueueModel } from './queue';
import type { IQueuedMessage } from './wire';

export interface IQueueViewActions {
  remove: (messageId: string) => Promise<void>;
  sendNow: (messageId: string) => Promise<void>;
}

/** The words before a queued item's text. */
export function queuedLabel(item: IQueuedMessage, paused: boolean): string {
  if (item.mode === 'steer') {
    return paused ? 'Steer (held)' : 'Steer: at the next step';
  }
  return paused ? 'Queued (held)' : 'Queued: after this run';
}

/** The line above a held queue. */
export const HELD_TEXT =
  'Stopped: these wait until you send again. Send now starts one; sending a new message ' +
  'lets the queue go on after it.';

export class QueueView {
  constructor(private readonly _actions: IQueueViewActions) {
    this.node.setAttribute('role', 'list');
    this.node.setAttribute('aria-label', 'Queued messages');
    this.node.hidden = true;
  }

  readonly node = element('div', 'pal-queue', 'pal-queue');

  render(model: QueueModel | null): void {
    const items = model?.items ?? [];
    const paused = model?.paused ?? false;
    this.node.hidden = items.length === 0;
    this.node.dataset.paused = String(paused);
    this.node.replaceChildren();
    if (paused && items.length > 0) {
      this.node.append(element('div', 'pal-queue-held', 'pal-queue-held', HELD_TEXT));
    }
    for (const item of items) {
      this.node.append(this._line(item, paused));
    }
  }

  private _line(item: IQueuedMessage, paused: boolean): HTMLElement {
    const line = element('div', 'pal-queued', 'pal-queued');
    line.setAttribute('role', 'listitem');
    line.dataset.messageId = item.message_id;
    line.dataset.mode = item.mode;
    const label = element('span', 'pal-queued-label', undefined, queuedLabel(item, paused));
    const text = element('span', 'pal-queued-text', 'pal-queued-text', item.text);
    text.title = item.text;
    const actions = element('span', 'pal-queued-actions');
    if (paused) {
      const now = button('Send now', 'pal-queued-send-now');
      now.setAttribute('aria-label', `Send now: ${shortText(item.text)}`);
      now.addEventListener('click', () =>
        this._run(now, () => this._actions.sendNow(item.message_id))
      );
      actions.append(now);
    }
    const remove = button('Remove', 'pal-queued-remove');
    remove.setAttribute('aria-label', `Remove queued message: ${shortText(item.text)}`);
    remove.addEventListener('click', () =>
      this._run(remove, () => this._actions.remove(item.message_id))
    );
    actions.append(remove);
    line.append(label, text, actions);
    return line;
  }

  private _run(control: HTMLButtonElement, action: () => Promise<void>): void {
    control.disabled = true;
    void action().finally(() => {
      control.disabled = false;
    });
  }
}

function shortText(text: string): string {
  const line = text.split('\n')[0];
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}
