/**
 * The "Harness" button of the chat panel: shows the live harness panel
 * (`rlm.harness.panel()`, docs/ui.md "The Harness view") for the notebook's
 * agent.
 *
 * The agent's kernel is busy most of the time, and a cell queued in the
 * notebook would wait for the agent's cell to finish. ipykernel 7 runs
 * kernel subshells: a console on a subshell of the notebook's kernel runs
 * its code at once, beside the agent's cell, and JupyterLab 4.6 sends widget
 * comm messages over a subshell of their own (`commsOverSubshells`, default
 * `perCommTarget`), so the panel's buttons answer while the agent works.
 * A kernel without subshells gets the panel in a new cell of the notebook
 * instead.
 */
import type { Widget } from '@lumino/widgets';
import { NotebookActions, type NotebookPanel } from '@jupyterlab/notebook';

/** The code that shows the panel (the same line a researcher types). */
export const HARNESS_PANEL_CODE = 'rlm.harness.panel()';

/** How long to wait for the console's subshell before giving up (ms). */
const SUBSHELL_TIMEOUT = 15000;

/** Where the panel went: a subshell console or a cell in the notebook. */
export type HarnessViewPlace = 'console' | 'cell';

/** The parts of a ConsolePanel this module uses (typed loosely: no extra dependency). */
interface IConsoleLike extends Widget {
  sessionContext: {
    ready: Promise<void>;
    session: { kernel: { subshellId: string | null } | null } | null;
  };
  console: { inject(code: string): Promise<void> };
}

/** Runs a JupyterLab command (`app.commands.execute`). */
export type ExecuteCommand = (
  id: string,
  args: Record<string, string | boolean>
) => Promise<unknown>;

export async function openHarnessView(
  execute: ExecuteCommand,
  panel: NotebookPanel
): Promise<HarnessViewPlace> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    throw new Error('the notebook has no kernel yet');
  }
  await kernel.info;
  if (kernel.supportsSubshells) {
    const console = (await execute('console:create', {
      path: panel.context.path,
      subshell: true,
      ref: panel.id,
      insertMode: 'split-bottom',
      activate: true,
      type: 'Harness'
    })) as IConsoleLike;
    console.title.label = 'Harness';
    console.addClass('pal-harness-console');
    await subshellReady(console);
    await console.console.inject(HARNESS_PANEL_CODE);
    return 'console';
  }
  await panel.context.ready;
  const notebook = panel.content;
  NotebookActions.insertBelow(notebook);
  const cell = notebook.activeCell;
  if (!cell) {
    throw new Error('could not insert a cell');
  }
  cell.model.sharedModel.setSource(HARNESS_PANEL_CODE);
  await NotebookActions.run(notebook, panel.sessionContext);
  return 'cell';
}

/** Wait until the console's own subshell exists: code sent before it would
 * queue behind the agent's running cell. */
async function subshellReady(console: IConsoleLike): Promise<void> {
  await console.sessionContext.ready;
  const deadline = Date.now() + SUBSHELL_TIMEOUT;
  while (!console.sessionContext.session?.kernel?.subshellId) {
    if (Date.now() > deadline || console.isDisposed) {
      throw new Error('the console’s kernel subshell did not start');
    }
    await new Promise(resolve => setTimeout(resolve, 50));
  }
}
