/**
 * REST client for the Prime Agent server extension (`{base_url}prime-agent/api/...`).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { AutonomyRequest } from './autonomy';
import type { CommandReply } from './commands';
import type { ITurnRevertRequest } from './reviewWire';
import type {
  DeliveryMode,
  IAgentMessageSent,
  IAgentsOverview,
  IAgentsStopped,
  ILeafMoved,
  IMessagePosted,
  IQueueState,
  IModelList,
  IPermissionState,
  IServerInfo,
  ISessionCopy,
  ISessionInfo,
  ISessionListItem,
  ISessionSteps,
  ISessionWithTranscript,
  ITrustState,
  PermissionMode
} from './wire';
import type { IAgentUsage } from './commands';

const API_ROOT = 'prime-agent/api';

/**
 * An error answered by the server (`{"message": str}` with a 4xx/5xx status).
 */
export class AgentApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
    this.name = 'AgentApiError';
  }
}

export interface IAttachOptions {
  notebookPath: string;
  kernelId?: string;
  sessionId?: string;
  newSession?: boolean;
}

export interface IBindingOptions {
  path: string;
  kernelId: string;
  documentId?: string;
}

export class AgentApiClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  getInfo(): Promise<IServerInfo> {
    return this._request<IServerInfo>('info');
  }

  attachSession(options: IAttachOptions): Promise<ISessionInfo> {
    const body: Record<string, string | boolean> = {
      notebook_path: options.notebookPath
    };
    if (options.kernelId) {
      body.kernel_id = options.kernelId;
    }
    if (options.sessionId) {
      body.session_id = options.sessionId;
    }
    if (options.newSession) {
      body.new = true;
    }
    return this._request<ISessionInfo>('sessions', 'POST', body);
  }

  /** Every session the server knows, newest first. */
  async listSessions(): Promise<ISessionInfo[]> {
    const answer = await this._request<{ sessions?: unknown }>('sessions');
    return Array.isArray(answer?.sessions) ? (answer.sessions as ISessionInfo[]) : [];
  }

  /** The sessions of one notebook, newest first (the panel's session list). */
  async listNotebookSessions(notebookPath: string): Promise<ISessionListItem[]> {
    const query = `?notebook=${encodeURIComponent(notebookPath)}`;
    const answer = await this._request<{ sessions?: unknown }>(`sessions${query}`);
    return Array.isArray(answer?.sessions) ? (answer.sessions as ISessionListItem[]) : [];
  }

  /** Remove a session's folder (409 while an agent is loaded on it, with the reason). */
  async deleteSession(sessionId: string): Promise<void> {
    await this._request<unknown>(`sessions/${encodeURIComponent(sessionId)}`, 'DELETE');
  }

  getSession(sessionId: string): Promise<ISessionWithTranscript> {
    return this._request<ISessionWithTranscript>(
      `sessions/${encodeURIComponent(sessionId)}`
    );
  }

  /**
   * The user's message: idle, it starts a turn; while a turn runs, `steer`
   * enters it at its next model call and `follow_up` (or `auto`) queues it
   * for after the run (docs/pairing.md).
   */
  sendMessage(
    sessionId: string,
    text: string,
    mode: DeliveryMode = 'auto'
  ): Promise<IMessagePosted> {
    return this._request<IMessagePosted>(
      `sessions/${encodeURIComponent(sessionId)}/messages`,
      'POST',
      { text, mode }
    );
  }

  /** Remove a queued message before it starts (404 unknown, 409 started). */
  removeQueuedMessage(
    sessionId: string,
    messageId: string
  ): Promise<{ removed: string; queue: IQueueState }> {
    return this._request<{ removed: string; queue: IQueueState }>(
      `sessions/${encodeURIComponent(sessionId)}/messages/${encodeURIComponent(messageId)}`,
      'DELETE'
    );
  }

  /** Send a queued message now: into the running turn, or as a turn at once. */
  sendQueuedNow(sessionId: string, messageId: string): Promise<IMessagePosted> {
    return this._request<IMessagePosted>(
      `sessions/${encodeURIComponent(sessionId)}/messages/${encodeURIComponent(messageId)}/send`,
      'POST',
      {}
    );
  }

  stopTurn(sessionId: string): Promise<{ stopped: boolean }> {
    return this._request<{ stopped: boolean }>(
      `sessions/${encodeURIComponent(sessionId)}/stop`,
      'POST',
      {}
    );
  }

  /** Branch: continue from a user message (before it) or a turn's end. */
  moveLeaf(sessionId: string, entryId: string): Promise<ILeafMoved> {
    return this._request<ILeafMoved>(
      `sessions/${encodeURIComponent(sessionId)}/leaf`,
      'POST',
      { entry_id: entryId }
    );
  }

  /** A new session and notebook from the path before a user message. */
  fork(sessionId: string, entryId: string): Promise<ISessionCopy> {
    return this._request<ISessionCopy>(
      `sessions/${encodeURIComponent(sessionId)}/fork`,
      'POST',
      { entry_id: entryId }
    );
  }

  /** A new session and notebook with the whole current branch. */
  clone(sessionId: string): Promise<ISessionCopy> {
    return this._request<ISessionCopy>(
      `sessions/${encodeURIComponent(sessionId)}/clone`,
      'POST',
      {}
    );
  }

  /**
   * Run a chat command (`/name args`) for a session: the server parses the
   * text after the name by the command's declaration (core/commands.py) and
   * answers with the view to show and its answer.
   */
  runCommand(sessionId: string, name: string, args: string): Promise<CommandReply> {
    return this._request<CommandReply>(
      `sessions/${encodeURIComponent(sessionId)}/commands/${encodeURIComponent(name)}`,
      'POST',
      { args }
    );
  }

  /**
   * Trust what the session's folder (and its sub-agents') holds that this
   * user did not sign, and load it (docs/trust.md).
   */
  trustSession(sessionId: string): Promise<ITrustState> {
    return this._request<ITrustState>(
      `sessions/${encodeURIComponent(sessionId)}/trust`,
      'POST',
      {}
    );
  }

  /**
   * Trust exactly these bytes of a project file (docs/project-context.md):
   * a file changed since it was shown answers 409.
   */
  trustProjectFile(path: string, sha256: string): Promise<{ trusted: { path: string } }> {
    return this._request<{ trusted: { path: string } }>('context/trust', 'POST', { path, sha256 });
  }

  /** The session's autonomous mode (docs/autonomy.md): an `AutonomyState`. */
  getAutonomy(sessionId: string): Promise<unknown> {
    return this._request<unknown>(`sessions/${encodeURIComponent(sessionId)}/autonomy`);
  }

  /** Turn autonomous mode on (with budgets and gates) or off; answers the new state. */
  setAutonomy(sessionId: string, request: AutonomyRequest): Promise<unknown> {
    return this._request<unknown>(
      `sessions/${encodeURIComponent(sessionId)}/autonomy`,
      'PUT',
      request
    );
  }

  // ---------------------------------------------------------------- model and cost (pairing.md, 2)

  /** The models a session may switch to (`rlm.find_models()`'s), with window and price. */
  getModels(): Promise<IModelList> {
    return this._request<IModelList>('models');
  }

  /** Switch the session's model from its next model call; answers the list with `current`. */
  setModel(sessionId: string, model: string): Promise<IModelList> {
    return this._request<IModelList>(`sessions/${encodeURIComponent(sessionId)}/model`, 'POST', {
      model
    });
  }

  /** The session's steps for the step-through (docs/teaching.md), loaded or only on disk. */
  getSteps(sessionId: string): Promise<ISessionSteps> {
    return this._request<ISessionSteps>(`sessions/${encodeURIComponent(sessionId)}/steps`);
  }

  /** The `/usage` report: tokens and cost, own and with the sub-agents. */
  getUsage(sessionId: string): Promise<IAgentUsage> {
    return this._request<IAgentUsage>(`sessions/${encodeURIComponent(sessionId)}/usage`);
  }

  // ---------------------------------------------------------------- permission modes (pairing.md, 4)

  getPermission(sessionId: string): Promise<IPermissionState> {
    return this._request<IPermissionState>(`sessions/${encodeURIComponent(sessionId)}/permission`);
  }

  setPermission(sessionId: string, mode: PermissionMode): Promise<IPermissionState> {
    return this._request<IPermissionState>(
      `sessions/${encodeURIComponent(sessionId)}/permission`,
      'PUT',
      { mode }
    );
  }

  /** Run (`approve`, the edited `code` if given) or skip the cell waiting for approval. */
  decideCell(
    sessionId: string,
    toolCallId: string,
    action: 'approve' | 'skip',
    code?: string
  ): Promise<IPermissionState> {
    const route = `sessions/${encodeURIComponent(sessionId)}/cells/${encodeURIComponent(toolCallId)}/${action}`;
    return this._request<IPermissionState>(route, 'POST', code === undefined ? {} : { code });
  }

  // ---------------------------------------------------------------- review and revert (pairing.md, 5)

  /** The cells a turn wrote, whether the kernel can go back to before it (a `TurnReview`). */
  getTurn(sessionId: string, turn: number): Promise<unknown> {
    return this._request<unknown>(`sessions/${encodeURIComponent(sessionId)}/turns/${turn}`);
  }

  /**
   * Record that the user removed these cells of a turn (the panel deleted them from the
   * notebook); `restore_kernel` (the whole turn) also restores the kernel's snapshot from
   * before it. Answers a `TurnRevert`; 409 while a turn runs.
   */
  revertTurn(sessionId: string, turn: number, request: ITurnRevertRequest): Promise<unknown> {
    return this._request<unknown>(
      `sessions/${encodeURIComponent(sessionId)}/turns/${turn}/revert`,
      'POST',
      request
    );
  }

  // ---------------------------------------------------------------- the Agents View (agents-view.md)

  /** Every agent on the server, depth first (an `AgentsOverview`). */
  listAgents(): Promise<IAgentsOverview> {
    return this._request<IAgentsOverview>('agents');
  }

  /** A chat message to a root, mail from the root to a sub-agent (403 beyond its reach). */
  messageAgent(sessionId: string, text: string): Promise<IAgentMessageSent> {
    return this._request<IAgentMessageSent>(
      `agents/${encodeURIComponent(sessionId)}/message`,
      'POST',
      { text }
    );
  }

  /** Stop the agent, or the agent and everything under it. */
  stopAgent(sessionId: string, subtree: boolean): Promise<IAgentsStopped> {
    return this._request<IAgentsStopped>(`agents/${encodeURIComponent(sessionId)}/stop`, 'POST', {
      subtree
    });
  }

  /** Delete a sub-agent that is not running (409 while it runs, 400 for a root). */
  async deleteAgent(sessionId: string): Promise<void> {
    await this._request<unknown>(`agents/${encodeURIComponent(sessionId)}`, 'DELETE');
  }

  /** The agents websocket: an overview on connect and on every change. */
  agentsEventsUrl(): string {
    const settings = this.serverSettings;
    let url = URLExt.join(settings.wsUrl, API_ROOT, 'agents', 'events');
    if (settings.appendToken && settings.token !== '') {
      url += `?token=${encodeURIComponent(settings.token)}`;
    }
    return url;
  }

  async postBinding(options: IBindingOptions): Promise<void> {
    const body: Record<string, string> = {
      path: options.path,
      kernel_id: options.kernelId
    };
    if (options.documentId) {
      body.document_id = options.documentId;
    }
    await this._request<null>('bindings', 'POST', body);
  }

  /**
   * The websocket URL of a session's event stream, with the token appended
   * the way JupyterLab's own kernel websockets do it.
   */
  eventsUrl(sessionId: string, since: number): string {
    const settings = this.serverSettings;
    let url =
      URLExt.join(
        settings.wsUrl,
        API_ROOT,
        'sessions',
        encodeURIComponent(sessionId),
        'events'
      ) + `?since=${since}`;
    if (settings.appendToken && settings.token !== '') {
      url += `&token=${encodeURIComponent(settings.token)}`;
    }
    return url;
  }

  private async _request<T>(
    route: string,
    method: 'GET' | 'POST' | 'PUT' | 'DELETE' = 'GET',
    body?: object
  ): Promise<T> {
    const url = URLExt.join(this.serverSettings.baseUrl, API_ROOT, route);
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        url,
        init,
        this.serverSettings
      );
    } catch (error) {
      throw new ServerConnection.NetworkError(error as TypeError);
    }
    const text = await response.text();
    const payload: unknown = text ? safeJsonParse(text) : null;
    if (!response.ok) {
      throw new AgentApiError(
        errorMessage(payload) ?? `${method} ${route}: HTTP ${response.status}`,
        response.status
      );
    }
    return payload as T;
  }
}

function safeJsonParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function errorMessage(payload: unknown): string | undefined {
  if (payload && typeof payload === 'object') {
    // `{"message": ...}` from the handlers; `{"error": ...}` as the agents contract words it.
    const { message, error } = payload as { message?: unknown; error?: unknown };
    const text = typeof message === 'string' ? message : typeof error === 'string' ? error : undefined;
    if (text !== undefined || 'message' in payload) {
      return text;
    }
  }
  return typeof payload === 'string' && payload.length < 300
    ? payload
    : undefined;
}
