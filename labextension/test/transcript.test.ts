import { describe, expect, it } from 'vitest';

import { TranscriptModel, type TranscriptEntry } from '../src/transcript';
import type { AgentEvent, ChatItem, ISessionWithTranscript } from '../src/wire';
import stopped from './fixtures/stopped-turn.json';

const SESSION = 's1';
const fixture = stopped as unknown as {
  session: ISessionWithTranscript;
  events: AgentEvent[];
};

/** A compact view of the entries for assertions. */
function summary(model: TranscriptModel): string[] {
  return model.entries.map((entry: TranscriptEntry) => {
    switch (entry.kind) {
      case 'user':
      case 'assistant':
        return `${entry.kind}:${entry.text}`;
      case 'cell':
        return `cell:${entry.cellId}:${entry.status}:${entry.executionCount ?? '-'}`;
      case 'notice':
        return `notice(${entry.tone}):${entry.text}`;
      case 'error':
        return `error:${entry.message}`;
      case 'refinement':
        return `refinement:${entry.record.id}`;
      case 'retry':
        return `retry:${entry.attempt}`;
      case 'agent_message':
        return `agent_message:${entry.text}`;
      case 'child':
        return `child:${entry.name}:${entry.status ?? '-'}`;
    }
  });
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

const STOPPED_TURN = [
  'user:Sleep a while.',
  'assistant:Sleeping.',
  'cell:cell-a:interrupted:2',
  'notice(info):Stopped.'
];

describe('reopening a session whose turn was stopped', () => {
  it('shows the user message, the cell line and the stop notice from the transcript', () => {
    const model = new TranscriptModel();
    model.load(fixture.session.transcript, fixture.session.seq ?? null);
    expect(summary(model)).toEqual(STOPPED_TURN);
    expect(model.findCellEntry('cell-a')?.code).toBe('import time\ntime.sleep(5)');
  });

  it('rebuilds the turn from the replayed events without duplicating anything', () => {
    const model = new TranscriptModel();
    model.load(fixture.session.transcript, fixture.session.seq ?? null);
    for (const e of fixture.events) {
      model.apply(e);
    }
    expect(summary(model)).toEqual(STOPPED_TURN);
    expect(model.status).toBe('idle');
    expect(model.lastSeq).toBe(1008);
  });

  it('keeps the transcript when the server restarted and replays nothing', () => {
    const model = new TranscriptModel();
    model.load(fixture.session.transcript, null);
    model.apply(event(5000, { type: 'status', status: 'idle' }));
    expect(summary(model)).toEqual(STOPPED_TURN);
  });

  it('shows the stop notice of a turn stopped live, once', () => {
    const model = new TranscriptModel();
    model.load([], 1000);
    for (const e of fixture.events) {
      model.apply(e);
    }
    expect(summary(model)).toEqual(STOPPED_TURN);
  });
});

describe('items and events this panel does not know', () => {
  it('shows an unknown item with text as a neutral line and skips one without', () => {
    const model = new TranscriptModel();
    const items = [
      { type: 'user', turn: 1, text: 'hi' },
      { type: 'handoff', turn: 1, text: 'Handed over to a child agent.' },
      { type: 'mystery', turn: 1 },
      null,
      { type: 'assistant', turn: 1, text: 'done' }
    ] as unknown as ChatItem[];
    expect(() => model.load(items, 10)).not.toThrow();
    expect(summary(model)).toEqual([
      'user:hi',
      'notice(info):Handed over to a child agent.',
      'assistant:done'
    ]);
  });

  it('ignores an unknown event and still advances', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    expect(() => model.apply(event(1, { type: 'goal_set', turn: 1, goal: 'x' }))).not.toThrow();
    expect(() => model.apply(event(2, { type: 'cell_finished', turn: 1 }))).not.toThrow();
    expect(model.lastSeq).toBe(2);
  });

  it('reads a cell item with a status it has no glyph for', () => {
    const model = new TranscriptModel();
    model.load(
      [
        { type: 'cell', turn: 1, cell_id: 'a', code: '', status: 'aborted', execution_count: null, preview: '' },
        { type: 'cell', turn: 1, cell_id: 'b', code: '', status: 'skipped', execution_count: null, preview: '' }
      ],
      5
    );
    expect(summary(model)).toEqual(['cell:a:aborted:-', 'cell:b:skipped:-']);
  });
});

