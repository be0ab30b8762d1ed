import { describe, expect, it } from 'vitest';

import {
  TranscriptModel,
  type IMessageOrigin,
  type TranscriptEntry
} from '../src/transcript';
import type { AgentEvent, ChatItem, ISessionWithTranscript } from '../src/wire';
import parentFixture from './fixtures/parent-with-children.json';
import childFixture from './fixtures/child-session.json';

interface IFixture {
  session: ISessionWithTranscript;
  events: AgentEvent[];
}
const parent = parentFixture as unknown as IFixture;
const child = childFixture as unknown as IFixture;
const SESSION = parent.session.session_id;

function sender(origin: IMessageOrigin | null): string {
  return origin ? `[${origin.relationship ?? '?'} ${origin.name} ${origin.composed ?? '-'}]` : '';
}

/** Everything a reload must bring back, one line per entry, in order. */
function summary(model: TranscriptModel): string[] {
  return model.entries.map((entry: TranscriptEntry) => {
    switch (entry.kind) {
      case 'user':
        return `user${sender(entry.origin)}:${entry.text}`;
      case 'agent_message':
        return `agent_message${sender(entry.origin)}:${entry.text}`;
      case 'child':
        return [
          'child',
          entry.childId,
          entry.name,
          entry.notebookPath,
          entry.task,
          entry.status ?? '-',
          entry.preview
        ].join(':');
      case 'assistant':
        return `assistant:${entry.text}`;
      case 'cell':
        return `cell:${entry.cellId}:${entry.status}:${entry.executionCount ?? '-'}`;
      case 'notice':
        return `notice(${entry.tone},${entry.noticeKind ?? '-'}):${entry.text}`;
      case 'error':
        return `error:${entry.message}`;
      case 'refinement':
        return `refinement:${entry.record.id}`;
      case 'retry':
        return `retry:${entry.attempt}`;
    }
  });
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

/** The parent's chat as it was built live, event by event. */
function builtLive(fixture: IFixture): TranscriptModel {
  const model = new TranscriptModel();
  model.load([], fixture.events[0].seq - 1);
  fixture.events.forEach(e => model.apply(e));
  return model;
}

const PARENT_CHAT = [
  'user:Summarise parts A and B, one sub-agent each.',
  'assistant:Spawning two sub-agents.',
  'cell:cell-1:ok:1',
  'child:20261130-090002-d4e5f6:part-a:analysis.agents/part-a.ipynb:Summarise part A:replied:Part A: revenue grew 12 %.',
  'child:20261130-090002-0a0b0c:part-b:analysis.agents/part-b.ipynb:Summarise part B:error:',
  "notice(warning,child_error):Sub-agent part-b ended with an error: NameError: name 'sales' is not defined",
  'assistant:Part B failed; part A is still working.',
  'user[child part-a 2026-11-30T09:01:10+00:00]:Part A: revenue grew 12 %.',
  "assistant:Checking part B's notebook.",
  'cell:cell-2:ok:2',
  'agent_message[child part-a 2026-11-30T09:01:20+00:00]:Addendum: the 12 % excludes Q4.',
  'assistant:Part A: revenue grew 12 % without Q4. Part B failed on a missing variable.'
];

describe('the parent’s chat with sub-agents', () => {
  it('shows spawns, child status, replies and child notices as they happen', () => {
    expect(summary(builtLive(parent))).toEqual(PARENT_CHAT);
  });

  it('reloads from the transcript exactly as it was shown live', () => {
    const model = new TranscriptModel();
    model.load(parent.session.transcript, parent.session.seq ?? null);
    expect(summary(model)).toEqual(PARENT_CHAT);
  });

  it('reloads identically when the server replays its whole buffer', () => {
    const model = new TranscriptModel();
    model.load(parent.session.transcript, parent.session.seq ?? null);
    parent.events.forEach(e => model.apply(e));
    expect(summary(model)).toEqual(PARENT_CHAT);
  });

  it('keeps the transcript’s child status over an older replayed child_status', () => {
    const model = new TranscriptModel();
    model.load(parent.session.transcript, 5000);
    model.apply(
      event(4000, {
        type: 'child_status',
        rlm_child_id: '20261130-090002-d4e5f6',
        name: 'part-a',
        notebook_path: 'analysis.agents/part-a.ipynb',
        status: 'running'
      })
    );
    expect(model.findChildEntry('20261130-090002-d4e5f6')?.status).toBe('replied');
  });

  it('takes the replayed child status when the transcript carries none (older server)', () => {
    const items: ChatItem[] = [
      { type: 'child', turn: 1, rlm_child_id: 'k1', name: 'part-a', notebook_path: 'a/part-a.ipynb', task: 't' }
    ];
    const model = new TranscriptModel();
    model.load(items, 100);
    expect(model.findChildEntry('k1')?.status).toBeNull();
    model.apply(event(60, { type: 'child_status', rlm_child_id: 'k1', name: 'part-a', notebook_path: 'a/part-a.ipynb', status: 'running' }));
    model.apply(event(70, { type: 'child_status', rlm_child_id: 'k1', name: 'part-a', notebook_path: 'a/part-a.ipynb', status: 'completed', preview: 'Done.' }));
    expect(model.findChildEntry('k1')).toMatchObject({ status: 'completed', preview: 'Done.' });
  });

  it('updates the child’s badge from each live child_status', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    const seen: string[] = [];
    model.changed.connect((_, change) => {
      if (change.type !== 'reset' && change.entry.kind === 'child') {
        seen.push(`${change.type}:${change.entry.status}`);
      }
    });
    model.apply(event(1, { type: 'child_spawned', turn: 1, rlm_child_id: 'k1', name: 'part-a', notebook_path: 'a/part-a.ipynb', task: 'Summarise part A', model: 'demo' }));
    for (const [seq, status] of [[2, 'replied'], [3, 'running'], [4, 'idle'], [5, 'inactive'], [6, 'error']] as const) {
      model.apply(event(seq, { type: 'child_status', rlm_child_id: 'k1', name: 'part-a', notebook_path: 'a/part-a.ipynb', status }));
    }
    expect(seen).toEqual([
      'added:running',
      'updated:replied',
      'updated:running',
      'updated:idle',
      'updated:inactive',
      'updated:error'
    ]);
    expect(model.entries).toHaveLength(1);
  });

  it('adds a line for a live child_status of a child it has no line for, and ignores a replayed one', () => {
    const model = new TranscriptModel();
    model.load([], 10);
    model.apply(event(5, { type: 'child_status', rlm_child_id: 'old', name: 'gone', notebook_path: 'a/gone.ipynb', status: 'idle' }));
    model.apply(event(11, { type: 'child_status', rlm_child_id: 'k2', name: 'part-b', notebook_path: 'a/part-b.ipynb', status: 'running' }));
    expect(summary(model)).toEqual(['child:k2:part-b:a/part-b.ipynb::running:']);
  });

  it('ignores a child_status with a status it does not know', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(event(1, { type: 'child_spawned', rlm_child_id: 'k1', name: 'a', notebook_path: 'a.ipynb', task: 't', model: 'm' }));
    model.apply(event(2, { type: 'child_status', rlm_child_id: 'k1', name: 'a', notebook_path: 'a.ipynb', status: 'exploded' }));
    expect(model.findChildEntry('k1')?.status).toBe('running');
  });

  it('keeps a child without a spawning cell where the transcript put it', () => {
    const model = new TranscriptModel();
    model.load(
      [
        { type: 'child', turn: null, rlm_child_id: 'k1', name: 'manual', notebook_path: 'm.ipynb', task: 't', spawn_cell_id: 'user-cell' },
        { type: 'user', turn: 1, text: 'hi' }
      ],
      5
    );
    expect(summary(model)).toEqual(['child:k1:manual:m.ipynb:t:-:', 'user:hi']);
  });
});

