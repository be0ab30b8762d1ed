import { describe, expect, it } from 'vitest';

import { messageBody } from '../src/entryViews';
import { TranscriptModel } from '../src/transcript';
import type { AgentEvent, ChatItem } from '../src/wire';

const SESSION = 's-parent';
const NOTICE_TEXT =
  "[notice] Sub-agent 'part-a' finished its task without replying. Its last answer: done";

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: SESSION, ...fields } as unknown as AgentEvent;
}

const origin = {
  from_session_id: 's-child',
  from_name: 'part-a',
  relationship: 'child',
  composed: '2026-11-30T16:00:00.000+00:00',
  mode: 'auto'
};

describe('a sub-agent notice that reaches the model as a message', () => {
  it('shows once, as its notice line, live and after a reload', () => {
    const live = new TranscriptModel();
    live.load([], 0);
    live.apply(
      event(1, { type: 'notice', kind: 'child_completed', text: NOTICE_TEXT.slice(9) })
    );
    live.apply(
      event(2, {
        type: 'turn_started',
        turn: 2,
        text: NOTICE_TEXT,
        message_id: 'notice_1',
        notice: 'child_completed',
        ...origin
      })
    );
    live.apply(
      event(3, {
        type: 'agent_message',
        turn: 2,
        text: NOTICE_TEXT,
        message_id: 'notice_2',
        notice: 'child_completed',
        ...origin
      })
    );
    expect(live.entries.map(e => e.kind)).toEqual(['notice']);

    const reloaded = new TranscriptModel();
    const items = [
      { type: 'notice', turn: null, kind: 'child_completed', text: NOTICE_TEXT.slice(9) },
      { type: 'user', turn: 2, text: NOTICE_TEXT, notice: 'child_completed', ...origin },
      { type: 'agent_message', turn: 2, text: NOTICE_TEXT, notice: 'child_completed', ...origin }
    ] as unknown as ChatItem[];
    reloaded.load(items, 3);
    expect(reloaded.entries.map(e => e.kind)).toEqual(['notice']);
  });

  it('keeps an ordinary reply from a child as a message bubble', () => {
    const model = new TranscriptModel();
    model.load([], 0);
    model.apply(
      event(1, {
        type: 'turn_started',
        turn: 2,
        text: '[message from child "part-a", written …, id msg_1]\nthe answer',
        message_id: 'msg_1',
        ...origin
      })
    );
    expect(model.entries.map(e => e.kind)).toEqual(['user']);
  });
});

describe('messageBody', () => {
  it('drops the header line written for the model', () => {
    expect(messageBody('[message from child "a", written t, id m]\nline 1\nline 2')).toBe(
      'line 1\nline 2'
    );
    expect(messageBody('[task from parent]\n\nsummarise part A')).toBe('summarise part A');
  });

  it('leaves text without such a header alone', () => {
    expect(messageBody('[1, 2, 3] is the answer')).toBe('[1, 2, 3] is the answer');
    expect(messageBody('plain')).toBe('plain');
  });
});

describe('a turn-less notice after a reload with the whole buffer replayed', () => {
  it('stays after the turn it followed', () => {
    const model = new TranscriptModel();
    const items = [
      { type: 'user', turn: 1, text: 'go' },
      { type: 'assistant', turn: 1, text: 'done' },
      { type: 'notice', turn: null, kind: 'child_completed', text: 'part-a finished' }
    ] as unknown as ChatItem[];
    model.load(items, 10);
    [
      event(1, { type: 'turn_started', turn: 1, text: 'go' }),
      event(2, { type: 'assistant_message', turn: 1, text: 'done', tool_calls: 0 }),
      event(3, { type: 'turn_ended', turn: 1, stop_reason: 'end_turn', final_text: 'done' }),
      event(4, { type: 'notice', kind: 'child_completed', text: 'part-a finished' })
    ].forEach(e => model.apply(e));
    expect(model.entries.map(e => e.kind)).toEqual(['user', 'assistant', 'notice']);
  });
});
