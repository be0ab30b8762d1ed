// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { allowedModes, PermissionModel, type IPermissionApi } from '../src/permission';
import { PermissionControls } from '../src/permissionView';
import type { AgentEvent, IPermissionState, PermissionMode } from '../src/wire';

class FakeApi implements IPermissionApi {
  state: IPermissionState = { mode: 'auto', cap: 'auto', waiting: [] };
  calls: string[] = [];
  refuse: string | null = null;

  async getPermission(): Promise<IPermissionState> {
    return { ...this.state };
  }

  async setPermission(_: string, mode: PermissionMode): Promise<IPermissionState> {
    this.calls.push(`mode ${mode}`);
    if (this.refuse) {
      throw new Error(this.refuse);
    }
    this.state = { ...this.state, mode };
    return { ...this.state };
  }

  async decideCell(
    _: string,
    toolCallId: string,
    action: 'approve' | 'skip',
    code?: string
  ): Promise<IPermissionState> {
    this.calls.push(`${action} ${toolCallId}${code === undefined ? '' : ` ${code}`}`);
    this.state = { ...this.state, waiting: this.state.waiting.filter(id => id !== toolCallId) };
    return { ...this.state };
  }
}

function event(fields: Record<string, unknown>): AgentEvent {
  return { seq: 1, session_id: 's', turn: 1, ...fields } as unknown as AgentEvent;
}

const AWAITING = event({
  type: 'cell_awaiting_approval',
  cell_id: 'c1',
  tool_call_id: 't1',
  code: 'print(1)'
});

describe('permission modes', () => {
  it('offers only the modes under the cap', () => {
    expect(allowedModes('auto')).toEqual(['plan', 'ask', 'auto']);
    expect(allowedModes('ask')).toEqual(['plan', 'ask']);
    expect(allowedModes('plan')).toEqual(['plan']);
  });

  it('shows the mode, and a choice the server refuses leaves its message', async () => {
    const api = new FakeApi();
    api.state = { mode: 'ask', cap: 'ask', waiting: [] };
    const model = new PermissionModel(api);
    const view = new PermissionControls();
    view.model = model;
    await model.attach('s');
    const select = view.composerNode.querySelector('select')!;
    expect(select.value).toBe('ask');
    expect([...select.options].map(o => o.value)).toEqual(['plan', 'ask']);

    api.refuse = "permission mode 'auto' is above this server's limit 'ask'";
    await model.choose('auto');
    expect(view.composerNode.textContent).toContain("above this server's limit");
    expect(model.mode).toBe('ask');
  });

  it('a waiting cell shows Run, Edit and Skip, and each answers the server', async () => {
    const api = new FakeApi();
    api.state = { mode: 'ask', cap: 'auto', waiting: ['t1'] };
    const model = new PermissionModel(api);
    const view = new PermissionControls();
    view.model = model;
    await model.attach('s');
    model.applyEvent(AWAITING);
    expect(view.waitingNode.hidden).toBe(false);
    expect(view.waitingNode.textContent).toContain('print(1)');

    (view.waitingNode.querySelector('.pal-approval-edit') as HTMLButtonElement).click();
    const editor = view.waitingNode.querySelector('textarea')!;
    editor.value = 'print(2)';
    (view.waitingNode.querySelector('.pal-approval-run-edited') as HTMLButtonElement).click();
    await Promise.resolve();
    await Promise.resolve();
    expect(api.calls).toEqual(['approve t1 print(2)']);
    expect(view.waitingNode.hidden).toBe(true);

    api.state = { ...api.state, waiting: ['t2'] };
    model.applyEvent(event({ ...AWAITING, tool_call_id: 't2', cell_id: 'c2' }));
    (view.waitingNode.querySelector('.pal-approval-skip') as HTMLButtonElement).click();
    await Promise.resolve();
    await Promise.resolve();
    expect(api.calls[api.calls.length - 1]).toBe('skip t2');
    expect(view.waitingNode.hidden).toBe(true);
  });

  it('a cell answered elsewhere (another tab, the stop) leaves the bar', () => {
    const model = new PermissionModel(new FakeApi());
    model.applyEvent(AWAITING);
    expect(model.waiting.map(c => c.toolCallId)).toEqual(['t1']);
    model.applyEvent(event({ type: 'cell_skipped', cell_id: 'c1', tool_call_id: 't1' }));
    expect(model.waiting).toEqual([]);
  });
});

