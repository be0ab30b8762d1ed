/**
 * The views of permission modes (docs/pairing.md, section 4): the mode
 * selector beside the input, and the bar of the agent cell waiting for
 * approval (Run, Edit, Skip) above it. Their state is PermissionModel's
 * (permission.ts).
 */
import { button } from './dom';
import {
  allowedModes,
  MODE_TITLES,
  type CellAnswer,
  type IWaitingCell,
  type PermissionModel
} from './permission';

/** What the other answer did, for the line over an edit it overtook. */
const OVERTAKEN: Record<CellAnswer | 'unknown', string> = {
  ran: 'ran the agent’s code',
  edited: 'ran their own edit',
  skipped: 'not run (skipped with Skip)',
  stopped: 'not run (the turn was stopped)',
  unknown: 'no longer waiting'
};

export class PermissionControls {
  constructor() {
    this.composerNode.className = 'pal-permission-row';
    this._select.className = 'pal-permission-mode';
    this._select.dataset.testid = 'pal-permission-mode';
    this._select.setAttribute('aria-label', 'Permission mode');
    this._select.addEventListener('change', () => void this._model?.choose(this._select.value));
    this._error.className = 'pal-permission-error';
    this._error.dataset.testid = 'pal-permission-error';
    this._error.setAttribute('role', 'status');
    this.composerNode.append(this._select, this._error);
    this.waitingNode.className = 'pal-approval';
    this.waitingNode.dataset.testid = 'pal-approval';
    this._overtakenNode.className = 'pal-approval-kept';
    this._cellNode.className = 'pal-approval-cell';
    this.waitingNode.append(this._overtakenNode, this._cellNode);
    this._render();
  }

  /** Beside the input: the mode selector. */
  readonly composerNode = document.createElement('div');
  /** Above the input: the cell waiting for approval, with Run, Edit and Skip. */
  readonly waitingNode = document.createElement('div');