describe('notices', () => {
  it('shows a kernel restart from the transcript as a warning', () => {
    const model = new TranscriptModel();
    model.load(
      [
        {
          type: 'notice',
          turn: 2,
          kind: 'kernel_restarted',
          text: 'The agent restarted the kernel: your variables are gone.'
        }
      ],
      50
    );
    const [entry] = model.entries;
    expect(entry).toMatchObject({ kind: 'notice', tone: 'warning', noticeKind: 'kernel_restarted' });
  });

  it('shows a live notice event, with or without a turn', () => {
    const model = new TranscriptModel();
    model.load([], 10);
    model.apply(event(11, { type: 'notice', kind: 'kernel_restarted_externally', text: 'The kernel was restarted.' }));
    model.apply(event(12, { type: 'notice', turn: 3, kind: 'kernel_died', text: 'The kernel died.' }));
    expect(summary(model)).toEqual([
      'notice(warning):The kernel was restarted.',
      'notice(warning):The kernel died.'
    ]);
  });

  it('does not repeat a turn-less notice the transcript already holds', () => {
    const model = new TranscriptModel();
    const text = 'The kernel was restarted.';
    model.load([{ type: 'notice', turn: 1, kind: 'kernel_restarted_externally', text }], 20);
    model.apply(event(15, { type: 'notice', kind: 'kernel_restarted_externally', text }));
    expect(summary(model)).toEqual([`notice(warning):${text}`]);
  });
});

describe('cells that wait for the user’s cell', () => {
  it('shows waiting, then running, then the result', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(event(1, { type: 'turn_started', turn: 1, text: 'go' }));
    model.apply(event(2, { type: 'cell_started', turn: 1, cell_id: 'c', code: 'x = 1' }));
    model.apply(event(3, { type: 'cell_waiting', turn: 1, cell_id: 'c', text: 'waiting for your cell to finish' }));
    expect(model.waitingCell?.cellId).toBe('c');
    expect(model.waitingCell?.waitingText).toBe('waiting for your cell to finish');
    model.apply(event(4, { type: 'cell_running', turn: 1, cell_id: 'c' }));
    expect(model.waitingCell).toBeNull();
    expect(model.findCellEntry('c')?.status).toBe('running');
    model.apply(event(5, { type: 'cell_finished', turn: 1, cell_id: 'c', status: 'ok', execution_count: 4, preview: '' }));
    expect(summary(model)).toEqual(['user:go', 'cell:c:ok:4']);
  });

  it('stays waiting when cell_started comes after cell_waiting', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(event(1, { type: 'cell_waiting', turn: 1, cell_id: 'c', text: '' }));
    model.apply(event(2, { type: 'cell_started', turn: 1, cell_id: 'c', code: 'x = 1' }));
    expect(model.findCellEntry('c')).toMatchObject({ status: 'waiting', code: 'x = 1' });
  });

  it('marks a cell withdrawn by Stop as skipped when the turn ends', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(event(1, { type: 'turn_started', turn: 1, text: 'go' }));
    model.apply(event(2, { type: 'cell_waiting', turn: 1, cell_id: 'c', text: 'waiting for your cell to finish' }));
    model.apply(event(3, { type: 'turn_ended', turn: 1, stop_reason: 'stopped', final_text: '' }));
    expect(summary(model)).toEqual(['user:go', 'cell:c:skipped:-', 'notice(info):Stopped.']);
    expect(model.waitingCell).toBeNull();
  });
});

describe('execution counts', () => {
  it('keeps a known count when cell_finished carries none', () => {
    const model = new TranscriptModel();
    model.load(
      [{ type: 'cell', turn: 1, cell_id: 'c', code: 'x', status: 'ok', execution_count: 7, preview: '' }],
      10
    );
    model.apply(event(11, { type: 'cell_finished', turn: null, cell_id: 'c', status: 'interrupted', execution_count: null, preview: '' }));
    expect(summary(model)).toEqual(['cell:c:interrupted:7']);
  });
});

describe('live events', () => {
  it('reports only events newer than the transcript', () => {
    const model = new TranscriptModel();
    const live: number[] = [];
    model.liveEvent.connect((_, e) => live.push(e.seq));
    model.load(fixture.session.transcript, 1004);
    for (const e of fixture.events) {
      model.apply(e);
    }
    expect(live).toEqual([1005, 1006, 1007, 1008]);
  });

  it('takes status inactive from the stream', () => {
    const model = new TranscriptModel();
    model.load([], 10);
    model.apply(event(11, { type: 'status', status: 'inactive' }));
    expect(model.status).toBe('inactive');
  });
});

describe('a message being sent', () => {
  it('is confirmed by turn_started instead of shown twice', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.addPendingUserMessage('hello');
    model.apply(event(1, { type: 'turn_started', turn: 1, text: 'hello' }));
    expect(summary(model)).toEqual(['user:hello']);
    expect(model.entries[0]).toMatchObject({ turn: 1, pending: false });
  });
});
