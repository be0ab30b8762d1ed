import { describe, expect, it } from 'vitest';

import { TranscriptModel, type TranscriptEntry } from '../src/transcript';
import type { AgentEvent, ChatItem, ISessionWithTranscript } from '../src/wire';
import reloadFixture from './fixtures/reload-order.json';

/**
 * A real session (tests/test_reload_order.py writes it): turn 1 spawns a
 * sub-agent (its line and its "finished" notice), a refinement is applied
 * while the agent is idle, a notice follows, then turn 2. `session` is what
 * GET session answered at the end, `events` the server's replay buffer.
 */
interface IFixture {
  session: ISessionWithTranscript;
  events: AgentEvent[];
}
const fixture = reloadFixture as unknown as IFixture;
const SESSION = fixture.session.session_id;

function summary(model: TranscriptModel): string[] {
  return model.entries.map((entry: TranscriptEntry) => {
    switch (entry.kind) {
      case 'user':
      case 'assistant':
      case 'agent_message':
        return `${entry.kind}:${entry.text}`;
      case 'cell':
        return `cell:${entry.cellId}:${entry.status}`;
      case 'notice':
        return `notice(${entry.noticeKind ?? '-'}):${entry.text}`;
      case 'error':
        return `error:${entry.message}`;
      case 'refinement':
        return `refinement:${entry.record.id}`;
      case 'retry':
        return `retry:${entry.attempt}`;
      case 'child':
        return `child:${entry.name}:${entry.status ?? '-'}`;
    }
  });
}

function builtLive(): TranscriptModel {
  const model = new TranscriptModel();
  model.load([], fixture.events[0].seq - 1);
  fixture.events.forEach(e => model.apply(e));
  return model;
}

