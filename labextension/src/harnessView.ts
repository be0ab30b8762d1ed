/**
 * The "Harness" view of the chat panel: the live harness panel
 * (`rlm.harness.panel()`, docs/ui.md "The Harness view") for the notebook's
 * agent, usable while the agent's cell runs.
 *
 * The agent's kernel is busy most of the time, and every request on its
 * main shell (a cell, a new connection's kernel_info) waits behind the
 * agent's cell. ipykernel 7 runs kernel subshells, each in its own thread:
 * the view creates one on the notebook's own kernel connection (a control
 * message, answered at once), runs the panel's code there and renders its
 * output with the notebook's renderers (its widget manager). JupyterLab 4.6
 * sends widget comm messages over a subshell of their own
 * (`commsOverSubshells`, default `perCommTarget`), and ipykernel routes
 * them to the subshell the panel publishes from, so its buttons answer
 * while the agent works. A kernel without subshells gets the panel in a new
 * notebook cell instead.
 */
import { MimeModel, type IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { KernelMessage, type Kernel } from '@jupyterlab/services';
import { NotebookActions, type NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

/** The code the view runs in its subshell (`view_id` lets it close the panel). */
export function harnessViewCode(viewId: string): string {
  return (
    'from prime_agent_kernel.harness_panel import harness_view\n' +
    `harness_view(view_id=${JSON.stringify(viewId)})`
  );
}

/** The code that stops the view's panel (its watcher thread) when the view closes. */
export function closeViewCode(viewId: string): string {
  return (
    'from prime_agent_kernel.harness_panel import close_view\n' +
    `close_view(${JSON.stringify(viewId)})`
  );
}

/** What a kernel without subshells runs in a new notebook cell. */
export const HARNESS_CELL_CODE = 'rlm.harness.panel()';

/** Where the panel went: the Harness view, or a cell in the notebook. */
export type HarnessViewPlace = 'view' | 'cell';

let nextViewId = 0;

/**
 * Show the harness panel of the notebook's agent: in a Harness view docked
 * below the notebook (`addToShell`), or in a new cell of the notebook when
 * its kernel has no subshells.
 */
export async function openHarnessView(
  panel: NotebookPanel,
  addToShell: (view: Widget) => void
): Promise<HarnessViewPlace> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    throw new Error('the notebook has no kernel yet');
  }
  await kernel.info;
  if (!kernel.supportsSubshells) {
    await runInNewCell(panel);
    return 'cell';
  }
  const view = new HarnessView(kernel, panel.content.rendermime);
  view.title.caption = `The harness of the agent of ${panel.context.path}`;
  addToShell(view);
  await view.start();
  return 'view';
}

async function runInNewCell(panel: NotebookPanel): Promise<void> {
  await panel.context.ready;
  const notebook = panel.content;
  NotebookActions.insertBelow(notebook);
  const cell = notebook.activeCell;
  if (!cell) {
    throw new Error('could not insert a cell');
  }
  cell.model.sharedModel.setSource(HARNESS_CELL_CODE);
  await NotebookActions.run(notebook, panel.sessionContext);
}

/** A main-area widget that shows the panel run in a subshell of the kernel. */
export class HarnessView extends Widget {
  constructor(
    private readonly _kernel: Kernel.IKernelConnection,
    private readonly _rendermime: IRenderMimeRegistry
  ) {
    super();
    this.id = `pal-harness-view-${++nextViewId}-${Date.now()}`;
    this.addClass('pal-HarnessView');
    this.node.dataset.testid = 'pal-harness-view';
    this.title.label = 'Harness';
    this.title.closable = true;
    this._status = document.createElement('div');
    this._status.className = 'pal-harness-view-status';
    this._status.textContent = 'Starting the harness panel…';
    this._outputs = document.createElement('div');
    this._outputs.className = 'pal-harness-view-outputs';
    this.node.append(this._status, this._outputs);
  }

  /** Create the subshell and run the panel's code in it; resolves when the code has run. */
  async start(): Promise<void> {
    try {
      const reply = await this._kernel.requestCreateSubshell({}).done;
      this._subshellId = reply.content.subshell_id;
      if (this.isDisposed) {
        this._release();
        return;
      }
      const future = this._execute(harnessViewCode(this.id));
      future.onIOPub = msg => this._onOutput(msg);
      const done = await future.done;
      this._status.hidden = done.content.status === 'ok';
    } catch (error) {
      this._status.textContent = `Could not start the harness panel: ${String(error)}`;
      throw error;
    }
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._release();
    for (const renderer of this._renderers) {
      renderer.dispose();
    }
    super.dispose();
  }

  /** Stop the panel's watcher, then free the subshell (both best effort). */
  private _release(): void {
    const subshellId = this._subshellId;
    if (subshellId === null || this._kernel.isDisposed) {
      return;
    }
    this._subshellId = null;
    const closing = this._execute(closeViewCode(this.id), subshellId);
    void closing.done
      .catch(() => undefined)
      .then(() => this._kernel.requestDeleteSubshell({ subshell_id: subshellId }, true).done)
      .catch(() => undefined);
  }

  /** An execute request on this view's subshell (the main shell may be busy). */
  private _execute(
    code: string,
    subshellId: string | null = this._subshellId
  ): Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg> {
    const msg = KernelMessage.createMessage<KernelMessage.IExecuteRequestMsg>({
      msgType: 'execute_request',
      channel: 'shell',
      session: this._kernel.clientId,
      username: this._kernel.username,
      subshellId: subshellId ?? undefined,
      content: {
        code,
        silent: false,
        store_history: false,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: false
      }
    });
    return this._kernel.sendShellMessage(msg, true, true) as Kernel.IShellFuture<
      KernelMessage.IExecuteRequestMsg,
      KernelMessage.IExecuteReplyMsg
    >;
  }

  private _onOutput(msg: KernelMessage.IIOPubMessage): void {
    if (this.isDisposed) {
      return;
    }
    if (
      KernelMessage.isDisplayDataMsg(msg) ||
      KernelMessage.isExecuteResultMsg(msg)
    ) {
      const data = msg.content.data;
      const mimeType = this._rendermime.preferredMimeType(data, 'any');
      if (!mimeType) {
        return;
      }
      const renderer = this._rendermime.createRenderer(mimeType);
      this._renderers.push(renderer);
      const metadata = msg.content.metadata;
      void renderer.renderModel(new MimeModel({ data, metadata, trusted: true }));
      Widget.attach(renderer, this._outputs);
    } else if (KernelMessage.isStreamMsg(msg) || KernelMessage.isErrorMsg(msg)) {
      const pre = document.createElement('pre');
      pre.className = 'pal-harness-view-text';
      pre.textContent = KernelMessage.isStreamMsg(msg)
        ? msg.content.text
        : `${msg.content.ename}: ${msg.content.evalue}`;
      if (KernelMessage.isErrorMsg(msg)) {
        pre.classList.add('pal-mod-error');
        pre.dataset.testid = 'pal-harness-view-error';
      }
      this._outputs.append(pre);
    }
  }

  private _subshellId: string | null = null;
  private readonly _renderers: (Widget & { renderModel(model: MimeModel): Promise<void> })[] =
    [];
  private readonly _status: HTMLElement;
  private readonly _outputs: HTMLElement;
}
