/**
 * The session list's view (docs/ui.md "Session list"): a region under the
 * panel's header with one focusable row per session of the notebook. Enter
 * on a row opens it, the arrows move between rows, Escape closes the list;
 * each row has Open, Fork, Step through (docs/teaching.md) and Delete
 * (which asks first). The state is
 * SessionListModel's (sessionList.ts).
 */
import { button, element } from './dom';
import {
  relativeTime,
  rowCost,
  rowModel,
  rowTitle,
  type SessionListModel
} from './sessionList';
import type { ISessionListItem } from './wire';

export const SESSION_LIST_ID = 'pal-session-list';

export interface ISessionListViewOptions {
  /** Escape or Close: where the focus goes back to (the Sessions button). */
  closed: () => void;
}

export class SessionListView {
  constructor(
    private readonly _model: SessionListModel,
    private readonly _options: ISessionListViewOptions
  ) {
    const node = this.node;
    node.className = 'pal-session-list';
    node.id = SESSION_LIST_ID;
    node.dataset.testid = 'pal-session-list';
    node.setAttribute('role', 'region');
    node.setAttribute('aria-label', 'Sessions of this notebook');
    node.tabIndex = -1;
    node.hidden = true;
    const heading = element('div', 'pal-session-list-head');
    const title = element('h2', 'pal-session-list-title', undefined, 'Sessions');
    const refresh = button('Refresh', 'pal-session-list-refresh');
    refresh.title = 'Read the list again';
    refresh.addEventListener('click', () => void this._model.refresh());
    const close = button('Close', 'pal-session-list-close');
    close.title = 'Close the session list (Escape)';
    close.setAttribute('aria-label', 'Close the session list');
    close.addEventListener('click', () => this._close());
    heading.append(title, refresh, close);
    this._status.className = 'pal-session-list-status';
    this._status.dataset.testid = 'pal-session-list-status';
    this._status.setAttribute('role', 'status');
    this._rows.className = 'pal-session-rows';
    this._rows.setAttribute('aria-label', 'Sessions, newest first');
    node.append(heading, this._status, this._rows);
    node.addEventListener('keydown', event => this._onKey(event));
    _model.changed.connect(this.render, this);
    this.render();
  }

  readonly node = document.createElement('section');

  /** Focus the current session's row (else the first), or the list itself. */
  focusRow(): void {
    const rows = this._rowNodes();
    const current = rows.find(row => row.dataset.current === 'true');
    (current ?? rows[0] ?? this.node).focus();
  }

  render(): void {
    const model = this._model;
    const focused = this._focusedPlace();
    this.node.hidden = !model.isOpen;
    this._status.textContent = model.error
      ? model.error
      : model.loading
        ? 'Loading…'
        : model.items.length === 0
          ? 'No sessions of this notebook yet.'
          : '';
    this._status.classList.toggle('pal-mod-error', model.error !== null);
    // Closed, it holds no rows: nothing of it is found or read while hidden.
    const items = model.isOpen ? model.items : [];
    this._rows.replaceChildren(...items.map(item => this._row(item)));
    this._restoreFocus(focused);
  }

  dispose(): void {
    this._model.changed.disconnect(this.render, this);
  }

