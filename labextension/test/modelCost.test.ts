// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import type { IAgentUsage } from '../src/commands';
import {
  answerFooter,
  contextPercent,
  contextText,
  footerText,
  formatCost,
  formatTokens,
  ModelCostModel,
  pickerOptions,
  sessionCostText,
  type IModelCostApi
} from '../src/modelCost';
import { ModelCostControls, renderAnswerFooter } from '../src/modelCostView';
import type { NotebookAgent } from '../src/notebookAgent';
import { statusItemText } from '../src/statusItem';
import { TranscriptModel } from '../src/transcript';
import type { AgentEvent, IModelInfo, IModelList } from '../src/wire';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const MODELS: IModelInfo[] = [
  { name: 'openai/gpt-4.1', provider: 'openai', model: 'gpt-4.1', context_window: 1_047_576 },
  {
    name: 'anthropic/claude-sonnet-4-5',
    provider: 'anthropic',
    model: 'claude-sonnet-4-5',
    context_window: 200_000,
    price: { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }
  }
];

function usage(cost: number | null, children: IAgentUsage[] = []): IAgentUsage {
  return {
    session_id: 's',
    name: '',
    notebook_path: 'a.ipynb',
    model: 'openai/gpt-4.1',
    status: 'idle',
    calls: 1,
    usage: { input_tokens: 10, output_tokens: 5 },
    usage_total: { input_tokens: 10, output_tokens: 5 },
    cost,
    cost_total: cost,
    children
  };
}

function standInApi(): IModelCostApi & { setModel: ReturnType<typeof vi.fn> } {
  return {
    getModels: vi.fn(async (): Promise<IModelList> => ({ models: MODELS })),
    setModel: vi.fn(
      async (_id: string, model: string): Promise<IModelList> => ({ models: MODELS, current: model })
    ),
    getUsage: vi.fn(async () => usage(0.0123, [usage(0.001)]))
  };
}

function event(fields: Record<string, unknown>): AgentEvent {
  return { seq: 1, session_id: 's', ...fields } as unknown as AgentEvent;
}

describe('an answer footer', () => {
  it('says the model, the tokens in (cache included) and out, and the cost', () => {
    const footer = answerFooter({
      usage: { input_tokens: 1000, cache_read_tokens: 200, cache_write_tokens: 34, output_tokens: 310 },
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      cost: 0.0042
    });
    expect(footer).toEqual({
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      input: 1234,
      output: 310,
      cost: 0.0042
    });
    expect(footerText(footer!)).toBe('claude-sonnet-4-5 · 1.2k in · 310 out · $0.0042');
  });

  it('says the cost is unknown when the provider declares no price, and is absent without usage', () => {
    const footer = answerFooter({ usage: { input_tokens: 5, output_tokens: 1 }, model: 'local', cost: null });
    expect(footerText(footer!)).toBe('local · 5 in · 1 out · cost unknown');
    expect(answerFooter({ model: 'x' })).toBeNull();
  });

  it('formats tokens and dollars compactly', () => {
    expect([950, 12_345, 123_456, 1_500_000].map(formatTokens)).toEqual(['950', '12.3k', '123k', '1.5M']);
    expect([null, 0, 0.00042, 0.5, 12.345].map(formatCost)).toEqual([
      'cost unknown',
      '$0',
      '$0.0004',
      '$0.5000',
      '$12.35'
    ]);
  });

  it('sits beside the answer text in the transcript, live and after a reload', () => {
    const transcript = new TranscriptModel();
    transcript.load(
      [
        {
          type: 'assistant',
          turn: 1,
          text: 'Hello.',
          usage: { input_tokens: 900, output_tokens: 30 },
          provider: 'openai',
          model: 'gpt-4.1',
          cost: 0.002
        }
      ],
      null
    );
    transcript.apply(
      event({
        seq: 2,
        type: 'assistant_message',
        turn: 2,
        text: 'Again.',
        tool_calls: 0,
        usage: { input_tokens: 1000, output_tokens: 10 },
        provider: 'openai',
        model: 'gpt-4.1-mini',
        cost: null
      })
    );
    const footers = transcript.entries.map(entry =>
      entry.kind === 'assistant' && entry.footer ? footerText(entry.footer) : null
    );
    expect(footers).toEqual([
      'gpt-4.1 · 900 in · 30 out · $0.0020',
      'gpt-4.1-mini · 1k in · 10 out · cost unknown'
    ]);
    const node = renderAnswerFooter(answerFooter({ usage: { input_tokens: 1 }, model: 'm', cost: 0 })!);
    expect(node.dataset.testid).toBe('pal-answer-footer');
    expect(node.textContent).toBe('m · 1 in · 0 out · $0');
  });
});

describe('context use', () => {
  it('is the last call’s input in percent of the window', () => {
    expect(contextPercent(50_000, 200_000)).toBe(25);
    expect(contextPercent(1_234, 200_000)).toBe(0.6);
    expect(contextPercent(0, 200_000)).toBeNull();
    expect(contextPercent(10, 0)).toBeNull();
    expect(contextText(25, 200_000)).toBe('Context 25 % of 200k');
    expect(contextText(null, 200_000)).toBe('Context – of 200k');
  });
});