describe('messages from other agents', () => {
  it('never takes another agent’s turn for the message the user is sending', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    const pending = model.addPendingUserMessage('ok');
    model.apply(event(1, { type: 'turn_started', turn: 1, text: 'ok', from_session_id: 'p', from_name: 'root.ipynb', relationship: 'parent', composed: '2026-11-30T09:00:00+00:00' }));
    expect(pending.pending).toBe(true);
    expect(summary(model)).toEqual(['user:ok', 'user[parent root.ipynb 2026-11-30T09:00:00+00:00]:ok']);
  });

  it('shows an agent message whose sender fields are missing or odd without throwing', () => {
    const model = new TranscriptModel();
    const items = [
      { type: 'agent_message', turn: 1, text: 'hello' },
      { type: 'agent_message', turn: 1, text: 'hi', from_name: 'x', relationship: 'cousin', composed: 7 }
    ] as unknown as ChatItem[];
    expect(() => model.load(items, 3)).not.toThrow();
    expect(summary(model)).toEqual(['agent_message[?  -]:hello', 'agent_message[? x -]:hi']);
  });
});

describe('notices about the family', () => {
  it('warns for a failed child and an undeliverable message, informs for a completed child', () => {
    const model = new TranscriptModel();
    model.load(
      [{ type: 'notice', turn: 1, kind: 'child_completed', text: 'part-a finished without replying: “Done.”' }],
      10
    );
    model.apply(event(11, { type: 'notice', turn: 1, kind: 'child_error', text: 'part-b failed.' }));
    model.apply(event(12, { type: 'notice', kind: 'message_undeliverable', text: 'part-c was deleted.' }));
    expect(summary(model)).toEqual([
      'notice(info,child_completed):part-a finished without replying: “Done.”',
      'notice(warning,child_error):part-b failed.',
      'notice(warning,message_undeliverable):part-c was deleted.'
    ]);
  });
});

describe('a sub-agent’s own chat', () => {
  const CHILD_CHAT = [
    'user[parent analysis.ipynb 2026-11-30T09:00:02+00:00]:[task from parent] Summarise part A',
    'assistant:Reading part A.',
    'cell:c-1:ok:1',
    'user[parent analysis.ipynb 2026-11-30T09:05:00+00:00]:Does the 12 % include Q4?',
    'assistant:No, it excludes Q4.'
  ];

  it('shows the parent as the sender of its task and of later messages, live and reloaded', () => {
    expect(summary(builtLive(child))).toEqual(CHILD_CHAT);
    const reloaded = new TranscriptModel();
    reloaded.load(child.session.transcript, child.session.seq ?? null);
    child.events.forEach(e => reloaded.apply(e));
    expect(summary(reloaded)).toEqual(CHILD_CHAT);
  });
});
