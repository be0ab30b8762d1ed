import { describe, expect, it } from 'vitest';

import { TranscriptModel, type INoticeEntry } from '../src/transcript';
import type { AgentEvent, ChatItem } from '../src/wire';

// The lines core/entry_types.py's `mcp_call_line` writes for an `mcp_call` entry.
const OK = 'MCP papers.search · 0.4 s · 1,204 chars';
const FAILED = 'MCP papers.slow · 2.0 s · timeout: papers.slow timed out after 2 s';

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: 's1', ...fields } as unknown as AgentEvent;
}

function notices(model: TranscriptModel): Array<[string, string, string | null]> {
  return model.entries
    .filter((e): e is INoticeEntry => e.kind === 'notice')
    .map(e => [e.text, e.tone, e.noticeKind]);
}

describe('an MCP call in the chat', () => {
  it('is one line, live and after a reload; a failure is a warning', () => {
    const live = new TranscriptModel();
    live.load([], 0);
    live.apply(event(1, { type: 'notice', turn: 1, kind: 'mcp_call', text: OK }));
    live.apply(event(2, { type: 'notice', turn: 1, kind: 'mcp_call_failed', text: FAILED }));
    const expected = [
      [OK, 'info', 'mcp_call'],
      [FAILED, 'warning', 'mcp_call_failed']
    ];
    expect(notices(live)).toEqual(expected);

    const reloaded = new TranscriptModel();
    const items = [
      { type: 'notice', turn: 1, kind: 'mcp_call', text: OK },
      { type: 'notice', turn: 1, kind: 'mcp_call_failed', text: FAILED }
    ] as unknown as ChatItem[];
    reloaded.load(items, 2);
    expect(notices(reloaded)).toEqual(expected);
  });
});