  set model(model: PermissionModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._render, this);
    this._model = model;
    this._editing = null;
    this._submitted = null;
    this._shownCell = null;
    this._overtakenNode.replaceChildren();
    model?.changed.connect(this._render, this);
    this._render();
  }

  dispose(): void {
    this.model = null;
  }

  private _render(): void {
    const model = this._model;
    this.composerNode.hidden = model === null || model.mode === null;
    if (model && model.mode) {
      const modes = allowedModes(model.cap);
      const shown = modes.join(',');
      if (shown !== this._shownModes) {
        this._shownModes = shown;
        this._select.replaceChildren(
          ...modes.map(mode => {
            const option = document.createElement('option');
            option.value = mode;
            option.textContent = mode;
            option.title = MODE_TITLES[mode];
            return option;
          })
        );
      }
      this._select.value = model.mode;
      this._select.title =
        `${MODE_TITLES[model.mode]}. No mode is a sandbox: a cell that runs can do what your kernel can.` +
        (model.cap !== 'auto' ? ` Limited to ${model.cap} by the server.` : '');
    }
    this._error.textContent = model?.error ?? '';
    const editing = this._editing;
    if (editing && !model?.waiting.some(cell => cell.toolCallId === editing.cell.toolCallId)) {
      this._editing = null;
      const answer = model?.answerOf(editing.cell.toolCallId) ?? null;
      // This tab's own Run edited: its answer is an edit (or the server's list dropped the cell).
      const mine =
        this._submitted === editing.cell.toolCallId && (answer === 'edited' || answer === null);
      if (!mine) {
        this._keepOvertakenEdit(editing.editor.value, answer);
      }
    }
    const cell = model?.waiting[0] ?? null;
    if (cell === null) {
      this._cellNode.replaceChildren();
    } else if (cell.toolCallId !== this._shownCell) {
      this._renderCell(cell);
    }
    this._shownCell = cell?.toolCallId ?? null;
    this.waitingNode.hidden = cell === null && this._overtakenNode.childElementCount === 0;
  }

  /**
   * Someone else answered the cell this tab was editing: the typed code
   * stays, read-only, with Copy, under a line that says what happened.
   */
  private _keepOvertakenEdit(code: string, answer: CellAnswer | null): void {
    const note = document.createElement('div');
    note.className = 'pal-approval-overtaken';
    note.dataset.testid = 'pal-approval-overtaken';
    note.setAttribute('role', 'status');
    note.textContent =
      `This cell was answered by someone else before your edit: ${OVERTAKEN[answer ?? 'unknown']}. ` +
      'Your edit did not run; copy it from here if you want it.';
    const kept = document.createElement('textarea');
    kept.className = 'pal-approval-editor';
    kept.dataset.testid = 'pal-approval-editor';
    kept.setAttribute('aria-label', 'Your edit (did not run)');
    kept.readOnly = true;
    kept.value = code;
    kept.rows = Math.min(12, Math.max(3, code.split('\n').length + 1));
    const copy = button('Copy', 'pal-approval-copy');
    copy.title = 'Copy your edited code to the clipboard';
    copy.addEventListener('click', () => {
      kept.select();
      void navigator.clipboard?.writeText(code).then(
        () => (copy.textContent = 'Copied'),
        () => (copy.textContent = 'Select and copy it (no clipboard access)')
      );
    });
    const dismiss = button('Dismiss', 'pal-approval-dismiss');
    dismiss.title = 'Forget this edit';
    dismiss.addEventListener('click', () => {
      this._overtakenNode.replaceChildren();
      this._render();
    });
    const actions = document.createElement('div');
    actions.className = 'pal-approval-actions';
    actions.append(copy, dismiss);
    this._overtakenNode.replaceChildren(note, kept, actions);
  }

  private _renderCell(cell: IWaitingCell): void {
    const title = document.createElement('div');
    title.className = 'pal-approval-title';
    title.textContent = 'The agent wants to run this cell';
    const code = document.createElement('pre');
    code.className = 'pal-approval-code';
    code.textContent = cell.code;
    const run = button('Run', 'pal-approval-run');
    run.classList.add('pal-mod-primary');
    run.title = 'Run the cell as the agent wrote it';
    run.addEventListener('click', () => void this._model?.approve(cell.toolCallId));
    const edit = button('Edit', 'pal-approval-edit');
    edit.title = 'Change the code first; the edited code runs in a new cell';
    edit.addEventListener('click', () => this._edit(cell, code, actions));
    const skip = button('Skip', 'pal-approval-skip');
    skip.title = 'Do not run it; the agent is told you skipped it';
    skip.addEventListener('click', () => void this._model?.skip(cell.toolCallId));
    const actions = document.createElement('div');
    actions.className = 'pal-approval-actions';
    actions.append(run, edit, skip);
    this._editing = null;
    this._cellNode.replaceChildren(title, code, actions);
  }

  private _edit(cell: IWaitingCell, code: HTMLElement, actions: HTMLElement): void {
    const editor = document.createElement('textarea');
    editor.className = 'pal-approval-editor';
    editor.dataset.testid = 'pal-approval-editor';
    editor.setAttribute('aria-label', 'Code to run instead');
    editor.value = cell.code;
    editor.rows = Math.min(12, Math.max(3, cell.code.split('\n').length + 1));
    const runEdited = button('Run edited', 'pal-approval-run-edited');
    runEdited.classList.add('pal-mod-primary');
    runEdited.addEventListener('click', () => {
      if (editor.value.trim()) {
        this._submitted = cell.toolCallId;
        void this._model?.approve(cell.toolCallId, editor.value);
      }
    });
    const cancel = button('Cancel', 'pal-approval-cancel');
    cancel.addEventListener('click', () => this._renderCell(cell));
    code.replaceWith(editor);
    actions.replaceChildren(runEdited, cancel);
    this._editing = { cell, editor };
    editor.focus();
  }

  private _model: PermissionModel | null = null;
  private _shownModes = '';
  private _shownCell: string | null = null;
  /** The cell whose code this tab is editing, and the editor. */
  private _editing: { cell: IWaitingCell; editor: HTMLTextAreaElement } | null = null;
  /** The cell this tab sent an edit for. */
  private _submitted: string | null = null;
  private readonly _overtakenNode = document.createElement('div');
  private readonly _cellNode = document.createElement('div');
  private readonly _select = document.createElement('select');
  private readonly _error = document.createElement('span');
}
