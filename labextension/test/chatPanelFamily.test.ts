// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';

import { SessionDirectory, findSenderNotebook, knownNotebookPath } from '../src/family';
import type { NotebookAgent } from '../src/notebookAgent';
import type { IMessageOrigin, TranscriptModel } from '../src/transcript';
import type { AgentEvent, ISessionInfo } from '../src/wire';

import { StandInAgent, sessionInfo, standInChatPanel } from './standIns';

// JupyterLab's icon registry needs its web components, which load only in a
// browser; the panel's icon plays no part in these tests.
vi.mock('../src/icons', () => ({ primeAgentIcon: undefined }));

const PARENT_ID = 'p-1';

/** A stand-in agent that finds senders' notebooks in `_directory`, as the real one does. */
class AgentWithFamily extends StandInAgent {
  constructor(
    session: ISessionInfo,
    private readonly _directory: SessionDirectory
  ) {
    super(session);
  }

  knownSenderNotebookPath(origin: IMessageOrigin): string | null {
    return knownNotebookPath(origin, this.parent, this.transcript.entries);
  }

  senderNotebookPath(origin: IMessageOrigin): Promise<string | null> {
    return findSenderNotebook(origin, this.parent, this.transcript.entries, this._directory);
  }
}

function setUp(agentSession: ISessionInfo, listed: ISessionInfo[] = []) {
  const opened: string[] = [];
  let notifyOpened: () => void = () => undefined;
  /** Resolves at the next notebook the panel opens. */
  const nextOpen = () => new Promise<void>(resolve => (notifyOpened = resolve));
  const directory = new SessionDirectory(async () => listed);
  const agent = new AgentWithFamily(agentSession, directory);
  const panel = standInChatPanel(async path => {
    opened.push(path);
    notifyOpened();
  });
  panel.agent = agent as unknown as NotebookAgent;
  const find = (testId: string) =>
    panel.node.querySelector<HTMLElement>(`[data-testid="${testId}"]`);
  const findAll = (testId: string) =>
    Array.from(panel.node.querySelectorAll<HTMLElement>(`[data-testid="${testId}"]`));
  return { agent, panel, opened, find, findAll, nextOpen };
}

function event(seq: number, fields: Record<string, unknown>): AgentEvent {
  return { seq, session_id: 'root', ...fields } as unknown as AgentEvent;
}

/** Resolves at the next entry the transcript adds. */
function nextEntry(model: TranscriptModel): Promise<void> {
  return new Promise(resolve => {
    const onChange = (_: TranscriptModel, change: { type: string }) => {
      if (change.type === 'added') {
        model.changed.disconnect(onChange);
        resolve();
      }
    };
    model.changed.connect(onChange);
  });
}

describe('the parent’s chat panel', () => {
  it('updates the child line’s badge in place as child_status events arrive', () => {
    const { agent, find, findAll } = setUp(sessionInfo('root', 'analysis.ipynb'));
    agent.transcript.load([], 0);
    agent.transcript.apply(event(1, { type: 'child_spawned', turn: 1, rlm_child_id: 'c1', name: 'part-a', notebook_path: 'analysis.agents/part-a.ipynb', task: 'Summarise part A', model: 'demo' }));
    expect(find('pal-child-status')?.textContent).toBe('running');
    agent.transcript.apply(event(2, { type: 'child_status', rlm_child_id: 'c1', name: 'part-a', notebook_path: 'analysis.agents/part-a.ipynb', status: 'replied', preview: 'Part A: +12 %' }));
    expect(findAll('pal-child')).toHaveLength(1);
    expect(find('pal-child')?.dataset.status).toBe('replied');
    expect(find('pal-child-status')?.textContent).toBe('replied');
  });

  it('opens the child notebook from the child line and from a child’s message', async () => {
    const { agent, find, opened, nextOpen } = setUp(sessionInfo('root', 'analysis.ipynb'));
    agent.transcript.load(
      [
        { type: 'child', turn: 1, rlm_child_id: 'c1', name: 'part-a', notebook_path: 'analysis.agents/part-a.ipynb', task: 't', status: 'replied' },
        { type: 'agent_message', turn: 1, text: 'Done.', from_session_id: 'c1', from_name: 'part-a', relationship: 'child', composed: '2026-11-30T09:01:20+00:00' }
      ],
      10
    );
    find('pal-child-link')?.click();
    expect(opened).toEqual(['analysis.agents/part-a.ipynb']);
    const opening = nextOpen();
    find('pal-sender-link')?.click();
    await opening;
    expect(opened).toEqual(['analysis.agents/part-a.ipynb', 'analysis.agents/part-a.ipynb']);
  });

  it('looks a sibling’s notebook up in the session list when its name is clicked', async () => {
    const { agent, find, opened, nextOpen } = setUp(sessionInfo('root', 'a.ipynb'), [sessionInfo('s2', 'b.ipynb')]);
    agent.transcript.load(
      [{ type: 'agent_message', turn: 1, text: 'hi', from_session_id: 's2', from_name: 'b.ipynb', relationship: 'sibling', composed: '2026-11-30T09:00:00+00:00' }],
      10
    );
    const opening = nextOpen();
    find('pal-sender-link')?.click();
    await opening;
    expect(opened).toEqual(['b.ipynb']);
  });

  it('says so in the chat when a sender’s notebook cannot be found', async () => {
    const { agent, find, opened } = setUp(sessionInfo('root', 'a.ipynb'), []);
    agent.transcript.load(
      [{ type: 'agent_message', turn: 1, text: 'hi', from_session_id: 'gone', from_name: 'old', relationship: 'sibling', composed: '2026-11-30T09:00:00+00:00' }],
      10
    );
    const error = nextEntry(agent.transcript);
    find('pal-sender-link')?.click();
    await error;
    expect(opened).toEqual([]);
    expect(find('pal-error')?.textContent).toBe('Could not find the notebook of old.');
  });
});

describe('a sub-agent’s chat panel', () => {
  it('names the parent in the header and on the task, both linked to its notebook', async () => {
    const { agent, find, opened, nextOpen } = setUp(
      sessionInfo('c1', 'analysis.agents/part-a.ipynb', { parent_session_id: PARENT_ID, name: 'part-a' })
    );
    agent.transcript.load([{ type: 'user', turn: 1, text: 'Summarise part A' }], 5);
    expect(find('pal-family')?.hidden).toBe(true);

    agent.parent = { sessionId: PARENT_ID, name: 'analysis.ipynb', notebookPath: 'analysis.ipynb' };
    agent.familyChanged.emit();

    expect(find('pal-family')?.hidden).toBe(false);
    expect(find('pal-family')?.textContent).toBe('sub-agent part-a of analysis.ipynb');
    expect(find('pal-family')?.title).toBe('sub-agent part-a of analysis.ipynb');
    expect(find('pal-message-sender')?.textContent).toBe('task from parent analysis.ipynb');
    let opening = nextOpen();
    find('pal-parent-link')?.click();
    await opening;
    opening = nextOpen();
    find('pal-sender-link')?.click();
    await opening;
    expect(opened).toEqual(['analysis.ipynb', 'analysis.ipynb']);
  });
});