function reloaded(items: readonly ChatItem[], events: readonly AgentEvent[]): TranscriptModel {
  const model = new TranscriptModel();
  model.load(items, fixture.session.seq ?? null);
  events.forEach(e => model.apply(e));
  return model;
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

describe('a reload shows the chat in the order it happened', () => {
  const live = summary(builtLive());

  it('has the refinement and the notice between the two turns when built live', () => {
    const refinement = live.findIndex(line => line.startsWith('refinement:'));
    expect(refinement).toBeGreaterThan(live.indexOf('assistant:Turn one done.'));
    expect(live[refinement + 1]).toMatch(/^notice\(message_undeliverable\)/);
    expect(live[refinement + 2]).toBe('user:And now?');
    expect(live.some(line => line.startsWith('child:alpha'))).toBe(true);
  });

  it('reloads from the transcript alone in the same order', () => {
    expect(summary(reloaded(fixture.session.transcript, []))).toEqual(live);
  });

  it('reloads in the same order when the server replays its whole buffer', () => {
    expect(summary(reloaded(fixture.session.transcript, fixture.events))).toEqual(live);
  });

  it('keeps a turn-less child line (spawned from the user’s own cell) at its place', () => {
    const items: ChatItem[] = [
      { type: 'user', turn: 1, text: 'one' },
      { type: 'child', turn: null, rlm_child_id: 'k1', name: 'manual', notebook_path: 'm.ipynb', task: 't', status: 'completed', preview: '' },
      { type: 'user', turn: 2, text: 'two' }
    ];
    const events = [
      event(1, { type: 'turn_started', turn: 1, text: 'one' }),
      event(2, { type: 'turn_ended', turn: 1, stop_reason: 'completed', final_text: '' }),
      event(3, { type: 'child_spawned', rlm_child_id: 'k1', name: 'manual', notebook_path: 'm.ipynb', task: 't', model: 'demo' }),
      event(4, { type: 'turn_started', turn: 2, text: 'two' }),
      event(5, { type: 'turn_ended', turn: 2, stop_reason: 'completed', final_text: '' })
    ];
    const model = new TranscriptModel();
    model.load(items, 5);
    events.forEach(e => model.apply(e));
    expect(summary(model)).toEqual(['user:one', 'child:manual:completed', 'user:two']);
  });

  it('keeps MCP call lines where they were: after the cell that made them, and between turns', () => {
    const items = [
      { type: 'user', turn: 1, text: 'one' },
      { type: 'cell', turn: 1, cell_id: 'c1', code: 'await mcp.call()', status: 'ok', execution_count: 1, preview: '' },
      { type: 'notice', turn: 1, kind: 'mcp_call', text: 'MCP docs.search: ok, 120 chars' },
      { type: 'assistant', turn: 1, text: 'Found it.' },
      { type: 'notice', turn: null, kind: 'mcp_call', text: 'MCP docs.fetch: ok, 80 chars' },
      { type: 'user', turn: 2, text: 'two' }
    ] as unknown as ChatItem[];
    const events = [
      event(1, { type: 'turn_started', turn: 1, text: 'one' }),
      event(2, { type: 'cell_started', turn: 1, cell_id: 'c1', code: 'await mcp.call()' }),
      event(3, { type: 'notice', turn: 1, kind: 'mcp_call', text: 'MCP docs.search: ok, 120 chars' }),
      event(4, { type: 'cell_finished', turn: 1, cell_id: 'c1', status: 'ok', execution_count: 1, preview: '' }),
      event(5, { type: 'assistant_message', turn: 1, text: 'Found it.' }),
      event(6, { type: 'turn_ended', turn: 1, stop_reason: 'completed', final_text: 'Found it.' }),
      event(7, { type: 'notice', kind: 'mcp_call', text: 'MCP docs.fetch: ok, 80 chars' }),
      event(8, { type: 'turn_started', turn: 2, text: 'two' })
    ];
    const expected = [
      'user:one',
      'cell:c1:ok',
      'notice(mcp_call):MCP docs.search: ok, 120 chars',
      'assistant:Found it.',
      'notice(mcp_call):MCP docs.fetch: ok, 80 chars',
      'user:two'
    ];
    const live = new TranscriptModel();
    live.load([], 0);
    events.forEach(e => live.apply(e));
    expect(summary(live)).toEqual(expected);
    const fromTranscript = new TranscriptModel();
    fromTranscript.load(items, 8);
    expect(summary(fromTranscript)).toEqual(expected);
    events.forEach(e => fromTranscript.apply(e));
    expect(summary(fromTranscript)).toEqual(expected);
  });

  it('keeps two refinements with the same text apart, each at its place', () => {
    const record = (id: string): Record<string, unknown> => ({
      id,
      trigger: 'user',
      scope: 'local',
      summary: 'same',
      edits: []
    });
    const items = [
      { type: 'user', turn: 1, text: 'one' },
      { type: 'refinement', turn: null, text: 'same', refinement: record('r1') },
      { type: 'user', turn: 2, text: 'two' },
      { type: 'refinement', turn: null, text: 'same', refinement: record('r2') }
    ] as unknown as ChatItem[];
    const events = [
      event(1, { type: 'turn_started', turn: 1, text: 'one' }),
      event(2, { type: 'refinement', text: 'same', refinement: record('r1') }),
      event(3, { type: 'turn_started', turn: 2, text: 'two' }),
      event(4, { type: 'refinement', text: 'same', refinement: record('r2') })
    ];
    const model = new TranscriptModel();
    model.load(items, 4);
    events.forEach(e => model.apply(e));
    expect(summary(model)).toEqual(['user:one', 'refinement:r1', 'user:two', 'refinement:r2']);
  });
});

describe('a chat command’s own answer', () => {
  it('is a command_reply line of the panel, which the session (and so a reload) does not hold', () => {
    const model = new TranscriptModel();
    model.addNote('/refine: planning in the background');
    const [line] = model.entries;
    expect(line).toMatchObject({ kind: 'notice', noticeKind: 'command_reply', turn: null });
    model.load([], null);
    expect(model.entries).toEqual([]);
  });
});