describe('the model picker', () => {
  it('offers the listed models and keeps a model that is no longer offered', () => {
    expect(pickerOptions(MODELS, 'openai/gpt-4.1').map(o => o.value)).toEqual([
      'openai/gpt-4.1',
      'anthropic/claude-sonnet-4-5'
    ]);
    expect(pickerOptions(MODELS, 'scripted/demo')[0]).toEqual({
      value: 'scripted/demo',
      label: 'scripted/demo (not offered)'
    });
  });

  it('shows the session’s model, switches through the API and follows model_change events', async () => {
    const api = standInApi();
    const model = new ModelCostModel(api);
    const controls = new ModelCostControls();
    controls.model = model;
    await model.attach(
      { session_id: 's', provider: 'openai', model: 'gpt-4.1', status: 'idle' },
      [{ type: 'assistant', turn: 1, text: 'x', usage: { input_tokens: 104_757 } }]
    );
    const select = controls.composerNode.querySelector('select')!;
    expect(select.getAttribute('aria-label')).toBe('Model');
    expect(select.value).toBe('openai/gpt-4.1');
    expect(controls.composerNode.querySelector('[data-testid="pal-context-use"]')!.textContent).toBe(
      'Context 10 % of 1M'
    );

    select.value = 'anthropic/claude-sonnet-4-5';
    select.dispatchEvent(new Event('change'));
    await vi.waitFor(() => expect(model.current).toBe('anthropic/claude-sonnet-4-5'));
    expect(api.setModel).toHaveBeenCalledWith('s', 'anthropic/claude-sonnet-4-5');
    expect(model.window).toBe(200_000);

    model.applyEvent(event({ type: 'model_change', provider: 'openai', model: 'gpt-4.1' }));
    expect(select.value).toBe('openai/gpt-4.1');
    model.applyEvent(
      event({ type: 'assistant_message', turn: 2, text: '', tool_calls: 1, usage: { input_tokens: 523_788 } })
    );
    expect(model.contextPercent).toBe(50);
  });

  it('shows a refused switch beside the picker and keeps the model', async () => {
    const api = standInApi();
    api.setModel.mockRejectedValueOnce(new Error('unknown model'));
    const model = new ModelCostModel(api);
    await model.attach({ session_id: 's', provider: 'openai', model: 'gpt-4.1' }, []);
    await model.choose('anthropic/claude-sonnet-4-5');
    expect(model.current).toBe('openai/gpt-4.1');
    expect(model.error).toBe('Could not switch the model: unknown model');
  });
});

describe('the session’s cost', () => {
  it('counts the sub-agents, in the header and the status bar', async () => {
    expect(sessionCostText(usage(0.0123, [usage(0.001), usage(null)]))).toBe(
      '$0.0123 with 2 sub-agents'
    );
    expect(sessionCostText(usage(null))).toBe('cost unknown');
    const model = new ModelCostModel(standInApi());
    const controls = new ModelCostControls();
    controls.model = model;
    await model.attach({ session_id: 's', provider: 'openai', model: 'gpt-4.1', status: 'idle' }, []);
    expect(controls.headerNode.textContent).toBe('Cost $0.0123 with 1 sub-agent');
    expect(statusItemText(model)).toBe('Prime Agent: idle · $0.0123 with 1 sub-agent');
    model.applyEvent(event({ type: 'status', status: 'running' }));
    expect(statusItemText(model)).toBe('Prime Agent: running · $0.0123 with 1 sub-agent');
    expect(statusItemText(null)).toBe('');
  });

  it('is read again after each answer and each sub-agent’s change, one request at a time', async () => {
    const api = standInApi();
    const model = new ModelCostModel(api);
    await model.attach({ session_id: 's', provider: 'openai', model: 'gpt-4.1' }, []);
    expect(api.getUsage).toHaveBeenCalledTimes(1);
    model.applyEvent(event({ type: 'turn_ended', turn: 1, stop_reason: 'end_turn', final_text: '' }));
    model.applyEvent(event({ type: 'child_status', child_session_id: 'c', status: 'idle' }));
    model.applyEvent(event({ type: 'child_status', child_session_id: 'c', status: 'idle' }));
    await vi.waitFor(() => expect(api.getUsage).toHaveBeenCalledTimes(3));
  });
});

describe('the chat panel', () => {
  it('shows the picker and the context use beside the input and the cost in the header', async () => {
    const panel = standInChatPanel();
    const agent = new StandInAgent(sessionInfo('s', 'a.ipynb', { provider: 'openai', model: 'gpt-4.1' }));
    const modelCost = new ModelCostModel(standInApi());
    Object.assign(agent, { modelCost });
    panel.agent = agent as unknown as NotebookAgent;
    await modelCost.attach(agent.session, []);

    const composer = panel.node.querySelector('.pal-composer')!;
    const picker = composer.querySelector<HTMLSelectElement>('[data-testid="pal-model-picker"]')!;
    expect(picker.getAttribute('aria-label')).toBe('Model');
    expect(picker.value).toBe('openai/gpt-4.1');
    expect(composer.querySelector('[data-testid="pal-context-use"]')!.textContent).toBe('Context – of 1M');
    const header = panel.node.querySelector('[data-testid="pal-header"]')!;
    expect(header.querySelector('[data-testid="pal-session-cost"]')!.textContent).toBe(
      'Cost $0.0123 with 1 sub-agent'
    );

    panel.agent = null;
    expect(panel.node.querySelector<HTMLElement>('.pal-model-row')!.hidden).toBe(true);
  });
});
