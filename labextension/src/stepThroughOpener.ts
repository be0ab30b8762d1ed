/**
 * Opening a step-through (docs/teaching.md, "Step-through"): from the
 * palette ("Step through a Prime Agent session…", which asks which session
 * of the current notebook) or from the session list's "Step through". The
 * view opens in the main area split beside the notebook, once per session
 * (opening it again brings it to the front), and scrolls the notebook to
 * the cell of the step it shows while the notebook is open.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { InputDialog, showErrorMessage } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';

import type { AgentApiClient } from './api';
import { revealCell } from './cellNavigation';
import { sessionChoices, StepThroughModel } from './stepThrough';
import { StepThroughView, type IStepThroughViewOptions } from './stepThroughView';

const TITLE = 'Step through a session';

export class StepThroughOpener {
  constructor(
    private readonly _app: JupyterFrontEnd,
    private readonly _api: AgentApiClient,
    private readonly _renderMarkdown: IStepThroughViewOptions['renderMarkdown']
  ) {}

  /** Asks which session of `panel`'s notebook, then opens it; false when none was chosen. */
  async pick(panel: NotebookPanel | null): Promise<boolean> {
    if (!panel) {
      void showErrorMessage(TITLE, 'Open a notebook first: a step-through shows one of its sessions.');
      return false;
    }
    const path = panel.context.path;
    const choices = sessionChoices(await this._api.listNotebookSessions(path));
    if (choices.size === 0) {
      void showErrorMessage(TITLE, `${path} has no session to step through yet.`);
      return false;
    }
    const labels = [...choices.keys()];
    const answer = await InputDialog.getItem({
      title: TITLE,
      label: `Which session of ${path}? (newest first)`,
      items: labels,
      current: 0
    });
    const sessionId = answer.button.accept && answer.value ? choices.get(answer.value) : undefined;
    if (!sessionId) {
      return false;
    }
    this.open(sessionId, panel);
    return true;
  }

  /** Opens the step-through of `sessionId` beside `panel` (or in front when it is open). */
  open(sessionId: string, panel: NotebookPanel | null): StepThroughView {
    const shown = this._views.get(sessionId);
    if (shown && !shown.isDisposed) {
      this._app.shell.activateById(shown.id);
      return shown;
    }
    const model = new StepThroughModel(this._api, sessionId);
    const view = new StepThroughView(model, {
      renderMarkdown: this._renderMarkdown,
      stepShown: step => {
        if (panel && !panel.isDisposed && step.cell_id) {
          void revealCell(panel, step.cell_id);
        }
      }
    });
    this._views.set(sessionId, view);
    view.disposed.connect(() => this._views.delete(sessionId));
    const beside = panel && !panel.isDisposed ? { ref: panel.id, mode: 'split-right' as const } : {};
    this._app.shell.add(view, 'main', beside);
    this._app.shell.activateById(view.id);
    void model.load();
    return view;
  }

  private readonly _views = new Map<string, StepThroughView>();
}