describe('an edit overtaken by another user’s answer', () => {
  async function editing() {
    const api = new FakeApi();
    api.state = { mode: 'ask', cap: 'auto', waiting: ['t1'] };
    const model = new PermissionModel(api);
    const view = new PermissionControls();
    view.model = model;
    await model.attach('s');
    model.applyEvent(AWAITING);
    view.waitingNode.querySelector<HTMLButtonElement>('[data-testid="pal-approval-edit"]')!.click();
    const editor = view.waitingNode.querySelector<HTMLTextAreaElement>(
      '[data-testid="pal-approval-editor"]'
    )!;
    editor.value = 'print("my careful edit")';
    return { api, model, view, editor };
  }

  it('keeps the typed code, read-only with Copy, and says the cell was run by someone else', async () => {
    const { model, view } = await editing();
    model.applyEvent(event({ type: 'cell_approved', cell_id: 'c1', tool_call_id: 't1', edited: false }));
    const kept = view.waitingNode.querySelector<HTMLTextAreaElement>(
      '[data-testid="pal-approval-editor"]'
    );
    expect(kept?.value).toBe('print("my careful edit")');
    expect(kept?.readOnly).toBe(true);
    expect(view.waitingNode.hidden).toBe(false);
    const note = view.waitingNode.querySelector('[data-testid="pal-approval-overtaken"]');
    expect(note?.textContent).toContain('answered by someone else');
    expect(note?.textContent).toContain('ran the agent’s code');
    expect(view.waitingNode.querySelector('[data-testid="pal-approval-copy"]')).not.toBeNull();
    expect(view.waitingNode.querySelector('[data-testid="pal-approval-run-edited"]')).toBeNull();
    view.waitingNode.querySelector<HTMLButtonElement>('[data-testid="pal-approval-dismiss"]')!.click();
    expect(view.waitingNode.hidden).toBe(true);
  });

  it('says skipped when the other answer was Skip, and stopped after a Stop', async () => {
    const stopped = await editing();
    stopped.model.applyEvent(event({ type: 'cell_skipped', cell_id: 'c1', tool_call_id: 't1' }));
    expect(
      stopped.view.waitingNode.querySelector('[data-testid="pal-approval-overtaken"]')?.textContent
    ).toContain('not run (the turn was stopped)');
    const { model, view } = await editing();
    model.applyEvent(
      event({ type: 'cell_skipped', cell_id: 'c1', tool_call_id: 't1', decision: 'skip' })
    );
    const note = view.waitingNode.querySelector('[data-testid="pal-approval-overtaken"]');
    expect(note?.textContent).toContain('not run (skipped with Skip)');
    expect(
      view.waitingNode.querySelector<HTMLTextAreaElement>('[data-testid="pal-approval-editor"]')
        ?.value
    ).toBe('print("my careful edit")');
  });

  it('shows no such line after this tab’s own Run edited', async () => {
    const { model, view } = await editing();
    view.waitingNode.querySelector<HTMLButtonElement>('[data-testid="pal-approval-run-edited"]')!.click();
    model.applyEvent(event({ type: 'cell_approved', cell_id: 'c1', tool_call_id: 't1', edited: true }));
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(view.waitingNode.querySelector('[data-testid="pal-approval-overtaken"]')).toBeNull();
    expect(view.waitingNode.hidden).toBe(true);
  });
});