  private _row(item: ISessionListItem): HTMLElement {
    const model = this._model;
    const id = item.session_id;
    const current = id === model.currentSessionId;
    const title = rowTitle(item);
    const row = element('li', 'pal-session-row', 'pal-session-row');
    row.tabIndex = 0;
    row.dataset.sessionId = id;
    row.dataset.current = String(current);
    row.dataset.status = item.status;
    row.classList.toggle('pal-mod-current', current);
    if (current) {
      row.setAttribute('aria-current', 'true');
    }
    const when = relativeTime(item.updated ?? item.created);
    row.setAttribute(
      'aria-label',
      [title, when, item.status, current ? 'shown here' : ''].filter(Boolean).join(', ')
    );

    const head = element('div', 'pal-session-row-head');
    head.append(element('span', 'pal-session-title', 'pal-session-title', title));
    if (current) {
      head.append(element('span', 'pal-session-current', 'pal-session-current', 'current'));
    }
    const meta = element('div', 'pal-session-meta');
    const iso = item.updated ?? item.created;
    if (iso) {
      const time = element('time', 'pal-session-time', 'pal-session-time', when);
      time.dateTime = iso;
      time.title = iso;
      meta.append(time);
    }
    meta.append(
      element('span', 'pal-session-model', 'pal-session-model', rowModel(item)),
      element('span', 'pal-session-status', 'pal-session-status', item.status),
      element('span', 'pal-session-row-cost', 'pal-session-row-cost', rowCost(item))
    );
    row.append(head, meta);
    if (item.reason) {
      row.append(element('div', 'pal-session-reason', undefined, item.reason));
    }

    const busy = model.busy !== null;
    const actions = element('div', 'pal-session-actions');
    if (model.confirming === id) {
      const ask = element(
        'span',
        'pal-session-confirm-text',
        undefined,
        'Delete this session’s log and its sub-agents’ logs? Their notebooks stay. This cannot be undone.'
      );
      const yes = button('Delete', 'pal-session-confirm-delete');
      yes.setAttribute('aria-label', `Confirm: delete session ${title}`);
      yes.addEventListener('click', () => void model.confirmDelete(id));
      const no = button('Cancel', 'pal-session-cancel-delete');
      no.setAttribute('aria-label', `Keep session ${title}`);
      no.addEventListener('click', () => model.cancelDelete());
      actions.append(ask, yes, no);
    } else {
      const open = button('Open', 'pal-session-open');
      open.setAttribute('aria-label', `Open session ${title}`);
      open.title = current
        ? 'This chat shows it: go to the input'
        : 'Show it in this chat to read and continue it (it becomes the notebook’s session)';
      open.disabled = busy || item.status === 'broken';
      open.addEventListener('click', () => void model.open(id));
      const fork = button('Fork', 'pal-session-fork');
      fork.setAttribute('aria-label', `Fork session ${title}`);
      fork.title = item.last_user_entry_id
        ? 'A copy up to before your last message, in a new notebook (the message waits in its input)'
        : 'Nothing to fork from: no message of yours yet';
      fork.disabled = busy || !item.last_user_entry_id || item.status === 'broken';
      fork.addEventListener('click', () => void model.fork(id));
      const remove = button('Delete', 'pal-session-delete');
      remove.setAttribute('aria-label', `Delete session ${title}`);
      remove.title = 'Delete this session’s log and its sub-agents’ logs (asks first)';
      remove.disabled = busy;
      remove.addEventListener('click', () => model.askDelete(id));
      actions.append(open, fork);
      if (model.canStepThrough) {
        const steps = button('Step through', 'pal-session-step-through');
        steps.setAttribute('aria-label', `Step through session ${title}`);
        steps.title = 'Show its steps one by one beside the notebook, as the model saw them';
        steps.disabled = item.status === 'broken';
        steps.addEventListener('click', () => model.stepThrough(id));
        actions.append(steps);
      }
      actions.append(remove);
    }
    row.append(actions);
    const error = model.rowError(id);
    if (error) {
      const alert = element('div', 'pal-session-error', 'pal-session-error', error);
      alert.setAttribute('role', 'alert');
      row.append(alert);
    }
    return row;
  }

  private _onKey(event: KeyboardEvent): void {
    if (event.key === 'Escape') {
      event.preventDefault();
      event.stopPropagation();
      if (this._model.confirming !== null) {
        this._model.cancelDelete();
        return;
      }
      this._close();
      return;
    }
    const row = event.target instanceof HTMLElement ? event.target : null;
    if (!row?.classList.contains('pal-session-row')) {
      return; // a button's own Enter
    }
    if (event.key === 'Enter') {
      event.preventDefault();
      void this._model.open(row.dataset.sessionId ?? '');
      return;
    }
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      const rows = this._rowNodes();
      const next = rows.indexOf(row) + (event.key === 'ArrowDown' ? 1 : -1);
      rows[Math.min(Math.max(next, 0), rows.length - 1)]?.focus();
    }
  }

  private _close(): void {
    this._model.close();
    this._options.closed();
  }

  private _rowNodes(): HTMLElement[] {
    return Array.from(this._rows.querySelectorAll<HTMLElement>(':scope > .pal-session-row'));
  }

  /** Which row (and which of its controls) had the focus before a render. */
  private _focusedPlace(): { sessionId: string; testId: string | null } | null {
    const active = document.activeElement;
    if (!(active instanceof HTMLElement) || !this._rows.contains(active)) {
      return null;
    }
    const row = active.closest<HTMLElement>('.pal-session-row');
    if (!row) {
      return null;
    }
    return {
      sessionId: row.dataset.sessionId ?? '',
      testId: active === row ? null : (active.dataset.testid ?? null)
    };
  }

  private _restoreFocus(place: { sessionId: string; testId: string | null } | null): void {
    if (!place || !this._model.isOpen) {
      return;
    }
    const row = this._rowNodes().find(r => r.dataset.sessionId === place.sessionId);
    if (!row) {
      this.focusRow(); // the row went (deleted): the list keeps the focus
      return;
    }
    const control = place.testId
      ? row.querySelector<HTMLElement>(`[data-testid="${place.testId}"]`)
      : null;
    // A button that went away (the confirmation ended) leaves the focus on its row.
    (control && !(control as HTMLButtonElement).disabled ? control : row).focus();
  }

  private readonly _status = document.createElement('div');
  private readonly _rows = document.createElement('ul');
}
